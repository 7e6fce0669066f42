// queue.declare, bind, unbind, purge and delete: a queue is a durable consumer on stream AMQP
// plus a key in the bucket, and its bindings are that consumer's filters (HIP-1326, "Exchanges,
// queues and bindings become subjects, consumers and filters").
#include <algorithm>
#include <limits>
#include <optional>

#include "amqp/routing/names.hpp"
#include "amqp/routing/subject.hpp"
#include "channel/channel_context.hpp"
#include "channel/handler_support.hpp"
#include "channel/handlers.hpp"
#include "topology/queue_arguments.hpp"

namespace amqp::broker {
namespace {

using count_or_failure = std::variant<std::uint64_t, bus::bus_error>;

std::uint32_t clamp32(std::uint64_t n) {
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(n, std::numeric_limits<std::uint32_t>::max()));
}

// What the queue declared (a redeclaration is compared with its arguments, not its policy's).
std::optional<routing::queue_def> find(channel_context& ctx, const std::string& name) {
  return ctx.state().read_topology([&](const routing::topology& t) -> std::optional<routing::queue_def> {
    const auto* def = t.find_declared(name);
    if (def == nullptr) return std::nullopt;
    return *def;
  });
}

std::optional<routing::exchange_def> find_exchange(channel_context& ctx, const std::string& name) {
  return ctx.state().read_topology([&](const routing::topology& t) -> std::optional<routing::exchange_def> {
    const auto* def = t.find_exchange(name);
    if (def == nullptr) return std::nullopt;
    return *def;
  });
}

void no_queue(channel_context& ctx, const std::string& name, wire::method_key during) {
  ctx.fail(wire::reply_code::not_found,
           "no queue " + quoted(name) + in_vhost(ctx), during, "declare it first");
}

bool usable(channel_context& ctx, const std::string& name, wire::method_key during) {
  std::string why;
  if (ctx.state().may_use(name, ctx.connection_id(), why)) return true;
  ctx.fail(wire::reply_code::resource_locked, why, during, locked_remedy);
  return false;
}

// The queue name a method names: the channel's last declared queue for "", then checked.
std::optional<std::string> queue_name(channel_context& ctx, const std::string& given,
                                      wire::method_key during) {
  auto name = ctx.resolve_queue(given, during);
  if (!name) return std::nullopt;
  if (auto bad = routing::check_name(names(ctx), "queue", *name)) {
    ctx.refuse(*bad, during);
    return std::nullopt;
  }
  return name;
}

// Whether the queue exists (mirror, else bucket) and this connection may use it; otherwise the
// channel fails with 404 or 405. `ask_bucket` skips the mirror: a passive declare is a question
// about the bucket, and a mirror hit may be a queue another replica deleted a moment ago.
task<bool> queue_there(channel_context& ctx, const std::string& name, wire::method_key during,
                       bool ask_bucket = false) {
  if (!usable(ctx, name, during)) co_return false;
  auto key = routing::queue_key(name);
  auto present = co_await entry_present(ctx, !ask_bucket && find(ctx, name).has_value(), std::move(key), during);
  if (!present) co_return false;
  if (!*present) {
    no_queue(ctx, name, during);
    co_return false;
  }
  co_return usable(ctx, name, during);  // the bucket may say exclusive
}

// Messages ready for delivery (never delivered, or requeued). Under interest retention the
// consumer is made again when it is missing (deleted behind our back, or a replica stopped
// between writing the key and creating it): nothing is kept for a queue without one.
count_or_failure pending_or_heal(broker& b, bus::client& bus, const std::string& queue) {
  auto info = bus::queue_counts(bus, routing::consumer_name(queue), routing::queue_subject(queue), false);
  if (info) return info->ready();
  if (info.error().kind != bus::bus_errc::not_found) return info.error();
  if (auto failed = store::converge_consumer(b, bus, queue)) return *failed;
  return std::uint64_t{0};
}

task<> answer_declare(channel_context& ctx, std::string name, bool no_wait) {
  static constexpr auto key = wire::queue_declare::key;
  ctx.last_queue = name;
  broker* b = &ctx.state();
  b->note_use(name, broker::use::declare);  // a passive one too, as RabbitMQ counts it
  // RabbitMQ answers 0 for a stream queue, whatever it holds: its messages are never taken.
  if (b->type_of(name) == routing::queue_type::stream) {
    if (!no_wait) ctx.reply(wire::queue_declare_ok{name, 0, ctx.state().consumer_count(name)});
    co_return;
  }
  // Counted once this channel's publishes so far are stored, as RabbitMQ counts them.
  co_await publishes_answered(ctx);
  auto count = [b, bus = ctx.bus_ptr(), name] { return pending_or_heal(*b, *bus, name); };
  auto pending = co_await ctx.on_bus(key, std::move(count));
  if (auto* f = std::get_if<bus::bus_error>(&pending)) co_return bus_failed(ctx, *f, key);
  if (!no_wait) {
    ctx.reply(wire::queue_declare_ok{name, clamp32(std::get<std::uint64_t>(pending)), ctx.state().consumer_count(name)});
  }
}

void answer_created(channel_context& ctx, const std::string& name, bool no_wait) {
  ctx.last_queue = name;
  ctx.state().note_use(name, broker::use::declare);
  if (!no_wait) ctx.reply(wire::queue_declare_ok{name, 0, ctx.state().consumer_count(name)});
}

// An optional argument as an inequivalence sentence shows it.
std::string text(const std::optional<std::uint64_t>& n) { return n ? std::to_string(*n) : std::string("none"); }
std::string text(const std::optional<std::string>& s) { return s ? *s : std::string("none"); }
std::string text(const std::optional<routing::overflow_mode>& m) {
  return m ? std::string(routing::to_string(*m)) : std::string("none");
}

// x-delivery-limit as declared: a count, -1 (no limit), or none.
std::optional<std::string> delivery_limit_of(const routing::queue_def& d) {
  if (d.unlimited_deliveries) return "-1";
  if (d.delivery_limit) return std::to_string(*d.delivery_limit);
  return std::nullopt;
}

bool equivalent(channel_context& ctx, const std::string& name, const routing::queue_def& current,
                const routing::queue_def& wanted) {
  static constexpr auto key = wire::queue_declare::key;
  auto mismatch = [&](std::string_view arg, bool received, bool now) {
    ctx.fail(wire::reply_code::precondition_failed,
             inequivalent(ctx, arg, "queue", name, bool_text(received), bool_text(now)), key, inequivalent_remedy);
    return false;
  };
  // RabbitMQ compares the exclusive flag first, as a lock: 405.
  if (current.exclusive != wanted.exclusive) {
    ctx.fail(wire::reply_code::resource_locked, ctx.state().locked_text(name), key, locked_remedy);
    return false;
  }
  if (current.durable != wanted.durable) return mismatch("durable", wanted.durable, current.durable);
  if (current.auto_delete != wanted.auto_delete) {
    return mismatch("auto_delete", wanted.auto_delete, current.auto_delete);
  }
  if (current.single_active_consumer != wanted.single_active_consumer) {
    return mismatch("x-single-active-consumer", wanted.single_active_consumer, current.single_active_consumer);
  }
  // RabbitMQ 3.10 takes no type and 'classic' as one type; when only one side named a type, it
  // shows that one as a typed value and the other as none.
  if (current.type() != wanted.type()) {
    auto shown = [&](const std::optional<routing::queue_type>& t) {
      if (!t) return std::string("none");
      const auto value = quoted(routing::to_string(*t));
      return wanted.declared_type && current.declared_type ? value : "the value " + value + " of type 'longstr'";
    };
    ctx.fail(wire::reply_code::precondition_failed,
             inequivalent_shown(ctx, "x-queue-type", "queue", name, shown(wanted.declared_type),
                                shown(current.declared_type)),
             key, inequivalent_remedy);
    return false;
  }
  auto differs = [&](std::string_view arg, const auto& received, const auto& now) {
    if (received == now) return false;
    ctx.fail(wire::reply_code::precondition_failed, inequivalent(ctx, arg, "queue", name, text(received), text(now)), key,
             inequivalent_remedy);
    return true;
  };
  // RabbitMQ shows x-max-age as a typed value: "the value '2h' of type 'longstr'", or none.
  if (wanted.max_age != current.max_age) {
    auto shown = [](const std::optional<std::string>& age) {
      return age ? "the value " + quoted(*age) + " of type 'longstr'" : std::string("none");
    };
    ctx.fail(wire::reply_code::precondition_failed,
             inequivalent_shown(ctx, "x-max-age", "queue", name, shown(wanted.max_age), shown(current.max_age)), key,
             inequivalent_remedy);
    return false;
  }
  if (differs("x-max-length-bytes", wanted.max_length_bytes, current.max_length_bytes)) return false;
  const auto dlx = [](const routing::queue_def& d) { return d.dead_letter ? std::optional(d.dead_letter->exchange) : std::nullopt; };
  const auto dlrk = [](const routing::queue_def& d) { return d.dead_letter ? d.dead_letter->routing_key : std::nullopt; };
  return !differs("x-message-ttl", wanted.message_ttl, current.message_ttl) &&
         !differs("x-dead-letter-exchange", dlx(wanted), dlx(current)) &&
         !differs("x-dead-letter-routing-key", dlrk(wanted), dlrk(current)) &&
         !differs("x-delivery-limit", delivery_limit_of(wanted), delivery_limit_of(current)) &&
         !differs("x-expires", wanted.expires, current.expires) &&
         !differs("x-max-length", wanted.max_length, current.max_length) &&
         !differs("x-overflow", wanted.overflow, current.overflow);
}

bus::stream_limits stream_limits_of(const routing::queue_def& def) {
  bus::stream_limits limits;
  if (def.max_age) limits.max_age_seconds = static_cast<std::int64_t>(max_age_seconds(*def.max_age).value_or(0));
  if (def.max_length_bytes && *def.max_length_bytes > 0) limits.max_bytes = static_cast<std::int64_t>(*def.max_length_bytes);
  return limits;
}

// What a create on the bus found, after the consumer exists.
using create_result = store::create_outcome<routing::queue_def>;

create_result create_on_bus(broker& b, bus::client& bus, const std::string& name, const routing::queue_def& def) {
  auto outcome = store::create_queue(b, bus, name, def);
  if (auto* created = std::get_if<store::created>(&outcome)) {
    // A stream queue is its own stream: what it is sent is stored there, and it has no consumer
    // on stream AMQP.
    if (def.type() == routing::queue_type::stream) {
      if (auto failed = bus.ensure_queue_stream(routing::consumer_name(name), stream_limits_of(def)); !failed) {
        (void)bus.kv_delete(routing::queue_key(name));
        return failed.error();
      }
      return outcome;
    }
    // Under limits retention the queue's subject keeps what it is sent: its consumer waits for
    // its first reader. Interest retention keeps only what a consumer's filter matches.
    if (bus.retains_by_limits()) return outcome;
    bus::kv_entry entry{created->value, created->revision};
    if (auto failed = store::converge_consumer(b, bus, name, &entry)) {
      // A queue the bus has no room for is not left in the bucket without its consumer.
      if (failed->kind == bus::bus_errc::limit) (void)bus.kv_delete(routing::queue_key(name));
      return *failed;
    }
  }
  return outcome;
}

// Resumes once no deletion of `queue` this process started is under way (broker::after_deletion):
// a declaration that meets one ends with a queue that exists.
task<> deletion_over(channel_context& ctx, const std::string& queue) {
  if (!ctx.state().being_deleted(queue)) co_return;
  auto wait = [&ctx, queue](std::function<void()> done) { ctx.state().after_deletion(queue, std::move(done)); };
  co_await until_called<>(ctx, std::move(wait));
}

task<> declare_new(channel_context& ctx, std::string name, routing::queue_def wanted, bool no_wait) {
  static constexpr auto key = wire::queue_declare::key;
  co_await deletion_over(ctx, name);
  auto& b = ctx.state();
  // The mirror holds every replica's queues; the stream's consumer limit is the bus's backstop.
  const auto limit = b.config().max_queues;
  if (b.read_topology([](const routing::topology& t) { return t.queues().size(); }) >= limit) {
    co_return ctx.fail(wire::reply_code::precondition_failed,
                       "cannot declare queue " + quoted(name) + ": queue limit in vhost " + quoted(b.config().vhost) +
                           " (" + std::to_string(limit) + ") is reached",
                       key);
  }
  if (wanted.exclusive) b.claim_exclusive(name, ctx.connection_id());
  b.write_topology([&](routing::topology& t) {
    t.put_queue(name, wanted);
    return true;
  });
  broker* bp = &b;
  auto create = [bp, bus = ctx.bus_ptr(), name, wanted] { return create_on_bus(*bp, *bus, name, wanted); };
  auto outcome = co_await ctx.on_bus(key, std::move(create));
  if (auto* f = std::get_if<bus::bus_error>(&outcome)) {
    b.forget_queue(name);
    co_return bus_failed(ctx, *f, key);
  }
  auto* current = std::get_if<routing::queue_def>(&outcome);
  if (!current) {
    if (store::is_transient(wanted)) b.remember_transient(routing::queue_key(name));
    // Its consumer starts at the next message, so a queue just created holds none: nothing to
    // ask the bus.
    broker::count(b.message_counters().queues_created);
    broker::count(b.message_counters().queues_declared);
    co_return answer_created(ctx, name, no_wait);
  }
  // Another replica declared it first; the mirror now holds its definition.
  if (wanted.exclusive) {
    b.forget_exclusive_claim(name);
    std::string why;
    if (!b.may_use(name, ctx.connection_id(), why))
      co_return ctx.fail(wire::reply_code::resource_locked, why, key, locked_remedy);
  }
  if (!equivalent(ctx, name, *current, wanted)) co_return;
  broker::count(b.message_counters().queues_declared);
  co_await answer_declare(ctx, name, no_wait);
}

task<> declare_passive(channel_context& ctx, std::string name, bool no_wait) {
  co_await deletion_over(ctx, name);
  const bool there = co_await queue_there(ctx, name, wire::queue_declare::key, /*ask_bucket=*/true);
  if (!there) co_return;
  co_await answer_declare(ctx, name, no_wait);
}

// A binding's two ends: the queue there and usable (else the channel failed), and whether the
// exchange is (mirror, else bucket). nullopt: the channel failed.
task<std::optional<bool>> binding_ends(channel_context& ctx, const std::string& queue, const std::string& exchange,
                                       wire::method_key key) {
  const bool there = co_await queue_there(ctx, queue, key);
  if (!there) co_return std::nullopt;
  auto exchange_key = routing::exchange_key(exchange);
  auto present = co_await entry_present(ctx, find_exchange(ctx, exchange).has_value(), std::move(exchange_key), key);
  co_return present;
}

task<> bind(channel_context& ctx, std::string queue, wire::queue_bind m) {
  static constexpr auto key = wire::queue_bind::key;
  const std::string exchange = m.exchange;
  auto present = co_await binding_ends(ctx, queue, exchange, key);
  if (!present) co_return;
  auto kind = find_exchange(ctx, exchange);
  if (!*present || !kind) {
    co_return ctx.fail(wire::reply_code::not_found, "no exchange " + quoted(exchange) + in_vhost(ctx), key,
                       "declare it first");
  }
  // Validates the key against the kind: what NATS cannot express is refused.
  auto filters = routing::binding_filters(exchange, kind->kind, m.routing_key);
  if (!filters) co_return ctx.refuse(filters.error(), key);
  // A binding routes what is published after it, this channel's earlier publishes not. The
  // mirror learns it from the bucket write, with its window.
  co_await publishes_answered(ctx);
  broker* b = &ctx.state();
  auto add = [b, bus = ctx.bus_ptr(), queue, exchange, routing_key = m.routing_key] {
    return store::add_binding(*b, *bus, queue, exchange, routing_key);
  };
  auto r = co_await ctx.on_bus(key, std::move(add));
  if (auto* f = std::get_if<bus::bus_error>(&r)) co_return bus_failed(ctx, *f, key);
  if (std::get<store::update_status>(r) == store::update_status::absent) co_return no_queue(ctx, queue, key);
  if (!m.no_wait) ctx.reply(wire::queue_bind_ok{});
}

task<> unbind(channel_context& ctx, std::string queue, wire::queue_unbind m) {
  static constexpr auto key = wire::queue_unbind::key;
  const std::string exchange = m.exchange;
  auto present = co_await binding_ends(ctx, queue, exchange, key);
  if (!present) co_return;
  if (!*present) co_return ctx.fail(wire::reply_code::not_found, "no exchange " + quoted(exchange) + in_vhost(ctx), key);
  // Unbinding what is not bound succeeds, as in RabbitMQ. What this channel published before
  // stays routed through the binding.
  co_await publishes_answered(ctx);
  broker* b = &ctx.state();
  auto remove = [b, bus = ctx.bus_ptr(), queue, exchange, routing_key = m.routing_key] {
    return store::remove_binding(*b, *bus, queue, exchange, routing_key);
  };
  auto failed = co_await ctx.on_bus(key, std::move(remove));
  if (failed) co_return bus_failed(ctx, *failed, key);
  ctx.reply(wire::queue_unbind_ok{});
}

task<> purge(channel_context& ctx, std::string queue, bool no_wait) {
  static constexpr auto key = wire::queue_purge::key;
  const bool there = co_await queue_there(ctx, queue, key);
  if (!there) co_return;
  if (ctx.state().type_of(queue) == routing::queue_type::stream) {
    co_return ctx.fail_connection(wire::reply_code::not_implemented,
                                  "queue.purge not supported by stream queues queue " + quoted(queue) + in_vhost(ctx), key,
                                  "a stream queue keeps its messages for every reader; its x-max-age and "
                                  "x-max-length-bytes drop the oldest, or delete the queue");
  }
  // What this channel published before the purge is purged too.
  co_await publishes_answered(ctx);
  broker* b = &ctx.state();
  auto empty = [b, bus = ctx.bus_ptr(), queue] { return store::purge(*b, *bus, queue); };
  auto purged = co_await ctx.on_bus(key, std::move(empty));
  if (auto* f = std::get_if<bus::bus_error>(&purged)) co_return bus_failed(ctx, *f, key);
  if (!no_wait) ctx.reply(wire::queue_purge_ok{clamp32(std::get<std::uint64_t>(purged))});
}

task<> delete_queue(channel_context& ctx, std::string queue, wire::queue_delete_ m) {
  static constexpr auto key = wire::queue_delete_::key;
  auto answer = [&ctx, no_wait = m.no_wait](std::uint64_t count) {
    if (!no_wait) ctx.reply(wire::queue_delete_ok{clamp32(count)});
  };
  const auto queue_key = routing::queue_key(queue);
  auto present = co_await entry_present(ctx, find(ctx, queue).has_value(), queue_key, key);
  if (!present) co_return;
  if (!*present) co_return answer(0);  // RabbitMQ: deleting what is absent succeeds
  if (!usable(ctx, queue, key)) co_return;
  // Consumers of this process only (HIP-1326, "Two facts a single process cannot answer for the
  // fleet"): a lower bound with replicas.
  if (m.if_unused && ctx.state().consumer_count(queue) > 0) {
    co_return ctx.fail(wire::reply_code::precondition_failed, "queue " + quoted(queue) + in_vhost(ctx) + " in use",
                       key, "cancel its consumers first, or delete it without if-unused");
  }
  // if-empty and the count see what this channel published before.
  co_await publishes_answered(ctx);
  broker* b = &ctx.state();
  const bool stream = b->type_of(queue) == routing::queue_type::stream;
  // RabbitMQ answers 0 for a stream queue, whatever it held.
  auto count_pending = [bus = ctx.bus_ptr(), queue, stream]() -> count_or_failure {
    if (stream) return std::uint64_t{0};
    return store::pending_messages(*bus, queue);
  };
  auto pending = co_await ctx.on_bus(key, std::move(count_pending));
  if (auto* f = std::get_if<bus::bus_error>(&pending)) co_return bus_failed(ctx, *f, key);
  const auto count = std::get<std::uint64_t>(pending);
  if (m.if_empty && count > 0) {
    co_return ctx.fail(wire::reply_code::precondition_failed, "queue " + quoted(queue) + in_vhost(ctx) + " not empty",
                       key, "purge it first, or delete it without if-empty");
  }
  // Local first: consumers here get basic.cancel; then the bus.
  ctx.state().forget_queue(queue);
  ctx.state().deletion_started(queue);
  auto remove = [b, bus = ctx.bus_ptr(), queue_key, queue, stream] {
    auto failed = store::remove_entry(*b, *bus, queue_key);
    // Its stream goes with it (its readers with the stream); the feeder stopped with forget_queue.
    if (!failed && stream) {
      if (auto dropped = bus->delete_queue_stream(routing::consumer_name(queue)); !dropped) failed = dropped.error();
    }
    b->deletion_finished(queue);
    return failed;
  };
  auto failed = co_await ctx.on_bus(key, std::move(remove));
  if (failed) co_return bus_failed(ctx, *failed, key);
  answer(count);
}

}  // namespace

void on_queue_declare(channel_context& ctx, wire::queue_declare m, turn method_turn) {
  static constexpr auto key = wire::queue_declare::key;
  std::string name = m.queue;
  const bool server_named = name.empty() && !m.passive;
  if (name.empty()) {
    if (m.passive) {
      auto last = ctx.resolve_queue(name, key);
      if (!last) return;
      name = *last;
    } else {
      name = routing::generate_queue_name(names(ctx));
    }
  }
  if (m.passive && name == routing::direct_reply_queue) {
    // RabbitMQ's direct reply-to pseudo-queue: always there, never holding anything.
    if (!m.no_wait) ctx.reply(wire::queue_declare_ok{name, 0, 0});
    return;
  }
  // A name the server chose may hold its own prefix; one a client chooses may not.
  const auto bad = m.passive || server_named ? routing::check_name(names(ctx), "queue", name)
                                             : routing::check_new_name(names(ctx), "queue", name);
  if (bad) return ctx.refuse(*bad, key);
  if (m.passive) return ctx.spawn(key, declare_passive(ctx, name, m.no_wait), std::move(method_turn));
  const auto& vhost = ctx.state().config().vhost;
  auto current = find(ctx, name);
  // What RabbitMQ refuses a quorum queue it is about to create comes first (an existing one is
  // only compared): a quorum queue with x-max-priority is its 406, not our 540.
  if (!current) {
    auto refused = refused_by_queue_type(m.arguments, m.durable, m.exclusive, m.auto_delete, server_named, name, vhost);
    if (refused) return ctx.fail(wire::reply_code::precondition_failed, *refused, key);
  }
  if (auto refused = refused_queue_argument(m.arguments))
    return ctx.fail(wire::reply_code::not_implemented, *refused, key);
  if (!usable(ctx, name, key)) return;
  routing::queue_def wanted{m.durable, m.exclusive, m.auto_delete, {}};
  std::string invalid;
  if (!read_queue_arguments(m.arguments, name, vhost, names(ctx), wanted, invalid))
    return ctx.fail(wire::reply_code::precondition_failed, invalid, key);
  if (current) {
    if (!equivalent(ctx, name, *current, wanted)) return;
    broker::count(ctx.state().message_counters().queues_declared);
    return ctx.spawn(key, answer_declare(ctx, name, m.no_wait), std::move(method_turn));
  }
  ctx.spawn(key, declare_new(ctx, name, std::move(wanted), m.no_wait), std::move(method_turn));
}

void on_queue_bind(channel_context& ctx, wire::queue_bind m, turn method_turn) {
  static constexpr auto key = wire::queue_bind::key;
  auto queue = queue_name(ctx, m.queue, key);
  if (!queue) return;
  if (m.exchange.empty()) {
    return ctx.fail(wire::reply_code::access_refused, "operation not permitted on the default exchange", key,
                    "every queue is bound to it under its own name already");
  }
  if (auto bad = routing::check_name(names(ctx), "exchange", m.exchange)) return ctx.refuse(*bad, key);
  ctx.spawn(key, bind(ctx, std::move(*queue), std::move(m)), std::move(method_turn));
}

void on_queue_unbind(channel_context& ctx, wire::queue_unbind m, turn method_turn) {
  static constexpr auto key = wire::queue_unbind::key;
  auto queue = queue_name(ctx, m.queue, key);
  if (!queue) return;
  if (m.exchange.empty()) {
    return ctx.fail(wire::reply_code::access_refused, "operation not permitted on the default exchange", key,
                    "a queue's binding to it is implicit and cannot be removed");
  }
  if (auto bad = routing::check_name(names(ctx), "exchange", m.exchange)) return ctx.refuse(*bad, key);
  ctx.spawn(key, unbind(ctx, std::move(*queue), std::move(m)), std::move(method_turn));
}

void on_queue_purge(channel_context& ctx, wire::queue_purge m, turn method_turn) {
  static constexpr auto key = wire::queue_purge::key;
  auto queue = queue_name(ctx, m.queue, key);
  if (!queue) return;
  ctx.spawn(key, purge(ctx, std::move(*queue), m.no_wait), std::move(method_turn));
}

void on_queue_delete(channel_context& ctx, wire::queue_delete_ m, turn method_turn) {
  static constexpr auto key = wire::queue_delete_::key;
  auto queue = queue_name(ctx, m.queue, key);
  if (!queue) return;
  if (!usable(ctx, *queue, key)) return;
  ctx.spawn(key, delete_queue(ctx, std::move(*queue), std::move(m)), std::move(method_turn));
}

}  // namespace amqp::broker
