#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "amqp/routing/filters.hpp"
#include "amqp/routing/subject.hpp"

using namespace amqp::routing;
using amqp::wire::reply_code;
using filters = std::vector<std::string>;

TEST_CASE("exchange kinds: direct, fanout and topic, headers is refused with a remedy, an unknown type is 503") {
  CHECK(*parse_exchange_kind("direct") == exchange_kind::direct);
  CHECK(*parse_exchange_kind("fanout") == exchange_kind::fanout);
  CHECK(*parse_exchange_kind("topic") == exchange_kind::topic);
  for (auto k : {exchange_kind::direct, exchange_kind::fanout, exchange_kind::topic}) {
    CHECK(*parse_exchange_kind(to_string(k)) == k);
  }
  auto headers = parse_exchange_kind("headers");
  REQUIRE_FALSE(headers);
  CHECK(headers.error().code == reply_code::not_implemented);
  CHECK(headers.error().text.find("has no subject to be; bind by routing key on a direct or topic "
                                  "exchange") != std::string::npos);
  for (std::string_view kind : {"x-delayed-message", "Topic", "ZZwwInvalid"}) {
    CAPTURE(kind);
    auto k = parse_exchange_kind(kind);
    REQUIRE_FALSE(k);
    CHECK(k.error().code == reply_code::command_invalid);
    CHECK(k.error().text == "unknown exchange type '" + std::string(kind) +
                                "'; declare it with type direct, fanout or topic");
  }
  auto empty = parse_exchange_kind("");
  REQUIRE_FALSE(empty);
  CHECK(empty.error().code == reply_code::command_invalid);
}

TEST_CASE("publish subjects: amqp.<exchange word>[.<key>]") {
  const std::vector<std::tuple<std::string, std::string, std::string>> table{
      {"", "", "amqp._"},
      {"", "_", "amqp._._"},
      {"", "orders", "amqp._.orders"},
      {"x", "", "amqp.x"},
      {"x", "a.b.c", "amqp.x.a.b.c"},
      {"amq.topic", "k", "amqp.amq-topic.k"},
      {"amq.direct", "", "amqp.amq-direct"},
      {"x", "caf\xc3\xa9", "amqp.x.caf\xc3\xa9"},
      {"x", std::string(255, 'k'), "amqp.x." + std::string(255, 'k')},
      // Every exchange and queue name is spelled as one word (names.hpp).
      {"orders.dlx", "k.l", "amqp.orders=2Edlx.k.l"},
      {"amq-topic", "k", "amqp.=61mq-topic.k"},  // a user's exchange, not amq.topic
      {"", "a.b", "amqp._.a=2Eb"},                // the default exchange's key names a queue
      {"", "celery@h.celery.pidbox", "amqp._.celery=40h=2Ecelery=2Epidbox"},
      {"", "a b*", "amqp._.a=20b=2A"},
  };
  for (const auto& [exchange, key, subject] : table) {
    CAPTURE(exchange);
    CAPTURE(key);
    auto s = publish_subject(exchange, key);
    REQUIRE(s);
    CHECK(*s == subject);
    auto back = split_subject(*s);
    REQUIRE(back);
    CHECK(*back == address{exchange, key});
  }
}

TEST_CASE("publish refuses a key that is not literal, naming the key and the remedy") {
  const std::vector<std::string> bad_keys{"a..b", ".a", "a.", ".", "a.*", "*", "#", "a.#",
                                          "a.>", ">", "a #", "a\tb", "a\nb", "a*b",
                                          std::string(256, 'k')};
  for (const auto& key : bad_keys) {
    CAPTURE(key);
    auto s = publish_subject("x", key);
    REQUIRE_FALSE(s);
    CHECK(s.error().code == reply_code::precondition_failed);
    if (key.size() <= 255) CHECK(s.error().text.find("'" + key + "'") != std::string::npos);
    CHECK(s.error().text.find("; ") != std::string::npos);  // cause; remedy
  }
}

TEST_CASE("blank_publish_key: whitespace or a control character in an otherwise literal key") {
  const std::initializer_list<std::string_view> blank{"a b", "a\tb", "a.b c", " lead", "a\nb",
                                                      std::string_view("a\0b", 3)};
  for (std::string_view key : blank) {
    CAPTURE(key);
    CHECK(blank_publish_key(key));
  }
  for (std::string_view key : {"", "ab", "a.b", "a #", "a..b c", "* b"}) {  // literal, or refused for more
    CAPTURE(key);
    CHECK_FALSE(blank_publish_key(key));
  }
  CHECK_FALSE(blank_publish_key(std::string(256, ' ')));  // too long: refused as such
}

TEST_CASE("bindings of any exchange and queue name, spelled as one word") {
  CHECK(*binding_filters("", exchange_kind::direct, "a.b") == filters{"amqp._.a=2Eb"});
  CHECK(*binding_filters("orders.dlx", exchange_kind::fanout, "") ==
        filters{"amqp.orders=2Edlx", "amqp.orders=2Edlx.>"});
  CHECK(*binding_filters("amq-topic", exchange_kind::topic, "a.#") == filters{"amqp.=61mq-topic.a", "amqp.=61mq-topic.a.>"});
  // A default-exchange subject whose tail is no queue's word keeps its key as published.
  CHECK(split_subject("amqp._.a.b") == address{"", "a.b"});
}

TEST_CASE("split_subject refuses what is not an AMQP subject") {
  CHECK_FALSE(split_subject("kafka.x.y"));
  CHECK_FALSE(split_subject("amqp"));
  CHECK_FALSE(split_subject("amqp."));
  CHECK_FALSE(split_subject("amqp..k"));
  CHECK_FALSE(split_subject("amqpx.y"));
  CHECK_FALSE(split_subject("amqp.a=2e.k"));  // no exchange is spelled so
  CHECK(*split_subject("amqp._.q") == address{"", "q"});
  CHECK(*split_subject("amqp.amq-fanout") == address{"amq.fanout", ""});
}

TEST_CASE("binding filters: the HIP-1326 §2.1 table") {
  struct row {
    std::string exchange;
    exchange_kind kind;
    std::string key;
    filters expected;
  };
  const std::vector<row> table{
      {"t", exchange_kind::topic, "a.*", {"amqp.t.a.*"}},
      {"t", exchange_kind::topic, "a.#", {"amqp.t.a", "amqp.t.a.>"}},
      {"t", exchange_kind::topic, "#", {"amqp.t", "amqp.t.>"}},
      {"t", exchange_kind::topic, "", {"amqp.t"}},
      {"t", exchange_kind::topic, "a.b", {"amqp.t.a.b"}},
      {"t", exchange_kind::topic, "*.*.#", {"amqp.t.*.*", "amqp.t.*.*.>"}},
      {"t", exchange_kind::topic, "*", {"amqp.t.*"}},
      {"f", exchange_kind::fanout, "anything", {"amqp.f", "amqp.f.>"}},
      {"f", exchange_kind::fanout, "a..#.b*", {"amqp.f", "amqp.f.>"}},  // ignored, even malformed
      {"f", exchange_kind::fanout, "", {"amqp.f", "amqp.f.>"}},
      {"d", exchange_kind::direct, "k", {"amqp.d.k"}},
      {"d", exchange_kind::direct, "a.b", {"amqp.d.a.b"}},
      {"d", exchange_kind::direct, "", {"amqp.d"}},
      {"", exchange_kind::direct, "q", {"amqp._.q"}},  // the default exchange's derived binding
      {"amq.topic", exchange_kind::topic, "a.#", {"amqp.amq-topic.a", "amqp.amq-topic.a.>"}},
  };
  for (const auto& r : table) {
    CAPTURE(r.exchange);
    CAPTURE(r.key);
    auto f = binding_filters(r.exchange, r.kind, r.key);
    REQUIRE(f);
    CHECK(*f == r.expected);
  }
}

TEST_CASE("binding filters refuse what NATS cannot express, with the remedy") {
  struct row {
    exchange_kind kind;
    std::string key;
    reply_code code;
    std::string_view mentions;
  };
  const std::vector<row> table{
      {exchange_kind::topic, "a.#.b", reply_code::not_implemented,
       "NATS matches a rest-wildcard only in last position"},
      {exchange_kind::topic, "#.a", reply_code::not_implemented, "only in last position"},
      {exchange_kind::topic, "a.b*", reply_code::not_implemented, "partial wildcard in word 'b*'"},
      {exchange_kind::topic, "a#", reply_code::not_implemented, "partial wildcard"},
      {exchange_kind::topic, "a.>", reply_code::not_implemented, "'>'"},
      {exchange_kind::topic, "a..b", reply_code::not_implemented, "empty word"},
      {exchange_kind::topic, "a.", reply_code::not_implemented, "empty word"},
      {exchange_kind::topic, "a b", reply_code::not_implemented, "whitespace"},
      {exchange_kind::direct, "a.*", reply_code::not_implemented,
       "a direct binding key matches literally"},
      {exchange_kind::direct, "#", reply_code::not_implemented, "matches literally"},
      {exchange_kind::direct, "a>", reply_code::not_implemented, "'>'"},
      {exchange_kind::direct, std::string(256, 'k'), reply_code::precondition_failed, "255"},
      {exchange_kind::topic, "caf\xc3", reply_code::precondition_failed, "UTF-8"},
      {exchange_kind::topic, "\xed\xa0\x80", reply_code::precondition_failed, "UTF-8"},
  };
  for (const auto& r : table) {
    CAPTURE(r.key);
    auto f = binding_filters("x", r.kind, r.key);
    REQUIRE_FALSE(f);
    CHECK(f.error().code == r.code);
    CHECK(f.error().text.find(r.mentions) != std::string::npos);
  }
}

TEST_CASE("a trailing # reaches zero or more words, never a neighbour") {
  auto f = binding_filters("x", exchange_kind::topic, "a.#");
  REQUIRE(f);
  auto reaches = [&](std::string_view key) {
    auto s = publish_subject("x", key);
    REQUIRE(s);
    for (const auto& filter : *f) {
      if (subject_matches(filter, *s)) return true;
    }
    return false;
  };
  CHECK(reaches("a"));
  CHECK(reaches("a.b"));
  CHECK(reaches("a.b.c"));
  CHECK_FALSE(reaches("b"));
  CHECK_FALSE(reaches("ab"));
  CHECK_FALSE(reaches(""));
}
