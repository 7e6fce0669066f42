#include <doctest/doctest.h>

#include <string>
#include <variant>

#include "amqp/wire/codec.hpp"
#include "housekeeping/dead_letter.hpp"

using namespace amqp;
using broker::death;
using broker::death_reason;

namespace {

const wire::field_value& header(const wire::basic_properties& p, std::string_view name) {
  REQUIRE(p.headers);
  const auto* v = wire::find(*p.headers, name);
  REQUIRE_MESSAGE(v, name);
  return *v;
}

std::string text(const wire::field_value& v) {
  const auto* s = std::get_if<std::string>(&v.value);
  REQUIRE(s);
  return *s;
}

const wire::field_table& entry(const wire::basic_properties& p, std::size_t i) {
  const auto& history = std::get<wire::field_array>(header(p, "x-death").value);
  REQUIRE(history.items.size() > i);
  return std::get<wire::field_table>(history.items[i].value);
}

const wire::field_value& member(const wire::field_table& t, std::string_view name) {
  const auto* v = wire::find(t, name);
  REQUIRE_MESSAGE(v, name);
  return *v;
}

}  // namespace

TEST_CASE("the first death writes RabbitMQ's x-death entry and the x-first/x-last headers") {
  wire::basic_properties p;
  p.content_type = "text/plain";
  p.expiration = "5000";
  p.headers = wire::field_table{{{"app", wire::field_value(std::string("kept"))}}};
  broker::add_death(p, death{"orders", death_reason::rejected, "shop", {"order.paid"}, 1'700'000'000});
  CHECK(p.content_type == "text/plain");
  CHECK_FALSE(p.expiration);  // it would expire the copy again
  CHECK(text(header(p, "app")) == "kept");
  const auto& e = entry(p, 0);
  CHECK(std::get<std::int64_t>(member(e, "count").value) == 1);
  CHECK(text(member(e, "reason")) == "rejected");
  CHECK(text(member(e, "queue")) == "orders");
  CHECK(std::get<wire::timestamp_value>(member(e, "time").value).seconds == 1'700'000'000);
  CHECK(text(member(e, "exchange")) == "shop");
  CHECK(std::get<wire::field_array>(member(e, "routing-keys").value).items ==
        std::vector<wire::field_value>{wire::field_value(std::string("order.paid"))});
  CHECK(text(member(e, "original-expiration")) == "5000");
  CHECK(text(header(p, "x-first-death-reason")) == "rejected");
  CHECK(text(header(p, "x-first-death-queue")) == "orders");
  CHECK(text(header(p, "x-first-death-exchange")) == "shop");
  CHECK(text(header(p, "x-last-death-queue")) == "orders");
}

TEST_CASE("a repeated death counts up and moves to the front, x-first-death stays and x-last-death follows") {
  wire::basic_properties p;
  broker::add_death(p, death{"work", death_reason::expired, "", {"work"}, 10});
  broker::add_death(p, death{"retry", death_reason::rejected, "dlx", {"work"}, 20});
  broker::add_death(p, death{"work", death_reason::expired, "", {"work"}, 30});
  CHECK(std::get<wire::field_array>(header(p, "x-death").value).items.size() == 2);
  CHECK(text(member(entry(p, 0), "queue")) == "work");
  CHECK(std::get<std::int64_t>(member(entry(p, 0), "count").value) == 2);
  CHECK(std::get<wire::timestamp_value>(member(entry(p, 0), "time").value).seconds == 10);  // the first time
  CHECK(text(member(entry(p, 1), "queue")) == "retry");
  CHECK(text(header(p, "x-first-death-queue")) == "work");
  CHECK(text(header(p, "x-first-death-reason")) == "expired");
  CHECK(text(header(p, "x-last-death-queue")) == "work");
  CHECK(text(header(p, "x-last-death-exchange")) == "");
  broker::add_death(p, death{"work", death_reason::rejected, "", {"work"}, 40});  // another reason: its own entry
  CHECK(std::get<wire::field_array>(header(p, "x-death").value).items.size() == 3);
}

TEST_CASE("a cycle no client rejected in is recognised, and one with a rejection is not") {
  wire::basic_properties p;
  CHECK_FALSE(broker::completes_cycle(p, "a"));
  broker::add_death(p, death{"a", death_reason::expired, "", {"a"}, 1});
  CHECK(broker::completes_cycle(p, "a"));        // a queue that dead-letters to itself on expiry
  CHECK_FALSE(broker::completes_cycle(p, "b"));  // first time at b
  broker::add_death(p, death{"b", death_reason::maxlen, "", {"b"}, 2});
  CHECK(broker::completes_cycle(p, "a"));  // a → b → a, fully automatic
  broker::add_death(p, death{"c", death_reason::rejected, "", {"c"}, 3});
  CHECK_FALSE(broker::completes_cycle(p, "a"));  // a client rejected it at c: not a loop by itself
  CHECK_FALSE(broker::completes_cycle(p, "c"));
}

TEST_CASE("a message expires at the lower of its expiration and the queue's TTL after it was stored") {
  bus::delivery d;
  d.stored_ns = 5'000'000'000;  // 5 s after the epoch
  CHECK_FALSE(broker::expiry_of(d, std::nullopt));
  CHECK(broker::expiry_of(d, 200) == 5'200);
  wire::basic_properties p;
  p.expiration = "50";
  d.amqp_props = wire::encode_properties(p);
  CHECK(broker::expiry_of(d, std::nullopt) == 5'050);
  CHECK(broker::expiry_of(d, 20) == 5'020);
  CHECK(broker::expiry_of(d, 200) == 5'050);
  p.expiration = "0";  // at once
  d.amqp_props = wire::encode_properties(p);
  CHECK(broker::expiry_of(d, 200) == 5'000);
}
