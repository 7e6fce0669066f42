// What HIP-1326's "What is not implemented, and how it says so" refuses, each as a channel
// exception naming the remedy (the connection survives), and methods a client never sends on
// an open channel.
#include <string>

#include "channel/channel_context.hpp"
#include "channel/handlers.hpp"

namespace amqp::broker {

void refuse_exchange_binding(channel_context& ctx, wire::method_key method) {
  ctx.fail(wire::reply_code::not_implemented,
           "exchange-to-exchange binding is not implemented; bind the queue to each exchange it "
           "should read",
           method);
}

void refuse_transactions(channel_context& ctx, wire::method_key method) {
  ctx.fail(wire::reply_code::not_implemented,
           "transactions (tx.*) are not implemented; a publish is confirmed one at a time through "
           "confirm.select",
           method);
}

void refuse_unexpected(channel_context& ctx, wire::method_key method) {
  const auto* info = wire::find_method(method);
  std::string name = info != nullptr ? std::string(info->name) : std::string("an unknown method");
  // A client that sends a server's method (or a connection method on a channel) is broken:
  // 503 is a connection exception in the spec.
  ctx.fail_connection(wire::reply_code::command_invalid,
                      name + " is not a method a client sends on an open channel; check the "
                             "client library's protocol state",
                      method);
}

}  // namespace amqp::broker
