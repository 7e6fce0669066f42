#include "housekeeping/dead_letter.hpp"

#include <boost/asio/post.hpp>
#include <algorithm>
#include <chrono>
#include <memory>
#include <span>
#include <variant>

#include "amqp/bus/base64.hpp"
#include "amqp/routing/subject.hpp"
#include "amqp/routing/topology.hpp"
#include "amqp/wire/codec.hpp"
#include "channel/channel_context.hpp"
#include "publish/route.hpp"

namespace amqp::broker {
namespace {

constexpr std::string_view history_header = "x-death";

const wire::field_table* table_of(const wire::field_value& v) { return std::get_if<wire::field_table>(&v.value); }

std::string_view text_of(const wire::field_table& t, std::string_view name) {
  const auto* v = wire::find(t, name);
  const auto* s = v ? std::get_if<std::string>(&v->value) : nullptr;
  return s ? std::string_view(*s) : std::string_view{};
}

std::int64_t count_of(const wire::field_table& t) {
  const auto* v = wire::find(t, "count");
  return v ? wire::integer_of(*v).value_or(0) : 0;
}

void set(wire::field_table& t, std::string_view name, wire::field_value v) {
  for (auto& e : t.entries) {
    if (e.name == name) {
      e.value = std::move(v);
      return;
    }
  }
  t.entries.push_back({std::string(name), std::move(v)});
}

const wire::field_array* history_of(const wire::basic_properties& props) {
  if (!props.headers) return nullptr;
  const auto* v = wire::find(*props.headers, history_header);
  return v ? std::get_if<wire::field_array>(&v->value) : nullptr;
}

wire::field_table entry_for(const death& d, const std::optional<std::string>& expiration) {
  wire::field_array keys;
  for (const auto& k : d.routing_keys) keys.items.emplace_back(k);
  wire::field_table entry;
  entry.entries = {{"count", wire::field_value(std::int64_t{1})},
                   {"reason", wire::field_value(std::string(to_string(d.reason)))},
                   {"queue", wire::field_value(d.queue)},
                   {"time", wire::field_value(wire::timestamp_value{d.time})},
                   {"exchange", wire::field_value(d.exchange)},
                   {"routing-keys", wire::field_value(std::move(keys))}};
  if (expiration) entry.entries.push_back({"original-expiration", wire::field_value(*expiration)});
  return entry;
}

// Where a queue's dead letters go, as the mirror has it when the queue gives one up.
struct dead_letter_plan {
  std::string exchange;
  std::string routing_key;
  bool exchange_exists = false;
  std::vector<std::string> reached;  // the queues that route takes the copy to
  std::vector<std::string> streams;  // those of them that are stream queues, sorted
};

std::optional<dead_letter_plan> plan_for(const broker& b, const std::string& queue, const std::string& own_key) {
  return b.read_topology([&](const routing::topology& t) -> std::optional<dead_letter_plan> {
    const auto* def = t.find_queue(queue);
    if (!def || !def->dead_letter) return std::nullopt;
    dead_letter_plan plan{def->dead_letter->exchange, def->dead_letter->routing_key.value_or(own_key), false, {}, {}};
    plan.exchange_exists = t.find_exchange(plan.exchange) != nullptr;
    if (plan.exchange_exists) plan.reached = t.queues_reached(plan.exchange, plan.routing_key);
    for (const auto& q : plan.reached)
      if (t.stream_queues().contains(q)) plan.streams.push_back(q);
    std::sort(plan.streams.begin(), plan.streams.end());
    return plan;
  });
}

// The queues the copy goes to: each the route reaches, less those it would bring back round a
// cycle.
std::vector<std::string> queues_for(const dead_letter_plan& plan, const wire::basic_properties& props) {
  std::vector<std::string> queues;
  for (const auto& q : plan.reached)
    if (!completes_cycle(props, q)) queues.push_back(q);
  return queues;
}

// Stores one copy per queue (route.hpp); the original is termed once all are stored, or goes back
// to the queue (dead-lettered again when it comes back). The queues the copies reach may expire
// them at their head (expiry.hpp): a TTL on the dead-letter queue is how a delayed retry is made.
void store_dead_letter(broker& b, const boost::asio::any_io_executor& ex, const std::vector<std::string>& queues,
                       const std::vector<std::string>& streams, const std::string& routed_as,
                       const std::string& property_octets, std::string body, std::string reply,
                       std::function<void()> settled) {
  b.expect_expiries(b.read_topology(
      [&](const routing::topology& t) { return expiries_of(t, queues, property_octets); }));
  auto bus = b.bus_ptr();
  publish_copies(*bus, *bus, ex, {queues, streams, routed_as}, bus::base64_encode(property_octets), std::move(body),
                 [bus, reply = std::move(reply), settled = std::move(settled)](bus::bus_status stored) {
                   if (stored) {
                     bus->term(reply);
                   } else {
                     bus->nak(reply);
                   }
                   if (settled) settled();
                 });
}

}  // namespace

std::uint64_t wall_clock_ms() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

std::string_view to_string(death_reason reason) {
  switch (reason) {
    case death_reason::rejected: return "rejected";
    case death_reason::expired: return "expired";
    case death_reason::maxlen: return "maxlen";
    case death_reason::delivery_limit: return "delivery_limit";
  }
  return "rejected";
}

void add_death(wire::basic_properties& props, const death& d) {
  auto& headers = props.headers ? *props.headers : props.headers.emplace();
  wire::field_array history;
  if (const auto* earlier = history_of(props)) history = *earlier;
  auto same = std::find_if(history.items.begin(), history.items.end(), [&](const wire::field_value& v) {
    const auto* t = table_of(v);
    return t && text_of(*t, "queue") == d.queue && text_of(*t, "reason") == to_string(d.reason);
  });
  wire::field_table entry;
  if (same != history.items.end()) {
    // RabbitMQ keeps the entry's first time, exchange and keys, and counts.
    entry = *table_of(*same);
    set(entry, "count", std::int64_t{count_of(entry) + 1});
    history.items.erase(same);
  } else {
    entry = entry_for(d, props.expiration);
  }
  props.expiration.reset();
  history.items.insert(history.items.begin(), wire::field_value(std::move(entry)));
  set(headers, history_header, std::move(history));
  if (!wire::find(headers, "x-first-death-reason")) {
    set(headers, "x-first-death-reason", std::string(to_string(d.reason)));
    set(headers, "x-first-death-queue", d.queue);
    set(headers, "x-first-death-exchange", d.exchange);
  }
  set(headers, "x-last-death-reason", std::string(to_string(d.reason)));
  set(headers, "x-last-death-queue", d.queue);
  set(headers, "x-last-death-exchange", d.exchange);
}

bool completes_cycle(const wire::basic_properties& props, std::string_view queue) {
  const auto* history = history_of(props);
  if (!history) return false;
  for (const auto& v : history->items) {
    const auto* t = table_of(v);
    if (!t) continue;
    if (text_of(*t, "reason") == to_string(death_reason::rejected)) return false;
    if (text_of(*t, "queue") == queue) return true;
  }
  return false;
}

std::optional<std::uint64_t> expiry_of(const bus::delivery& d, std::optional<std::uint64_t> queue_ttl) {
  std::optional<std::uint64_t> ttl = queue_ttl;
  // Refused at publish when it is not milliseconds; a bus-native writer's odd value is inert.
  if (auto ms = wire::expiration_of(d.amqp_props); ms && *ms) ttl = ttl ? std::min(*ttl, **ms) : **ms;
  if (!ttl) return std::nullopt;
  return d.stored_ns / 1'000'000 + *ttl;
}

bool passed_over(broker& b, boost::asio::any_io_executor ex, const std::string& queue, bus::delivery& d,
                 std::function<void()> settled) {
  const auto rules = b.rules_for(queue);
  std::optional<death_reason> why;
  if (const auto expiry = expiry_of(d, rules.message_ttl); expiry && wall_clock_ms() > *expiry) {
    why = death_reason::expired;
  } else if (rules.delivery_limit && d.delivered > *rules.delivery_limit + 1) {
    why = death_reason::delivery_limit;  // returned (delivered - 1 times) more often than the limit
  }
  if (!why) return false;
  give_up(b, std::move(ex), queue, *why, std::move(d), std::move(settled));
  return true;
}

void give_up(broker& b, boost::asio::any_io_executor ex, const std::string& queue, death_reason why,
             bus::delivery d, std::function<void()> settled) {
  const auto& bus = b.bus_ptr();
  const auto term = [&] {
    bus->term(d.reply);
    if (settled) settled();
  };
  const auto addr = routing::split_subject(d.shown_subject()).value_or(routing::address{});
  const auto plan = plan_for(b, queue, addr.routing_key);
  // No dead-letter exchange, or one that does not exist: RabbitMQ drops the message.
  if (!plan || !plan->exchange_exists) return term();
  const auto routed_as = routing::publish_subject(plan->exchange, plan->routing_key);
  wire::basic_properties props;
  if (!d.amqp_props.empty()) {
    auto decoded = wire::decode_properties(
        {reinterpret_cast<const std::uint8_t*>(d.amqp_props.data()), d.amqp_props.size()});
    if (!decoded) {
      // A bus-native writer's odd octets: the copy keeps them as they are, without a history.
      b.warn("dead-lettering from queue '" + queue + "': " + decoded.error().text +
             "; the copy keeps the original properties");
      if (!routed_as) return term();
      return store_dead_letter(b, ex, plan->reached, plan->streams, *routed_as, d.amqp_props, std::move(d.body),
                               std::move(d.reply), std::move(settled));
    }
    props = std::move(*decoded);
  }
  add_death(props, death{queue, why, addr.exchange, {addr.routing_key}, wall_clock_ms() / 1000});
  if (!routed_as) {
    b.warn("dead-lettering from queue '" + queue + "' to exchange '" + plan->exchange + "': " + routed_as.error().text +
           "; the message was dropped");
    return term();
  }
  const auto queues = queues_for(*plan, props);
  if (queues.empty()) return term();  // every queue it would reach is a cycle
  store_dead_letter(b, ex, queues, plan->streams, *routed_as, wire::encode_properties(props), std::move(d.body),
                    std::move(d.reply), std::move(settled));
}

void give_up_rejected(broker& b, boost::asio::any_io_executor ex, const std::string& queue, std::string reply,
                      std::uint64_t stream_seq) {
  const bool dead_letters = b.read_topology([&](const routing::topology& t) {
    const auto* def = t.find_queue(queue);
    return def && def->dead_letter;
  });
  auto bus = b.bus_ptr();
  if (!dead_letters) return bus->term(reply);
  // On the serial lane, so that copies are published in the order the client rejected them.
  boost::asio::post(b.dead_letter_lane(), [weak = b.weak_from_this(), bus, ex, queue, reply = std::move(reply),
                                           stream_seq]() mutable {
    auto read = bus->read_message(stream_seq);
    boost::asio::post(ex, [weak, bus, ex, queue, reply = std::move(reply), read = std::move(read)]() mutable {
      auto owner = weak.lock();
      if (!owner) return;
      if (!read) {
        // Not found too: the stream's leader may lack what its consumer delivered (a node back
        // from a full disk). Back in the queue, a purged message is gone for good all the same.
        owner->warn("dead-lettering from queue '" + queue + "': " + read.error().text +
                    "; the message goes back to the queue");
        return bus->nak(reply);
      }
      read->reply = std::move(reply);
      give_up(*owner, ex, queue, death_reason::rejected, std::move(*read));
    });
  });
}

}  // namespace amqp::broker
