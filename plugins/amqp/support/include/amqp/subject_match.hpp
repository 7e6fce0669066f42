#pragma once
// NATS subject matching, shared by the layers that judge subjects: routing (bindings' filters)
// and the bus (a user's publish permissions, which the server matches the same way).
// Tokens are dot-separated; `*` matches exactly one token, `>` one or more and only last.
#include <string_view>

namespace amqp {

// Walks the tokens of a subject without allocating: matching runs once per delivery and filter.
class subject_tokens {
 public:
  explicit subject_tokens(std::string_view text) : rest_(text) {}
  bool done() const { return done_; }
  std::string_view next() {
    auto dot = rest_.find('.');
    auto token = rest_.substr(0, dot);
    if (dot == std::string_view::npos) {
      done_ = true;
    } else {
      rest_.remove_prefix(dot + 1);
    }
    return token;
  }

 private:
  std::string_view rest_;
  bool done_ = false;
};

// Does the (literal) subject match the filter, with NATS semantics?
inline bool subject_matches(std::string_view filter, std::string_view subject) {
  subject_tokens f(filter);
  subject_tokens s(subject);
  while (!f.done()) {
    auto want = f.next();
    if (want == ">") return f.done() && !s.done();
    if (s.done()) return false;
    auto got = s.next();
    if (want != "*" && want != got) return false;
  }
  return s.done();
}

}  // namespace amqp
