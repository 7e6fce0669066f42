#pragma once
// Small pieces every topology handler uses: reporting a bus failure, and confirming a mirror
// miss against the bucket.
#include <string>
#include <utility>
#include <variant>

#include "bus_failure.hpp"
#include "channel_context.hpp"
#include "topology_store.hpp"

namespace amqp::broker {

// Which exchange and queue names this process's clients may use (CLOUD_AMQP_NAMES).
inline routing::name_rules names(channel_context& ctx) { return ctx.state().config().names; }

inline std::string in_vhost(channel_context& ctx) { return ctx.state().in_vhost(); }

inline void bus_failed(channel_context& ctx, const bus::bus_error& f, wire::method_key during) {
  ctx.refuse(bus_failure_reply(f.kind, "the bus did not complete the operation", f.text, "retry on a new channel"),
             during);
}

// Calls then(bool present) for a bucket key: at once when the mirror has it, otherwise after
// reading the bucket (the declaration may come from another replica whose watch update is
// still on its way; HIP-1326, "Where it sits", makes the bucket, not the mirror, the truth).
template <class Then>
void find_entry(channel_context& ctx, bool in_mirror, std::string key, wire::method_key during,
                Then then) {
  if (in_mirror) {
    then(true);
    return;
  }
  broker* b = &ctx.state();
  ctx.run_on_bus(
      during, [b, bus = ctx.bus_ptr(), key = std::move(key)] { return store::refresh(*b, *bus, key); },
      [&ctx, during, then = std::move(then)](std::variant<bool, bus::bus_error> found) mutable {
        if (auto* f = std::get_if<bus::bus_error>(&found)) return bus_failed(ctx, *f, during);
        then(std::get<bool>(found));
      });
}

inline std::string quoted(std::string_view name) { return "'" + std::string(name) + "'"; }

// RabbitMQ's "inequivalent arg" sentence, with the remedy.
inline std::string inequivalent(channel_context& ctx, std::string_view arg, std::string_view what,
                                std::string_view name, std::string_view received, std::string_view current) {
  return "inequivalent arg '" + std::string(arg) + "' for " + std::string(what) + " " +
         quoted(name) + in_vhost(ctx) + ": received '" + std::string(received) +
         "' but current is '" + std::string(current) +
         "'; declare it with the arguments it has, or delete it and declare it anew";
}

inline const char* bool_text(bool b) { return b ? "true" : "false"; }

}  // namespace amqp::broker
