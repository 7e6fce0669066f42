#include "amqp/routing/filters.hpp"

#include <algorithm>

#include "amqp/subject_match.hpp"

namespace amqp::routing {

bool subject_matches(std::string_view filter, std::string_view subject) {
  return amqp::subject_matches(filter, subject);
}

bool filter_covers(std::string_view general, std::string_view specific) {
  subject_tokens g(general);
  subject_tokens s(specific);
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

}  // namespace amqp::routing
