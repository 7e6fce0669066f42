#pragma once
// AMQP addressing onto subjects (HIP-1326, "Exchanges, queues and bindings become subjects,
// consumers and filters" and "`#` is not `>`"): what a publish is sent to, and what a binding
// filters on. Every function validates its arguments and refuses, never approximates.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "amqp/wire/result.hpp"

namespace amqp::routing {

inline constexpr std::size_t max_routing_key_length = 255;  // a shortstr
inline constexpr std::string_view subject_root = "amqp";

enum class exchange_kind { direct, fanout, topic };
// The delayed-message plugin's exchange type; its argument x-delayed-type names the kind.
inline constexpr std::string_view delayed_exchange_type = "x-delayed-message";

std::string_view to_string(exchange_kind kind);  // "direct" | "fanout" | "topic"
// "direct" | "fanout" | "topic" → the kind. RabbitMQ's behaviour, not the reference's:
//  - "" → 503 COMMAND_INVALID ("… declare it with type direct, fanout or topic").
//  - "headers" → 540 NOT_IMPLEMENTED with the remedy of HIP-1326's "What is not implemented"
//    ("… routes on something other than a name and has no subject to be; bind by routing key
//    on a direct or topic exchange").
//  - any other kind → 503 COMMAND_INVALID "unknown exchange type '…'" (RabbitMQ's answer).
wire::result<exchange_kind> parse_exchange_kind(std::string_view kind);

// `amqp.<exchange word>[.<key>]` (exchange_word; an empty key omits the word). The caller has
// checked the exchange's name (check_name). The key must be literal: an empty word, any of
// `* # >`, whitespace or a control character, or more than 255 octets → 406 PRECONDITION_FAILED
// naming the key and the remedy. The default exchange's key names a queue and is that queue's
// word (name_word), so any queue name is reached.
wire::result<std::string> publish_subject(std::string_view exchange, std::string_view routing_key);

// The subject a queue's messages are stored under, amqp._.<queue word>: every message stored for
// the queue is a copy there, whatever exchange routed it.
std::string queue_subject(std::string_view queue);
// Every queue's subject, as one filter: amqp._.>
std::string queue_subjects();

// A key publish_subject refuses only for whitespace or a control character (literal otherwise:
// no empty word, no wildcard, not too long). No binding of a direct or topic exchange can hold
// such a word, and no queue is named so: RabbitMQ routes it to nothing, and so does the broker
// (a fanout exchange, which ignores the key, still refuses it: its subject cannot be spelled).
bool blank_publish_key(std::string_view routing_key);

// RabbitMQ's direct reply-to: a requester consumes the pseudo-queue `amq.rabbitmq.reply-to`
// (no-ack), its requests' reply_to becomes a reply address "amq.rabbitmq.reply-to.<token>", and a
// publish to that address through the default exchange goes to the bus subject
// "amqp-reply.<token>": outside the stream (nothing is stored) and seen by every replica.
inline constexpr std::string_view direct_reply_queue = "amq.rabbitmq.reply-to";
std::string direct_reply_address(std::string_view token);
std::string direct_reply_subject_of(std::string_view token);
// Does a default-exchange routing key name a reply address?
bool names_direct_reply(std::string_view routing_key);
// The bus subject of a reply address; nullopt when its token is not one subject word.
std::optional<std::string> direct_reply_subject(std::string_view routing_key);

struct address {
  std::string exchange;
  std::string routing_key;
  friend bool operator==(const address&, const address&) = default;
};
// The inverse of publish_subject: "amqp._" → {"", ""}, "amqp.x.a.b" → {"x", "a.b"},
// "amqp.amq-topic.k" → {"amq.topic", "k"}, "amqp._.a=2Eb" → {"", "a.b"}. nullopt when not under
// "amqp." or its exchange word is none exchange_word makes.
std::optional<address> split_subject(std::string_view subject);

// The table of HIP-1326's "`#` is not `>`": the filter subjects a binding of `key` to
// `exchange` (of `kind`) reads.
//  topic  `a.*` → amqp.t.a.*;  `a.#` → amqp.t.a.> and amqp.t.a;  `#` → amqp.t.> and amqp.t;
//         `` → amqp.t;  literal `a.b` → amqp.t.a.b
//  fanout anything (ignored, even malformed) → amqp.f.> and amqp.f
//  direct `k` → amqp.d.k;  `` → amqp.d
// Refusals: whatever AMQP allows but a NATS subject cannot express is 540 NOT_IMPLEMENTED
// with the remedy (HIP-1326, "What is not implemented, and how it says so"): `#` before the
// last word, a partial wildcard (`a.b*`), a wildcard (`* # >`) in a direct key, `>` anywhere
// (NATS would read it as a wildcard), empty words (`a..b`, a leading/trailing dot),
// whitespace or control characters.
// A key over 255 octets is 406 (it cannot be a shortstr). The exchange's name is the caller's
// to check, as in publish_subject. The result is normalized (sorted, deduplicated).
// The default exchange's binding of queue q is binding_filters("", direct, q) = amqp._.<name_word(q)>.
wire::result<std::vector<std::string>> binding_filters(std::string_view exchange, exchange_kind kind,
                                                       std::string_view key);

}  // namespace amqp::routing
