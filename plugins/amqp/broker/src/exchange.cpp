// exchange.declare and exchange.delete (exchange.bind/unbind are refused in refusals.cpp).
#include <optional>
#include <variant>

#include "amqp/routing/names.hpp"
#include "channel_context.hpp"
#include "handler_support.hpp"
#include "handlers.hpp"

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
    ctx.fail(wire::reply_code::precondition_failed,
             inequivalent(ctx, arg, "exchange", name, received, now), declare_key);
    return false;
  };
  if (current.kind != wanted.kind) {
    return mismatch("type", routing::to_string(wanted.kind), routing::to_string(current.kind));
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

void declared(channel_context& ctx, bool no_wait) {
  if (!no_wait) ctx.reply(wire::exchange_declare_ok{});
}

void declare_passive(channel_context& ctx, const wire::exchange_declare& m, turn method_turn) {
  const std::string name = m.exchange;
  if (name.empty()) return declared(ctx, m.no_wait);  // the default exchange always exists
  // A name reserved to the bus is looked up like any other, and not found.
  if (auto bad = routing::check_name(names(ctx), "exchange", name);
      bad && bad->code != wire::reply_code::access_refused) {
    return ctx.refuse(*bad, declare_key);
  }
  // A question about the bucket: a mirror hit may be an exchange another replica just deleted.
  const bool standard = routing::is_standard_exchange(name);
  find_entry(ctx, standard, routing::exchange_key(name), declare_key,
             [&ctx, name, no_wait = m.no_wait, method_turn](bool present) {
               if (!present) {
                 return ctx.fail(wire::reply_code::not_found,
                                 "no exchange " + quoted(name) +
                                     in_vhost(ctx) + "; declare it first (without passive)",
                                 declare_key);
               }
               declared(ctx, no_wait);
             });
}

void deleted(channel_context& ctx, bool no_wait) {
  if (!no_wait) ctx.reply(wire::exchange_delete_ok{});
}

// Local first, then the bucket (which also drops the exchange's bindings from every queue).
void remove_exchange(channel_context& ctx, const std::string& name, bool no_wait, turn method_turn) {
  ctx.state().write_topology([&](routing::topology& t) { return t.erase_exchange(name); });
  broker* b = &ctx.state();
  ctx.run_on_bus(
      delete_key, [b, bus = ctx.bus_ptr(), name] { return store::remove_entry(*b, *bus, routing::exchange_key(name)); },
      [&ctx, no_wait, method_turn](std::optional<bus::bus_error> failed) {
        if (failed) return bus_failed(ctx, *failed, delete_key);
        deleted(ctx, no_wait);
      });
}

}  // namespace

void on_exchange_declare(channel_context& ctx, wire::exchange_declare m, turn method_turn) {
  if (m.passive) return declare_passive(ctx, m, std::move(method_turn));
  auto kind = routing::parse_exchange_kind(m.type);
  if (!kind) return ctx.refuse(kind.error(), declare_key);
  if (auto bad = routing::check_new_name(names(ctx), "exchange", m.exchange)) return ctx.refuse(*bad, declare_key);

  const std::string name = m.exchange;
  const routing::exchange_def wanted{*kind, m.durable, m.auto_delete, m.internal};
  if (auto current = find(ctx, name)) {
    if (equivalent(ctx, name, *current, wanted)) declared(ctx, m.no_wait);
    return;
  }
  // Local first: this connection's next frame sees it; then the bucket decides who was first.
  ctx.state().write_topology([&](routing::topology& t) { return t.put_exchange(name, wanted); });
  broker* b = &ctx.state();
  ctx.run_on_bus(
      declare_key, [b, bus = ctx.bus_ptr(), name, wanted] { return store::create_exchange(*b, *bus, name, wanted); },
      [&ctx, name, wanted, no_wait = m.no_wait, method_turn](store::create_outcome<routing::exchange_def> outcome) {
        if (auto* f = std::get_if<bus::bus_error>(&outcome)) {
          ctx.state().write_topology([&](routing::topology& t) { return t.erase_exchange(name); });
          return bus_failed(ctx, *f, declare_key);
        }
        if (auto* current = std::get_if<routing::exchange_def>(&outcome)) {
          if (!equivalent(ctx, name, *current, wanted)) return;  // another replica was first
        } else if (store::is_transient(wanted)) {
          ctx.state().remember_transient(routing::exchange_key(name));
        }
        declared(ctx, no_wait);
      });
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

  find_entry(ctx, find(ctx, name).has_value(), routing::exchange_key(name), delete_key,
             [&ctx, name, m, method_turn](bool present) {
               if (!present) return deleted(ctx, m.no_wait);  // RabbitMQ: deleting what is absent succeeds
               if (!m.if_unused) return remove_exchange(ctx, name, m.no_wait, method_turn);
               // "Unused" is the bucket's answer: a binding made through another replica counts.
               ctx.run_on_bus(
                   delete_key, [bus = ctx.bus_ptr(), name] { return store::exchange_in_use(*bus, name); },
                   [&ctx, name, no_wait = m.no_wait, method_turn](std::variant<bool, bus::bus_error> in_use) {
                     if (auto* f = std::get_if<bus::bus_error>(&in_use)) return bus_failed(ctx, *f, delete_key);
                     if (std::get<bool>(in_use)) {
                       return ctx.fail(wire::reply_code::precondition_failed,
                                       "exchange " + quoted(name) +
                                           in_vhost(ctx) + " in use; unbind its queues first, or delete it "
                                           "without if-unused",
                                       delete_key);
                     }
                     remove_exchange(ctx, name, no_wait, method_turn);
                   });
             });
}

}  // namespace amqp::broker
