#pragma once
// Dead-lettering (RabbitMQ's x-dead-letter-exchange): a message a queue gives up on is published
// to the queue's dead-letter exchange, its history added to the `x-death` header, and the original
// leaves the queue only once the bus has stored the copy. At least once: a crash in between leaves
// a duplicate, never a loss.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "amqp/bus/client.hpp"
#include "amqp/wire/properties.hpp"

namespace amqp::broker {

class broker;

enum class death_reason { rejected, expired, maxlen, delivery_limit };
std::string_view to_string(death_reason reason);  // RabbitMQ's words: "rejected", "expired", …

// One time a queue gave a message up.
struct death {
  std::string queue;
  death_reason reason = death_reason::rejected;
  std::string exchange;                   // the message was published to
  std::vector<std::string> routing_keys;  // with these keys
  std::uint64_t time = 0;                 // POSIX seconds
};

// The copy's properties, as RabbitMQ writes them: `x-death` (most recent first; an entry of the
// same queue and reason counts up and moves to the front), `x-first-death-*` kept from the first
// time, `x-last-death-*` from this one, and `expiration` taken off (it would expire the copy
// again) and kept in the entry as `original-expiration`.
void add_death(wire::basic_properties& props, const death& d);

// RabbitMQ's cycle rule: a copy that is not a rejection is dropped at a queue its `x-death` (with
// this death added) already names, when no rejection happened since it was last there: a loop no
// client takes part in would never end.
bool completes_cycle(const wire::basic_properties& props, std::string_view queue);

// Milliseconds since the epoch, the clock expiry is judged by (the stream stamps with the same).
std::uint64_t wall_clock_ms();

// When a message expires in a queue, in milliseconds since the epoch by the stream's clock: the
// lower of its `expiration` and the queue's x-message-ttl after it was stored. nullopt: never.
std::optional<std::uint64_t> expiry_of(const bus::delivery& d, std::optional<std::uint64_t> queue_ttl);

// A message the queue's consumer read that its client must never see, settled here: it waited in it longer than its `expiration`
// or the queue's x-message-ttl allows (RabbitMQ checks that when a message reaches the queue's
// head), or was returned to it more often than its x-delivery-limit allows: the queue gives it
// up. True when the caller must not deliver it. `settled`, when given, runs once d.reply is
// settled (acked, termed or, a copy not stored, nakked), only when this returns true.
bool passed_over(broker& b, boost::asio::any_io_executor ex, const std::string& queue, bus::delivery& d,
                 std::function<void()> settled = {});

// The queue gives up on a delivery its consumer read: dead-lettered when the queue has a
// dead-letter exchange, dropped otherwise. The bus settles d.reply either way: term once the
// copies are stored, nak (back to the queue) when storing one failed; then `settled` runs.
void give_up(broker& b, boost::asio::any_io_executor ex, const std::string& queue, death_reason why,
             bus::delivery d, std::function<void()> settled = {});
// The same for a delivery the client rejected (requeue false): the message is read back from the
// stream by its sequence when the queue dead-letters.
void give_up_rejected(broker& b, boost::asio::any_io_executor ex, const std::string& queue, std::string reply,
                      std::uint64_t stream_seq);

}  // namespace amqp::broker
