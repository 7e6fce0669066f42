#include "writes.hpp"

#include <algorithm>

#include "amqp/bus/base64.hpp"
#include "amqp/wire/codec.hpp"
#include "properties_json.hpp"
#include "request_body.hpp"

namespace amqp::management {
namespace {

template <class T>
asked<T> refused(std::string why) {
  return {std::nullopt, std::move(why)};
}

// The length of the UTF-8 sequence at `s[i]`: 0 when it is not one (overlong, a surrogate, past
// U+10FFFF or cut short).
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  const std::size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  const auto second = static_cast<unsigned char>(s[i + 1]);
  const unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
  const unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
  if (second < lo || second > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  return n;
}

// Text a JSON string can carry as it is: UTF-8 without control characters but line breaks and tabs.
bool printable(const std::string& payload) {
  for (std::size_t i = 0; i < payload.size();) {
    const auto c = static_cast<unsigned char>(payload[i]);
    if (c < 0x20 && c != '\n' && c != '\r' && c != '\t') return false;
    const auto n = utf8_length(payload, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace

asked<wire::queue_declare> queue_declaration(const std::string& name, const std::string& text) {
  std::string why;
  auto body = request_body::parse(text, why);
  if (!body) return refused<wire::queue_declare>(why);
  auto arguments = body->table("arguments");
  const bool durable = body->flag("durable", true), auto_delete = body->flag("auto_delete", false);
  if (body->error()) return refused<wire::queue_declare>(*body->error());
  return {wire::queue_declare{0, name, false, durable, false, auto_delete, false, std::move(arguments)}, {}};
}

asked<wire::exchange_declare> exchange_declaration(const std::string& name, const std::string& text) {
  std::string why;
  auto body = request_body::parse(text, why);
  if (!body) return refused<wire::exchange_declare>(why);
  auto arguments = body->table("arguments");
  if (!body->has("type")) return refused<wire::exchange_declare>("type is required, e.g. {\"type\":\"direct\"}");
  auto type = body->text("type", "");
  const bool durable = body->flag("durable", true), auto_delete = body->flag("auto_delete", false),
             internal = body->flag("internal", false);
  if (body->error()) return refused<wire::exchange_declare>(*body->error());
  return {wire::exchange_declare{0, name, std::move(type), false, durable, auto_delete, internal, false,
                                 std::move(arguments)},
          {}};
}

asked<wire::queue_bind> binding_request(const std::string& exchange, const std::string& queue, const std::string& text) {
  std::string why;
  auto body = request_body::parse(text, why);
  if (!body) return refused<wire::queue_bind>(why);
  auto arguments = body->table("arguments");
  if (!arguments.entries.empty())
    return refused<wire::queue_bind>("binding arguments are not implemented; bind without them");
  const auto key = body->text("routing_key", "");
  if (body->error()) return refused<wire::queue_bind>(*body->error());
  return {wire::queue_bind{0, queue, exchange, key, false, {}}, {}};
}

asked<publication> publication_request(const std::string& exchange, const std::string& text) {
  std::string why;
  auto body = request_body::parse(text, why);
  if (!body) return refused<publication>(why);
  auto props = properties_of(body->value("properties"), why);
  if (!props) return refused<publication>(why);
  const auto encoding = body->text("payload_encoding", "string");
  std::string payload = body->text("payload", "");
  const auto routing_key = body->text("routing_key", "");
  if (body->error()) return refused<publication>(*body->error());
  if (encoding == "base64") {
    auto decoded = bus::base64_decode(payload);
    if (!decoded) return refused<publication>("payload is not valid base64");
    payload = std::move(*decoded);
  } else if (encoding != "string") {
    return refused<publication>("payload_encoding must be string or base64, not '" + encoding + "'");
  }
  // amq.default is how RabbitMQ's API names the default exchange, whose AMQP name is "".
  const std::string name = exchange == "amq.default" ? "" : exchange;
  return {publication{wire::basic_publish{0, name, routing_key, true, false}, std::move(*props), std::move(payload)},
          {}};
}

asked<get_request> get_messages_request(const std::string& text) {
  std::string why;
  auto body = request_body::parse(text, why);
  if (!body) return refused<get_request>(why);
  get_request how;
  how.count = body->number("count", 1);
  how.ackmode = body->text("ackmode", "ack_requeue_true");
  const auto encoding = body->text("encoding", "auto");
  how.truncate = body->number("truncate", -1);
  if (body->error()) return refused<get_request>(*body->error());
  if (how.ackmode != "ack_requeue_true" && how.ackmode != "ack_requeue_false" &&
      how.ackmode != "reject_requeue_true" && how.ackmode != "reject_requeue_false")
    return refused<get_request>(
        "ackmode must be ack_requeue_true, ack_requeue_false, reject_requeue_true or reject_requeue_false");
  if (encoding != "auto" && encoding != "base64") return refused<get_request>("encoding must be auto or base64");
  how.base64 = encoding == "base64";
  return {std::move(how), {}};
}

nlohmann::json got_message_json(const wire::basic_get_ok& ok, const std::string& property_octets,
                                const std::string& body, const get_request& how) {
  auto props = wire::decode_properties(
      {reinterpret_cast<const std::uint8_t*>(property_octets.data()), property_octets.size()});
  // Cut first, as RabbitMQ does, so a character cut in two makes the rest base64, not broken text.
  std::string payload = body;
  if (how.truncate >= 0 && payload.size() > static_cast<std::size_t>(how.truncate))
    payload.resize(static_cast<std::size_t>(how.truncate));
  const bool text = !how.base64 && printable(payload);
  return {{"payload_bytes", body.size()},
          {"redelivered", ok.redelivered},
          {"exchange", ok.exchange},
          {"routing_key", ok.routing_key},
          {"message_count", ok.message_count},
          {"properties", props ? to_json(*props) : nlohmann::json::object()},
          {"payload", text ? payload : bus::base64_encode(payload)},
          {"payload_encoding", text ? "string" : "base64"}};
}

bool query_flag(const query& q, std::string_view key) {
  auto it = q.find(key);
  return it != q.end() && it->second == "true";
}

}  // namespace amqp::management
