#pragma once
// Exchange and queue names: which ones a client may use (CLOUD_AMQP_NAMES), and how each is
// spelled where it meets the bus: a word of a subject, of a bucket key and of a consumer name.
#include <optional>
#include <string>
#include <string_view>

#include "amqp/wire/result.hpp"

namespace amqp::routing {

// CLOUD_AMQP_NAMES.
enum class name_rules {
  // HIP-1326's "Exchanges, queues and bindings become subjects" to the letter: a name is one
  // subject word of [A-Za-z0-9_-], 1 to 128 characters.
  hip,
  // Every name RabbitMQ accepts: UTF-8 text of 1 to 255 octets, spelled injectively (name_word).
  escaped,
};
std::string_view to_string(name_rules rules);  // "hip" | "escaped"
std::optional<name_rules> parse_name_rules(std::string_view text);

inline constexpr std::size_t max_hip_name_length = 128;
inline constexpr std::size_t max_name_length = 255;

// Whether `name` can name an exchange or queue (`what`: "exchange" or "queue") under `rules`,
// for any method that names one. Refusals:
//  - 403 ACCESS_REFUSED: the empty exchange name (the default exchange cannot be declared,
//    deleted or bound); under hip, the exchange names "_", "amq-direct", "amq-fanout" and
//    "amq-topic", which HIP-1326's "Exchanges, queues and bindings become subjects" gives the
//    standard exchanges on the bus.
//  - 540 NOT_IMPLEMENTED: "amq.headers" and "amq.match", RabbitMQ's headers exchanges
//    (HIP-1326, "What is not implemented, and how it says so").
//  - 406 PRECONDITION_FAILED: empty; too long; under hip a character outside [A-Za-z0-9_-] (a
//    dot is named with the reason and the setting that allows it) or the queue name "_"; under
//    escaped, octets that are not UTF-8.
// The standard exchanges `amq.direct`, `amq.fanout`, `amq.topic` are accepted: they exist.
std::optional<wire::refusal> check_name(name_rules rules, std::string_view what, std::string_view name);

// Whether a client may declare `name`: check_name, and a name that starts with `amq.` (other
// than an existing standard exchange) is 403 ACCESS_REFUSED, as RabbitMQ reserves that prefix.
std::optional<wire::refusal> check_new_name(name_rules rules, std::string_view what, std::string_view name);

// True for "", "amq.direct", "amq.fanout" and "amq.topic": the exchanges that always exist.
bool is_standard_exchange(std::string_view exchange);

// A name's word on the bus, the same in both modes: each octet of [A-Za-z0-9_-] stands for
// itself and every other one is '=' and its two hexadecimal digits, upper case ("orders.dlx" →
// "orders=2Edlx"). So a name HIP-1326's "Exchanges, queues and bindings become subjects"
// accepts is spelled as that section spells it, and every word is both a subject token and a
// bucket-key word (their alphabets share [-_=A-Za-z0-9]).
std::string name_word(std::string_view name);
// The exact inverse: nullopt for a word name_word never makes (lower-case digits, an escaped
// word character, a bare or short '=', a character outside the alphabet).
std::optional<std::string> name_of_word(std::string_view word);

// The exchange's word in a subject and a bucket key: "" → "_", "amq.direct" → "amq-direct",
// "amq.fanout" → "amq-fanout", "amq.topic" → "amq-topic", any other name → name_word, except
// that a name whose word would be one of those four has its first octet escaped ("amq-topic" →
// "=61mq-topic"), so that no user exchange can share a standard one's subjects.
std::string exchange_word(std::string_view exchange);
// The inverse: nullopt for a word exchange_word never makes.
std::optional<std::string> exchange_of_word(std::string_view word);

// The name of a queue's durable consumer: its name_word when that fits nats-server's 255
// characters, else the longest prefix of it that leaves room, "=Z" (which no word holds) and the
// SHA-256 of the name in hex.
std::string consumer_name(std::string_view queue);
inline constexpr std::size_t max_consumer_name_length = 255;

// Well-formed UTF-8 (no overlong forms, no surrogates: what nlohmann::json accepts, since names
// and binding keys are kept as JSON text in the topology bucket).
bool is_utf8(std::string_view text);

// Non-empty, and nothing but [A-Za-z0-9_-]: one subject word.
bool is_word(std::string_view text);

// `length` random characters of [A-Za-z0-9_-] (one subject word). Thread-safe.
std::string random_word(std::size_t length);

// A server-named queue, "amq.gen-" + 22 random characters of [A-Za-z0-9_-] as RabbitMQ names
// one; under hip "amq-gen-…", which holds no dot. Thread-safe.
std::string generate_queue_name(name_rules rules);

}  // namespace amqp::routing
