#pragma once
// The virtual hosts this process serves. "/" is the NATS account of the adaptor's own user (the
// bus pubsub gives); every other is a NATS account of its own (CLOUD_AMQP_VHOSTS), with its own
// stream AMQP, bucket amqp and broker, so that the same name in two vhosts names two objects and
// the bus itself keeps them apart. A signed-in user works in its own account's vhost only.
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "amqp/broker/broker.hpp"
#include "amqp/bus/client.hpp"

namespace amqp::server {

struct vhost {
  std::string name;
  std::shared_ptr<bus::client> bus;  // the adaptor's own user in the vhost's account
  std::shared_ptr<broker::broker> broker;
};

using vhost_map = std::map<std::string, vhost, std::less<>>;

inline constexpr std::string_view default_vhost = "/";

// The vhost connection.open names; "" is "/" (a client URL's bare trailing slash names it).
// nullptr when this process serves no such vhost.
inline const vhost* find_vhost(const vhost_map& vhosts, std::string_view name) {
  auto it = vhosts.find(name.empty() ? default_vhost : name);
  return it == vhosts.end() ? nullptr : &it->second;
}

}  // namespace amqp::server
