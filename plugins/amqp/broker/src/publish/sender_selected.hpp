#pragma once
// Sender-selected distribution, RabbitMQ's CC and BCC headers: arrays of routing keys a publish
// is routed by as well as its own, one copy to each queue whatever number of keys reach it; BCC
// is taken out of the message before it is stored, CC stays.
#include <string>
#include <vector>

#include "amqp/wire/result.hpp"

namespace amqp::broker {

// The CC keys, then the BCC keys, in order, of a publish's content-header property octets (empty:
// neither header), with BCC taken out of the octets. An element that is not a string is skipped,
// as RabbitMQ skips it; a CC or BCC that is not an array is refused with RabbitMQ's 406 text, the
// octets left as they were.
wire::result<std::vector<std::string>> read_sender_selected(std::string& property_octets);

}  // namespace amqp::broker
