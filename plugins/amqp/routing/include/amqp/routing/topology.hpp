#pragma once
// The topology model: what is declared, as the KV bucket `amqp` stores it (reference JSON,
// keys `x.<exchange word>` and `q.<queue word>`, bindings inside the queue's value), and `topology`,
// the in-memory mirror of that bucket with an incremental routing index.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "amqp/wire/result.hpp"
#include "amqp/routing/subject.hpp"

namespace amqp::routing {

struct exchange_def {
  exchange_kind kind = exchange_kind::direct;
  bool durable = false;
  bool auto_delete = false;
  bool internal = false;
  // Type x-delayed-message (RabbitMQ's delayed-message plugin): routes as `kind` (its
  // x-delayed-type), a message with an x-delay header once that many milliseconds have passed.
  bool delayed = false;
  friend bool operator==(const exchange_def&, const exchange_def&) = default;
};
// The type a client declared: x-delayed-message, or the kind's own name.
std::string_view type_name(const exchange_def& def);

// A routing entry: a publish to `exchange` whose key matches `key` (by the exchange's kind) is
// copied to the queue when it is published (docs/DESIGN.md, "Where a message is stored").
struct binding {
  std::string exchange;
  std::string key;
  friend bool operator==(const binding&, const binding&) = default;
  bool names(std::string_view x, std::string_view k) const { return exchange == x && key == k; }
};

// x-dead-letter-exchange and x-dead-letter-routing-key: where a message the queue gives up on
// (rejected without requeue, expired, past its delivery limit) is published instead.
struct dead_letter_target {
  std::string exchange;
  std::optional<std::string> routing_key;  // absent: the message's own routing key
  friend bool operator==(const dead_letter_target&, const dead_letter_target&) = default;
};

// x-overflow: what a queue at its x-max-length does with one more message (RabbitMQ's words).
enum class overflow_mode { drop_head, reject_publish, reject_publish_dlx };
std::string_view to_string(overflow_mode mode);
std::optional<overflow_mode> parse_overflow(std::string_view text);

// x-queue-type: the RabbitMQ queue types a declaration may name. Each is a consumer of the stream;
// a quorum queue differs where RabbitMQ's does: its redeliveries carry x-delivery-count, it has a
// default delivery limit, and some declarations are refused. A stream queue's consumer feeds a
// JetStream stream of its own, which its AMQP consumers read without taking messages away.
enum class queue_type { classic, quorum, stream };
std::string_view to_string(queue_type type);
std::optional<queue_type> parse_queue_type(std::string_view text);

// RabbitMQ 4's delivery limit for a quorum queue that sets none (by argument or policy): a message
// returned more often is dead-lettered or dropped. RabbitMQ 3.10 has no default.
inline constexpr std::uint64_t quorum_default_delivery_limit = 20;

struct queue_def {
  bool durable = false;
  bool exclusive = false;
  bool auto_delete = false;
  std::vector<binding> bindings;
  // x-message-ttl: how many milliseconds a message may wait in this queue (RabbitMQ's queue TTL).
  std::optional<std::uint64_t> message_ttl{};
  std::optional<dead_letter_target> dead_letter{};
  // x-delivery-limit: how many times a message may be returned to the queue before it is
  // dead-lettered (or dropped) instead of delivered again.
  std::optional<std::uint64_t> delivery_limit{};
  // x-delivery-limit -1, RabbitMQ 4's way to say "no limit": a quorum queue's default does not
  // apply (a policy's limit still does).
  bool unlimited_deliveries = false;
  // x-expires: the queue is deleted once nothing used it for this many milliseconds.
  std::optional<std::uint64_t> expires{};
  // x-single-active-consumer: one consumer at a time receives (a pinned group on the bus).
  bool single_active_consumer = false;
  // x-max-length: how many ready messages the queue holds at most; x-overflow as declared (absent
  // means drop-head).
  std::optional<std::uint64_t> max_length{};
  std::optional<overflow_mode> overflow{};
  // x-queue-type as declared; absent when the declaration named none. Kept apart from an explicit
  // 'classic' because RabbitMQ words a redeclaration's inequivalence differently for the two.
  std::optional<queue_type> declared_type{};
  // A stream queue's retention (x-max-age as declared, e.g. "7D"; x-max-length-bytes): what its
  // own stream keeps.
  std::optional<std::string> max_age{};
  std::optional<std::uint64_t> max_length_bytes{};
  queue_type type() const { return declared_type.value_or(queue_type::classic); }
  // x-max-length when the overflow is drop-head (what is over it goes from the head), else nullopt.
  std::optional<std::uint64_t> drop_head_limit() const {
    if (overflow.value_or(overflow_mode::drop_head) != overflow_mode::drop_head) return std::nullopt;
    return max_length;
  }
  friend bool operator==(const queue_def&, const queue_def&) = default;
};

// Bucket keys: "x." + exchange_word and "q." + name_word; "p." + name_word, a policy (policy.hpp);
// and "u." + name_word, when a queue with x-expires was last declared or read (milliseconds since
// the epoch, in decimal), not topology.
std::string exchange_key(std::string_view exchange);
std::string queue_key(std::string_view queue);
std::string use_key(std::string_view queue);
std::string policy_key(std::string_view policy);

struct bucket_key {
  enum class kind { exchange, queue, use, policy };
  kind what;
  std::string name;
  friend bool operator==(const bucket_key&, const bucket_key&) = default;
};
// The inverse, in either CLOUD_AMQP_NAMES mode: nullopt for a key none of those four makes, or
// whose name no mode accepts.
std::optional<bucket_key> parse_bucket_key(std::string_view key);

// JSON, exactly the reference's: {"kind":"topic","durable":true} (+ "auto_delete":true,
// "internal":true only when set); {"durable":bool,"exclusive":true?,"auto_delete":true?,
// "bindings":[{"exchange":"x","key":"k"}]?, "message_ttl":ms?, "dead_letter":{"exchange":"x","routing_key":"k"?}?,
// "delivery_limit":n?, "expires":ms?, "type":"classic"|"quorum"?} (optional members omitted when
// false/empty/0/absent; the reference ignores the additions; a value without "type" is a classic
// queue that named no type, so stores written before the type was kept still load).
// Parsing never throws: malformed JSON, a wrong member type or an unknown/headers kind is a
// refusal (541 INTERNAL_ERROR, the sentence names what is wrong). Unknown members are ignored.
std::string encode_exchange(const exchange_def& def);
std::string encode_queue(const queue_def& def);
wire::result<exchange_def> parse_exchange(std::string_view json);
wire::result<queue_def> parse_queue(std::string_view json);

struct compiled_policy;  // policy.hpp

// The mirror. Not thread-safe: one strand owns it. The standard exchanges ("", amq.direct,
// amq.fanout, amq.topic) always exist and cannot be replaced or erased.
//
// A queue is kept as it works: what it declared with the features of the policy that applies to
// it (the highest priority matching its name; at equal priority one applying to queues only before
// one applying to all, then by name, where RabbitMQ leaves the choice undefined), and a quorum
// queue's default delivery limit when neither set one. What it declared is kept beside it when
// either changed something.
class topology {
 public:
  using queue_map = std::map<std::string, queue_def, std::less<>>;
  using policy_map = std::map<std::string, std::shared_ptr<const compiled_policy>, std::less<>>;

  topology();

  // One KV update: a value (put) or nullopt (delete/purge marker). `x.` keys touch only
  // exchanges, `q.` keys only queues and `p.` keys policies; `u.` keys nothing. A malformed key or
  // value leaves the mirror unchanged and is returned as a refusal for the caller to log.
  std::optional<wire::refusal> apply(std::string_view bucket_key, std::optional<std::string_view> json);

  // Local writes (the same connection sees them at once; the caller then writes the bucket).
  // put_exchange/erase_exchange return false for a standard exchange (left untouched);
  // erase_* return false when the name was absent. put_queue takes what the queue declared.
  bool put_exchange(std::string_view name, exchange_def def);
  bool erase_exchange(std::string_view name);
  void put_queue(std::string_view name, queue_def def);
  bool erase_queue(std::string_view name);
  // A policy put or erased: every queue is looked at again. Returns the queues whose features
  // changed, sorted.
  std::vector<std::string> put_policy(std::string_view name, compiled_policy p);
  std::vector<std::string> erase_policy(std::string_view name);

  // nullptr when absent. Pointers stay valid until that name is next written or erased.
  const exchange_def* find_exchange(std::string_view name) const;
  // The queue as it works (with its policy's features).
  const queue_def* find_queue(std::string_view name) const;
  // The queue as it was declared (what its arguments said).
  const queue_def* find_declared(std::string_view name) const;
  // The name of the policy that applies to the queue; nullptr when none does.
  const std::string* policy_of(std::string_view queue) const;
  const policy_map& policies() const { return policies_; }
  const queue_map& queues() const { return queues_; }
  // Every exchange, the standard ones included (a copy: for an operator's listing).
  std::map<std::string, exchange_def, std::less<>> exchanges() const;
  // Whether some queue has an x-max-length (a publish then asks which ones it reaches).
  bool has_length_limits() const { return length_limited_ > 0; }
  // Whether some queue has an x-message-ttl or a dead-letter exchange: the queues whose head may
  // expire while nobody reads them (a publish then tells the expiry sweeper which it reaches).
  bool has_timed_queues() const { return timed_ > 0; }
  // The stream queues (x-queue-type stream), kept as the queues change: no walk over every queue.
  const std::set<std::string, std::less<>>& stream_queues() const { return stream_queues_; }

  // The queue's own subject, amqp._.<queue>, the one filter of its bus consumer: every message
  // stored for it is a copy under that subject. Empty when the queue does not exist.
  std::vector<std::string> queue_filters(std::string_view queue) const;

  // Would a publish to (exchange, routing_key) reach at least one queue? Answered from an
  // index kept up to date on every write, touching only that exchange's bindings (never a
  // scan over every queue). False for an absent exchange or an unpublishable key.
  bool routable(std::string_view exchange, std::string_view routing_key) const;
  // The queues a publish to (exchange, routing_key) reaches by their current bindings, sorted.
  // From the same index: a direct exchange's key is one lookup, a topic's visits its distinct keys.
  std::vector<std::string> queues_reached(std::string_view exchange, std::string_view routing_key) const;

  // Queues with at least one binding to `exchange` (sorted), for exchange.delete if-unused.
  std::vector<std::string> queues_bound_to(std::string_view exchange) const;
  bool has_bindings(std::string_view exchange) const;

 private:
  using counted_names = std::map<std::string, std::size_t, std::less<>>;
  // Per exchange name (present or not): the queues each binding key binds (how many bindings
  // each), and every queue bound, so that a publish visits only the keys it can match.
  struct exchange_index {
    std::map<std::string, counted_names, std::less<>> keys;
    counted_names queues;
  };
  void index_queue(std::string_view queue, const queue_def& def);
  void unindex_queue(std::string_view queue, const queue_def& def);
  // The counts and the set kept beside the queues, as one is added or removed.
  void tally(std::string_view queue, const queue_def& def, bool added);
  const exchange_index* index_of(std::string_view exchange) const;
  const policy_map::value_type* policy_for(std::string_view queue) const;
  // Sets the queue's working definition from `declared` and the policies; true when it changed.
  bool settle_queue(std::string_view name, queue_def declared);
  std::vector<std::string> settle_all_queues();

  std::map<std::string, exchange_def, std::less<>> exchanges_;
  queue_map queues_;
  queue_map declared_;  // only where a policy changed what the queue declared
  std::map<std::string, std::string, std::less<>> policy_of_;  // queue → the policy applied
  policy_map policies_;
  std::size_t length_limited_ = 0;  // queues with a max_length
  std::size_t timed_ = 0;           // queues with a message_ttl or a dead_letter
  std::set<std::string, std::less<>> stream_queues_;
  std::map<std::string, exchange_index, std::less<>> index_;
};

}  // namespace amqp::routing
