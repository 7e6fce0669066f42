// The channel's two mode switches: channel.flow and confirm.select.
#include "channel/channel_context.hpp"
#include "channel/handlers.hpp"

namespace amqp::broker {

void on_channel_flow(channel_context& ctx, wire::channel_flow m) {
  if (!m.active) {
    // Pausing a whole channel's deliveries is not implemented (HIP-1326, "What is not
    // implemented, and how it says so").
    ctx.fail(wire::reply_code::not_implemented,
             "channel.flow(active=false) is not implemented; pause a consumer with basic.cancel "
             "or bound it with basic.qos",
             wire::channel_flow::key);
    return;
  }
  ctx.reply(wire::channel_flow_ok{true});
}

void on_confirm_select(channel_context& ctx, wire::confirm_select m) {
  // Repeating it is harmless (RabbitMQ answers select-ok again); sequence numbering is the
  // publish side's and is not reset by a repeat.
  ctx.confirms = true;
  if (!m.no_wait) ctx.reply(wire::confirm_select_ok{});
}

}  // namespace amqp::broker
