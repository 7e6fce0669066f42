#pragma once
// Where a publish is stored (docs/DESIGN.md, "Where a message is stored"): the adaptor routes it
// when it is published, from one mirror read, and the stream stores one copy per queue reached,
// under the queue's own subject amqp._.<queue>, marked with the subject the publish named; a
// stream queue's copy goes to the queue's own stream instead.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "amqp/bus/result.hpp"
#include "amqp/routing/topology.hpp"
#include "housekeeping/expiry.hpp"
#include "housekeeping/length_limit.hpp"

namespace amqp::bus {
class client;
}

namespace amqp::broker {

class broker;

struct publish_plan {
  // The exchange as the mirror has it; none: the mirror lacks it, and nothing else is planned.
  std::optional<routing::exchange_def> exchange;
  std::vector<std::string> queues;   // each queue reached once, sorted
  std::vector<std::string> streams;  // those of `queues` that are stream queues, sorted
  std::string routed_as;             // amqp.<exchange>.<key>; empty when that is the copy's own subject
  std::vector<length_limit> limits;  // the queues reached that have an x-max-length
  // Through the default exchange: the queue the key names, when the mirror does not have it (it
  // may be another replica's declaration on its way here: the bucket says).
  std::optional<std::string> unknown_queue;
  std::vector<expiry_look> expiries;  // the queues reached where this message may expire unread
};

// The plan of a publish to (exchange, key) and its CC and BCC keys, with these content-header
// properties, from one mirror read.
publish_plan plan_publish(const broker& b, std::string_view exchange, std::string_view key,
                          const std::vector<std::string>& cc_keys, std::string_view property_octets);

// What a route's copies are: the queues reached, and which of them are stream queues.
struct copy_targets {
  const std::vector<std::string>& queues;
  const std::vector<std::string>& streams;  // sorted; may name queues beyond `queues`
  const std::string& routed_as;
};

// One copy per queue, in the order given; `done` runs once on `ex`: ok when every copy is
// stored, else the first refusal. A queue's copy goes to amqp._.<queue> through `bus`; a stream
// queue's to its own stream through `adaptor` (only the adaptor's user publishes there). Each copy
// counts as one publish of the bus client's. With a `msg_id_prefix`, each copy's Nats-Msg-Id is it
// plus the queue's word, so that copies made again (after a crash, a refusal) are stored once.
void publish_copies(bus::client& bus, bus::client& adaptor, const boost::asio::any_io_executor& ex,
                    const copy_targets& to, std::string props_b64, std::string body,
                    std::function<void(bus::bus_status)> done, std::string_view msg_id_prefix = {});

}  // namespace amqp::broker
