// The node, the user and health: /api/overview, whoami, cluster-name, extensions, feature-flags,
// nodes, the health checks and the aliveness test.
#include "handlers.hpp"
#include "off_loop.hpp"
#include "amqp/wire/codec.hpp"

namespace amqp::management {
namespace {

using json = nlohmann::json;

// Every queue's ready and unacknowledged messages in `in`, from the bus; nullopt, with `failure`
// said, when the bus does not answer.
net::awaitable<std::optional<std::pair<std::uint64_t, std::uint64_t>>> queued(const std::vector<vhost>& in,
                                                                               std::string& failure) {
  std::uint64_t ready = 0, unacked = 0;
  for (const auto& v : in) {
    auto peek = [v] { return queue_counts(v, broker::topology_of(*v.broker)); };
    auto counts = co_await off_loop(broker::bus_of(*v.broker)->worker_executor(), std::move(peek));
    if (!counts || !*counts) {
      failure = counts ? (*counts).error().text : "no answer";
      co_return std::nullopt;
    }
    for (const auto& [name, info] : **counts) {
      ready += info.ready();
      unacked += info.held_here;
    }
  }
  co_return std::pair{ready, unacked};
}

json object_totals(const std::vector<vhost>& in, const json& conns) {
  std::uint64_t queues = 0, exchanges = 0, consumers = 0, channels = 0;
  for (const auto& v : in) {
    const auto t = broker::topology_of(*v.broker);
    queues += t.queues().size();
    exchanges += t.exchanges().size();
    consumers += broker::consumers_of(*v.broker).size();
  }
  for (const auto& c : conns) channels += c["channels"].get<std::uint64_t>();
  return {{"connections", conns.size()},
          {"channels", channels},
          {"exchanges", exchanges},
          {"queues", queues},
          {"consumers", consumers}};
}

}  // namespace

handled overview(api& a, const call& c) {
  const auto& src = a.src();
  std::string failure;
  const auto counted = co_await queued(c.in, failure);
  if (!counted) co_return error_reply(503, "bus_unavailable", failure);
  const auto [ready, unacked] = *counted;
  const auto conns = a.connections_in(c.in);
  json listeners = json::array();
  for (const auto& l : src.listeners)
    listeners.push_back({{"node", src.node}, {"protocol", l.protocol}, {"ip_address", l.ip}, {"port", l.port}});
  co_return json_reply(200, json{{"management_version", api_version},
                                 {"rabbitmq_version", api_version},
                                 {"product_name", "cloud"},
                                 {"product_version", src.product_version},
                                 {"cluster_name", src.node},
                                 {"node", src.node},
                                 {"rates_mode", "basic"},
                                 {"object_totals", object_totals(c.in, conns)},
                                 {"queue_totals",
                                  {{"messages", ready + unacked}, {"messages_ready", ready}, {"messages_unacknowledged", unacked}}},
                                 {"message_stats", a.message_stats(c.in)},
                                 {"listeners", listeners},
                                 {"exchange_types",
                                  json::array({{{"name", "direct"}, {"enabled", true}},
                                               {{"name", "fanout"}, {"enabled", true}},
                                               {{"name", "topic"}, {"enabled", true}}})}});
}

handled whoami(api&, const call& c) {
  co_return json_reply(200, json{{"name", c.who.user}, {"tags", json::array({"administrator"})}});
}

handled cluster_name(api& a, const call&) { co_return json_reply(200, json{{"name", a.src().node}}); }

handled extensions(api&, const call&) { co_return json_reply(200, json::array()); }

handled feature_flags(api&, const call&) {
  co_return json_reply(200, json::array({{{"name", "quorum_queue"}, {"state", "enabled"}, {"stability", "stable"},
                                          {"provided_by", "cloud"}, {"desc", "x-queue-type quorum is kept with the queue"}},
                                         {{"name", "implicit_default_bindings"}, {"state", "enabled"},
                                          {"stability", "stable"}, {"provided_by", "cloud"},
                                          {"desc", "every queue is bound to the default exchange by its name"}}}));
}

handled nodes(api& a, const call&) { co_return json_reply(200, json::array({node_json(a.src().node)})); }

handled node(api& a, const call& c) {
  if (c.arg("name") != a.src().node) co_return not_found();
  co_return json_reply(200, node_json(a.src().node));
}

// Every check passes while this process answers: its alarms are the bus's, which NATS reports.
handled health(api&, const call&) { co_return json_reply(200, json{{"status", "ok"}}); }

// Declare, publish, get, as RabbitMQ's aliveness test does.
handled aliveness(api& a, const call& c) {
  auto ch = co_await a.open_operator(c.v(), c.who);
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

}  // namespace amqp::management
