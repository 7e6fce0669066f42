#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <random>

#include "amqp/routing/filters.hpp"
#include "amqp/routing/topology.hpp"

using namespace amqp::routing;
using filters = std::vector<std::string>;
using names = std::vector<std::string>;

TEST_CASE("the standard exchanges always exist and cannot be replaced") {
  topology t;
  for (std::string_view name : {"", "amq.direct", "amq.fanout", "amq.topic"}) {
    CAPTURE(name);
    REQUIRE(t.find_exchange(name));
    CHECK_FALSE(t.put_exchange(name, {exchange_kind::fanout, false, false, false}));
    CHECK_FALSE(t.erase_exchange(name));
    REQUIRE(t.find_exchange(name));
  }
  CHECK(t.find_exchange("amq.topic")->kind == exchange_kind::topic);
  CHECK(t.find_exchange("amq.fanout")->kind == exchange_kind::fanout);
  CHECK(t.find_exchange("")->kind == exchange_kind::direct);
  CHECK_FALSE(t.find_exchange("events"));
}

TEST_CASE("apply deletes per kind: deleting exchange foo leaves queue foo") {
  topology t;
  REQUIRE_FALSE(t.apply("x.foo", R"({"kind":"fanout","durable":true})"));
  REQUIRE_FALSE(t.apply("q.foo", R"({"durable":true})"));
  REQUIRE(t.find_exchange("foo"));
  REQUIRE(t.find_queue("foo"));
  REQUIRE_FALSE(t.apply("x.foo", std::nullopt));
  CHECK_FALSE(t.find_exchange("foo"));
  CHECK(t.find_queue("foo"));
  REQUIRE_FALSE(t.apply("x.foo", R"({"kind":"fanout","durable":true})"));
  REQUIRE_FALSE(t.apply("q.foo", std::nullopt));
  CHECK(t.find_exchange("foo"));
  CHECK_FALSE(t.find_queue("foo"));
  // A queue's use stamp (x-expires) is no topology: taken, and nothing changes.
  REQUIRE_FALSE(t.apply("q.foo", R"({"durable":true})"));
  REQUIRE_FALSE(t.apply("u.foo", "1764600000000"));
  REQUIRE_FALSE(t.apply("u.foo", std::nullopt));
  CHECK(t.find_exchange("foo"));
  CHECK(t.find_queue("foo"));
}

TEST_CASE("the stream queues are kept as queues come, change type and go") {
  topology t;
  REQUIRE_FALSE(t.apply("q.s", R"({"durable":true,"type":"stream"})"));
  REQUIRE_FALSE(t.apply("q.c", R"({"durable":true})"));
  CHECK(t.stream_queues() == std::set<std::string, std::less<>>{"s"});
  REQUIRE_FALSE(t.apply("q.c", R"({"durable":true,"type":"stream"})"));
  CHECK(t.stream_queues() == std::set<std::string, std::less<>>{"c", "s"});
  REQUIRE_FALSE(t.apply("q.s", R"({"durable":true})"));
  REQUIRE_FALSE(t.apply("q.c", std::nullopt));
  CHECK(t.stream_queues().empty());
}

TEST_CASE("apply refuses malformed keys and values and leaves the mirror unchanged") {
  topology t;
  REQUIRE_FALSE(t.apply("q.orders", R"({"durable":true,"bindings":[{"exchange":"x","key":"k"}]})"));
  auto bad_value = t.apply("q.orders", "{not json");
  REQUIRE(bad_value);
  CHECK(bad_value->code == amqp::wire::reply_code::internal_error);
  REQUIRE(t.find_queue("orders"));
  CHECK(t.find_queue("orders")->bindings.size() == 1);
  CHECK(t.apply("b.orders", R"({})"));
  CHECK(t.apply("x.amq.topic", R"({"kind":"topic"})"));
  CHECK(t.apply("x.a.b", std::nullopt));
  CHECK(t.queues().size() == 1);
}

TEST_CASE("a queue's filter is its own subject, and its bindings route by their exchange's current kind") {
  topology t;
  t.put_exchange("events", {exchange_kind::topic, true, false, false});
  t.put_exchange("fan", {exchange_kind::fanout, true, false, false});
  t.put_queue("audit", {true, false, false,
                        {{"events", "order.#"}, {"events", "order.created"}, {"fan", "ignored"},
                         {"gone", "k"}, {"amq.topic", "a.*"}}});
  CHECK(t.queue_filters("audit") == filters{"amqp._.audit"});
  CHECK(t.queue_filters("missing").empty());
  CHECK(t.queues_reached("events", "order") == names{"audit"});
  CHECK(t.queues_reached("events", "order.created") == names{"audit"});
  CHECK(t.queues_reached("fan", "anything") == names{"audit"});
  CHECK(t.queues_reached("amq.topic", "a.b") == names{"audit"});
  CHECK(t.queues_reached("gone", "k").empty());
  t.put_exchange("gone", {exchange_kind::direct, false, false, false});
  CHECK(t.queues_reached("gone", "k") == names{"audit"});
  // An exchange deleted and redeclared with another kind reads the bindings by the new kind.
  t.erase_exchange("fan");
  t.put_exchange("fan", {exchange_kind::direct, false, false, false});
  CHECK(t.queues_reached("fan", "anything").empty());
  CHECK(t.queues_reached("fan", "ignored") == names{"audit"});
  // The default binding is derived, never stored.
  CHECK(encode_queue(*t.find_queue("audit")).find("\"exchange\":\"\"") == std::string::npos);
}

TEST_CASE("routable, bindings and queues bound, kept by every write") {
  topology t;
  t.put_exchange("d", {exchange_kind::direct, true, false, false});
  t.put_exchange("f", {exchange_kind::fanout, true, false, false});
  t.put_exchange("t", {exchange_kind::topic, true, false, false});
  CHECK_FALSE(t.routable("d", "k"));
  CHECK_FALSE(t.routable("f", ""));
  CHECK_FALSE(t.routable("", "q1"));
  CHECK_FALSE(t.routable("nope", "k"));
  CHECK_FALSE(t.has_bindings("d"));

  t.put_queue("q1", {true, false, false, {{"d", "k"}, {"t", "a.#"}}});
  t.put_queue("q2", {true, false, false, {{"d", "k"}, {"f", ""}}});
  CHECK(t.routable("", "q1"));
  CHECK_FALSE(t.routable("", "q3"));
  CHECK(t.routable("d", "k"));
  CHECK_FALSE(t.routable("d", "j"));
  CHECK(t.routable("f", "anything"));
  CHECK(t.routable("t", "a"));
  CHECK(t.routable("t", "a.b.c"));
  CHECK_FALSE(t.routable("t", "b"));
  CHECK_FALSE(t.routable("t", "a.*"));  // not a publishable key
  CHECK(t.queues_bound_to("d") == names{"q1", "q2"});
  CHECK(t.has_bindings("f"));
  CHECK(t.queues_reached("d", "k") == names{"q1", "q2"});
  CHECK(t.queues_reached("t", "a.b") == names{"q1"});
  CHECK(t.queues_reached("f", "x") == names{"q2"});
  CHECK(t.queues_reached("", "q2") == names{"q2"});
  CHECK(t.queues_reached("", "q3").empty());
  CHECK(t.queues_reached("d", "j").empty());

  // Rewriting q1 without its bindings (unbind) updates the index.
  t.put_queue("q1", {true, false, false, {}});
  CHECK_FALSE(t.routable("t", "a"));
  CHECK_FALSE(t.has_bindings("t"));
  CHECK(t.routable("d", "k"));
  CHECK(t.queues_bound_to("d") == names{"q2"});

  REQUIRE_FALSE(t.apply("q.q2", std::nullopt));
  CHECK_FALSE(t.routable("d", "k"));
  CHECK_FALSE(t.routable("f", ""));
  CHECK(t.queues_bound_to("d").empty());

  // A deleted exchange routes nothing, though queues still name it.
  t.put_queue("q3", {true, false, false, {{"f", ""}}});
  CHECK(t.routable("f", "x"));
  t.erase_exchange("f");
  CHECK_FALSE(t.routable("f", "x"));
  CHECK(t.has_bindings("f"));
}

namespace {

// Brute force: the queues whose own subject or some binding's filters match the publish subject.
names queues_matching(const topology& t, std::string_view exchange, std::string_view key) {
  names reached;
  auto subject = publish_subject(exchange, key);
  if (!t.find_exchange(exchange) || !subject) return reached;
  for (const auto& [queue, def] : t.queues()) {
    auto filters = t.queue_filters(queue);
    for (const auto& b : def.bindings) {
      const auto* x = t.find_exchange(b.exchange);
      if (!x) continue;
      if (auto more = binding_filters(b.exchange, x->kind, b.key)) filters.insert(filters.end(), more->begin(), more->end());
    }
    if (std::any_of(filters.begin(), filters.end(), [&](const auto& f) { return subject_matches(f, *subject); }))
      reached.push_back(queue);
  }
  return reached;
}

}  // namespace

TEST_CASE("property: routable and queues_reached agree with the bindings' filters after any sequence of writes") {
  std::mt19937 rng{1326};
  auto pick = [&](const auto& options) {
    return options[std::uniform_int_distribution<std::size_t>(0, options.size() - 1)(rng)];
  };
  const std::vector<std::string> exchanges{"", "amq.topic", "amq.fanout", "amq.direct", "e1", "e2"};
  const std::vector<std::string> queues{"q1", "q2", "q3"};
  const std::vector<std::string> keys{"", "a", "b", "a.b", "a.*", "*.b", "a.#", "#", "*", "q1"};
  const std::vector<std::string> publish_keys{"", "a", "b", "a.b", "b.b", "a.b.c", "q1", "q2"};
  const std::vector<exchange_kind> kinds{exchange_kind::direct, exchange_kind::fanout,
                                         exchange_kind::topic};
  topology t;
  for (int step = 0; step < 400; ++step) {
    int op = std::uniform_int_distribution<int>(0, 3)(rng);
    if (op == 0) {
      t.put_exchange(pick(exchanges), {pick(kinds), true, false, false});
    } else if (op == 1) {
      t.erase_exchange(pick(exchanges));
    } else if (op == 2) {
      queue_def def{true, false, false, {}};
      int n = std::uniform_int_distribution<int>(0, 3)(rng);
      for (int i = 0; i < n; ++i) {
        std::string exchange = pick(exchanges);
        std::string key = pick(keys);
        // Only what the broker would accept is stored: a binding valid for the current kind.
        const exchange_def* x = t.find_exchange(exchange);
        if (exchange.empty() || !x || !binding_filters(exchange, x->kind, key)) continue;
        def.bindings.push_back({exchange, key});
      }
      t.put_queue(pick(queues), def);
    } else {
      t.erase_queue(pick(queues));
    }
    std::string disagreement;  // "<exchange>/<key>" of the first publish the two disagree on
    for (const auto& exchange : exchanges) {
      for (const auto& key : publish_keys) {
        const auto reached = queues_matching(t, exchange, key);
        if (disagreement.empty() &&
            (t.routable(exchange, key) != !reached.empty() || t.queues_reached(exchange, key) != reached)) {
          disagreement = exchange + "/" + key;
        }
      }
    }
    CAPTURE(step);
    CHECK(disagreement == "");
  }
}
