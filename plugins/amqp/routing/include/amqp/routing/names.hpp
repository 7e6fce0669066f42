#pragma once
// Exchange and queue names (HIP-1326 §2): a name is one NATS subject word, because it becomes
// one word of a subject and a dot would let two (exchange, key) pairs share a subject.
#include <optional>
#include <string>
#include <string_view>

#include "amqp/routing/outcome.hpp"

namespace amqp::routing {

inline constexpr std::size_t max_name_length = 128;

// `what` is "exchange" or "queue" (it only shapes the sentence). Accepts a 1..128-octet word
// of [A-Za-z0-9_-] other than "_". Refusals:
//  - 406 PRECONDITION_FAILED: empty, too long, a character outside the word set (a dot is
//    named with the reason: exchange `a` + key `b.c` vs exchange `a.b` + key `c`), or "_".
//  - 403 ACCESS_REFUSED: an `amq.`-prefixed name (RabbitMQ reserves that prefix), and for
//    exchanges the reserved words that spell the standard exchanges on the bus (see below),
//    and the empty exchange name (the default exchange cannot be declared or deleted).
// The standard exchanges `amq.direct`, `amq.fanout`, `amq.topic` are accepted for
// what == "exchange": they exist, so naming them (passive declare, bind, publish) is valid;
// whether an operation on them is allowed is the caller's decision.
std::optional<refusal> check_name(std::string_view what, std::string_view name);

// True for "", "amq.direct", "amq.fanout" and "amq.topic": the exchanges that always exist.
bool is_standard_exchange(std::string_view exchange);

// The exchange's word in a subject: "" → "_", "amq.direct" → "amq-direct",
// "amq.fanout" → "amq-fanout", "amq.topic" → "amq-topic", any other (valid) name → itself.
// Collision-free because check_name refuses "_" and the three `amq-*` words as exchange names
// (403, reserved), and a user can never declare a dotted name.
std::string exchange_word(std::string_view exchange);
// The inverse: "_" → "", "amq-topic" → "amq.topic", …, any other word → itself.
std::string exchange_of_word(std::string_view word);

// Non-empty, and nothing but [A-Za-z0-9_-]: one subject word.
bool is_word(std::string_view text);

// `length` random characters of [A-Za-z0-9_-] (one subject word). Thread-safe.
std::string random_word(std::size_t length);

// A server-named queue: "amq-gen-" + 22 random characters of [A-Za-z0-9_-] (no dots, so it
// passes check_name). Thread-safe.
std::string generate_queue_name();

}  // namespace amqp::routing
