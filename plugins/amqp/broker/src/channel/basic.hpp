#pragma once
// The basic and confirm classes of one channel: publishing, consuming, getting, settling.
//
// Design
// -----------------------------------------------------
// After HIP-1326's "A message keeps its properties and stays readable", "Acknowledgement, and
// what bounds a consumer", "What is not implemented, and how it says so" and "What IS
// implemented, and is commonly assumed not to be".
//
// Threads. Everything here runs on the connection's executor (channel_context::executor()).
// The bus calls back through bus::client, which posts to that executor; nothing here blocks
// and nothing here waits for the bus between two methods of the channel.
//
// Publishing (publish/publish.cpp). Checks in RabbitMQ's order: `immediate` (540), the exchange exists
// (404; the bucket is asked on a mirror miss), it is not internal (403), the key is literal
// (406, routing::publish_subject). Its plan (publish/route.hpp) names the queues it reaches; a
// mandatory publish that reaches none is answered by basic.return 312 with the original
// properties and body and stored nowhere. Each queue reached gets a copy on `amqp._.<queue>`,
// body verbatim, property octets base64 in `Amqp-Props`, the publish's subject in
// `Amqp-Routed-As`, and the channel moves on at once (pipelined). Under confirm mode each publish takes the next sequence number and
// publish_confirms decides which basic.ack/nack frames the bus's answers allow: confirms
// are sent from the low watermark up, coalesced with `multiple` only over runs of equal
// outcome, so a client never has a sequence confirmed the wrong way. A bus refusal is a nack
// under confirms; without confirms it is a 541 channel exception, because a publisher that
// asked for no confirmation still must not believe a dropped message was stored. A refusal of
// the connection's user (its permissions on the bus) is 403 either way (bus_failure.hpp).
//
// Consuming (deliver/consumer.hpp). One bus puller per AMQP consumer on the queue's durable, so
// competing consumers split the queue. A consumer keeps the bus asked for what its credit allows:
// credit = min(per-consumer prefetch, its share of the channel-global prefetch) minus what is in
// flight (delivered and unsettled, or asked for and not arrived), so prefetch is a true
// in-flight bound and never a mere fetch size; it asks again once half its window is free, so
// deliveries never wait for a round trip to the bus. A request that expires is re-armed.
// no-ack consumers are unbounded by prefetch (HIP-1326, "Acknowledgement, and what bounds a
// consumer"): what bounds every consumer is the connection's output, while it is backlogged no
// consumer asks for more.
//
// Delivering (deliver/delivery.hpp). exchange/key come from the subject shown (Amqp-Routed-As,
// else the copy's own); redelivered = delivered > 1; a quorum queue's redelivery (and its every basic.get-ok) gets `x-delivery-count` = delivered
// - 1 in the headers table, as RabbitMQ's quorum queues add it; a classic queue's never does
// (its deliveries pass the publisher's octets verbatim). Method + header + body frames are one
// send; delivery tags are allocated per channel from 1 at the moment the delivery is handed
// to the connection, which writes in call order: tags reach the socket in allocation order.
//
// Settling (settle/settle.cpp). ack → bus ack; reject/nack requeue → nak; requeue=false → term, or dead-lettered
// first when the queue has a dead-letter exchange (housekeeping/dead_letter.hpp). `multiple`
// covers every outstanding tag <= N (0 = all), an empty multiple is fine; a single unknown tag
// is 406 "unknown delivery tag N" and the channel closes (RabbitMQ). basic.recover, with
// either requeue value, naks everything outstanding (the bus redelivers to whichever consumer
// pulls next: there is no way to pin a message to its former consumer) and answers
// recover-ok; recover-async is 540 with its remedy. What is requeued at once is NAK'ed in
// stream order: the bus redelivers in NAK order, ahead of what it never delivered.
//
// Cancelling. basic.cancel ends the consumer's open pull requests (the bus has no other way to
// cancel one: its inbox loses interest); what the bus had already sent is delivered before
// cancel-ok, as RabbitMQ delivers what it had sent before the cancel, and nothing after it.
// Its unsettled deliveries stay outstanding: the client may still settle them.
//
// Closing. closed() naks every outstanding delivery at once (never left to the ack wait),
// stops every consumer and removes it from the broker's registry (auto-delete
// happens there). What a stopped consumer's requests still bring goes straight back.
//
// Decisions where RabbitMQ and the reference differ:
// - A duplicate consumer tag on a channel is RabbitMQ's connection-level 530 NOT_ALLOWED
//   ("attempt to reuse consumer tag"), not the reference's channel-level 530.
// - The exclusive-consumer flag is honoured within this process (403 ACCESS_REFUSED when the
//   queue has another consumer, or when an exclusive consumer holds it), as RabbitMQ; like
//   exclusive queues (HIP-1326, "Two facts a single process cannot answer for the fleet") it is
//   not a guarantee across replicas.
// - An unknown tag on nack/reject reports nack/reject, not basic.ack (the reference's bug).
// - basic.get waits for this channel's publishes still on their way to the bus before it
//   pulls, so publish-then-get on one channel sees the message, as on RabbitMQ; the pull is a
//   no_wait request, so an empty queue is answered get-empty at once (the reference waits 1 s);
//   after a confirmed publish it first waits for the bus to count it (get_request).
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "channel/channel_context.hpp"
#include "deliver/consumer.hpp"
#include "publish/publish_confirms.hpp"

namespace amqp::broker {

class get_request;  // deliver/consume.cpp: one basic.get in progress

// RabbitMQ's direct reply-to on one channel: its no-ack consumer of amq.rabbitmq.reply-to, and
// the bus subject its replies come to (routing/subject.hpp).
struct direct_reply {
  std::string tag;
  std::string token;  // the reply address's last word
  std::shared_ptr<bus::direct_subscription> subscription;
};

// A delivery the client has not settled yet.
struct outstanding_delivery {
  std::string reply;                   // the bus's ack subject
  std::uint64_t stream_seq = 0;        // its place in the queue (requeues go back in this order)
  std::shared_ptr<consumer> owner;     // null for basic.get: no credit to release
  std::string got_from;                // basic.get's queue (a consumer's is owner->queue())
  bool stream = false;                 // a stream queue's: nothing to settle on the bus, never requeued
  const std::string& queue() const { return owner ? owner->queue() : got_from; }
};

// The channel's basic/confirm state. basic_class::state (private to the core's class) is this
// type, so the helpers in deliver/ and publish/ can name it.
struct basic_state {
  explicit basic_state(channel_context& c) : ctx(c) {}

  channel_context& ctx;

  // ---- consuming
  std::map<std::string, std::shared_ptr<consumer>> consumers;  // by consumer tag
  std::uint16_t prefetch_count = 0;   // per consumer, for consumers created after basic.qos
  std::shared_ptr<credit_pool> global = std::make_shared<credit_pool>();  // channel-wide
  std::uint64_t next_tag = 0;         // the last delivery tag allocated
  std::map<std::uint64_t, outstanding_delivery> outstanding;
  std::shared_ptr<get_request> get;  // the basic.get in progress, if any
  std::shared_ptr<direct_reply> reply;  // the channel's consumer of amq.rabbitmq.reply-to, if any
  // A consumer tag this channel uses (a queue's consumer, or the reply consumer).
  bool uses_tag(const std::string& tag) const { return consumers.contains(tag) || (reply && reply->tag == tag); }

  // ---- publishing
  publish_confirms confirms;
  std::uint64_t publishes_in_flight = 0;           // handed to the bus, not yet answered
  std::size_t publish_cost_in_flight = 0;          // their cost, as told to the connection
  std::deque<std::function<void()>> after_publishes;  // work waiting for in-flight == 0
};

struct basic_class::state : basic_state {
  using basic_state::basic_state;
};

// Re-arms every consumer's pulls (credit was released, possibly channel-wide).
void pump_consumers(basic_state& s);
// Requeues everything the channel holds outstanding, in stream order (settle/settle.cpp).
void requeue_all(basic_state& s);
// dead_letter.hpp's passed_over, on the channel's executor.
bool passed_over(basic_state& s, const std::string& queue, bus::delivery& d);
// Hands a bus delivery to the client: allocates the tag, records it outstanding unless
// no-ack, writes method + header + bodies as one unit, with x-delivery-count as `shown` says.
// Returns the tag.
std::uint64_t deliver(basic_state& s, const std::string& consumer_tag, bool no_ack,
                      const std::shared_ptr<consumer>& owner, bus::delivery d, delivery_count shown,
                      std::optional<std::uint64_t> stream_offset = std::nullopt);

}  // namespace amqp::broker
