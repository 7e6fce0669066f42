#include "amqp/routing/filters.hpp"

#include <algorithm>
#include <limits>

namespace amqp::routing {
namespace {

std::vector<std::string_view> tokens_of(std::string_view subject) {
  std::vector<std::string_view> tokens;
  std::size_t start = 0;
  for (;;) {
    auto dot = subject.find('.', start);
    tokens.push_back(subject.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) return tokens;
    start = dot + 1;
  }
}

bool ends_open(const std::vector<std::string_view>& tokens) {
  return !tokens.empty() && tokens.back() == ">";
}

// Walks the tokens of a subject without allocating: matching runs once per delivery and filter.
class token_cursor {
 public:
  explicit token_cursor(std::string_view text) : rest_(text) {}
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

}  // namespace

bool subject_matches(std::string_view filter, std::string_view subject) {
  token_cursor f(filter);
  token_cursor s(subject);
  while (!f.done()) {
    auto want = f.next();
    if (want == ">") return f.done() && !s.done();
    if (s.done()) return false;
    auto got = s.next();
    if (want != "*" && want != got) return false;
  }
  return s.done();
}

bool filter_covers(std::string_view general, std::string_view specific) {
  token_cursor g(general);
  token_cursor s(specific);
  while (!g.done()) {
    auto want = g.next();
    // `>` takes one or more tokens, whatever they are (a `>` in `specific` too).
    if (want == ">") return g.done() && !s.done();
    if (s.done()) return false;
    auto got = s.next();
    if (want == "*") {
      if (got == ">") return false;  // `>` may take several tokens; `*` only one
      continue;
    }
    if (want != got) return false;  // a literal covers only itself (not `*` or `>`)
  }
  return s.done();
}

std::vector<std::string> normalize_filters(std::vector<std::string> filters) {
  std::sort(filters.begin(), filters.end());
  filters.erase(std::unique(filters.begin(), filters.end()), filters.end());
  // A literal covers only itself, so only wildcard filters can cover another: checking
  // against those alone keeps a queue with many literal bindings from costing n².
  std::vector<std::string_view> wild;
  for (const auto& f : filters) {
    if (f.find_first_of("*>") != std::string::npos) wild.push_back(f);
  }
  std::vector<std::string> kept;
  for (const auto& f : filters) {  // copied, not moved: `wild` views these strings
    bool covered = std::any_of(wild.begin(), wild.end(), [&](std::string_view other) {
      return other != f && filter_covers(other, f);
    });
    if (!covered) kept.push_back(f);
  }
  return kept;
}

std::string covering_filter(const std::vector<std::string>& filters) {
  if (filters.empty()) return {};
  std::vector<std::vector<std::string_view>> all;
  all.reserve(filters.size());
  for (const auto& f : filters) all.push_back(tokens_of(f));
  std::size_t shortest = std::numeric_limits<std::size_t>::max();
  bool open = false;
  for (const auto& t : all) {
    // The fewest tokens a matched subject has is the filter's length, `>` included (it takes
    // at least one).
    shortest = std::min(shortest, t.size());
    open = open || ends_open(t) || t.size() != all.front().size();
  }
  // Closed and equal length: join every position. Otherwise the cover must match a subject
  // of `shortest` tokens and longer ones, so its last position is `>` at shortest - 1.
  const std::size_t joined = open ? shortest - 1 : shortest;
  std::string cover;
  for (std::size_t i = 0; i < joined; ++i) {
    auto token = all.front()[i];
    bool same = std::all_of(all.begin(), all.end(), [&](const auto& t) { return t[i] == token; });
    if (i > 0) cover += '.';
    cover += same ? std::string(token) : std::string("*");
  }
  if (open) cover += joined > 0 ? ".>" : ">";
  return cover;
}

}  // namespace amqp::routing
