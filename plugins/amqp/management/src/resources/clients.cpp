// This process's connections, channels and consumers: another replica lists its own (HIP-1326,
// "Two facts a single process cannot answer for the fleet").
#include <map>

#include "handlers.hpp"

namespace amqp::management {

using json = nlohmann::json;

handled connections(api& a, const call& c) { co_return c.list(a.connections_in(c.in)); }

handled one_connection(api& a, const call& c) {
  for (auto& conn : a.connections_in(c.in))
    if (conn["name"] == c.arg("name")) co_return json_reply(200, conn);
  co_return not_found();
}

// A channel is listed while it has consumers: the broker knows a channel by its consumers only.
handled channels(api& a, const call& c) {
  const auto& src = a.src();
  json items = json::array();
  if (!src.connections) co_return c.list(std::move(items));
  std::map<std::pair<std::uint64_t, std::uint16_t>, std::uint32_t> consumers;
  for (const auto& v : c.in)
    for (const auto& each : broker::consumers_of(*v.broker)) ++consumers[{each.connection_id, each.channel}];
  for (const auto& conn : src.connections()) {
    if (std::none_of(c.in.begin(), c.in.end(), [&](const vhost& v) { return v.name == conn.vhost; })) continue;
    for (const auto& [key, count] : consumers)
      if (key.first == conn.id) items.push_back(channel_json(conn, key.second, count, src.node));
  }
  co_return c.list(std::move(items));
}

handled consumers(api& a, const call& c) {
  const auto& src = a.src();
  std::map<std::uint64_t, connection_view> by_id;
  if (src.connections)
    for (auto& conn : src.connections()) by_id.emplace(conn.id, std::move(conn));
  json items = json::array();
  for (const auto& v : c.in) {
    for (const auto& each : broker::consumers_of(*v.broker)) {
      auto conn = by_id.find(each.connection_id);
      items.push_back(consumer_json(each, v.name, conn == by_id.end() ? nullptr : &conn->second, src.node));
    }
  }
  co_return c.list(std::move(items));
}

}  // namespace amqp::management
