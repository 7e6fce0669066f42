// The vhosts a user may use. Users, permissions and limits are the bus's (NATS accounts and their
// subject permissions), so the table has no row for them and their paths are 404.
#include "handlers.hpp"

namespace amqp::management {

handled vhosts(api&, const call& c) {
  auto items = nlohmann::json::array();
  for (const auto& v : c.in) items.push_back(vhost_json(v.name));
  co_return c.list(std::move(items));
}

handled one_vhost(api&, const call& c) { co_return json_reply(200, vhost_json(c.v().name)); }

}  // namespace amqp::management
