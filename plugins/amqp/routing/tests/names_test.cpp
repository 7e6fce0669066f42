#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "amqp/routing/names.hpp"

using namespace amqp::routing;
using amqp::wire::reply_code;

namespace {

struct name_case {
  std::string_view what;
  std::string name;
  std::optional<reply_code> refused;  // nullopt: accepted
  std::string_view mentions = {};     // the refusal text must contain this
};

void check_cases(name_rules rules, const std::vector<name_case>& cases, bool declaring) {
  for (const auto& c : cases) {
    CAPTURE(to_string(rules));
    CAPTURE(c.what);
    CAPTURE(c.name);
    auto refusal = declaring ? check_new_name(rules, c.what, c.name) : check_name(rules, c.what, c.name);
    REQUIRE(refusal.has_value() == c.refused.has_value());
    if (!refusal) continue;
    CHECK(refusal->code == *c.refused);
    CHECK(refusal->text.find(c.mentions) != std::string::npos);
  }
}

bool in_word_alphabet(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '=';
}

// Names that stress the spelling: word characters, the escape's own characters, dots, blanks and
// octets of every range, in runs that look like escapes ("=2E", "2E").
std::vector<std::string> awkward_names(std::size_t count, unsigned seed) {
  static constexpr std::string_view pieces[] = {"a", "Z", "9", "_", "-", ".", "=", "=2E", "2E", "E", " ",
                                                "*", ">", "\xc3\xa9", "\xff", std::string_view("\0", 1), "/",
                                                "amq", "amq-topic", "_", "=5F", "=61"};
  std::mt19937 engine{seed};
  std::uniform_int_distribution<std::size_t> piece(0, std::size(pieces) - 1), length(1, 12);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < count; ++i) {
    std::string name;
    for (std::size_t n = length(engine); n > 0; --n) name += pieces[piece(engine)];
    names.push_back(name.substr(0, max_name_length));
  }
  return names;
}

}  // namespace

TEST_CASE("hip names: one subject word, refused otherwise with the reason and the setting") {
  check_cases(name_rules::hip,
              {
                  {"queue", "orders", std::nullopt},
                  {"queue", "a_b-C9", std::nullopt},
                  {"queue", std::string(128, 'q'), std::nullopt},
                  {"queue", "amq-gen-abc", std::nullopt},  // a server-named queue, named again
                  {"exchange", "events", std::nullopt},
                  {"exchange", "amq.direct", std::nullopt},
                  {"exchange", "amq.fanout", std::nullopt},
                  {"exchange", "amq.topic", std::nullopt},
                  {"exchange", "amq-other", std::nullopt},  // only the standard exchanges' words are reserved
                  {"queue", "a.b", reply_code::precondition_failed, "'a.b' holds '.'"},
                  {"exchange", "a.b", reply_code::precondition_failed, "CLOUD_AMQP_NAMES=escaped"},
                  {"exchange", "orders.dlx", reply_code::precondition_failed, "exchange 'a' with key 'b.c'"},
                  {"queue", "amq.gen-x", reply_code::precondition_failed, "holds '.'"},  // none can exist
                  {"queue", "", reply_code::precondition_failed, "empty"},
                  {"queue", std::string(129, 'q'), reply_code::precondition_failed, "at most 128"},
                  {"queue", "a b", reply_code::precondition_failed, "[A-Za-z0-9_-]"},
                  {"queue", "a*", reply_code::precondition_failed, "CLOUD_AMQP_NAMES=escaped"},
                  {"queue", "caf\xc3\xa9", reply_code::precondition_failed, "[A-Za-z0-9_-]"},
                  {"queue", "_", reply_code::precondition_failed, "'_' is reserved"},
                  {"exchange", "_", reply_code::precondition_failed, "'_' is reserved"},
                  {"exchange", "amq.headers", reply_code::not_implemented, "headers exchange"},
                  {"exchange", "amq.match", reply_code::not_implemented, "bind by routing key"},
                  {"exchange", "", reply_code::access_refused, "default exchange"},
                  {"exchange", "amq-topic", reply_code::access_refused, "spells a standard"},
                  {"exchange", "amq-direct", reply_code::access_refused, "spells a standard"},
              },
              false);
}

TEST_CASE("escaped names: every UTF-8 name RabbitMQ accepts") {
  check_cases(name_rules::escaped,
              {
                  {"queue", "orders", std::nullopt},
                  {"exchange", "orders.dlx", std::nullopt},
                  {"exchange", "celery.pidbox", std::nullopt},
                  {"queue", "celery@host.celery.pidbox", std::nullopt},
                  {"queue", "amq.gen-x", std::nullopt},  // a server-named queue, named again
                  {"queue", "a b*>#", std::nullopt},
                  {"queue", "caf\xc3\xa9", std::nullopt},
                  {"queue", std::string("a\0b", 3), std::nullopt},
                  {"queue", "_", std::nullopt},
                  {"exchange", "_", std::nullopt},
                  {"exchange", "amq-topic", std::nullopt},  // spelled apart from amq.topic (exchange_word)
                  {"queue", std::string(255, '.'), std::nullopt},
                  {"exchange", "amq.topic", std::nullopt},
                  {"queue", std::string(256, 'q'), reply_code::precondition_failed, "at most 255 octets"},
                  {"queue", "caf\xe9", reply_code::precondition_failed, "not UTF-8"},
                  {"queue", "\xed\xa0\x80", reply_code::precondition_failed, "not UTF-8"},  // a surrogate
                  {"queue", "", reply_code::precondition_failed, "empty"},
                  {"exchange", "", reply_code::access_refused, "default exchange"},
                  {"exchange", "amq.headers", reply_code::not_implemented, "headers exchange"},
              },
              false);
}

TEST_CASE("declaring: the amq. prefix is the server's in both modes") {
  for (auto rules : {name_rules::hip, name_rules::escaped}) {
    check_cases(rules,
                {
                    {"queue", "amq.gen-x", reply_code::access_refused, "reserved prefix 'amq.*'"},
                    {"exchange", "amq.custom", reply_code::access_refused, "reserved prefix 'amq.*'"},
                    {"exchange", "amq.direct", std::nullopt},  // it exists: declaring it is a question
                    {"exchange", "amq.headers", reply_code::not_implemented, "headers exchange"},
                    {"queue", "orders", std::nullopt},
                    {"exchange", "", reply_code::access_refused, "default exchange"},
                },
                true);
  }
  CHECK(check_new_name(name_rules::hip, "queue", "a.b")->code == reply_code::precondition_failed);
  CHECK_FALSE(check_new_name(name_rules::escaped, "queue", "a.b"));
}

TEST_CASE("CLOUD_AMQP_NAMES values") {
  CHECK(parse_name_rules("hip") == name_rules::hip);
  CHECK(parse_name_rules("escaped") == name_rules::escaped);
  for (std::string_view bad : {"", "HIP", "escape", " hip"}) CHECK_FALSE(parse_name_rules(bad));
  CHECK(to_string(name_rules::escaped) == "escaped");
}

TEST_CASE("a name's word: HIP-1326 §2's spelling for its names, escapes for every other octet") {
  const std::vector<std::pair<std::string, std::string>> table{
      {"orders", "orders"},
      {"a_b-C9", "a_b-C9"},
      {"orders.dlx", "orders=2Edlx"},
      {"a=b", "a=3Db"},
      {"a=2Eb", "a=3D2Eb"},
      {"caf\xc3\xa9", "caf=C3=A9"},
      {" ", "=20"},
      {std::string("\0", 1), "=00"},
      {"celery@h.celery.pidbox", "celery=40h=2Ecelery=2Epidbox"},
  };
  for (const auto& [name, word] : table) {
    CAPTURE(name);
    CHECK(name_word(name) == word);
    CHECK(name_of_word(word) == name);
  }
  // Words name_word never makes have no name: lower-case digits, an escaped word character, a
  // short or bare escape, characters outside the alphabet, the empty word.
  for (std::string_view word : {"a=2e", "=41", "a=", "a=2", "=", "a.b", "a b", "", "a=G0", "=Z0"}) {
    CAPTURE(word);
    CHECK_FALSE(name_of_word(word));
  }
}

TEST_CASE("property: the spelling is injective and its inverse exact") {
  std::map<std::string, std::string> seen;  // word → name
  for (const auto& name : awkward_names(20000, 1326)) {
    CAPTURE(name);
    const auto word = name_word(name);
    CHECK(std::all_of(word.begin(), word.end(), in_word_alphabet));
    CHECK(name_of_word(word) == name);
    auto [at, fresh] = seen.emplace(word, name);
    if (!fresh) CHECK(at->second == name);  // one word, one name
    // The spelling of HIP-1326's "Exchanges, queues and bindings become subjects", in both modes.
    if (is_word(name)) CHECK(word == name);
  }
  // Any string over the word alphabet either names nothing or is the word of exactly its name.
  std::mt19937 engine{7};
  constexpr std::string_view alphabet = "aZ09_-=2E3D";
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1), length(1, 10);
  for (int i = 0; i < 20000; ++i) {
    std::string word;
    for (std::size_t n = length(engine); n > 0; --n) word += alphabet[pick(engine)];
    CAPTURE(word);
    if (auto name = name_of_word(word)) CHECK(name_word(*name) == word);
  }
}

TEST_CASE("exchange words: the standard exchanges' are theirs alone") {
  const std::vector<std::pair<std::string, std::string>> table{
      {"", "_"},
      {"amq.direct", "amq-direct"},
      {"amq.fanout", "amq-fanout"},
      {"amq.topic", "amq-topic"},
      {"events", "events"},
      {"amq-other", "amq-other"},
      {"orders.dlx", "orders=2Edlx"},
      {"amq-topic", "=61mq-topic"},
      {"amq-direct", "=61mq-direct"},
      {"_", "=5F"},
  };
  for (const auto& [exchange, word] : table) {
    CAPTURE(exchange);
    CHECK(exchange_word(exchange) == word);
    CHECK(exchange_of_word(word) == exchange);
  }
  std::map<std::string, std::string> seen;
  auto names = awkward_names(20000, 99);
  for (const auto& [exchange, word] : table) names.push_back(exchange);
  for (const auto& name : names) {
    CAPTURE(name);
    const auto word = exchange_word(name);
    CHECK(exchange_of_word(word) == name);
    auto [at, fresh] = seen.emplace(word, name);
    if (!fresh) CHECK(at->second == name);
  }
  for (std::string_view word : {"=5F", "=61mq-topic"}) CHECK_FALSE(name_of_word(word));  // no queue's word
  CHECK_FALSE(exchange_of_word("=61mq-other"));  // only a standard word's first octet is escaped
}

TEST_CASE("consumer names fit nats-server's 255 characters and stay distinct") {
  CHECK(consumer_name("orders") == "orders");
  CHECK(consumer_name("a.b") == "a=2Eb");
  const std::string long_plain(255, 'q');
  CHECK(consumer_name(long_plain) == long_plain);
  std::set<std::string> seen;
  for (char last : {'.', ',', 'x'}) {
    for (const std::string& base : {std::string(254, '.'), std::string(84, 'a') + std::string(170, '\xe9')}) {
      const auto name = base + last;
      const auto consumer = consumer_name(name);
      CAPTURE(consumer);
      CHECK(consumer.size() <= max_consumer_name_length);
      CHECK(consumer.find("=Z") != std::string::npos);
      CHECK(std::all_of(consumer.begin(), consumer.end(), in_word_alphabet));
      CHECK(consumer.starts_with(name_word(name).substr(0, 150)));  // readable: the word's beginning
      seen.insert(consumer);
    }
  }
  CHECK(seen.size() == 6);
}

TEST_CASE("generated queue names: RabbitMQ's amq.gen- under escaped, dot-free under hip") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto hip = generate_queue_name(name_rules::hip);
    auto escaped = generate_queue_name(name_rules::escaped);
    CAPTURE(hip);
    CHECK(hip.starts_with("amq-gen-"));
    CHECK(hip.size() == 30);
    CHECK_FALSE(check_name(name_rules::hip, "queue", hip));
    CHECK(escaped.starts_with("amq.gen-"));
    CHECK(escaped.size() == 30);
    CHECK_FALSE(check_name(name_rules::escaped, "queue", escaped));
    CHECK(check_new_name(name_rules::escaped, "queue", escaped));  // a client may not choose one
    seen.insert(hip);
    seen.insert(escaped);
  }
  CHECK(seen.size() == 2000);
}
