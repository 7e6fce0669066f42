// RabbitMQ's policies, written to the vhost's bucket and enforced where RabbitMQ enforces them at
// once: an expiry counted from now, a drop-head limit trimming what is over it.
#include <algorithm>

#include "amqp/broker/broker.hpp"
#include "amqp/routing/policy.hpp"
#include "broker_state.hpp"
#include "length_limit.hpp"

namespace amqp::broker {
namespace {

struct policy_effects {
  std::vector<std::string> expiring;  // the policy gives them an x-expires
  std::vector<std::pair<std::string, std::uint64_t>> trimmed;  // drop-head queues and their limit
};

policy_effects effects_of(const broker& b, const std::string& name, const routing::policy& p) {
  return b.read_topology([&](const routing::topology& t) {
    policy_effects e;
    for (const auto& [queue, def] : t.queues()) {
      const auto* applied = t.policy_of(queue);
      if (!applied || *applied != name) continue;
      if (p.expires && def.expires) e.expiring.push_back(queue);
      if (p.max_length && def.max_length && def.overflow.value_or(routing::overflow_mode::drop_head) ==
                                                 routing::overflow_mode::drop_head)
        e.trimmed.emplace_back(queue, *def.max_length);
    }
    return e;
  });
}

// What is over a drop-head limit goes from the head, as a publish past the limit would drop it.
void trim(broker& b, bus::client& as, const std::vector<std::pair<std::string, std::uint64_t>>& limits) {
  std::vector<std::string> queues;
  for (const auto& l : limits) queues.push_back(l.first);
  auto counts = ready_counts(b, as, queues, /*for_dropping=*/true);
  if (auto* f = std::get_if<bus::bus_error>(&counts)) {
    b.warn("trimming the queues a policy limits: " + f->text + "; each is trimmed at its next publish");
    return;
  }
  const auto& ready = std::get<std::vector<std::uint64_t>>(counts);
  for (std::size_t i = 0; i < limits.size(); ++i)
    if (ready[i] > limits[i].second) drop_heads(b, b.bus_executor(), limits[i].first, ready[i] - limits[i].second, [] {});
}

bool known(const broker& b, const std::string& name) {
  return b.read_topology([&](const routing::topology& t) { return t.policies().contains(name); });
}

}  // namespace

policy_change put_policy(broker& b, bus::client& as, const std::string& name, std::string_view json) {
  policy_change change;
  if (auto bad = routing::check_name(routing::name_rules::escaped, "policy", name)) {
    change.refused = bad->text;
    return change;
  }
  auto p = routing::parse_policy(json, b.config().names);
  if (!p) {
    change.refused = p.error().text;
    return change;
  }
  change.existed = known(b, name);
  const auto key = routing::policy_key(name);
  const auto value = routing::encode_policy(*p);
  auto written = as.kv_put(key, value);
  if (!written) {
    change.failure = written.error().text;
    change.denied = written.error().kind == bus::bus_errc::denied;
    return change;
  }
  b.apply_entry(key, value, *written);
  b.look_at_policy_queues(name);
  const auto effects = effects_of(b, name, *p);
  for (const auto& queue : effects.expiring) b.note_use(queue, broker::use::declare);
  if (!effects.trimmed.empty()) trim(b, as, effects.trimmed);
  return change;
}

policy_change delete_policy(broker& b, bus::client& as, const std::string& name) {
  policy_change change;
  change.existed = known(b, name);
  if (!change.existed) return change;
  const auto key = routing::policy_key(name);
  if (auto gone = as.kv_delete(key); !gone && gone.error().kind != bus::bus_errc::not_found) {
    change.failure = gone.error().text;
    change.denied = gone.error().kind == bus::bus_errc::denied;
    return change;
  }
  b.apply_entry(key, std::nullopt, 0);
  return change;
}

}  // namespace amqp::broker
