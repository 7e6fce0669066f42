// RabbitMQ's policies, written to the vhost's bucket and enforced where RabbitMQ enforces them at
// once: an expiry counted from now, a drop-head limit trimming what is over it.
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <memory>

#include "amqp/broker/broker.hpp"
#include "amqp/routing/policy.hpp"
#include "broker_state.hpp"
#include "housekeeping/length_limit.hpp"

namespace amqp::broker {
namespace {

struct policy_effects {
  std::vector<std::string> expiring;  // the policy gives them an x-expires
  std::vector<std::string> trimmed;   // it gives them a drop-head length limit
};

policy_effects effects_of(const broker& b, const std::string& name, const routing::policy& p) {
  return b.read_topology([&](const routing::topology& t) {
    policy_effects e;
    for (const auto& [queue, def] : t.queues()) {
      const auto* applied = t.policy_of(queue);
      if (!applied || *applied != name) continue;
      if (p.expires && def.expires) e.expiring.push_back(queue);
      if (p.max_length && def.drop_head_limit()) e.trimmed.push_back(queue);
    }
    return e;
  });
}

// What is over a queue's drop-head limit goes from the head, as a publish past the limit would drop
// it, in rounds: count, drop the excess, count again (a no-wait pull can come back empty while the
// head is on its way elsewhere), until the queue is within its limit. One trim at a time per queue:
// a policy put while one runs makes it count again rather than drop what the first is dropping.
class policy_trim : public std::enable_shared_from_this<policy_trim> {
 public:
  // Its rounds and its dropper's callbacks run one at a time, on a strand of the bus pool.
  policy_trim(broker& b, std::string queue)
      : broker_(b.weak_from_this()), queue_(std::move(queue)), strand_(boost::asio::make_strand(b.bus_executor())) {}

  void start(broker& b) {
    if (!b.begin_trim(queue_)) return;  // the running one counts again when its round ends
    boost::asio::post(strand_, [self = shared_from_this()] { self->round(); });
  }

 private:
  static constexpr int most_rounds = 8;

  // Blocking, on the bus pool: the limit as it is now, the count, and the drop of the excess.
  void round() {
    auto b = broker_.lock();
    if (!b) return;
    const auto limit = b->read_topology([&](const routing::topology& t) -> std::optional<std::uint64_t> {
      const auto* def = t.find_queue(queue_);
      return def ? def->drop_head_limit() : std::nullopt;
    });
    std::uint64_t excess = 0;
    if (limit && ++rounds_ <= most_rounds) {
      auto counts = ready_counts(b->bus(), {queue_}, /*for_dropping=*/true);
      if (auto* f = std::get_if<bus::bus_error>(&counts)) {
        b->warn("trimming queue '" + queue_ + "' to the length limit a policy set: " + f->text +
                "; it is trimmed at its next publish");
      } else {
        const auto ready = std::get<std::vector<std::uint64_t>>(counts).front();
        excess = ready > *limit ? ready - *limit : 0;
      }
    }
    if (excess > 0) {
      return drop_heads(*b, strand_, queue_, excess, [self = shared_from_this()] { self->round(); });
    }
    if (b->end_trim(queue_)) {  // a policy came meanwhile
      rounds_ = 0;
      return round();
    }
  }

  std::weak_ptr<broker> broker_;
  std::string queue_;
  boost::asio::any_io_executor strand_;
  int rounds_ = 0;
};

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
  for (const auto& queue : effects.trimmed) std::make_shared<policy_trim>(b, queue)->start(b);
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
