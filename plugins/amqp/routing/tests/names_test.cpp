#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <set>

#include "amqp/routing/names.hpp"

using amqp::routing::check_name;
using amqp::wire::reply_code;

namespace {

struct name_case {
  std::string_view what;
  std::string name;
  std::optional<reply_code> refused;  // nullopt: accepted
  std::string_view mentions = {};     // the refusal text must contain this
};

}  // namespace

TEST_CASE("check_name accepts one subject word and refuses everything else, naming why") {
  const std::vector<name_case> cases{
      {"queue", "orders", std::nullopt},
      {"queue", "a_b-C9", std::nullopt},
      {"queue", std::string(128, 'q'), std::nullopt},
      {"queue", "amq-gen-abc", std::nullopt},  // a server-named queue, redeclared by name
      {"exchange", "events", std::nullopt},
      {"exchange", "amq.direct", std::nullopt},
      {"exchange", "amq.fanout", std::nullopt},
      {"exchange", "amq.topic", std::nullopt},
      {"exchange", "amq-other", std::nullopt},  // only the spellings of standard exchanges are reserved
      {"queue", "a.b", reply_code::precondition_failed, "'a.b' holds '.'"},
      {"exchange", "a.b", reply_code::precondition_failed, "exchange 'a' with key 'b.c'"},
      {"queue", "", reply_code::precondition_failed, "empty"},
      {"queue", std::string(129, 'q'), reply_code::precondition_failed, "at most 128"},
      {"queue", "a b", reply_code::precondition_failed, "[A-Za-z0-9_-]"},
      {"queue", "a*", reply_code::precondition_failed, "[A-Za-z0-9_-]"},
      {"queue", "caf\xc3\xa9", reply_code::precondition_failed, "[A-Za-z0-9_-]"},
      {"queue", "_", reply_code::precondition_failed, "'_' is reserved"},
      {"exchange", "_", reply_code::precondition_failed, "'_' is reserved"},
      {"queue", "amq.gen-x", reply_code::access_refused, "'amq.' prefix"},
      {"exchange", "amq.headers", reply_code::access_refused, "'amq.' prefix"},
      {"exchange", "", reply_code::access_refused, "default exchange"},
      {"exchange", "amq-topic", reply_code::access_refused, "spells a standard"},
      {"exchange", "amq-direct", reply_code::access_refused, "spells a standard"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    CAPTURE(c.name);
    auto refusal = check_name(c.what, c.name);
    REQUIRE(refusal.has_value() == c.refused.has_value());
    if (!refusal) continue;
    CHECK(refusal->code == *c.refused);
    CHECK(refusal->text.find(c.mentions) != std::string::npos);
  }
}

TEST_CASE("exchange words are reversible and distinct") {
  using amqp::routing::exchange_of_word;
  using amqp::routing::exchange_word;
  const std::vector<std::pair<std::string, std::string>> table{
      {"", "_"},
      {"amq.direct", "amq-direct"},
      {"amq.fanout", "amq-fanout"},
      {"amq.topic", "amq-topic"},
      {"events", "events"},
      {"amq-other", "amq-other"},
  };
  std::set<std::string> words;
  for (const auto& [exchange, word] : table) {
    CHECK(exchange_word(exchange) == word);
    CHECK(exchange_of_word(word) == exchange);
    words.insert(word);
  }
  CHECK(words.size() == table.size());
  // Every word a standard exchange takes is refused as a user's exchange name.
  for (const auto& [exchange, word] : table) {
    if (amqp::routing::is_standard_exchange(exchange)) CHECK(check_name("exchange", word));
  }
}

TEST_CASE("generated queue names are valid, prefixed and distinct") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto name = amqp::routing::generate_queue_name();
    CAPTURE(name);
    CHECK(name.starts_with("amq-gen-"));
    CHECK(name.size() == 30);
    CHECK_FALSE(check_name("queue", name));
    seen.insert(name);
  }
  CHECK(seen.size() == 1000);
}
