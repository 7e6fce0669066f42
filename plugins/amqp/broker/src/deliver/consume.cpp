// The basic class, consuming side: qos, consume, cancel, get, and the channel's end. The design is
// described at the top of channel/basic.hpp; publishing is publish/publish.cpp, settling
// settle/settle.cpp.
#include "channel/basic.hpp"

#include <algorithm>
#include <utility>

#include "amqp/routing/names.hpp"
#include "amqp/routing/subject.hpp"
#include "amqp/routing/topology.hpp"
#include "deliver/consume_arguments.hpp"
#include "housekeeping/dead_letter.hpp"
#include "deliver/delivery.hpp"
#include "channel/handler_support.hpp"
#include "topology/topology_store.hpp"

namespace amqp::broker {
namespace {

// RabbitMQ's shape: "amq.ctag-" and 22 URL-safe characters, unique enough to never collide
// with a tag a client chose or another server tag on the channel.
std::string generated_tag() { return "amq.ctag-" + routing::random_word(22); }

void reuse_of_tag(channel_context& ctx, const std::string& tag) {
  // RabbitMQ raises this on the connection.
  ctx.fail_connection(wire::reply_code::not_allowed, "attempt to reuse consumer tag " + quoted(tag),
                      wire::basic_consume::key,
                      "choose another tag on this channel, or leave it empty for a server-generated one");
}

// basic.consume of amq.rabbitmq.reply-to: the channel's replies come to a bus subject of its
// own, and each is handed over once, no-ack, as RabbitMQ's direct reply-to does.
void consume_direct_reply(basic_state& s, const wire::basic_consume& m) {
  constexpr auto during = wire::basic_consume::key;
  if (!m.no_ack) {
    return s.ctx.fail(wire::reply_code::precondition_failed,
                      "reply consumer cannot acknowledge; consume amq.rabbitmq.reply-to with no-ack", during);
  }
  if (s.reply) {
    return s.ctx.fail(wire::reply_code::precondition_failed,
                      "reply consumer already set; a channel has one: cancel it, or use another channel", during);
  }
  std::string tag = m.consumer_tag.empty() ? generated_tag() : m.consumer_tag;
  if (s.uses_tag(tag)) return reuse_of_tag(s.ctx, tag);
  auto reply = std::make_shared<direct_reply>(direct_reply{tag, routing::random_word(22), nullptr});
  // What comes after the channel went, or after a cancel, is dropped: nothing is stored.
  reply->subscription = s.ctx.bus().subscribe_direct(
      routing::direct_reply_subject_of(reply->token), s.ctx.executor(),
      [&s, weak = std::weak_ptr<direct_reply>(reply)](bus::delivery d) {
        auto r = weak.lock();
        if (!r || s.reply != r || s.ctx.is_closed()) return;
        // Addressed as RabbitMQ delivers it: the default exchange, the reply address as the key.
        d.subject = "amqp._." + routing::direct_reply_address(r->token);
        deliver(s, r->tag, true, nullptr, std::move(d), delivery_count::never);  // a reply is no queue's
      });
  if (!reply->subscription) {
    return s.ctx.fail(wire::reply_code::internal_error,
                      "the bus did not take the reply consumer's subscription; retry on a new channel", during);
  }
  s.reply = std::move(reply);
  if (!m.no_wait) s.ctx.reply(wire::basic_consume_ok{tag});
}

// Detaches a consumer from the channel and from the broker's registry.
void drop_consumer(basic_state& s, consumer& c, bool registered) {
  c.stop();
  if (registered) s.ctx.state().remove_consumer(c.queue(), s.ctx, c.tag());
}

// Whether `queue` exists and this connection may use it; the channel fails otherwise (404 absent,
// 405 another connection's exclusive queue). Under limits retention its first reader makes its bus
// consumer (broker::make_consumer): a refusal (credentials, the bus's consumer limit) fails the
// channel; a bus that did not answer (a leader being elected) leaves it to the reader's pulls,
// which make it again until it is there.
task<bool> usable_queue(channel_context& ctx, const std::string& queue, wire::method_key during) {
  const bool in_mirror =
      ctx.state().read_topology([&](const routing::topology& t) { return t.find_queue(queue) != nullptr; });
  auto key = routing::queue_key(queue);
  auto present = co_await entry_present(ctx, in_mirror, std::move(key), during);
  if (!present) co_return false;
  if (!*present) {
    ctx.fail(wire::reply_code::not_found, "no queue " + quoted(queue) + in_vhost(ctx), during, "declare it first");
    co_return false;
  }
  std::string sentence;
  if (!ctx.state().may_use(queue, ctx.connection_id(), sentence)) {
    ctx.fail(wire::reply_code::resource_locked, sentence, during, locked_remedy);
    co_return false;
  }
  if (ctx.state().type_of(queue) == routing::queue_type::stream || ctx.state().consumer_made(queue)) co_return true;
  auto make = [b = &ctx.state(), bus = ctx.bus_ptr(), queue] { return b->make_consumer(*bus, queue); };
  auto made = co_await ctx.on_bus(during, std::move(make));
  if (!made && (made.error().kind == bus::bus_errc::denied || made.error().kind == bus::bus_errc::limit)) {
    bus_failed(ctx, made.error(), during);
    co_return false;
  }
  co_return true;
}

}  // namespace

// One basic.get: a no-wait pull of one message, answered get-ok, or get-empty as soon as the
// bus says nothing is ready for it (404, or 408 when other consumers' requests already claim
// what is pending), as RabbitMQ answers at once. Owned by the channel (basic_state::get), with
// a puller of its own: an answer that comes after the channel went goes back to the queue.
//
// A no-wait pull finds only what the queue's consumer has counted, and the bus confirms a
// publish before that: after a confirm, the get first waits for the bus to count the publishes
// (bus::client::count_publishes).
class get_request final : public std::enable_shared_from_this<get_request> {
 public:
  get_request(basic_state& s, std::string queue, bool no_ack, turn method_turn)
      : s_(s), queue_(std::move(queue)), no_ack_(no_ack), turn_(std::move(method_turn)) {}
  // The channel went while the message was being counted: it goes back to the queue.
  ~get_request() {
    if (taken_) s_.ctx.bus().return_unseen(taken_->reply);
  }

  void start() {
    if (!s_.ctx.bus().publishes_uncounted()) return pull();
    s_.ctx.run_on_bus(
        wire::basic_get::key, [bus = s_.ctx.bus_ptr()] { return bus->count_publishes(); },
        [weak = weak_from_this()](bus::bus_status counted) {
          if (auto self = weak.lock()) self->counted(counted);
        });
  }

 private:
  static constexpr std::chrono::milliseconds no_wait{0};  // the bus's no-wait pull (client.hpp)

  // One no-wait request, on a puller of its own: a request is over once its message came.
  void pull() {
    std::weak_ptr<get_request> weak = weak_from_this();
    bus::puller_callbacks callbacks;
    callbacks.on_delivery = [weak, bus = s_.ctx.bus_ptr()](bus::delivery d) {
      if (auto self = weak.lock()) return self->got(std::move(d));
      bus->return_unseen(d.reply);
    };
    callbacks.on_event = [weak](bus::pull_event e) {
      if (auto self = weak.lock()) self->empty(e);
    };
    // A single-active-consumer queue refuses basic.get (on_method below): never a pinned group here.
    puller_ = s_.ctx.bus().make_puller(routing::consumer_name(queue_), s_.ctx.executor(), std::move(callbacks));
    puller_->request(1, no_wait);
  }

  void counted(const bus::bus_status& status) {
    if (status) return pull();
    auto keep = std::move(s_.get);  // destroys this object when the scope ends
    s_.ctx.refuse(bus_failure_reply(status.error().kind,
                                    "the bus did not count this channel's publishes for basic.get on queue " +
                                        quoted(queue_),
                                    status.error().text, "retry on a new channel"),
                  wire::basic_get::key);
  }

  // get-ok says how many messages remain, requeued ones included, which the delivery's own
  // count (what the server never delivered) leaves out: the queue is counted first, as a passive
  // declare counts it, with this message already held.
  void got(bus::delivery d) {
    if (passed_over(s_, queue_, d)) {
      // The next one is asked for once this puller's callback is over.
      boost::asio::post(s_.ctx.executor(), [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->pull();
      });
      return;
    }
    taken_ = std::move(d);
    s_.ctx.run_on_bus(
        wire::basic_get::key, [bus = s_.ctx.bus_ptr(), queue = queue_] { return store::pending_messages(*bus, queue); },
        [weak = weak_from_this()](std::variant<std::uint64_t, bus::bus_error> count) {
          auto self = weak.lock();
          if (!self || !self->taken_) return;
          auto* remaining = std::get_if<std::uint64_t>(&count);
          self->hand_over(remaining ? *remaining : self->taken_->pending);
        });
  }

  void hand_over(std::uint64_t remaining) {
    bus::delivery d = std::move(*taken_);
    taken_.reset();
    const auto addr = routing::split_subject(d.shown_subject()).value_or(routing::address{});
    const std::uint64_t tag = ++s_.next_tag;
    const auto shown = delivery_count_of(s_.ctx.state().type_of(queue_), /*get=*/true);
    auto props = delivered_properties(d.amqp_props, d.delivered, shown);
    std::string out;
    encode_delivery(out, s_.ctx.id(),
                    wire::basic_get_ok{tag, d.delivered > 1, addr.exchange, addr.routing_key,
                                       static_cast<std::uint32_t>(std::min<std::uint64_t>(remaining, UINT32_MAX))},
                    props ? std::string_view(*props) : std::string_view(d.amqp_props), d.body,
                    s_.ctx.frame_max());
    s_.ctx.send(std::move(out));
    auto& counters = s_.ctx.state().message_counters();
    broker::count(no_ack_ ? counters.delivered_get_auto_ack : counters.delivered_get_manual_ack);
    if (d.delivered > 1) broker::count(counters.redelivered);
    if (no_ack_) {
      s_.ctx.bus().ack(d.reply);
    } else {
      s_.outstanding.emplace(tag, outstanding_delivery{std::move(d.reply), d.stream_seq, nullptr, queue_});
    }
    finish();
  }

  void empty(const bus::pull_event& e) {
    if (e.status == bus::pull_status::consumer_gone && !remade_) {
      // Another replica found the queue's consumer unused an instant before: made again, asked again.
      remade_ = true;
      auto& b = s_.ctx.state();
      b.forget_consumer(queue_);
      b.after_consumer_made(queue_, s_.ctx.executor(), [weak = weak_from_this()](const bus::bus_status&) {
        if (auto self = weak.lock()) self->pull();
      });
      return;
    }
    // Nothing ready for this request; or the queue (known to exist) still has no consumer on the bus.
    if (e.status == bus::pull_status::no_messages || e.status == bus::pull_status::request_expired ||
        e.status == bus::pull_status::consumer_gone) {
      s_.ctx.reply(wire::basic_get_empty{});
      broker::count(s_.ctx.state().message_counters().get_empty);
      return finish();
    }
    if (e.status == bus::pull_status::denied) {
      auto keep = std::move(s_.get);  // destroys this object when the scope ends
      return s_.ctx.refuse(bus_failure_reply(bus::bus_errc::denied, "basic.get of queue " + quoted(queue_), e.description, {}),
                           wire::basic_get::key);
    }
    // The first word from the server says why; the request itself is over once it is counted.
    if (why_.empty()) why_ = (e.code != 0 ? std::to_string(e.code) + " " : std::string{}) + e.description;
    if (e.unfilled == 0) return;
    auto keep = std::move(s_.get);  // destroys this object when the scope ends
    s_.ctx.refuse(bus_failure_reply(bus::bus_errc::failed, "the bus did not answer basic.get on queue " + quoted(queue_),
                                    why_, "retry on a new channel"),
                  wire::basic_get::key);
  }

  // Answered: the channel's next method may run, at once (it may be another basic.get, so this
  // one is out of s_.get first).
  void finish() {
    auto keep = std::move(s_.get);  // destroys this object (and its puller) when the scope ends
    turn_.end();
  }

  basic_state& s_;
  std::string queue_;
  bool no_ack_;
  std::shared_ptr<bus::puller> puller_;
  std::optional<bus::delivery> taken_;  // pulled, not yet handed to the client
  std::string why_;  // what the bus said, when it did not answer with a message or empty
  bool remade_ = false;  // its pull found no consumer once, and made it again
  turn turn_;        // basic.get's, held until it is answered (or the channel goes)
};

// ---- helpers shared with consumer.cpp ---------------------------------------------------

bool passed_over(basic_state& s, const std::string& queue, bus::delivery& d) {
  return passed_over(s.ctx.state(), s.ctx.executor(), queue, d);
}

void pump_consumers(basic_state& s) {
  if (s.ctx.is_closed()) return;
  // A copy: pumping never changes the map, but a delivery handed out inside may fail the
  // channel, and closed() would then clear it.
  auto consumers = s.consumers;
  for (auto& [tag, c] : consumers) c->pump();
}

std::uint64_t deliver(basic_state& s, const std::string& consumer_tag, bool no_ack,
                      const std::shared_ptr<consumer>& owner, bus::delivery d, delivery_count shown,
                      std::optional<std::uint64_t> stream_offset) {
  auto& bus = s.ctx.bus();
  if (!s.ctx.is_open()) {
    // The channel is going: the message goes back, never dropped (a stream queue keeps it anyway).
    if (!stream_offset) bus.return_unseen(d.reply);
    if (owner) owner->release();
    return 0;
  }
  const auto addr = routing::split_subject(d.shown_subject()).value_or(routing::address{});
  const std::uint64_t tag = ++s.next_tag;
  auto props = stream_offset ? stream_properties(d.amqp_props, *stream_offset)
                             : delivered_properties(d.amqp_props, d.delivered, shown);
  std::string out;
  encode_delivery(out, s.ctx.id(),
                  wire::basic_deliver{consumer_tag, tag, d.delivered > 1, addr.exchange, addr.routing_key},
                  props ? std::string_view(*props) : std::string_view(d.amqp_props), d.body,
                  s.ctx.frame_max());
  s.ctx.send(std::move(out));
  auto& counters = s.ctx.state().message_counters();
  broker::count(no_ack ? counters.delivered_consume_auto_ack : counters.delivered_consume_manual_ack);
  if (d.delivered > 1) broker::count(counters.redelivered);
  if (no_ack) {
    bus.ack(d.reply);
  } else {
    s.outstanding.emplace(tag, outstanding_delivery{std::move(d.reply), d.stream_seq, owner, {}, stream_offset.has_value()});
  }
  return tag;
}

namespace {

// True when an argument of the consume is refused (consume_arguments.hpp): the channel is closed.
bool refused_arguments(channel_context& ctx, const wire::basic_consume& m, std::string_view queue) {
  auto refused = refused_consume_argument(m.arguments, queue, ctx.state().config().vhost);
  if (refused) ctx.fail(refused->code, refused->sentence, wire::basic_consume::key);
  return refused.has_value();
}

void drop_reader(channel_context& ctx, const std::string& queue, const std::string& reader) {
  boost::asio::post(ctx.state().bus_executor(), [bus = ctx.bus_ptr(), consumer = routing::consumer_name(queue), reader] {
    (void)bus->delete_stream_reader(consumer, reader);
  });
}

// A stream queue's consumer, as RabbitMQ 3.10 takes one: with a prefetch of its own, acking, no
// x-priority; its reader on the queue's stream starts at x-stream-offset. nullopt: the channel
// (or the connection) failed.
task<std::optional<std::pair<std::string, bus::stream_start>>> open_reader(basic_state& s, const wire::basic_consume& m,
                                                                          const std::string& queue) {
  auto& chan = s.ctx;
  constexpr auto during = wire::basic_consume::key;
  if (s.prefetch_count == 0) {
    chan.fail(wire::reply_code::precondition_failed,
              "consumer prefetch count is not set for 'queue " + quoted(queue) + in_vhost(chan) + "'", during,
              "send basic.qos with a prefetch count (not global) before consuming a stream queue");
    co_return std::nullopt;
  }
  if (m.no_ack) {
    chan.fail_connection(wire::reply_code::not_implemented,
                         "automatic acknowledgement not supported by stream queues queue " + quoted(queue) +
                             in_vhost(chan),
                         during, "consume a stream queue with acknowledgements; an ack only gives credit back");
    co_return std::nullopt;
  }
  if (wire::find(m.arguments, "x-priority")) {
    chan.fail(wire::reply_code::precondition_failed,
              "invalid arg 'x-priority' for queue " + quoted(queue) + in_vhost(chan) +
                  " of queue type rabbit_stream_queue",
              during, "leave x-priority unset: every reader of a stream queue reads every message");
    co_return std::nullopt;
  }
  auto offset = stream_offset(m.arguments, queue, chan.state().config().vhost, std::chrono::system_clock::now());
  if (auto* refused = std::get_if<consume_refusal>(&offset)) {
    chan.fail(refused->code, refused->sentence, during);
    co_return std::nullopt;
  }
  const auto start = std::get<bus::stream_start>(offset);
  auto create = [bus = chan.bus_ptr(), consumer = routing::consumer_name(queue), start] {
    return bus->create_stream_reader(consumer, start);
  };
  auto created = co_await chan.on_bus(during, std::move(create));
  if (!created) {
    bus_failed(chan, created.error(), during);
    co_return std::nullopt;
  }
  co_return std::pair{std::move(*created), start};
}

task<> start_consumer(basic_state& s, wire::basic_consume m, std::string queue, std::string tag) {
  auto& chan = s.ctx;
  constexpr auto during = wire::basic_consume::key;
  const bool there = co_await usable_queue(chan, queue, during);
  if (!there) co_return;
  if (s.uses_tag(tag)) co_return reuse_of_tag(chan, tag);  // a pipelined consume with the same tag won meanwhile
  const int priority = consumer_priority(m.arguments);
  std::string reader;
  bus::stream_start start;
  if (chan.state().type_of(queue) == routing::queue_type::stream) {
    auto opened = co_await open_reader(s, m, queue);
    if (!opened) co_return;
    reader = std::move(opened->first);
    start = opened->second;
  } else if (wire::find(m.arguments, "x-stream-offset")) {
    co_return chan.fail(wire::reply_code::not_implemented,
                        "consumer argument 'x-stream-offset' is not implemented on queue " + quoted(queue) +
                            in_vhost(chan) + ": only a stream queue is read from an offset; declare one with "
                            "x-queue-type 'stream', or leave the argument unset",
                        during);
  }
  // The pinned group hands the queue over in the order the consumers asked, whatever their
  // priority (a consumer has one priority policy); RabbitMQ 3.10's classic queues would hand
  // it to the highest priority, so it is refused rather than ignored.
  if (priority != bus::lowest_consumer_priority &&
      chan.state().sharing_of(queue) == bus::queue_sharing::single_active) {
    co_return chan.fail(wire::reply_code::not_implemented,
                        "consumer argument 'x-priority' is not implemented on single-active-consumer queue " +
                            quoted(queue) + in_vhost(chan) +
                            ": its consumers take over in the order they registered; leave x-priority unset "
                            "(or 0) there, or give the consumers of a queue without x-single-active-consumer "
                            "their priorities",
                        during);
  }
  std::string sentence;
  if (!chan.state().add_consumer(queue, chan.shared_from_this(), tag, m.exclusive, sentence, !m.no_ack,
                                 s.prefetch_count)) {
    if (!reader.empty()) drop_reader(chan, queue, reader);
    co_return chan.fail(wire::reply_code::access_refused, sentence, during,
                        "consume without the exclusive flag, or once the queue's other consumers are cancelled");
  }
  auto c = std::make_shared<consumer>(s, consumer::options{tag, queue, m.no_ack, s.prefetch_count, priority, reader, start});
  s.consumers.emplace(tag, c);
  if (!m.no_wait) chan.reply(wire::basic_consume_ok{tag});  // before the first delivery
  c->start();
}

// The get carries its own copy of the turn: it is answered once the bus answers its pull.
task<> get_one(basic_state& s, std::string queue, bool no_ack, turn method_turn) {
  auto& chan = s.ctx;
  constexpr auto during = wire::basic_get::key;
  const bool there = co_await usable_queue(chan, queue, during);
  if (!there) co_return;
  if (chan.state().type_of(queue) == routing::queue_type::stream) {
    co_return chan.fail_connection(wire::reply_code::not_implemented,
                                   "basic.get not supported by stream queues queue " + quoted(queue) + in_vhost(chan),
                                   during, "consume it with basic.consume, a prefetch and an x-stream-offset");
  }
  // The bus serves only the active consumer's pulls; RabbitMQ's quorum queues refuse it too.
  if (chan.state().sharing_of(queue) == bus::queue_sharing::single_active) {
    co_return chan.fail(wire::reply_code::resource_locked,
                        "cannot obtain access to locked queue " + quoted(queue) + in_vhost(chan) +
                            ". basic.get operations are not supported by queues with single active consumer; "
                            "consume from it with basic.consume",
                        during);
  }
  chan.state().note_use(queue, broker::use::get);
  co_await publishes_answered(chan);
  if (chan.is_closed()) co_return;
  auto request = std::make_shared<get_request>(s, queue, no_ack, std::move(method_turn));
  s.get = request;
  request->start();
}

}  // namespace

// ---- basic_class --------------------------------------------------------------------------

basic_class::basic_class(channel_context& ctx) : state_(std::make_unique<state>(ctx)) {}

// channel::closed() always ran before: the channel core calls closed() once, on close or at its end.
basic_class::~basic_class() = default;

void basic_class::on_method(wire::basic_qos m) {
  auto& s = *state_;
  if (m.prefetch_size != 0) {
    s.ctx.fail(wire::reply_code::not_implemented,
               "basic.qos with a prefetch-size is not implemented; bound the channel by message "
               "count instead (prefetch-size 0, prefetch-count N)",
               wire::basic_qos::key);
    return;
  }
  if (m.global) {
    s.global->limit = m.prefetch_count;  // the channel's shared bound, effective at once
  } else {
    s.prefetch_count = m.prefetch_count;  // for consumers created from now on (RabbitMQ)
  }
  s.ctx.reply(wire::basic_qos_ok{});
  pump_consumers(s);
}

void basic_class::on_method(wire::basic_consume m, turn method_turn) {
  auto& s = *state_;
  auto& ctx = s.ctx;
  constexpr auto during = wire::basic_consume::key;
  if (m.queue == routing::direct_reply_queue) {
    if (refused_arguments(ctx, m, m.queue)) return;
    return consume_direct_reply(s, m);
  }
  auto queue = ctx.resolve_queue(m.queue, during);
  if (!queue || refused_arguments(ctx, m, *queue)) return;
  std::string tag = m.consumer_tag.empty() ? generated_tag() : m.consumer_tag;
  if (s.uses_tag(tag)) return reuse_of_tag(ctx, tag);
  ctx.spawn(during, start_consumer(s, std::move(m), std::move(*queue), std::move(tag)), std::move(method_turn));
}

void basic_class::on_method(wire::basic_cancel m, turn method_turn) {
  auto& s = *state_;
  // Carries the turn: the cancel is answered when the bus's requests are over.
  auto answer = [&s, tag = m.consumer_tag, no_wait = m.no_wait, method_turn]() mutable {
    if (!no_wait) s.ctx.reply(wire::basic_cancel_ok{tag});  // unknown tag: ok too
    method_turn.end();
  };
  if (s.reply && s.reply->tag == m.consumer_tag) {
    s.reply.reset();  // unsubscribed: replies that come later are dropped, as in RabbitMQ
    return answer();
  }
  auto it = s.consumers.find(m.consumer_tag);
  if (it == s.consumers.end() || it->second->cancelling()) return answer();
  // It stays in `consumers` until the bus's requests are over, so that closing the channel
  // meanwhile stops it (stop() drops this continuation, and `s` with it).
  it->second->cancel([&s, tag = m.consumer_tag, answer]() mutable {
    if (auto c = s.consumers.find(tag); c != s.consumers.end()) {
      auto gone = c->second;
      s.consumers.erase(c);
      // Its unsettled deliveries stay outstanding: the client may still settle them (RabbitMQ).
      s.ctx.state().remove_consumer(gone->queue(), s.ctx, gone->tag());
    }
    answer();
  });
}

void basic_class::on_method(wire::basic_get m, turn method_turn) {
  auto& s = *state_;
  constexpr auto during = wire::basic_get::key;
  auto queue = s.ctx.resolve_queue(m.queue, during);
  if (!queue) return;
  s.ctx.spawn(during, get_one(s, std::move(*queue), m.no_ack, method_turn), method_turn);
}

void basic_class::closed() {
  auto& s = *state_;
  // The consumers stop asking first (the bus then holds the requeues below until their requests
  // are over, so that they keep their order), what was outstanding is requeued at once, never
  // left to the ack wait, and then the consumers go (which may auto-delete their queue).
  auto consumers = std::move(s.consumers);
  s.consumers.clear();
  for (auto& [tag, c] : consumers) c->stop();
  requeue_all(s);
  s.get.reset();  // an answer still to come goes back to the queue
  s.reply.reset();
  for (auto& [tag, c] : consumers) drop_consumer(s, *c, true);
  s.after_publishes.clear();
  // Answers still to come find the channel closed: release their cost now.
  s.ctx.port().publish_answered(std::exchange(s.publish_cost_in_flight, 0));
}

void basic_class::after_publishes(std::function<void()> work) {
  auto& s = *state_;
  if (s.ctx.is_closed()) return;
  if (s.publishes_in_flight == 0) return work();
  s.after_publishes.push_back(std::move(work));
}

void basic_class::consumers_may_ask() { pump_consumers(*state_); }

void basic_class::queue_deleted(const std::string& queue) {
  auto& s = *state_;
  for (auto it = s.consumers.begin(); it != s.consumers.end();) {
    if (it->second->queue() != queue) {
      ++it;
      continue;
    }
    if (it->second->cancelling()) {  // the client's own cancel ends it, and is answered
      ++it;
      continue;
    }
    auto c = it->second;
    it = s.consumers.erase(it);
    drop_consumer(s, *c, false);  // the broker already took it out of its registry
    // consumer_cancel_notify: tell the client its consumer is gone.
    s.ctx.reply(wire::basic_cancel{c->tag(), true});
  }
}

}  // namespace amqp::broker
