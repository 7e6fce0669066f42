// The management API's endpoints, RabbitMQ 3.x's shapes. Reads come from the vhost's topology
// mirror and the bus's consumer counts; writes go through an operator channel (operator_channel.hpp)
// as AMQP methods, so they are refused as a client would be.
#include "api.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include "amqp/bus/base64.hpp"
#include "amqp/routing/names.hpp"
#include "amqp/routing/policy.hpp"
#include "amqp/routing/subject.hpp"
#include "amqp/wire/codec.hpp"
#include "definitions.hpp"
#include "off_loop.hpp"
#include "operator_channel.hpp"
#include "properties_json.hpp"
#include "request_body.hpp"

namespace amqp::management {
namespace {

using json = nlohmann::json;


// RabbitMQ's management version these shapes follow; cloud names itself in product_*.
constexpr const char* api_version = "3.10.8";
constexpr std::chrono::seconds operator_timeout{30};

reply json_reply(unsigned status, const json& body) { return reply{status, body.dump(), "application/json", {}, {}}; }
reply no_content() { return reply{204, "", "application/json", {}, {}}; }
reply created() { return reply{201, "", "application/json", {}, {}}; }
reply not_found() { return error_reply(404, "Object Not Found", "Not Found"); }
reply bad_request(const std::string& reason) { return error_reply(400, "bad_request", reason); }
// A vhost the user may not use, in RabbitMQ's words.
reply refused_vhost() { return error_reply(401, "not_authorised", "User not authorised to access virtual host"); }

std::map<std::string, std::uint32_t> consumer_counts(const broker::broker& b) {
  std::map<std::string, std::uint32_t> counts;
  for (const auto& c : broker::consumers_of(b)) ++counts[c.queue];
  return counts;
}

// A policy as RabbitMQ lists one.
json policy_entry(const std::string& vhost, const std::string& name, const routing::compiled_policy& p) {
  auto entry = json::parse(routing::encode_policy(p.rules));
  entry["vhost"] = vhost;
  entry["name"] = name;
  return entry;
}

// `arguments` are what the queue declared; the policy that applies to it is named beside them.
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


json binding_json(const std::string& vhost, const std::string& source, const std::string& queue,
                  const std::string& key) {
  return {{"source", source},         {"vhost", vhost},          {"destination", queue},
          {"destination_type", "queue"}, {"routing_key", key},     {"arguments", json::object()},
          {"properties_key", properties_key(key)}};
}


// What a refusal over AMQP is over HTTP, as RabbitMQ's management plugin maps it.
reply refused_reply(const operator_channel::answer& a, const std::string& what) {
  if (a.timed_out) return error_reply(504, "timeout", what + ": the broker did not answer in time");
  if (!a.refused) return error_reply(500, "internal_error", what + ": no answer");
  if (a.refused->code == wire::reply_code::not_found) return error_reply(404, "not_found", a.refused->text);
  if (a.refused->code == wire::reply_code::access_refused) return error_reply(403, "access_refused", a.refused->text);
  return bad_request(a.refused->text);
}

template <class M>
bool is(const operator_channel::received& r) {
  return std::holds_alternative<M>(r.method);
}

bool settled_publish(const operator_channel::received& f) { return is<wire::basic_ack>(f) || is<wire::basic_nack>(f); }
bool taken_get(const operator_channel::received& f) { return is<wire::basic_get_ok>(f) || is<wire::basic_get_empty>(f); }

}  // namespace

reply error_reply(unsigned status, const std::string& error, const std::string& reason) {
  return json_reply(status, json{{"error", error}, {"reason", reason}});
}

api::api(const sources& src, net::any_io_executor ex) : src_(src), ex_(std::move(ex)) {}

// Copies: a request keeps its vhosts' brokers while it runs, whatever happens to the service.
std::optional<vhost> api::find(const std::string& name) const {
  for (const auto& v : src_.vhosts)
    if (v.name == name) return v;
  return std::nullopt;
}

std::vector<vhost> api::all_vhosts() const { return src_.vhosts; }

// The vhosts `who` may use, as the bus says (a user of one NATS account sees that account's only).
net::awaitable<std::vector<vhost>> api::permitted(const principal& who) {
  auto ask = [&who, all = all_vhosts()] {
    std::vector<vhost> allowed;
    for (const auto& v : all)
      if (who.client_for(v.name)) allowed.push_back(v);
    return allowed;
  };
  auto pool = broker::bus_of(*src_.vhosts.front().broker)->worker_executor();
  auto allowed = co_await off_loop(pool, std::move(ask));
  co_return allowed ? std::move(*allowed) : std::vector<vhost>{};
}

// A request's bug is its own 500, named, and the connection stays (RabbitMQ's shape).
net::awaitable<reply> api::answer(request r, const principal& who) {
  std::string failure;
  try {
    // Two statements: g++ 12 miscompiles a co_await inside a conditional expression.
    reply answered;
    if (r.method == "GET" || r.method == "HEAD")
      answered = co_await get(r, who);
    else
      answered = co_await write(r, who);
    co_return answered;
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (src_.log) src_.log("management: " + r.method + " failed: " + failure);
  co_return error_reply(500, "internal_server_error", failure);
}

// ---- reads ------------------------------------------------------------------------------------

namespace {

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

void api::sample_counters() {
  const auto now = std::chrono::steady_clock::now();
  for (const auto& v : src_.vhosts) {
    counter_sample newest{now, broker::message_counts_of(*v.broker)};
    auto [it, first] = samples_.try_emplace(v.name, newest, newest);
    if (!first) it->second = {it->second.second, newest};
  }
}

// RabbitMQ's message_stats: the counts, this process's since it started, and each one's rate over
// the last sample interval (`<name>_details`).
json api::message_stats(const std::vector<vhost>& in) const {
  json stats = json::object();
  for (const auto& [name, read] : message_stats_fields) {
    std::uint64_t total = 0;
    double rate = 0;
    for (const auto& v : in) {
      total += read(broker::message_counts_of(*v.broker));
      auto it = samples_.find(v.name);
      if (it == samples_.end()) continue;
      const auto& [older, newer] = it->second;
      const std::chrono::duration<double> span = newer.at - older.at;
      if (span.count() > 0) rate += static_cast<double>(read(newer.counts) - read(older.counts)) / span.count();
    }
    stats[name] = total;
    stats[std::string(name) + "_details"] = {{"rate", rate}};
  }
  return stats;
}

net::awaitable<reply> api::overview(const std::vector<vhost>& in) {
  std::uint64_t queues = 0, exchanges = 0, ready = 0, unacked = 0, consumers = 0;
  for (const auto& v : in) {
    const auto t = broker::topology_of(*v.broker);
    queues += t.queues().size();
    exchanges += t.exchanges().size();
    consumers += broker::consumers_of(*v.broker).size();
    auto bus = broker::bus_of(*v.broker);
    auto peek = [bus] { return bus->peek_all_queues(); };
    auto pool = bus->worker_executor();
    auto counts = co_await off_loop(pool, std::move(peek));
    if (!counts || !*counts) co_return error_reply(503, "bus_unavailable", counts ? (*counts).error().text : "no answer");
    for (const auto& [name, info] : **counts) {
      ready += info.ready();
      unacked += info.held_here;
    }
  }
  const auto conns = connections_json(in);
  std::uint64_t channels = 0;
  for (const auto& c : conns) channels += c["channels"].get<std::uint64_t>();
  json listeners = json::array();
  for (const auto& l : src_.listeners)
    listeners.push_back({{"node", src_.node}, {"protocol", l.protocol}, {"ip_address", l.ip}, {"port", l.port}});
  co_return json_reply(200, json{{"management_version", api_version},
                                 {"rabbitmq_version", api_version},
                                 {"product_name", "cloud"},
                                 {"product_version", src_.product_version},
                                 {"cluster_name", src_.node},
                                 {"node", src_.node},
                                 {"rates_mode", "basic"},
                                 {"object_totals",
                                  {{"connections", conns.size()},
                                   {"channels", channels},
                                   {"exchanges", exchanges},
                                   {"queues", queues},
                                   {"consumers", consumers}}},
                                 {"queue_totals",
                                  {{"messages", ready + unacked}, {"messages_ready", ready}, {"messages_unacknowledged", unacked}}},
                                 {"message_stats", message_stats(in)},
                                 {"listeners", listeners},
                                 {"exchange_types",
                                  json::array({{{"name", "direct"}, {"enabled", true}},
                                               {{"name", "fanout"}, {"enabled", true}},
                                               {{"name", "topic"}, {"enabled", true}}})}});
}

net::awaitable<reply> api::queues(const request& r, const std::vector<vhost>& in) {
  json items = json::array();
  for (const auto& v : in) {
    const auto t = broker::topology_of(*v.broker);
    const auto consumers = consumer_counts(*v.broker);
    auto bus = broker::bus_of(*v.broker);
    // A stream queue's messages are what its own stream holds (its consumer on stream AMQP only
    // passes them on).
    std::vector<std::string> streams;
    for (const auto& [queue, def] : t.queues())
      if (def.type() == routing::queue_type::stream) streams.push_back(routing::consumer_name(queue));
    auto peek = [bus, streams] {
      auto all = bus->peek_all_queues();
      if (!all) return all;
      for (const auto& consumer : streams)
        if (auto held = bus->queue_stream_state(consumer)) (*all)[consumer] = bus::queue_info{held->messages};
      return all;
    };
    auto pool = bus->worker_executor();
    auto counts = co_await off_loop(pool, std::move(peek));
    if (!counts || !*counts) co_return error_reply(503, "bus_unavailable", counts ? (*counts).error().text : "no answer");
    for (const auto& entry : t.queues()) {
      const auto& name = entry.first;
      auto info = (**counts).find(routing::consumer_name(name));
      auto c = consumers.find(name);
      items.push_back(queue_json(v.name, src_.node, t, name, info == (**counts).end() ? nullptr : &info->second,
                                 c == consumers.end() ? 0 : c->second));
    }
  }
  auto shaped = shape_list(std::move(items), r.query);
  if (shaped.bad_request) co_return bad_request(*shaped.bad_request);
  co_return json_reply(200, shaped.body);
}

net::awaitable<reply> api::queue(const vhost& v, const std::string& name) {
  const auto t = broker::topology_of(*v.broker);
  const auto* def = t.find_queue(name);
  if (def == nullptr) co_return not_found();
  auto bus = broker::bus_of(*v.broker);
  const bool stream = def->type() == routing::queue_type::stream;
  auto peek = [bus, consumer = routing::consumer_name(name), stream]() -> bus::bus_result<bus::queue_info> {
    if (!stream) return bus->peek_queue(consumer);
    auto held = bus->queue_stream_state(consumer);
    if (!held) return held.error();
    return bus::queue_info{held->messages};
  };
  auto pool = bus->worker_executor();
  auto info = co_await off_loop(pool, std::move(peek));
  if (!info) co_return error_reply(503, "bus_unavailable", "no answer");
  // A queue whose consumer is still being made is "down" with nothing counted; any other failure
  // is the bus's, said as such.
  if (!*info && (*info).error().kind != bus::bus_errc::not_found)
    co_return error_reply(503, "bus_unavailable", (*info).error().text);
  const bus::queue_info* counted = *info ? &**info : nullptr;
  const auto consumers = consumer_counts(*v.broker);
  auto c = consumers.find(name);
  co_return json_reply(200, queue_json(v.name, src_.node, t, name, counted, c == consumers.end() ? 0 : c->second));
}

json api::exchanges_json(const std::vector<vhost>& in) const {
  json items = json::array();
  for (const auto& v : in) {
    const auto t = broker::topology_of(*v.broker);
    for (const auto& [name, def] : t.exchanges()) items.push_back(exchange_json(v.name, name, def));
  }
  return items;
}

json api::bindings_json(const std::vector<vhost>& in) const {
  json items = json::array();
  for (const auto& v : in) {
    const auto t = broker::topology_of(*v.broker);
    for (const auto& [queue, def] : t.queues()) {
      items.push_back(binding_json(v.name, "", queue, queue));  // the implicit default binding
      for (const auto& b : def.bindings) items.push_back(binding_json(v.name, b.exchange, queue, b.key));
    }
  }
  return items;
}

json api::connections_json(const std::vector<vhost>& in) const {
  json items = json::array();
  if (!src_.connections) return items;
  for (const auto& c : src_.connections()) {
    if (std::none_of(in.begin(), in.end(), [&](const vhost& v) { return v.name == c.vhost; })) continue;
    items.push_back({{"name", c.name},
                     {"node", src_.node},
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
                     {"client_properties", {{"product", c.client_product}, {"version", c.client_version}}}});
  }
  return items;
}

json api::consumers_json(const std::vector<vhost>& in) const {
  std::map<std::uint64_t, connection_view> by_id;
  if (src_.connections)
    for (auto& c : src_.connections()) by_id.emplace(c.id, std::move(c));
  json items = json::array();
  for (const auto& v : in) {
    for (const auto& c : broker::consumers_of(*v.broker)) {
      auto conn = by_id.find(c.connection_id);
      json channel = {{"number", c.channel}, {"node", src_.node}};
      if (conn != by_id.end()) {
        channel["connection_name"] = conn->second.name;
        channel["name"] = conn->second.name + " (" + std::to_string(c.channel) + ")";
        channel["peer_host"] = conn->second.peer_host;
        channel["peer_port"] = conn->second.peer_port;
        channel["user"] = conn->second.user;
      }
      items.push_back({{"consumer_tag", c.tag},
                       {"queue", {{"name", c.queue}, {"vhost", v.name}}},
                       {"channel_details", channel},
                       {"exclusive", c.exclusive},
                       {"ack_required", c.ack_required},
                       {"prefetch_count", c.prefetch},
                       {"active", true},
                       {"activity_status", "up"},
                       {"arguments", json::object()}});
    }
  }
  return items;
}

json api::channels_json(const std::vector<vhost>& in) const {
  json items = json::array();
  if (!src_.connections) return items;
  std::map<std::pair<std::uint64_t, std::uint16_t>, std::uint32_t> consumers;
  for (const auto& v : in)
    for (const auto& c : broker::consumers_of(*v.broker)) ++consumers[{c.connection_id, c.channel}];
  for (const auto& c : src_.connections()) {
    if (std::none_of(in.begin(), in.end(), [&](const vhost& v) { return v.name == c.vhost; })) continue;
    for (const auto& [key, count] : consumers) {
      if (key.first != c.id) continue;
      items.push_back({{"name", c.name + " (" + std::to_string(key.second) + ")"},
                       {"number", key.second},
                       {"node", src_.node},
                       {"vhost", c.vhost},
                       {"user", c.user},
                       {"consumer_count", count},
                       {"state", "running"},
                       {"connection_details", {{"name", c.name}, {"peer_host", c.peer_host}, {"peer_port", c.peer_port}}}});
    }
  }
  return items;
}

// The vhosts a path names: every one the user may use, or the one in segment `at` (nullopt: no
// such vhost, or not one of those).
std::optional<std::vector<vhost>> api::reading::in(std::size_t at) const {
  if (r.path.size() <= at) return allowed;
  for (const auto& v : allowed)
    if (v.name == r.path[at]) return std::vector<vhost>{v};
  return std::nullopt;
}

reply api::reading::list(json items) const {
  auto shaped = shape_list(std::move(items), r.query);
  return shaped.bad_request ? bad_request(*shaped.bad_request) : json_reply(200, shaped.body);
}

// What a path naming a vhost the user may not use answers: 404 when there is none, else 401.
reply api::missing(const std::string& vhost_name) const { return find(vhost_name) ? refused_vhost() : not_found(); }

net::awaitable<reply> api::get(const request& r, const principal& who) {
  auto allowed = co_await permitted(who);
  const reading g{r, who, std::move(allowed)};
  const auto& p = r.path;
  const auto n = p.size();
  if (n == 1 && p[0] == "overview") {
    auto answered = co_await overview(g.allowed);
    co_return answered;
  }
  if ((n == 2 && p[0] == "aliveness-test") || (p[0] == "queues" && n <= 3)) {
    const auto vs = g.in(1);
    if (!vs) co_return missing(p[1]);
    reply answered;
    if (p[0] == "aliveness-test") {
      answered = co_await aliveness(vs->front(), who);
    } else if (n == 3) {
      answered = co_await queue(vs->front(), p[2]);
    } else {
      answered = co_await queues(r, *vs);
    }
    co_return answered;
  }
  if (auto answered = node_reading(g)) co_return std::move(*answered);
  if (auto answered = topology_reading(g)) co_return std::move(*answered);
  if (auto answered = client_reading(g)) co_return std::move(*answered);
  co_return not_found();
}

// The user, the node, its vhosts and health.
std::optional<reply> api::node_reading(const reading& g) const {
  const auto& p = g.r.path;
  const auto n = p.size();
  if (n == 1 && p[0] == "whoami") return json_reply(200, json{{"name", g.who.user}, {"tags", json::array({"administrator"})}});
  if (n == 1 && p[0] == "cluster-name") return json_reply(200, json{{"name", src_.node}});
  if (n == 1 && p[0] == "extensions") return json_reply(200, json::array());
  if (n == 1 && p[0] == "feature-flags") {
    return json_reply(200, json::array({{{"name", "quorum_queue"}, {"state", "enabled"}, {"stability", "stable"},
                                         {"provided_by", "cloud"}, {"desc", "x-queue-type quorum is kept with the queue"}},
                                        {{"name", "implicit_default_bindings"}, {"state", "enabled"},
                                         {"stability", "stable"}, {"provided_by", "cloud"},
                                         {"desc", "every queue is bound to the default exchange by its name"}}}));
  }
  if ((n == 1 || n == 2) && p[0] == "nodes") {
    json node = {{"name", src_.node}, {"running", true}, {"type", "disc"}, {"being_drained", false}};
    if (n == 2) return p[1] == src_.node ? json_reply(200, node) : not_found();
    return json_reply(200, json::array({node}));
  }
  if ((n == 1 || n == 2) && p[0] == "vhosts") {
    if (n == 2 && !g.in(1)) return missing(p[1]);
    json items = json::array();
    for (const auto& v : g.allowed) {
      if (n == 2 && v.name != p[1]) continue;
      items.push_back({{"name", v.name}, {"description", ""}, {"tags", json::array()}, {"tracing", false},
                       {"default_queue_type", "classic"}, {"metadata", {{"description", ""}, {"tags", json::array()}}}});
    }
    if (n == 2) return items.empty() ? not_found() : json_reply(200, items[0]);
    return g.list(std::move(items));
  }
  if ((n == 2 && p[0] == "healthchecks" && p[1] == "node") || (n >= 3 && p[0] == "health" && p[1] == "checks"))
    return json_reply(200, json{{"status", "ok"}});
  return std::nullopt;
}

// A queue's bindings, exchanges, bindings, policies, parameters and the definitions file.
std::optional<reply> api::topology_reading(const reading& g) const {
  const auto& p = g.r.path;
  const auto n = p.size();
  const bool exchanges = p[0] == "exchanges" && (n <= 3 || (n == 5 && p[3] == "bindings"));
  const bool bindings = p[0] == "bindings" && (n <= 2 || ((n == 6 || n == 7) && p[2] == "e" && p[4] == "q"));
  const bool others = (p[0] == "queues" && n == 4 && p[3] == "bindings") || (p[0] == "definitions" && n <= 2) ||
                      (p[0] == "policies" && n <= 3);
  if (!exchanges && !bindings && !others) return parameters_reading(g);
  const auto vs = g.in(1);
  if (!vs) return missing(p[1]);
  // Of the listed, those whose `field` is `value` (with `one`: that one, or 404).
  auto only = [&](json items, const char* field, const json& value, bool one) {
    json kept = json::array();
    for (auto& item : items)
      if (item[field] == value) kept.push_back(std::move(item));
    if (one) return kept.empty() ? not_found() : json_reply(200, kept[0]);
    return g.list(std::move(kept));
  };
  if (p[0] == "queues") return only(bindings_json(*vs), "destination", p[2], false);
  if (exchanges && n <= 2) return g.list(exchanges_json(*vs));
  if (exchanges && n == 3) return only(exchanges_json(*vs), "name", p[2] == "amq.default" ? "" : p[2], true);
  if (exchanges) {  // exchange-to-exchange bindings are refused: none has one as destination
    if (p[4] != "source") return p[4] == "destination" ? g.list(json::array()) : not_found();
    return only(bindings_json(*vs), "source", p[2], false);
  }
  if (bindings && n <= 2) return g.list(bindings_json(*vs));
  if (bindings) {
    json items = json::array();
    for (auto& b : bindings_json(*vs))
      if (b["source"] == p[3] && b["destination"] == p[5] && (n == 6 || b["routing_key"] == routing_key_of(p[6])))
        items.push_back(std::move(b));
    if (n == 7) return items.empty() ? not_found() : json_reply(200, items[0]);
    return g.list(std::move(items));
  }
  if (p[0] == "definitions") {
    std::vector<std::pair<std::string, routing::topology>> mirrors;
    for (const auto& v : *vs) mirrors.emplace_back(v.name, broker::topology_of(*v.broker));
    return json_reply(200, export_definitions(mirrors, src_.product_version, n == 2));
  }
  json items = json::array();
  for (const auto& v : *vs) {
    const auto t = broker::topology_of(*v.broker);
    for (const auto& [name, policy] : t.policies()) items.push_back(policy_entry(v.name, name, *policy));
  }
  return n == 3 ? only(std::move(items), "name", p[2], true) : g.list(std::move(items));
}

// No runtime parameter component (shovel, federation) is implemented, so none is set; the
// operator policies are none for the same reason.
std::optional<reply> api::parameters_reading(const reading& g) const {
  const auto& p = g.r.path;
  const auto n = p.size();
  if (!(p[0] == "parameters" && n <= 3) && !(p[0] == "operator-policies" && n <= 2)) return std::nullopt;
  const std::size_t vhost_at = p[0] == "parameters" ? 2 : 1;
  if (n > vhost_at && !g.in(vhost_at)) return missing(p[vhost_at]);
  return g.list(json::array());
}

// This process's consumers, connections and channels.
std::optional<reply> api::client_reading(const reading& g) const {
  const auto& p = g.r.path;
  const auto n = p.size();
  if (p[0] == "consumers" && n <= 2) {
    auto vs = g.in(1);
    if (!vs) return missing(p[1]);
    return g.list(consumers_json(*vs));
  }
  if (p[0] == "connections" && n == 1) return g.list(connections_json(g.allowed));
  if (p[0] == "vhosts" && n == 3 && p[2] == "connections") {
    auto vs = g.in(1);
    if (!vs) return missing(p[1]);
    return g.list(connections_json(*vs));
  }
  if (p[0] == "connections" && n == 2) {
    for (auto& c : connections_json(g.allowed))
      if (c["name"] == p[1]) return json_reply(200, c);
    return not_found();
  }
  if (p[0] == "channels" && n == 1) return g.list(channels_json(g.allowed));
  return std::nullopt;
}

// ---- the aliveness test: declare, publish, get, as RabbitMQ's does -----------------------------

net::awaitable<reply> api::aliveness(const vhost& v, const principal& who) {
  auto ch = co_await open_operator(v, who);
  if (!ch) co_return refused_vhost();
  wire::queue_declare declare{0, "aliveness-test", false, false, false, false, false, {}};
  auto declared = co_await ch->call(std::move(declare), is<wire::queue_declare_ok>);
  if (declared.refused || declared.timed_out) co_return refused_reply(declared, "aliveness-test");
  wire::confirm_select select{false};
  auto selected = co_await ch->call(std::move(select), is<wire::confirm_select_ok>);
  if (selected.refused || selected.timed_out) co_return refused_reply(selected, "aliveness-test");
  wire::basic_publish m{0, "", "aliveness-test", false, false};
  auto octets = wire::encode_properties(wire::basic_properties{});
  std::string body = "test_message";
  auto sent = co_await ch->publish(std::move(m), std::move(octets), std::move(body), settled_publish);
  if (sent.refused || sent.timed_out) co_return refused_reply(sent, "aliveness-test");
  wire::basic_get get{0, "aliveness-test", true};
  auto got = co_await ch->call(std::move(get), taken_get);
  if (got.refused || got.timed_out) co_return refused_reply(got, "aliveness-test");
  if (!is<wire::basic_get_ok>(got.frames.back()))
    co_return json_reply(503, json{{"status", "failed"}, {"reason", "the test message did not come back"}});
  co_return json_reply(200, json{{"status", "ok"}});
}

// ---- writes -----------------------------------------------------------------------------------

net::awaitable<reply> api::write(const request& r, const principal& who) {
  const auto& p = r.path;
  const auto n = p.size();
  const auto v = n >= 2 ? find(p[1]) : std::nullopt;
  const bool put = r.method == "PUT", del = r.method == "DELETE", post = r.method == "POST";
  if (v) {
    auto ask = [&who, name = v->name] { return who.client_for(name) != nullptr; };
    auto pool = broker::bus_of(*v->broker)->worker_executor();
    auto may = co_await off_loop(pool, std::move(ask));
    if (!may || !*may) co_return refused_vhost();
  }
  if (p[0] == "queues" && n == 3 && v && put) {
    auto answered = co_await declare_queue(*v, p[2], r, who);
    co_return answered;
  }
  if (p[0] == "queues" && n == 3 && v && del) {
    auto answered = co_await delete_queue(*v, p[2], r, who);
    co_return answered;
  }
  if (p[0] == "queues" && n == 4 && v && del && p[3] == "contents") {
    auto answered = co_await purge_queue(*v, p[2], who);
    co_return answered;
  }
  if (p[0] == "queues" && n == 4 && v && post && p[3] == "get") {
    auto answered = co_await get_messages(*v, p[2], r, who);
    co_return answered;
  }
  if (p[0] == "exchanges" && n == 3 && v && put) {
    auto answered = co_await declare_exchange(*v, p[2], r, who);
    co_return answered;
  }
  if (p[0] == "exchanges" && n == 3 && v && del) {
    auto answered = co_await delete_exchange(*v, p[2], r, who);
    co_return answered;
  }
  if (p[0] == "exchanges" && n == 4 && v && post && p[3] == "publish") {
    auto answered = co_await publish(*v, p[2], r, who);
    co_return answered;
  }
  if (p[0] == "definitions" && post && (n == 1 || (n == 2 && v))) {
    auto answered = co_await import(r, v, who);
    co_return answered;
  }
  if (p[0] == "bindings" && n == 6 && v && post && p[2] == "e" && p[4] == "q") {
    auto answered = co_await bind(*v, p[3], p[5], r, who);
    co_return answered;
  }
  if (p[0] == "bindings" && n == 7 && v && del && p[2] == "e" && p[4] == "q") {
    auto answered = co_await unbind(*v, p[3], p[5], p[6], who);
    co_return answered;
  }
  if (p[0] == "policies" && n == 3 && v && (put || del)) {
    auto answered = co_await change_policy(*v, p[2], r, who);
    co_return answered;
  }
  co_return unwritable(r, v);
}

// A write no path takes: what RabbitMQ answers for it.
reply api::unwritable(const request& r, const std::optional<vhost>& v) const {
  const auto& p = r.path;
  const auto n = p.size();
  const bool put = r.method == "PUT", del = r.method == "DELETE";
  // Nothing can be set there, so nothing is there to delete (parameters/{component}/{vhost}/{name}).
  if (p[0] == "parameters" && n == 4 && (put || del)) {
    if (!find(p[2]) || del) return not_found();
    return bad_request("Validation failed\n\ncomponent " + p[1] +
                       " not found: runtime parameters (shovels, federation) are not implemented\n");
  }
  if (p[0] == "operator-policies" && n == 3 && v && (put || del)) {
    if (del) return not_found();
    return bad_request("Validation failed\n\noperator policies are not implemented: set a policy "
                       "(PUT /api/policies/{vhost}/{name}), which the adaptor applies\n");
  }
  if (n >= 2 && !v &&
      (p[0] == "queues" || p[0] == "exchanges" || p[0] == "bindings" || p[0] == "definitions" || p[0] == "policies" ||
       p[0] == "operator-policies"))
    return not_found();
  reply refused = error_reply(405, "Method Not Allowed", "Method Not Allowed");
  refused.allow = "GET, HEAD";
  return refused;
}

// PUT or DELETE of a policy: written to the vhost's bucket through `who`'s own bus client.
net::awaitable<reply> api::change_policy(const vhost& v, const std::string& name, const request& r,
                                         const principal& who) {
  const bool del = r.method == "DELETE";
  auto change = [&who, b = v.broker, vhost = v.name, name, body = r.body, del]() -> std::optional<broker::policy_change> {
    auto client = who.client_for(vhost);
    if (!client) return std::nullopt;
    return del ? broker::delete_policy(*b, *client, name) : broker::put_policy(*b, *client, name, body);
  };
  auto pool = broker::bus_of(*v.broker)->worker_executor();
  auto done = co_await off_loop(pool, std::move(change));
  if (!done || !*done) co_return refused_vhost();
  const auto& c = **done;
  if (c.refused) co_return bad_request("Validation failed\n\n" + *c.refused + "\n");
  if (c.failure && c.denied) co_return error_reply(403, "access_refused", "policy " + name + ": " + *c.failure);
  if (c.failure) co_return error_reply(503, "bus_unavailable", "policy " + name + ": " + *c.failure);
  if (del) co_return c.existed ? no_content() : not_found();
  co_return c.existed ? no_content() : created();
}

// One operator channel for one request, through the user's client in the vhost; nullptr when the
// user may not use the vhost.
net::awaitable<std::shared_ptr<operator_channel>> api::open_operator(const vhost& v, const principal& who) {
  auto sign_in = [&who, name = v.name] { return who.client_for(name); };
  auto pool = broker::bus_of(*v.broker)->worker_executor();
  auto client = co_await off_loop(pool, std::move(sign_in));
  if (!client || !*client) co_return nullptr;
  co_return std::make_shared<operator_channel>(v.broker, *client, ex_, next_operator_++ | (1ULL << 62), who.user,
                                               operator_timeout);
}

// One method on an operator channel of `who`'s: `success` when it is answered as `done` asks,
// else the reply its refusal is.
net::awaitable<reply> api::one_method(const vhost& v, const principal& who, wire::method m,
                                      operator_channel::done_fn done, reply success) {
  const auto what = std::string(wire::info_of(m).name);
  auto ch = co_await open_operator(v, who);
  if (!ch) co_return refused_vhost();
  auto a = co_await ch->call(std::move(m), std::move(done));
  if (a.refused || a.timed_out) co_return refused_reply(a, what);
  co_return success;
}

net::awaitable<reply> api::declare_queue(const vhost& v, const std::string& name, const request& r,
                                         const principal& who) {
  std::string why;
  auto body = request_body::parse(r.body, why);
  if (!body) co_return bad_request(why);
  auto arguments = body->table("arguments");
  const bool durable = body->flag("durable", true), auto_delete = body->flag("auto_delete", false);
  if (body->error()) co_return bad_request(*body->error());
  const auto success = broker::topology_of(*v.broker).find_queue(name) ? no_content() : created();
  wire::method m = wire::queue_declare{0, name, false, durable, false, auto_delete, false, std::move(arguments)};
  auto answered = co_await one_method(v, who, std::move(m), is<wire::queue_declare_ok>, success);
  co_return answered;
}

net::awaitable<reply> api::delete_queue(const vhost& v, const std::string& name, const request& r,
                                        const principal& who) {
  auto ch = co_await open_operator(v, who);
  if (!ch) co_return refused_vhost();
  // RabbitMQ answers 404 for a queue that is not there.
  wire::queue_declare passive{0, name, true, false, false, false, false, {}};
  auto there = co_await ch->call(std::move(passive), is<wire::queue_declare_ok>);
  if (there.refused || there.timed_out) co_return refused_reply(there, "queue.delete");
  const bool if_unused = r.query.contains("if-unused") && r.query.at("if-unused") == "true";
  const bool if_empty = r.query.contains("if-empty") && r.query.at("if-empty") == "true";
  wire::queue_delete_ m{0, name, if_unused, if_empty, false};
  auto a = co_await ch->call(std::move(m), is<wire::queue_delete_ok>);
  if (a.refused || a.timed_out) co_return refused_reply(a, "queue.delete");
  co_return no_content();
}

net::awaitable<reply> api::purge_queue(const vhost& v, const std::string& name, const principal& who) {
  wire::method m = wire::queue_purge{0, name, false};
  auto answered = co_await one_method(v, who, std::move(m), is<wire::queue_purge_ok>, no_content());
  co_return answered;
}

net::awaitable<reply> api::declare_exchange(const vhost& v, const std::string& name, const request& r,
                                            const principal& who) {
  std::string why;
  auto body = request_body::parse(r.body, why);
  if (!body) co_return bad_request(why);
  auto arguments = body->table("arguments");
  if (!body->has("type")) co_return bad_request("type is required, e.g. {\"type\":\"direct\"}");
  auto type = body->text("type", "");
  const bool durable = body->flag("durable", true), auto_delete = body->flag("auto_delete", false),
             internal = body->flag("internal", false);
  if (body->error()) co_return bad_request(*body->error());
  const auto success = broker::topology_of(*v.broker).find_exchange(name) ? no_content() : created();
  wire::method m =
      wire::exchange_declare{0, name, std::move(type), false, durable, auto_delete, internal, false, std::move(arguments)};
  auto answered = co_await one_method(v, who, std::move(m), is<wire::exchange_declare_ok>, success);
  co_return answered;
}

net::awaitable<reply> api::delete_exchange(const vhost& v, const std::string& name, const request& r,
                                           const principal& who) {
  if (broker::topology_of(*v.broker).find_exchange(name) == nullptr) co_return not_found();
  const bool if_unused = r.query.contains("if-unused") && r.query.at("if-unused") == "true";
  wire::method m = wire::exchange_delete_{0, name, if_unused, false};
  auto answered = co_await one_method(v, who, std::move(m), is<wire::exchange_delete_ok>, no_content());
  co_return answered;
}

net::awaitable<reply> api::bind(const vhost& v, const std::string& exchange, const std::string& queue,
                                const request& r, const principal& who) {
  std::string why;
  auto body = request_body::parse(r.body, why);
  if (!body) co_return bad_request(why);
  auto arguments = body->table("arguments");
  if (!arguments.entries.empty()) co_return bad_request("binding arguments are not implemented; bind without them");
  const auto key = body->text("routing_key", "");
  if (body->error()) co_return bad_request(*body->error());
  auto made = created();
  made.location = properties_key(key);
  wire::method m = wire::queue_bind{0, queue, exchange, key, false, {}};
  auto answered = co_await one_method(v, who, std::move(m), is<wire::queue_bind_ok>, made);
  co_return answered;
}

net::awaitable<reply> api::unbind(const vhost& v, const std::string& exchange, const std::string& queue,
                                  const std::string& props, const principal& who) {
  const auto key = routing_key_of(props);
  const auto t = broker::topology_of(*v.broker);
  const auto* def = t.find_queue(queue);
  if (!def || std::none_of(def->bindings.begin(), def->bindings.end(),
                           [&](const routing::binding& b) { return b.names(exchange, key); }))
    co_return not_found();
  wire::method m = wire::queue_unbind{0, queue, exchange, key, {}};
  auto answered = co_await one_method(v, who, std::move(m), is<wire::queue_unbind_ok>, no_content());
  co_return answered;
}

net::awaitable<reply> api::publish(const vhost& v, const std::string& exchange, const request& r,
                                   const principal& who) {
  std::string why;
  auto body = request_body::parse(r.body, why);
  if (!body) co_return bad_request(why);
  auto props = properties_of(body->value("properties"), why);
  if (!props) co_return bad_request(why);
  const auto encoding = body->text("payload_encoding", "string");
  std::string payload = body->text("payload", "");
  const auto routing_key = body->text("routing_key", "");
  if (body->error()) co_return bad_request(*body->error());
  if (encoding == "base64") {
    auto decoded = bus::base64_decode(payload);
    if (!decoded) co_return bad_request("payload is not valid base64");
    payload = std::move(*decoded);
  } else if (encoding != "string") {
    co_return bad_request("payload_encoding must be string or base64, not '" + encoding + "'");
  }
  const std::string name = exchange == "amq.default" ? "" : exchange;
  auto ch = co_await open_operator(v, who);
  if (!ch) co_return refused_vhost();
  wire::confirm_select select{false};
  auto confirmed = co_await ch->call(std::move(select), is<wire::confirm_select_ok>);
  if (confirmed.refused || confirmed.timed_out) co_return refused_reply(confirmed, "basic.publish");
  wire::basic_publish m{0, name, routing_key, true, false};
  auto octets = wire::encode_properties(*props);
  auto a = co_await ch->publish(std::move(m), std::move(octets), std::move(payload), settled_publish);
  if (a.refused || a.timed_out) co_return refused_reply(a, "basic.publish");
  const bool returned = std::any_of(a.frames.begin(), a.frames.end(), is<wire::basic_return_>);
  if (is<wire::basic_nack>(a.frames.back())) co_return error_reply(500, "nacked", "the bus did not store the message");
  co_return json_reply(200, json{{"routed", !returned}});
}

net::awaitable<reply> api::get_messages(const vhost& v, const std::string& queue, const request& r,
                                        const principal& who) {
  std::string why;
  auto body = request_body::parse(r.body, why);
  if (!body) co_return bad_request(why);
  const auto count = body->number("count", 1);
  const auto ackmode = body->text("ackmode", "ack_requeue_true");
  const auto encoding = body->text("encoding", "auto");
  const auto truncate = body->number("truncate", -1);
  if (body->error()) co_return bad_request(*body->error());
  if (ackmode != "ack_requeue_true" && ackmode != "ack_requeue_false" && ackmode != "reject_requeue_true" &&
      ackmode != "reject_requeue_false")
    co_return bad_request("ackmode must be ack_requeue_true, ack_requeue_false, reject_requeue_true or reject_requeue_false");
  if (encoding != "auto" && encoding != "base64") co_return bad_request("encoding must be auto or base64");
  auto ch = co_await open_operator(v, who);
  if (!ch) co_return refused_vhost();
  json messages = json::array();
  std::vector<std::uint64_t> tags;
  for (std::int64_t i = 0; i < count; ++i) {
    wire::basic_get get{0, queue, false};
    auto a = co_await ch->call(std::move(get), taken_get);
    if (a.refused || a.timed_out) co_return refused_reply(a, "basic.get");
    const auto* ok = std::get_if<wire::basic_get_ok>(&a.frames.back().method);
    if (!ok) break;
    tags.push_back(ok->delivery_tag);
    const auto& delivered = a.frames.back();
    auto props = wire::decode_properties(
        {reinterpret_cast<const std::uint8_t*>(delivered.property_octets.data()), delivered.property_octets.size()});
    std::string payload = delivered.body;
    const bool text = encoding == "auto" && std::all_of(payload.begin(), payload.end(), [](unsigned char c) {
                        return c >= 0x20 || c == '\n' || c == '\r' || c == '\t';
                      });
    if (truncate >= 0 && payload.size() > static_cast<std::size_t>(truncate)) payload.resize(static_cast<std::size_t>(truncate));
    messages.push_back({{"payload_bytes", delivered.body.size()},
                        {"redelivered", ok->redelivered},
                        {"exchange", ok->exchange},
                        {"routing_key", ok->routing_key},
                        {"message_count", ok->message_count},
                        {"properties", props ? to_json(*props) : json::object()},
                        {"payload", text ? payload : bus::base64_encode(payload)},
                        {"payload_encoding", text ? "string" : "base64"}});
  }
  // Settled as asked: ack_requeue_true gives them back, in their order (the operator channel's
  // close requeues what it holds).
  for (auto tag : tags) {
    if (ackmode == "ack_requeue_false") ch->tell(wire::basic_ack{tag, false});
    if (ackmode == "reject_requeue_false") ch->tell(wire::basic_reject{tag, false});
  }
  co_return json_reply(200, messages);
}

// ---- definitions import: exchanges, then queues, then bindings, each vhost on its own channel ----

net::awaitable<reply> api::import(const request& r, const std::optional<vhost>& only, const principal& who) {
  auto file = json::parse(r.body, nullptr, false);
  std::string why;
  auto defs = import_definitions(file.is_discarded() ? json() : file,
                                 only ? std::optional<std::string>(only->name) : std::nullopt, why);
  if (!defs) co_return bad_request(why);
  std::vector<std::string> named = defs->vhosts;
  for (const auto& e : defs->exchanges) named.push_back(e.vhost);
  for (const auto& q : defs->queues) named.push_back(q.vhost);
  for (const auto& b : defs->bindings) named.push_back(b.vhost);
  for (const auto& p : defs->policies) named.push_back(p.vhost);
  for (const auto& name : named)
    if (!find(name)) co_return bad_request("vhost '" + name + "' is not served here; CLOUD_AMQP_VHOSTS lists the others");
  for (const auto& v : all_vhosts()) {
    if (std::find(named.begin(), named.end(), v.name) == named.end()) continue;
    auto answered = co_await import_into(v, *defs, who);
    if (answered.status != 204) co_return answered;
  }
  co_return no_content();
}

net::awaitable<reply> api::import_into(const vhost& v, const definitions& defs, const principal& who) {
  for (const auto& p : defs.policies) {
    if (p.vhost != v.name) continue;
    request put{"PUT", {}, {}, p.json};
    auto answered = co_await change_policy(v, p.name, put, who);
    if (answered.status >= 300) co_return answered;
  }
  auto ch = co_await open_operator(v, who);
  if (!ch) co_return refused_vhost();
  std::string why;
  for (const auto& e : defs.exchanges) {
    if (e.vhost != v.name) continue;
    auto arguments = table_of(e.arguments, why);
    if (!arguments) co_return bad_request("exchange '" + e.name + "': " + why);
    wire::exchange_declare m{0, e.name, e.type, false, e.durable, e.auto_delete, e.internal, false, std::move(*arguments)};
    auto a = co_await ch->call(std::move(m), is<wire::exchange_declare_ok>);
    if (a.refused || a.timed_out) co_return refused_reply(a, "exchange.declare");
  }
  for (const auto& q : defs.queues) {
    if (q.vhost != v.name) continue;
    auto arguments = table_of(q.arguments, why);
    if (!arguments) co_return bad_request("queue '" + q.name + "': " + why);
    wire::queue_declare m{0, q.name, false, q.durable, false, q.auto_delete, false, std::move(*arguments)};
    auto a = co_await ch->call(std::move(m), is<wire::queue_declare_ok>);
    if (a.refused || a.timed_out) co_return refused_reply(a, "queue.declare");
  }
  for (const auto& b : defs.bindings) {
    if (b.vhost != v.name) continue;
    wire::queue_bind m{0, b.destination, b.source, b.routing_key, false, {}};
    auto a = co_await ch->call(std::move(m), is<wire::queue_bind_ok>);
    if (a.refused || a.timed_out) co_return refused_reply(a, "queue.bind");
  }
  co_return no_content();
}

}  // namespace amqp::management
