#pragma once
// The channel core's dispatch targets, one file per AMQP class (style: one handler per class).
// Each handler answers its method or fails the channel. One that takes a `turn` hands it to the
// coroutine it spawns for its bus work (channel_context.hpp, spawn); the others answer before
// they return.
#include "amqp/wire/methods.hpp"

namespace amqp::broker {

class channel_context;
class turn;

// exchange.cpp
void on_exchange_declare(channel_context& ctx, wire::exchange_declare m, turn method_turn);
void on_exchange_delete(channel_context& ctx, wire::exchange_delete_ m, turn method_turn);

// queue.cpp
void on_queue_declare(channel_context& ctx, wire::queue_declare m, turn method_turn);
void on_queue_bind(channel_context& ctx, wire::queue_bind m, turn method_turn);
void on_queue_unbind(channel_context& ctx, wire::queue_unbind m, turn method_turn);
void on_queue_purge(channel_context& ctx, wire::queue_purge m, turn method_turn);
void on_queue_delete(channel_context& ctx, wire::queue_delete_ m, turn method_turn);

// channel_flow.cpp: channel.flow and confirm.select (the two channel-mode switches)
void on_channel_flow(channel_context& ctx, wire::channel_flow m);
void on_confirm_select(channel_context& ctx, wire::confirm_select m);

// refusals.cpp: what HIP-1326's "What is not implemented, and how it says so" refuses, and
// methods a client never sends on a channel.
void refuse_exchange_binding(channel_context& ctx, wire::method_key method);
void refuse_transactions(channel_context& ctx, wire::method_key method);
void refuse_unexpected(channel_context& ctx, wire::method_key method);

}  // namespace amqp::broker
