#include "amqp/routing/policy.hpp"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

namespace amqp::routing {
namespace {

using json = nlohmann::json;

wire::refusal invalid(std::string why) { return wire::refusal{wire::reply_code::precondition_failed, std::move(why)}; }

// The policy keys RabbitMQ 3.10 knows that set something the adaptor does not have.
struct unsupported_key {
  std::string_view name;
  std::string_view remedy;
};
constexpr std::array<unsupported_key, 14> unsupported{{
    {"max-length-bytes", "the bus counts a queue's messages, not their bytes; bound the queue by max-length"},
    {"queue-mode", "every queue is on the bus's disk already; leave it out"},
    {"ha-mode", "queues are replicated by the bus's stream replicas; leave it out"},
    {"ha-params", "queues are replicated by the bus's stream replicas; leave it out"},
    {"ha-sync-mode", "queues are replicated by the bus's stream replicas; leave it out"},
    {"ha-sync-batch-size", "queues are replicated by the bus's stream replicas; leave it out"},
    {"ha-promote-on-shutdown", "queues are replicated by the bus's stream replicas; leave it out"},
    {"ha-promote-on-failure", "queues are replicated by the bus's stream replicas; leave it out"},
    {"queue-master-locator", "queues are placed by the bus; leave it out"},
    {"queue-leader-locator", "queues are placed by the bus; leave it out"},
    {"alternate-exchange", "alternate exchanges are not implemented; publish with mandatory to learn of unroutable messages"},
    {"federation-upstream", "federation is not implemented; join the buses instead (NATS leaf nodes or a cluster)"},
    {"federation-upstream-set", "federation is not implemented; join the buses instead (NATS leaf nodes or a cluster)"},
    {"max-age", "stream queues are not implemented"},
}};

std::optional<std::uint64_t> count(const json& value, bool zero_allowed) {
  if (!value.is_number_integer()) return std::nullopt;
  const auto n = value.get<std::int64_t>();
  if (n < 0 || (n == 0 && !zero_allowed)) return std::nullopt;
  return static_cast<std::uint64_t>(n);
}

std::string shown(const json& value) { return value.dump(); }

// One definition key into `p`; a refusal names the key and what is wrong with its value.
std::optional<wire::refusal> read_key(const std::string& key, const json& value, name_rules names, policy& p) {
  struct numeric {
    std::string_view key;
    std::optional<std::uint64_t> policy::*field;
    bool zero_allowed;
    std::string_view meaning;
  };
  static constexpr std::array<numeric, 4> numerics{{
      {"message-ttl", &policy::message_ttl, true, "message TTL"},
      {"expires", &policy::expires, false, "queue expiry"},
      {"max-length", &policy::max_length, true, "maximum length"},
      {"delivery-limit", &policy::delivery_limit, true, "delivery limit"},
  }};
  for (const auto& n : numerics) {
    if (key != n.key) continue;
    auto v = count(value, n.zero_allowed);
    if (!v) return invalid(shown(value) + " is not a valid " + std::string(n.meaning));
    p.*n.field = *v;
    return std::nullopt;
  }
  if (key == "dead-letter-exchange" || key == "dead-letter-routing-key") {
    if (!value.is_string()) return invalid(shown(value) + " is not a valid " + key + ": give a string");
    auto text = value.get<std::string>();
    if (key == "dead-letter-exchange") {
      if (!text.empty())
        if (auto bad = check_name(names, "exchange", text)) return invalid("dead-letter-exchange: " + bad->text);
      p.dead_letter_exchange = std::move(text);
    } else {
      p.dead_letter_routing_key = std::move(text);
    }
    return std::nullopt;
  }
  if (key == "overflow") {
    auto mode = value.is_string() ? parse_overflow(value.get<std::string>()) : std::nullopt;
    if (!mode) return invalid(shown(value) + " is not a valid overflow value: drop-head, reject-publish or reject-publish-dlx");
    p.overflow = *mode;
    return std::nullopt;
  }
  for (const auto& u : unsupported)
    if (key == u.name) return invalid("policy setting '" + key + "' is not implemented: " + std::string(u.remedy));
  return invalid("'" + key + "' is not a recognised policy setting");
}

std::optional<policy_target> parse_target(std::string_view text) {
  for (auto t : {policy_target::all, policy_target::queues, policy_target::exchanges})
    if (text == to_string(t)) return t;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(policy_target target) {
  switch (target) {
    case policy_target::all: return "all";
    case policy_target::queues: return "queues";
    case policy_target::exchanges: return "exchanges";
  }
  return "all";
}

wire::result<policy> parse_policy(std::string_view text, name_rules names) {
  json value = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) return invalid("a policy is a JSON object");
  policy p;
  auto pattern = value.find("pattern");
  if (pattern == value.end()) return invalid("the policy has no pattern");
  if (!pattern->is_string()) return invalid("pattern should be a string, actually was " + shown(*pattern));
  p.pattern = pattern->get<std::string>();
  if (!compile(p)) return invalid("pattern should be regular expression but is invalid: " + p.pattern);
  if (auto to = value.find("apply-to"); to != value.end()) {
    auto target = to->is_string() ? parse_target(to->get<std::string>()) : std::nullopt;
    if (!target)
      return invalid("apply-to " + shown(*to) + " unrecognised; should be 'queues', 'exchanges' or 'all'");
    p.apply_to = *target;
  }
  if (auto priority = value.find("priority"); priority != value.end()) {
    // RabbitMQ's own API sends the number as a string when a form gave it.
    std::optional<std::int64_t> n;
    if (priority->is_number_integer()) n = priority->get<std::int64_t>();
    if (priority->is_string()) {
      try {
        std::size_t used = 0;
        const auto& s = priority->get_ref<const std::string&>();
        n = std::stoll(s, &used);
        if (used != s.size()) n.reset();
      } catch (const std::exception&) {
        n.reset();
      }
    }
    if (!n) return invalid("priority should be a number, actually was " + shown(*priority));
    p.priority = *n;
  }
  auto definition = value.find("definition");
  if (definition == value.end()) return invalid("the policy has no definition");
  if (!definition->is_object()) return invalid("definition should be an object, actually was " + shown(*definition));
  if (definition->empty()) return invalid("no policy provided");
  for (const auto& [key, v] : definition->items())
    if (auto bad = read_key(key, v, names, p)) return *bad;
  return p;
}

std::string encode_policy(const policy& p) {
  json definition = json::object();
  if (p.message_ttl) definition["message-ttl"] = *p.message_ttl;
  if (p.expires) definition["expires"] = *p.expires;
  if (p.max_length) definition["max-length"] = *p.max_length;
  if (p.delivery_limit) definition["delivery-limit"] = *p.delivery_limit;
  if (p.dead_letter_exchange) definition["dead-letter-exchange"] = *p.dead_letter_exchange;
  if (p.dead_letter_routing_key) definition["dead-letter-routing-key"] = *p.dead_letter_routing_key;
  if (p.overflow) definition["overflow"] = std::string(to_string(*p.overflow));
  return json{{"pattern", p.pattern},
              {"apply-to", std::string(to_string(p.apply_to))},
              {"definition", std::move(definition)},
              {"priority", p.priority}}
      .dump();
}

std::optional<compiled_policy> compile(policy p) {
  try {
    std::regex pattern(p.pattern, std::regex::ECMAScript | std::regex::optimize);
    return compiled_policy{std::move(p), std::move(pattern)};
  } catch (const std::regex_error&) {
    return std::nullopt;
  }
}

bool compiled_policy::matches_queue(std::string_view queue) const {
  if (rules.apply_to == policy_target::exchanges) return false;
  return std::regex_search(queue.begin(), queue.end(), pattern);
}

queue_def with_policy(const queue_def& declared, const policy& p) {
  queue_def q = declared;
  // A stream queue keeps every message for its readers: a policy's TTL, length limit, expiry,
  // delivery limit or dead-lettering would take messages from its feeder (RabbitMQ's streams
  // ignore these keys too).
  if (q.type() == queue_type::stream) return q;
  auto smaller = [](std::optional<std::uint64_t>& argument, const std::optional<std::uint64_t>& set) {
    if (set) argument = argument ? std::min(*argument, *set) : *set;
  };
  smaller(q.message_ttl, p.message_ttl);
  smaller(q.expires, p.expires);
  smaller(q.max_length, p.max_length);
  smaller(q.delivery_limit, p.delivery_limit);
  if (!q.overflow) q.overflow = p.overflow;
  // A routing key alone (no exchange declared or set) dead-letters nothing, as in RabbitMQ.
  if (!q.dead_letter && p.dead_letter_exchange) q.dead_letter = dead_letter_target{*p.dead_letter_exchange, {}};
  if (q.dead_letter && !q.dead_letter->routing_key) q.dead_letter->routing_key = p.dead_letter_routing_key;
  return q;
}

}  // namespace amqp::routing
