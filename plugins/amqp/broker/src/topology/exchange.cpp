// exchange.declare and exchange.delete (exchange.bind/unbind are refused in refusals.cpp).
#include <optional>
#include <variant>

#include "amqp/routing/names.hpp"
#include "channel/channel_context.hpp"
#include "publish/delayed_delivery.hpp"
#include "channel/handler_support.hpp"
#include "channel/handlers.hpp"

namespace amqp::broker {
namespace {

constexpr auto declare_key = wire::exchange_declare::key;
constexpr auto delete_key = wire::exchange_delete_::key;

std::optional<routing::exchange_def> find(channel_context& ctx, const std::string& name) {
  return ctx.state().read_topology([&](const routing::topology& t) -> std::optional<routing::exchange_def> {
    const auto* def = t.find_exchange(name);
    if (def == nullptr) return std::nullopt;
    return *def;
  });
}

// RabbitMQ compares type, durable, auto-delete and internal on a re-declaration.
bool equivalent(channel_context& ctx, const std::string& name, const routing::exchange_def& current,
                const routing::exchange_def& wanted) {
  auto mismatch = [&](std::string_view arg, std::string_view received, std::string_view now) {
    ctx.fail(wire::reply_code::precondition_failed, inequivalent(ctx, arg, "exchange", name, received, now),
             declare_key, inequivalent_remedy);
    return false;
  };
  if (current.delayed != wanted.delayed || (current.kind != wanted.kind && !current.delayed)) {
    return mismatch("type", routing::type_name(wanted), routing::type_name(current));
  }
  if (current.kind != wanted.kind) {
    return mismatch("x-delayed-type", routing::to_string(wanted.kind), routing::to_string(current.kind));
  }
  if (current.durable != wanted.durable) {
    return mismatch("durable", bool_text(wanted.durable), bool_text(current.durable));
  }
  if (current.auto_delete != wanted.auto_delete) {
    return mismatch("auto_delete", bool_text(wanted.auto_delete), bool_text(current.auto_delete));
  }
  if (current.internal != wanted.internal) {
    return mismatch("internal", bool_text(wanted.internal), bool_text(current.internal));
  }
  return true;
}

// The exchange a declaration asks for. x-delayed-message routes as its x-delayed-type says (the
// plugin's 406 text, typos kept, when there is none); alternate-exchange is not built.
wire::result<routing::exchange_def> declared_exchange(const wire::exchange_declare& m) {
  if (wire::find(m.arguments, "alternate-exchange")) {
    return wire::refusal{wire::reply_code::not_implemented,
                         "exchange argument 'alternate-exchange' is not implemented; publish with mandatory and "
                         "handle basic.return to learn of messages nothing is bound for"};
  }
  routing::exchange_def def{routing::exchange_kind::direct, m.durable, m.auto_delete, m.internal};
  std::string_view type = m.type;
  if (type == routing::delayed_exchange_type) {
    const auto* routed_as = wire::find(m.arguments, "x-delayed-type");
    const auto* text = routed_as ? std::get_if<std::string>(&routed_as->value) : nullptr;
    if (text == nullptr) {
      return wire::refusal{wire::reply_code::precondition_failed,
                           "Invalid argument, 'x-delayed-type' must bean existing exchnage type",
                           "declare it with the argument x-delayed-type set to direct, fanout or topic"};
    }
    def.delayed = true;
    type = *text;
  }
  auto kind = routing::parse_exchange_kind(type);
  if (!kind) return kind.error();
  def.kind = *kind;
  return def;
}

void declared(channel_context& ctx, bool no_wait) {
  if (!no_wait) ctx.reply(wire::exchange_declare_ok{});
}

task<> declare_passive(channel_context& ctx, wire::exchange_declare m) {
  const std::string name = m.exchange;
  if (name.empty()) co_return declared(ctx, m.no_wait);  // the default exchange always exists
  // A name reserved to the bus is looked up like any other, and not found.
  if (auto bad = routing::check_name(names(ctx), "exchange", name);
      bad && bad->code != wire::reply_code::access_refused) {
    co_return ctx.refuse(*bad, declare_key);
  }
  // A question about the bucket: a mirror hit may be an exchange another replica just deleted.
  const bool standard = routing::is_standard_exchange(name);
  auto key = routing::exchange_key(name);
  auto present = co_await entry_present(ctx, standard, std::move(key), declare_key);
  if (!present) co_return;
  if (!*present) {
    co_return ctx.fail(wire::reply_code::not_found, "no exchange " + quoted(name) + in_vhost(ctx), declare_key,
                       "declare it first (without passive)");
  }
  declared(ctx, m.no_wait);
}

task<> declare(channel_context& ctx, wire::exchange_declare m, routing::exchange_def wanted) {
  const std::string name = m.exchange;
  if (auto current = find(ctx, name)) {
    if (equivalent(ctx, name, *current, wanted)) declared(ctx, m.no_wait);
    co_return;
  }
  // Local first: this connection's next frame sees it; then the bucket decides who was first.
  ctx.state().write_topology([&](routing::topology& t) { return t.put_exchange(name, wanted); });
  broker* b = &ctx.state();
  auto create = [b, bus = ctx.bus_ptr(), name, wanted] { return store::create_exchange(*b, *bus, name, wanted); };
  auto outcome = co_await ctx.on_bus(declare_key, std::move(create));
  if (auto* f = std::get_if<bus::bus_error>(&outcome)) {
    ctx.state().write_topology([&](routing::topology& t) { return t.erase_exchange(name); });
    co_return bus_failed(ctx, *f, declare_key);
  }
  if (auto* current = std::get_if<routing::exchange_def>(&outcome)) {
    if (!equivalent(ctx, name, *current, wanted)) co_return;  // another replica was first
  } else if (store::is_transient(wanted)) {
    ctx.state().remember_transient(routing::exchange_key(name));
  }
  declared(ctx, m.no_wait);
}

void deleted(channel_context& ctx, bool no_wait) {
  if (!no_wait) ctx.reply(wire::exchange_delete_ok{});
}

task<> delete_exchange(channel_context& ctx, wire::exchange_delete_ m) {
  const std::string name = m.exchange;
  auto key = routing::exchange_key(name);
  auto present = co_await entry_present(ctx, find(ctx, name).has_value(), key, delete_key);
  if (!present) co_return;
  if (!*present) co_return deleted(ctx, m.no_wait);  // RabbitMQ: deleting what is absent succeeds
  if (m.if_unused) {
    // "Unused" is the bucket's answer: a binding made through another replica counts.
    auto look = [bus = ctx.bus_ptr(), name] { return store::exchange_in_use(*bus, name); };
    auto in_use = co_await ctx.on_bus(delete_key, std::move(look));
    if (auto* f = std::get_if<bus::bus_error>(&in_use)) co_return bus_failed(ctx, *f, delete_key);
    if (std::get<bool>(in_use)) {
      co_return ctx.fail(wire::reply_code::precondition_failed, "exchange " + quoted(name) + in_vhost(ctx) + " in use",
                         delete_key, "unbind its queues first, or delete it without if-unused");
    }
  }
  // Local first, then the bucket (which also drops the exchange's bindings from every queue).
  const auto current = find(ctx, name);
  ctx.state().write_topology([&](routing::topology& t) { return t.erase_exchange(name); });
  broker* b = &ctx.state();
  auto remove = [b, bus = ctx.bus_ptr(), key] { return store::remove_entry(*b, *bus, key); };
  auto failed = co_await ctx.on_bus(delete_key, std::move(remove));
  if (failed) co_return bus_failed(ctx, *failed, delete_key);
  // The plugin's delayed messages go with their exchange.
  if (current && current->delayed) {
    auto drop = [bus = ctx.bus_ptr(), waiting = delayed_subject_prefix(name) + ".>"]() -> std::optional<bus::bus_error> {
      auto dropped = bus->purge_subject(waiting);
      if (dropped) return std::nullopt;
      return dropped.error();
    };
    auto not_dropped = co_await ctx.on_bus(delete_key, std::move(drop));
    if (not_dropped) co_return bus_failed(ctx, *not_dropped, delete_key);
  }
  deleted(ctx, m.no_wait);
}

}  // namespace

void on_exchange_declare(channel_context& ctx, wire::exchange_declare m, turn method_turn) {
  if (m.passive) return ctx.spawn(declare_key, declare_passive(ctx, std::move(m)), std::move(method_turn));
  auto wanted = declared_exchange(m);
  if (!wanted) return ctx.refuse(wanted.error(), declare_key);
  if (auto bad = routing::check_new_name(names(ctx), "exchange", m.exchange)) return ctx.refuse(*bad, declare_key);
  ctx.spawn(declare_key, declare(ctx, std::move(m), *wanted), std::move(method_turn));
}

void on_exchange_delete(channel_context& ctx, wire::exchange_delete_ m, turn method_turn) {
  const std::string name = m.exchange;
  if (name.empty() || routing::is_standard_exchange(name)) {
    return ctx.fail(wire::reply_code::access_refused,
                    "operation not permitted on the " +
                        (name.empty() ? std::string("default exchange") : "standard exchange " + quoted(name)) +
                        "; it always exists and cannot be deleted",
                    delete_key);
  }
  // The 'amq.' prefix is the server's to delete as well as to declare.
  if (auto bad = routing::check_new_name(names(ctx), "exchange", name)) return ctx.refuse(*bad, delete_key);
  ctx.spawn(delete_key, delete_exchange(ctx, std::move(m)), std::move(method_turn));
}

}  // namespace amqp::broker
