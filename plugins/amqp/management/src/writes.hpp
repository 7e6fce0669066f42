#pragma once
// What a write's body asks for, as the AMQP method the operator channel sends for it, read as
// RabbitMQ's management API reads it; a body that asks for nothing valid is the 400 reason,
// naming the field. Pure: no I/O.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "amqp/wire/codec.hpp"  // before methods.hpp: frame.hpp's frame_type::method would shadow wire::method
#include "amqp/wire/methods.hpp"
#include "amqp/wire/properties.hpp"
#include "query.hpp"

namespace amqp::management {

template <class T>
struct asked {
  std::optional<T> value;  // nullopt: refused for `why`
  std::string why;
};

// PUT /api/queues/{vhost}/{name}: durable, auto_delete, arguments.
asked<wire::queue_declare> queue_declaration(const std::string& name, const std::string& body);
// PUT /api/exchanges/{vhost}/{name}: type (required), durable, auto_delete, internal, arguments.
asked<wire::exchange_declare> exchange_declaration(const std::string& name, const std::string& body);
// POST /api/bindings/{vhost}/e/{exchange}/q/{queue}: routing_key; arguments are not implemented.
asked<wire::queue_bind> binding_request(const std::string& exchange, const std::string& queue, const std::string& body);

struct publication {
  wire::basic_publish method;  // mandatory, so an unroutable message says routed: false
  wire::basic_properties properties;
  std::string payload;
};
// POST /api/exchanges/{vhost}/{name}/publish: routing_key, payload, payload_encoding, properties.
asked<publication> publication_request(const std::string& exchange, const std::string& body);

struct get_request {
  std::int64_t count = 1;
  std::string ackmode = "ack_requeue_true";
  bool base64 = false;          // encoding base64, else auto (text when it is printable)
  std::int64_t truncate = -1;   // the payload's bytes kept; -1: all
};
// POST /api/queues/{vhost}/{name}/get: count, ackmode, encoding, truncate.
asked<get_request> get_messages_request(const std::string& body);
// One message a get took, as RabbitMQ lists it.
nlohmann::json got_message_json(const wire::basic_get_ok& ok, const std::string& property_octets,
                                const std::string& body, const get_request& how);

// A query flag such as if-unused: set only by "true".
bool query_flag(const query& q, std::string_view key);

}  // namespace amqp::management
