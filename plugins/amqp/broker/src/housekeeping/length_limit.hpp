#pragma once
// x-max-length (RabbitMQ's queue length limit): a queue holds at most that many ready messages.
// Decided where the publish is, against the bus's count of the queue once this channel's earlier
// publishes are counted: drop-head takes the oldest ready messages off the head once the new one
// is stored (each dead-lettered as `maxlen`, or dropped), reject-publish refuses the new one
// (reject-publish-dlx dead-letters it). Publishes on other channels or replicas at the same
// moment are not serialised with it: the queue may pass its limit by those, until its next
// publish trims it.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "amqp/bus/client.hpp"

#include "amqp/routing/topology.hpp"

namespace amqp::broker {

class broker;

struct length_limit {
  std::string queue;
  std::uint64_t max_length = 0;
  routing::overflow_mode overflow = routing::overflow_mode::drop_head;
};

// Blocking: the ready count of each queue, as queue.declare counts it. `for_dropping`: only what
// was never delivered. The bus counts a requeued message and one delivered to another replica (or
// still on its way here) alike, as unacked; dropping on the account of one of those would drop a
// message within the limit, so a drop-head queue holding requeued messages may exceed its limit by
// those instead.
using counts_or_failure = std::variant<std::vector<std::uint64_t>, bus::bus_error>;
counts_or_failure ready_counts(bus::client& bus, const std::vector<std::string>& queues, bool for_dropping);

// Takes up to `n` messages off the head of `queue`, each given up as `maxlen` (dead-lettered, or
// dropped); then `done` runs on `ex`, which must be serial (a strand). Stops early when the queue
// has no more to give.
void drop_heads(broker& b, boost::asio::any_io_executor ex, const std::string& queue, std::uint64_t n,
                std::function<void()> done);

}  // namespace amqp::broker
