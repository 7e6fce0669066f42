#pragma once
// RabbitMQ's policies: a name, a regular expression over queue names and the queue features it
// gives every queue it matches, as if declared with their x-arguments. Only the features the
// adaptor has (dead-lettering, message TTL, length limit and overflow, delivery limit, queue
// expiry) can be set; a definition naming any other key is refused, naming it. A policy is kept
// in the vhost's topology bucket under "p." + name_word(name), so every replica applies the same.
#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>

#include "amqp/routing/names.hpp"
#include "amqp/routing/topology.hpp"
#include "amqp/wire/result.hpp"

namespace amqp::routing {

// apply-to, RabbitMQ 3.10's values.
enum class policy_target { all, queues, exchanges };
std::string_view to_string(policy_target target);

struct policy {
  std::string pattern;  // matched anywhere in the name, as RabbitMQ's re:run does
  policy_target apply_to = policy_target::all;
  std::int64_t priority = 0;
  // The definition, in queue_def's terms.
  std::optional<std::uint64_t> message_ttl{};
  std::optional<std::uint64_t> expires{};
  std::optional<std::uint64_t> max_length{};
  std::optional<std::uint64_t> delivery_limit{};
  std::optional<std::string> dead_letter_exchange{};
  std::optional<std::string> dead_letter_routing_key{};
  std::optional<overflow_mode> overflow{};
  friend bool operator==(const policy&, const policy&) = default;
};

// A policy as RabbitMQ's API and definitions file give one: a JSON object {"pattern",
// "definition", "apply-to"?, "priority"?} (other members, such as a file's "vhost" and "name", are
// not the policy's). A refusal (406, its text the reason a 400 carries) names the member or
// definition key that is wrong and why; a dead-letter exchange's name is checked under `names`.
wire::result<policy> parse_policy(std::string_view json, name_rules names);
// {"pattern","apply-to","definition","priority"}: what the bucket keeps and the API shows, the
// definition with RabbitMQ's key names ("message-ttl", "dead-letter-exchange", …).
std::string encode_policy(const policy& p);

// A policy with its pattern compiled, as the mirror keeps it.
struct compiled_policy {
  policy rules;
  std::regex pattern;
  bool matches_queue(std::string_view queue) const;
};
// nullopt when the pattern is not an ECMAScript regular expression (parse_policy refuses those).
std::optional<compiled_policy> compile(policy p);

// What a queue declared, with a policy's features where the queue declared none; a numeric limit
// both set is the smaller, as RabbitMQ resolves them (an argument wins over a policy otherwise).
queue_def with_policy(const queue_def& declared, const policy& p);

}  // namespace amqp::routing
