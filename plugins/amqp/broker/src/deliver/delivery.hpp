#pragma once
// Turning a message read from the bus into the octets a client receives: the method
// (basic.deliver or basic.get-ok), the content header and the body frames, built into one
// buffer so the session writes them as one unit.
#include <cstdint>
#include <string>
#include <string_view>

#include "amqp/routing/topology.hpp"
#include "amqp/wire/codec.hpp"
#include "amqp/wire/result.hpp"

namespace amqp::broker {

// Which deliveries carry header `x-delivery-count` = delivered - 1, as RabbitMQ 3.10 adds it:
// never from a classic queue; from a quorum queue on every redelivery to a consumer, and on every
// basic.get-ok (0 the first time).
enum class delivery_count { never, on_redelivery, always };

// How a queue of `type` shows the count on basic.deliver (`get` false) or basic.get-ok.
inline delivery_count delivery_count_of(routing::queue_type type, bool get) {
  if (type != routing::queue_type::quorum) return delivery_count::never;
  return get ? delivery_count::always : delivery_count::on_redelivery;
}

// The content-header property octets a client should see for a message the bus delivered
// for the `delivered`-th time. Without the count header the publisher's octets pass verbatim;
// adding it requires decoding and re-encoding the properties (replacing any value a publisher
// set). A message that arrived without properties (a bus-native publisher) gets an empty
// property list.
wire::result<std::string> delivered_properties(std::string_view property_octets, std::uint64_t delivered,
                                               delivery_count shown);

// The property octets of a stream queue's delivery: header `x-stream-offset` (a long) set to the
// message's offset in the stream queue, as RabbitMQ adds it.
wire::result<std::string> stream_properties(std::string_view property_octets, std::uint64_t offset);

// Appends method + content header + body frames for one message on `channel`.
template <class Method>
void encode_delivery(std::string& out, std::uint16_t channel, const Method& method,
                     std::string_view property_octets, std::string_view body,
                     std::uint32_t frame_max) {
  wire::encode_method(out, channel, method);
  wire::encode_content_header(out, channel, Method::key.class_id, body.size(), property_octets);
  wire::encode_body(out, channel, body, frame_max);
}

}  // namespace amqp::broker
