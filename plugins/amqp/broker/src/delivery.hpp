#pragma once
// Turning a message read from the bus into the octets a client receives: the method
// (basic.deliver or basic.get-ok), the content header and the body frames, built into one
// buffer so the session writes them as one unit.
#include <cstdint>
#include <string>
#include <string_view>

#include "amqp/wire/codec.hpp"
#include "amqp/wire/result.hpp"

namespace amqp::broker {

// The content-header property octets a client should see for a message the bus delivered
// for the `delivered`-th time. A first delivery passes the publisher's octets verbatim; a
// redelivery gets header `x-delivery-count` = delivered - 1 (as RabbitMQ's quorum queues
// report it), which requires decoding and re-encoding the properties. A message that
// arrived without properties (a bus-native publisher) gets an empty property list.
wire::result<std::string> delivered_properties(std::string_view property_octets,
                                               std::uint64_t delivered);

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
