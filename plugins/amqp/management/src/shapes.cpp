#include "shapes.hpp"

#include "amqp/routing/names.hpp"
#include "definitions.hpp"
#include "query.hpp"

namespace amqp::management {
namespace {

using json = nlohmann::json;

// RabbitMQ's message_stats names, each with how to read it from the counters.
using counter_of = std::uint64_t (*)(const broker::message_counts&);
const std::pair<const char*, counter_of> message_stats_fields[] = {
    {"publish", [](const broker::message_counts& c) { return c.received; }},
    {"confirm", [](const broker::message_counts& c) { return c.confirmed; }},
    {"return_unroutable", [](const broker::message_counts& c) { return c.unroutable_returned; }},
    {"deliver", [](const broker::message_counts& c) { return c.delivered_consume_manual_ack; }},
    {"deliver_no_ack", [](const broker::message_counts& c) { return c.delivered_consume_auto_ack; }},
    {"get", [](const broker::message_counts& c) { return c.delivered_get_manual_ack; }},
    {"get_no_ack", [](const broker::message_counts& c) { return c.delivered_get_auto_ack; }},
    {"get_empty", [](const broker::message_counts& c) { return c.get_empty; }},
    {"redeliver", [](const broker::message_counts& c) { return c.redelivered; }},
    {"ack", [](const broker::message_counts& c) { return c.acknowledged; }},
    {"deliver_get", [](const broker::message_counts& c) { return c.delivered(); }},
};

}  // namespace

json queue_json(const std::string& vhost, const std::string& node, const routing::topology& t, const std::string& name,
                const bus::queue_info* info, std::uint32_t consumers) {
  const auto& d = *t.find_declared(name);
  const std::uint64_t unacked = info ? info->held_here : 0;
  const std::uint64_t ready = info ? info->ready() : 0;
  json policy = nullptr, effective = json::object();
  if (const auto* applied = t.policy_of(name)) {
    policy = *applied;
    effective = json::parse(routing::encode_policy(t.policies().at(*applied)->rules))["definition"];
  }
  return {{"name", name},
          {"vhost", vhost},
          {"durable", d.durable},
          {"auto_delete", d.auto_delete},
          {"exclusive", d.exclusive},
          {"arguments", queue_arguments(d)},
          {"consumers", consumers},
          {"messages", ready + unacked},
          {"messages_ready", ready},
          {"messages_unacknowledged", unacked},
          {"node", node},
          {"policy", policy},
          {"operator_policy", nullptr},
          {"effective_policy_definition", effective},
          {"exclusive_consumer_tag", nullptr},
          {"state", info ? "running" : "down"},
          {"type", std::string(routing::to_string(d.type()))}};
}

json exchange_json(const std::string& vhost, const std::string& name, const routing::exchange_def& d) {
  return {{"name", name},
          {"vhost", vhost},
          {"type", std::string(routing::type_name(d))},
          {"durable", d.durable},
          {"auto_delete", d.auto_delete},
          {"internal", d.internal},
          {"arguments", exchange_arguments(d)},
          {"user_who_performed_action", "rmq-internal"}};
}

json exchanges_json(const std::string& vhost, const routing::topology& t) {
  json items = json::array();
  for (const auto& [name, def] : t.exchanges()) items.push_back(exchange_json(vhost, name, def));
  return items;
}

json binding_json(const std::string& vhost, const std::string& source, const std::string& queue,
                  const std::string& key) {
  return {{"source", source},         {"vhost", vhost},          {"destination", queue},
          {"destination_type", "queue"}, {"routing_key", key},     {"arguments", json::object()},
          {"properties_key", properties_key(key)}};
}

json bindings_json(const std::string& vhost, const routing::topology& t) {
  json items = json::array();
  for (const auto& [queue, def] : t.queues()) {
    items.push_back(binding_json(vhost, "", queue, queue));
    for (const auto& b : def.bindings) items.push_back(binding_json(vhost, b.exchange, queue, b.key));
  }
  return items;
}

json policy_json(const std::string& vhost, const std::string& name, const routing::compiled_policy& p) {
  auto entry = json::parse(routing::encode_policy(p.rules));
  entry["vhost"] = vhost;
  entry["name"] = name;
  return entry;
}

json policies_json(const std::string& vhost, const routing::topology& t) {
  json items = json::array();
  for (const auto& [name, policy] : t.policies()) items.push_back(policy_json(vhost, name, *policy));
  return items;
}

json vhost_json(const std::string& name) {
  return {{"name", name},         {"description", ""},
          {"tags", json::array()}, {"tracing", false},
          {"default_queue_type", "classic"}, {"metadata", {{"description", ""}, {"tags", json::array()}}}};
}

json node_json(const std::string& node) {
  return {{"name", node}, {"running", true}, {"type", "disc"}, {"being_drained", false}};
}

json connection_json(const connection_view& c, const std::string& node) {
  return {{"name", c.name},
          {"node", node},
          {"vhost", c.vhost},
          {"user", c.user},
          {"peer_host", c.peer_host},
          {"peer_port", c.peer_port},
          {"host", c.host},
          {"port", c.port},
          {"channels", c.channels},
          {"channel_max", c.channel_max},
          {"frame_max", c.frame_max},
          {"timeout", c.heartbeat},
          {"ssl", c.tls},
          {"protocol", "AMQP 0-9-1"},
          {"type", "network"},
          {"state", c.state},
          {"connected_at", c.connected_at},
          {"client_properties", {{"product", c.client_product}, {"version", c.client_version}}}};
}

json consumer_json(const broker::consumer_view& c, const std::string& vhost, const connection_view* conn,
                   const std::string& node) {
  json channel = {{"number", c.channel}, {"node", node}};
  if (conn) {
    channel["connection_name"] = conn->name;
    channel["name"] = conn->name + " (" + std::to_string(c.channel) + ")";
    channel["peer_host"] = conn->peer_host;
    channel["peer_port"] = conn->peer_port;
    channel["user"] = conn->user;
  }
  return {{"consumer_tag", c.tag},
          {"queue", {{"name", c.queue}, {"vhost", vhost}}},
          {"channel_details", channel},
          {"exclusive", c.exclusive},
          {"ack_required", c.ack_required},
          {"prefetch_count", c.prefetch},
          {"active", true},
          {"activity_status", "up"},
          {"arguments", json::object()}};
}

json channel_json(const connection_view& c, std::uint16_t number, std::uint32_t consumers, const std::string& node) {
  return {{"name", c.name + " (" + std::to_string(number) + ")"},
          {"number", number},
          {"node", node},
          {"vhost", c.vhost},
          {"user", c.user},
          {"consumer_count", consumers},
          {"state", "running"},
          {"connection_details", {{"name", c.name}, {"peer_host", c.peer_host}, {"peer_port", c.peer_port}}}};
}

json only(json items, const char* field, const json& value) {
  json kept = json::array();
  for (auto& item : items)
    if (item[field] == value) kept.push_back(std::move(item));
  return kept;
}

json message_stats(const std::vector<vhost_counters>& in) {
  json stats = json::object();
  for (const auto& [name, read] : message_stats_fields) {
    std::uint64_t total = 0;
    double rate = 0;
    for (const auto& v : in) {
      total += read(v.now);
      if (!v.last_two) continue;
      const auto& [older, newer] = *v.last_two;
      const std::chrono::duration<double> span = newer.at - older.at;
      if (span.count() > 0) rate += static_cast<double>(read(newer.counts) - read(older.counts)) / span.count();
    }
    stats[name] = total;
    stats[std::string(name) + "_details"] = {{"rate", rate}};
  }
  return stats;
}

}  // namespace amqp::management
