// The basic class, consuming side: qos, consume, cancel, get, settlement, recover, and the
// channel's end. The design is described at the top of basic.hpp; publishing is publish.cpp.
#include "basic.hpp"

#include <random>
#include <utility>

#include "amqp/routing/subject.hpp"
#include "amqp/routing/topology.hpp"
#include "delivery.hpp"
#include "handler_support.hpp"

namespace amqp::broker {
namespace {

// RabbitMQ's shape: "amq.ctag-" and 22 URL-safe characters, unique enough to never collide
// with a tag a client chose or another server tag on the channel.
std::string generated_tag() {
  static constexpr char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string tag = "amq.ctag-";
  for (int i = 0; i < 22; ++i) tag += alphabet[rng() % 64];
  return tag;
}

std::string unknown_tag_sentence(std::uint64_t tag) {
  return "unknown delivery tag " + std::to_string(tag) +
         "; settle only tags delivered on this channel and not yet acknowledged, rejected or "
         "recovered";
}

enum class settlement { ack, requeue, drop };

void settle_one(basic_state& s, outstanding_delivery& d, settlement how) {
  auto& bus = s.ctx.state().bus();
  switch (how) {
    case settlement::ack: bus.ack(d.reply); break;
    case settlement::requeue: bus.nak(d.reply); break;
    case settlement::drop: bus.term(d.reply); break;
  }
  if (d.owner) d.owner->release();
}

// basic.ack / nack / reject. False when the channel was closed for an unknown tag.
bool settle(basic_state& s, std::uint64_t tag, bool multiple, settlement how,
            wire::method_key during) {
  if (multiple) {
    auto end = tag == 0 ? s.outstanding.end() : s.outstanding.upper_bound(tag);
    for (auto it = s.outstanding.begin(); it != end;) {
      settle_one(s, it->second, how);
      it = s.outstanding.erase(it);
    }
  } else {
    auto it = s.outstanding.find(tag);
    if (it == s.outstanding.end()) {
      s.ctx.fail(wire::reply_code::precondition_failed, unknown_tag_sentence(tag), during);
      return false;
    }
    settle_one(s, it->second, how);
    s.outstanding.erase(it);
  }
  pump_consumers(s);
  return true;
}

void requeue_all(basic_state& s) {
  for (auto& [tag, d] : s.outstanding) settle_one(s, d, settlement::requeue);
  s.outstanding.clear();
}

// Detaches a consumer from the channel and from the broker's registry.
void drop_consumer(basic_state& s, consumer& c, bool registered) {
  c.stop();
  if (registered) s.ctx.state().remove_consumer(c.queue(), s.ctx, c.tag());
}

// Runs `work` once every publish of this channel handed to the bus so far was answered, so a
// basic.get after a publish on the same channel can see that message.
void after_publishes(basic_state& s, std::function<void()> work) {
  if (s.publishes_in_flight == 0) {
    work();
    return;
  }
  s.after_publishes.push_back(std::move(work));
}

// Calls then() when `queue` exists and this connection may use it; fails the channel
// otherwise (404 absent, 405 another connection's exclusive queue).
template <class Then>
void with_usable_queue(channel_context& ctx, const std::string& queue, wire::method_key during,
                       Then then) {
  const bool in_mirror =
      ctx.state().read_topology([&](const routing::topology& t) { return t.find_queue(queue) != nullptr; });
  find_entry(ctx, in_mirror, routing::queue_key(queue), during,
             [&ctx, queue, during, then = std::move(then)](bool present) mutable {
               if (!present) {
                 ctx.fail(wire::reply_code::not_found,
                          "no queue " + quoted(queue) + " in vhost '/'; declare it first", during);
                 return;
               }
               std::string sentence;
               if (!ctx.state().may_use(queue, ctx.connection_id(), sentence)) {
                 ctx.fail(wire::reply_code::resource_locked, sentence, during);
                 return;
               }
               then();
             });
}

}  // namespace

// One basic.get: a no-wait pull of one message, answered get-ok, or get-empty as soon as the
// bus says nothing is ready (404, or 408 when other consumers' requests already claim what is
// pending), as RabbitMQ answers at once.
class get_request final : public pull_source::sink, public std::enable_shared_from_this<get_request> {
 public:
  get_request(basic_state& s, std::string queue, bool no_ack)
      : s_(s), queue_(std::move(queue)), no_ack_(no_ack),
        deadline_(std::chrono::steady_clock::now() + get_wait), watchdog_(s.ctx.executor()) {}

  void start() {
    source_ = pull_source::open(s_.ctx.state_ptr(), queue_, s_.ctx.executor(), this);
    source_->request(1, no_wait);
    // A request the bus never answers (it reached a consumer being replaced at that moment)
    // must not hold the channel: past the wait and a margin, the get is answered empty.
    watchdog_.expires_at(deadline_ + pull_expiry_margin);
    watchdog_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
      auto self = weak.lock();
      if (!self || ec) return;
      if (!self->answered_) self->s_.ctx.reply(wire::basic_get_empty{});
      self->finish();
    });
  }
  void cancel() {
    watchdog_.cancel();
    if (source_) {
      source_->detach();
      source_->release();  // a get holds no delivery that must go back first
    }
    source_.reset();
  }

  void on_message(bus::delivery d) override {
    if (!delivers_to(s_.ctx.state(), queue_, d.subject)) {
      s_.ctx.state().bus().ack(d.reply);  // not this queue's (2.9 cover): the request goes on
      return;
    }
    answered_ = true;
    const auto addr = routing::split_subject(d.subject).value_or(routing::address{});
    const std::uint64_t tag = ++s_.next_tag;
    auto props = delivered_properties(d.amqp_props, d.delivered);
    std::string out;
    encode_delivery(out, s_.ctx.id(),
                    wire::basic_get_ok{tag, d.delivered > 1, addr.exchange, addr.routing_key,
                                       static_cast<std::uint32_t>(std::min<std::uint64_t>(d.pending, UINT32_MAX))},
                    props ? std::string_view(*props) : std::string_view(d.amqp_props), d.body,
                    s_.ctx.frame_max());
    s_.ctx.send(std::move(out));
    if (no_ack_) {
      s_.ctx.state().bus().ack(d.reply);
    } else {
      s_.outstanding.emplace(tag, outstanding_delivery{std::move(d.reply), nullptr});
    }
  }

  void on_request_end(const bus::pull_event* why, std::uint32_t) override {
    if (!answered_) {
      // Without an event the request was filled by messages of another binding of 2.9's
      // covering filter, skipped above: look again while the bound allows.
      if (why == nullptr && std::chrono::steady_clock::now() < deadline_) {
        source_->request(1, no_wait);
        return;
      }
      s_.ctx.reply(wire::basic_get_empty{});
    }
    finish();
  }

 private:
  static constexpr std::chrono::milliseconds no_wait{0};  // the bus's no_wait pull (client.hpp)

  void finish() {
    cancel();
    auto& ctx = s_.ctx;
    auto keep = std::move(s_.get);  // destroys this object when the scope ends
    ctx.finish();
  }

  basic_state& s_;
  std::string queue_;
  bool no_ack_;
  std::chrono::steady_clock::time_point deadline_;
  boost::asio::steady_timer watchdog_;
  std::shared_ptr<pull_source> source_;
  bool answered_ = false;
};

// ---- helpers shared with consumer.cpp ---------------------------------------------------

void pump_consumers(basic_state& s) {
  if (s.closed) return;
  // A copy: pumping never changes the map, but a delivery handed out inside may fail the
  // channel, and closed() would then clear it.
  auto consumers = s.consumers;
  for (auto& [tag, c] : consumers) c->pump();
}

std::uint64_t deliver(basic_state& s, const std::string& consumer_tag, bool no_ack,
                      const std::shared_ptr<consumer>& owner, bus::delivery d) {
  auto& bus = s.ctx.state().bus();
  if (!s.ctx.is_open() || s.closed) {
    bus.nak(d.reply);  // the channel is going: the message goes back, never dropped
    if (owner) owner->release();
    return 0;
  }
  const auto addr = routing::split_subject(d.subject).value_or(routing::address{});
  const std::uint64_t tag = ++s.next_tag;
  auto props = delivered_properties(d.amqp_props, d.delivered);
  std::string out;
  encode_delivery(out, s.ctx.id(),
                  wire::basic_deliver{consumer_tag, tag, d.delivered > 1, addr.exchange, addr.routing_key},
                  props ? std::string_view(*props) : std::string_view(d.amqp_props), d.body,
                  s.ctx.frame_max());
  s.ctx.send(std::move(out));
  if (no_ack) {
    bus.ack(d.reply);
  } else {
    s.outstanding.emplace(tag, outstanding_delivery{std::move(d.reply), owner});
  }
  return tag;
}

// ---- basic_class --------------------------------------------------------------------------

basic_class::basic_class(channel_context& ctx) : state_(std::make_unique<state>(ctx)) {}

basic_class::~basic_class() { closed(); }

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
  s.ctx.finish();
}

void basic_class::on_method(wire::basic_consume m) {
  auto& s = *state_;
  auto& ctx = s.ctx;
  constexpr auto during = wire::basic_consume::key;
  auto queue = ctx.resolve_queue(m.queue, during);
  if (!queue) return;
  std::string tag = m.consumer_tag.empty() ? generated_tag() : m.consumer_tag;
  if (s.consumers.contains(tag)) {
    // RabbitMQ raises this on the connection.
    ctx.fail_connection(wire::reply_code::not_allowed,
                        "attempt to reuse consumer tag " + quoted(tag) +
                            " on this channel; choose another tag, or leave it empty for a "
                            "server-generated one",
                        during);
    return;
  }
  with_usable_queue(ctx, *queue, during, [&s, m = std::move(m), queue = *queue, tag = std::move(tag)] {
    auto& chan = s.ctx;
    const wire::method_key consume_key = wire::basic_consume::key;
    if (s.consumers.contains(tag)) {  // a pipelined consume with the same tag won meanwhile
      chan.fail_connection(wire::reply_code::not_allowed,
                          "attempt to reuse consumer tag " + quoted(tag) + " on this channel",
                          consume_key);
      return;
    }
    std::string sentence;
    if (!chan.state().add_consumer(queue, chan.shared_from_this(), tag, m.exclusive, sentence)) {
      chan.fail(wire::reply_code::access_refused, sentence, consume_key);
      return;
    }
    auto c = std::make_shared<consumer>(
        s, consumer::options{tag, queue, m.no_ack, s.prefetch_count});
    s.consumers.emplace(tag, c);
    if (!m.no_wait) chan.reply(wire::basic_consume_ok{tag});  // before the first delivery
    c->start();
    chan.finish();
  });
}

void basic_class::on_method(wire::basic_cancel m) {
  auto& s = *state_;
  if (auto it = s.consumers.find(m.consumer_tag); it != s.consumers.end()) {
    auto c = it->second;
    s.consumers.erase(it);
    // Its unsettled deliveries stay outstanding: the client may still ack them (RabbitMQ).
    drop_consumer(s, *c, true);
  }
  if (!m.no_wait) s.ctx.reply(wire::basic_cancel_ok{m.consumer_tag});  // unknown tag: ok too
  s.ctx.finish();
}

void basic_class::on_method(wire::basic_get m) {
  auto& s = *state_;
  constexpr auto during = wire::basic_get::key;
  auto queue = s.ctx.resolve_queue(m.queue, during);
  if (!queue) return;
  with_usable_queue(s.ctx, *queue, during, [&s, queue = *queue, no_ack = m.no_ack] {
    after_publishes(s, [&s, queue, no_ack] {
      if (s.closed) return;
      auto get = std::make_shared<get_request>(s, queue, no_ack);
      s.get = get;
      get->start();
    });
  });
}

void basic_class::on_method(wire::basic_ack m) {
  if (settle(*state_, m.delivery_tag, m.multiple, settlement::ack, wire::basic_ack::key))
    state_->ctx.finish();
}

void basic_class::on_method(wire::basic_reject m) {
  if (settle(*state_, m.delivery_tag, false, m.requeue ? settlement::requeue : settlement::drop,
             wire::basic_reject::key))
    state_->ctx.finish();
}

void basic_class::on_method(wire::basic_nack m) {
  if (settle(*state_, m.delivery_tag, m.multiple, m.requeue ? settlement::requeue : settlement::drop,
             wire::basic_nack::key))
    state_->ctx.finish();
}

void basic_class::on_method(wire::basic_recover) {
  // Either requeue value: the bus redelivers to whichever consumer pulls next (basic.hpp).
  auto& s = *state_;
  requeue_all(s);
  s.ctx.reply(wire::basic_recover_ok{});
  pump_consumers(s);
  s.ctx.finish();
}

void basic_class::on_method(wire::basic_recover_async) {
  state_->ctx.fail(wire::reply_code::not_implemented,
                   "basic.recover-async is not implemented; use basic.recover, which is answered",
                   wire::basic_recover_async::key);
}

void basic_class::closed() {
  auto& s = *state_;
  if (s.closed) return;
  s.closed = true;
  // Requeue first, so nothing waits out the five-minute ack wait; then the consumers go
  // (which may auto-delete their queue).
  requeue_all(s);
  if (s.get) {
    s.get->cancel();
    s.get.reset();
  }
  auto consumers = std::move(s.consumers);
  s.consumers.clear();
  for (auto& [tag, c] : consumers) drop_consumer(s, *c, true);
  s.after_publishes.clear();
  // Answers still to come find the channel closed: release their cost now.
  s.ctx.port().publish_answered(std::exchange(s.publish_cost_in_flight, 0));
}

void basic_class::queue_deleted(const std::string& queue) {
  auto& s = *state_;
  for (auto it = s.consumers.begin(); it != s.consumers.end();) {
    if (it->second->queue() != queue) {
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
