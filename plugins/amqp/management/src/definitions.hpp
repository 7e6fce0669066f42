#pragma once
// RabbitMQ's definitions file (GET and POST /api/definitions): the policies, exchanges, queues and
// bindings of each vhost, written as RabbitMQ exports them and read back as it imports them. Users,
// permissions and parameters are the bus's (NATS accounts) or not implemented, so an import that
// carries any is refused, naming which, instead of being half applied. Pure: no I/O.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "amqp/routing/topology.hpp"

namespace amqp::management {

// A queue's arguments as RabbitMQ lists them (x-message-ttl, x-dead-letter-exchange, ...).
nlohmann::json queue_arguments(const routing::queue_def& d);
// An exchange's arguments as RabbitMQ lists them: x-delayed-type for a delayed-message exchange.
nlohmann::json exchange_arguments(const routing::exchange_def& d);

// Every vhost's (name, mirror) as one definitions file; with `one_vhost` the per-vhost shape
// (no "vhost" fields, no vhosts list). The standard exchanges, exclusive queues and the default
// exchange's implicit bindings are left out, as RabbitMQ leaves them.
nlohmann::json export_definitions(const std::vector<std::pair<std::string, routing::topology>>& vhosts,
                                  const std::string& product_version, bool one_vhost);

struct definitions {
  struct exchange {
    std::string vhost, name, type;
    bool durable = true, auto_delete = false, internal = false;
    nlohmann::json arguments;
  };
  struct queue {
    std::string vhost, name;
    bool durable = true, auto_delete = false;
    nlohmann::json arguments;
  };
  struct binding {
    std::string vhost, source, destination, routing_key;
  };
  struct policy {
    std::string vhost, name;
    std::string json;  // the entry, read as PUT /api/policies reads its body
  };
  std::vector<std::string> vhosts;  // the file's vhosts list: each must be one this process serves
  std::vector<exchange> exchanges;
  std::vector<queue> queues;
  std::vector<binding> bindings;
  std::vector<policy> policies;
};

// The declarations a file asks for, each in `vhost` when given (the per-vhost import) or in its
// own "vhost" field; nullopt with `why` set when the file carries what cannot be applied.
std::optional<definitions> import_definitions(const nlohmann::json& file, const std::optional<std::string>& vhost,
                                              std::string& why);

}  // namespace amqp::management
