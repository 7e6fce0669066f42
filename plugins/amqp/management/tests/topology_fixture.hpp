#pragma once
// A vhost's mirror for the management tests: a topic exchange, a durable queue bound to it with a
// TTL and a dead-letter exchange, an exclusive queue, and a policy applied to the first queue.
#include <doctest/doctest.h>

#include "amqp/routing/policy.hpp"
#include "amqp/routing/topology.hpp"

namespace amqp::management::testing {

inline routing::topology orders_topology() {
  routing::topology t;
  t.put_exchange("orders", {routing::exchange_kind::topic, true, false, false});
  routing::queue_def eu;
  eu.durable = true;
  eu.bindings.push_back({"orders", "eu.#"});
  eu.message_ttl = 60000;
  eu.dead_letter = routing::dead_letter_target{"dlx", std::nullopt};
  t.put_queue("eu", eu);
  routing::queue_def mine;
  mine.exclusive = true;
  t.put_queue("amq.gen-1", mine);
  auto limit = routing::parse_policy(R"({"pattern":"^eu$","apply-to":"queues","definition":{"max-length":5}})",
                                     routing::name_rules::escaped);
  REQUIRE(limit);
  t.put_policy("limit", *routing::compile(*limit));
  return t;
}

}  // namespace amqp::management::testing
