#pragma once
// Small pieces every topology handler uses: reporting a bus failure, confirming a mirror miss
// against the bucket, and waiting for the channel's publishes.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "channel/bus_failure.hpp"
#include "channel/channel_context.hpp"
#include "topology/topology_store.hpp"

namespace amqp::broker {

// Which exchange and queue names this process's clients may use (CLOUD_AMQP_NAMES).
inline routing::name_rules names(channel_context& ctx) { return ctx.state().config().names; }

inline std::string in_vhost(channel_context& ctx) { return ctx.state().in_vhost(); }

inline void bus_failed(channel_context& ctx, const bus::bus_error& f, wire::method_key during) {
  ctx.refuse(bus_failure_reply(f.kind, "the bus did not complete the operation", f.text, "retry on a new channel"),
             during);
}

// Whether a bucket key is there: at once when the mirror has it, otherwise the bucket's answer
// (the declaration may come from another replica whose watch update is still on its way;
// HIP-1326, "Where it sits", makes the bucket, not the mirror, the truth). nullopt: the bus
// failed, and so did the channel.
inline task<std::optional<bool>> entry_present(channel_context& ctx, bool in_mirror, std::string key,
                                              wire::method_key during) {
  if (in_mirror) co_return true;
  broker* b = &ctx.state();
  auto refresh = [b, bus = ctx.bus_ptr(), key = std::move(key)] { return store::refresh(*b, *bus, key); };
  auto found = co_await ctx.on_bus(during, std::move(refresh));
  if (auto* f = std::get_if<bus::bus_error>(&found)) {
    bus_failed(ctx, *f, during);
    co_return std::nullopt;
  }
  co_return std::get<bool>(found);
}

// Inside a handler, for a callback API: `co_await until_called<Args...>(ctx, start)` calls
// start(done) and resumes once done(args...) is called, on the channel's executor (posted: never
// inside the co_await that started it); never, when the channel is no longer open by then.
template <class... Args, class Start>
auto until_called(channel_context& ctx, Start start) {
  return boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&, void(Args...)>(
      [&ctx](auto handler, Start begin) {
        auto resume = std::make_shared<decltype(handler)>(std::move(handler));
        begin([resume, weak = ctx.weak_from_this()](Args... args) {
          auto channel = weak.lock();
          if (!channel) return;
          boost::asio::post(channel->executor(), [resume, weak, args...]() mutable {
            if (auto c = weak.lock(); c && c->is_open()) (*resume)(std::move(args)...);
          });
        });
      },
      boost::asio::use_awaitable, std::move(start));
}

// Resumes once every publish this channel handed to the bus so far was answered
// (basic_class::after_publishes).
inline auto publishes_answered(channel_context& ctx) {
  return until_called<>(ctx, [&ctx](std::function<void()> done) { ctx.basic().after_publishes(std::move(done)); });
}

inline std::string quoted(std::string_view name) { return "'" + std::string(name) + "'"; }

// RabbitMQ's "inequivalent arg" text with both values as it shows them: quoted when both sides
// have one; when one side has none, "none" and "the value 'v' of type 't'" for the other.
inline std::string inequivalent_shown(channel_context& ctx, std::string_view arg, std::string_view what,
                                      std::string_view name, std::string_view received, std::string_view current) {
  return "inequivalent arg '" + std::string(arg) + "' for " + std::string(what) + " " + quoted(name) +
         in_vhost(ctx) + ": received " + std::string(received) + " but current is " + std::string(current);
}
// RabbitMQ's "inequivalent arg" text for two values; its remedy, inequivalent_remedy, goes to the log.
inline std::string inequivalent(channel_context& ctx, std::string_view arg, std::string_view what,
                                std::string_view name, std::string_view received, std::string_view current) {
  return inequivalent_shown(ctx, arg, what, name, quoted(received), quoted(current));
}
inline constexpr std::string_view inequivalent_remedy =
    "declare it with the arguments it has, or delete it and declare it anew";
// The remedy for RabbitMQ's "cannot obtain exclusive access to locked queue" (broker::may_use).
inline constexpr std::string_view locked_remedy =
    "use an exclusive queue from the connection that declared it, declared with the same exclusive flag, or "
    "declare a queue of your own";

inline const char* bool_text(bool b) { return b ? "true" : "false"; }

}  // namespace amqp::broker
