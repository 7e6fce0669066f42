#pragma once
// The JSON the API answers with, in RabbitMQ 3.x's shapes, made from plain data so that each
// resource's shape is tested without a broker. Pure: no I/O.
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "amqp/broker/broker.hpp"
#include "amqp/bus/client.hpp"
#include "amqp/management/service.hpp"
#include "amqp/routing/policy.hpp"
#include "amqp/routing/topology.hpp"

namespace amqp::management {

// RabbitMQ's management version these shapes follow; cloud names itself in product_*.
inline constexpr const char* api_version = "3.10.8";

// `arguments` are what the queue declared; the policy that applies to it is named beside them.
// `info`: the bus's counts (nullptr: its consumer is not there yet, so "down").
nlohmann::json queue_json(const std::string& vhost, const std::string& node, const routing::topology& t,
                          const std::string& name, const bus::queue_info* info, std::uint32_t consumers);
nlohmann::json exchange_json(const std::string& vhost, const std::string& name, const routing::exchange_def& d);
// Every exchange of a vhost's mirror, the default one ("") and the amq.* ones included.
nlohmann::json exchanges_json(const std::string& vhost, const routing::topology& t);
nlohmann::json binding_json(const std::string& vhost, const std::string& source, const std::string& queue,
                            const std::string& key);
// A vhost's bindings: each queue's implicit one from the default exchange, then its own.
nlohmann::json bindings_json(const std::string& vhost, const routing::topology& t);
// A policy as RabbitMQ lists one.
nlohmann::json policy_json(const std::string& vhost, const std::string& name, const routing::compiled_policy& p);
nlohmann::json policies_json(const std::string& vhost, const routing::topology& t);
nlohmann::json vhost_json(const std::string& name);
nlohmann::json node_json(const std::string& node);
nlohmann::json connection_json(const connection_view& c, const std::string& node);
// `conn`: the consumer's connection when this process still lists it.
nlohmann::json consumer_json(const broker::consumer_view& c, const std::string& vhost, const connection_view* conn,
                             const std::string& node);
nlohmann::json channel_json(const connection_view& c, std::uint16_t number, std::uint32_t consumers,
                            const std::string& node);

// Of `items`, those whose `field` is `value`.
nlohmann::json only(nlohmann::json items, const char* field, const nlohmann::json& value);

struct counter_sample {
  std::chrono::steady_clock::time_point at;
  broker::message_counts counts;
};
// A vhost's counters now, and its last two samples (older, newer) when it has been sampled.
struct vhost_counters {
  broker::message_counts now;
  const std::pair<counter_sample, counter_sample>* last_two = nullptr;
};
// RabbitMQ's message_stats: each count summed over the vhosts, and its rate per second over the
// last sample interval (`<name>_details`).
nlohmann::json message_stats(const std::vector<vhost_counters>& in);

}  // namespace amqp::management
