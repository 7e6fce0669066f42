#include "deliver/consumer.hpp"

#include <algorithm>
#include <utility>

#include <boost/asio/post.hpp>

#include "amqp/routing/names.hpp"
#include "channel/basic.hpp"
#include "channel/bus_failure.hpp"
#include "deliver/delivery.hpp"

namespace amqp::broker {

consumer::consumer(basic_state& channel, options o)
    : channel_(&channel),
      options_(std::move(o)),
      bus_(channel.ctx.bus_ptr()),
      global_(channel.global),
      retry_(channel.ctx.executor()),
      top_up_(channel.ctx.executor()) {
  own_.limit = options_.prefetch;
}

// Destroyed once it is gone from the channel and its last delivery is settled (each holds it).
consumer::~consumer() { stop(); }

void consumer::start() {
  start_puller();
  pump();
}

void consumer::start_puller() {
  // The callbacks hold the consumer weakly: a puller outlives its consumer until the server
  // confirmed its requests are over, and what reaches it then goes back to the queue.
  std::weak_ptr<consumer> weak = weak_from_this();
  const bool stream = reads_stream();
  const std::uint64_t generation = ++generation_;
  bus::puller_callbacks callbacks;
  callbacks.on_delivery = [weak, bus = bus_, stream, generation](bus::delivery d) {
    auto self = weak.lock();
    if (self && self->generation_ == generation) return self->on_delivery(std::move(d));
    // A replaced reader's (its credit was given back when it was replaced): the new one reads it
    // again. A stream queue's reader holds nothing to hand back.
    if (!stream) bus->return_unseen(d.reply);
  };
  callbacks.on_event = [weak, generation](bus::pull_event e) {
    auto self = weak.lock();
    if (!self) return;
    if (self->generation_ == generation) self->on_event(e);
  };
  callbacks.on_stopped = [weak, generation] {
    auto self = weak.lock();
    if (self && self->generation_ == generation) self->on_stopped();
  };
  if (stream) {
    // Every reader reads every message: none waits in line.
    puller_ = bus_->make_stream_puller(routing::consumer_name(options_.queue), options_.reader,
                                       channel_->ctx.executor(), std::move(callbacks));
    return;
  }
  const auto sharing = channel_->ctx.state().sharing_of(options_.queue);
  single_active_ = sharing == bus::queue_sharing::single_active;
  shown_count_ = delivery_count_of(channel_->ctx.state().type_of(options_.queue), /*get=*/false);
  puller_ = bus_->make_puller(routing::consumer_name(options_.queue), channel_->ctx.executor(), std::move(callbacks),
                              sharing, options_.priority);
}

void consumer::reopen_reader() {
  if (reopening_ || !channel_ || cancelled_ || cancel_done_) return;
  reopening_ = true;
  bus::stream_start start = options_.start;
  if (last_seq_ > 0) {
    start.kind = bus::stream_start::from::sequence;
    start.sequence = last_seq_ + 1;
  }
  auto create = [bus = bus_, queue = routing::consumer_name(options_.queue), start] {
    return bus->create_stream_reader(queue, start);
  };
  bus_->run_blocking(channel_->ctx.executor(), std::move(create),
                     [weak = weak_from_this()](bus::bus_result<std::string> reader) {
                       auto self = weak.lock();
                       if (!self) return;
                       self->reopening_ = false;
                       if (!self->channel_ || self->cancelled_ || self->cancel_done_ || !reader) {
                         if (reader) self->delete_reader(*reader);
                         if (self->channel_ && !self->cancelled_ && !self->cancel_done_) self->retry_later();
                         return;
                       }
                       // The old puller's requests end (what they did not bring is given back);
                       // the old reader is gone, or goes.
                       // What the old puller asked for and did not bring is the new one's to
                       // ask for; what it still brings is dropped (generation_).
                       auto old = std::move(self->puller_);
                       self->give(old->asked());
                       old->stop();
                       self->drop_reader();
                       self->options_.reader = std::move(*reader);
                       self->reader_dropped_ = false;
                       self->start_puller();
                       self->pump();
                     });
}

// What to ask for now. A consumer's window is what it may have asked for at once: its prefetch,
// its fair share of a channel-wide prefetch (an idle queue's open requests must not hold all of
// the channel's credit while another queue has messages waiting), at most max_pull_window and
// what the bus may have on its way at once in bytes (puller::window_in_bytes).
// It asks once half its window is free, so that requests stay few and large; `top_up` asks for
// whatever is free.
std::uint32_t consumer::wanted(bool top_up) const {
  const std::uint32_t asked = puller_->asked();
  const std::uint32_t most = std::min(max_pull_window, puller_->window_in_bytes());
  if (options_.no_ack) {
    // Unbounded by protocol (HIP-1326, "Acknowledgement, and what bounds a consumer"): the
    // socket is what bounds it (wait_for_socket).
    return asked <= most / 2 ? most - asked : 0;
  }
  std::uint32_t window = own_.limit == 0 ? most : std::min<std::uint32_t>(own_.limit, most);
  std::uint32_t free = own_.available(max_pull_window);
  if (global_->limit != 0) {
    std::uint32_t bounded = 0;
    for (const auto& [tag, c] : channel_->consumers) bounded += c->no_ack() || c->cancelling() ? 0 : 1;
    window = std::min(window, std::max<std::uint32_t>(1, global_->limit / std::max<std::uint32_t>(1, bounded)));
    free = std::min(free, global_->available(max_pull_window));
  }
  if (asked >= window) return 0;
  const std::uint32_t n = std::min(free, window - asked);
  return top_up || n >= std::max<std::uint32_t>(1, window / 2) ? n : 0;
}

bool consumer::may_ask() const {
  if (!channel_ || !puller_ || cancelled_ || retry_armed_ || drain_armed_) return false;
  // A channel that raised an exception waits for the session to close it (after the client's
  // close-ok, for a connection exception): what it got meanwhile goes back, so it asks for nothing.
  if (!channel_->ctx.is_open()) return false;
  return !single_active_ || channel_->ctx.state().first_in_line(options_.queue, channel_->ctx, options_.tag);
}

void consumer::pump() {
  if (!may_ask() || wait_for_socket()) return;
  if (const std::uint32_t n = wanted(false); n > 0) return ask(n);
  if (puller_->asked() == 0 && wanted(true) > 0) top_up_later();
}

void consumer::ask(std::uint32_t n) {
  if (!options_.no_ack) {
    own_.take(n);
    global_->take(n);
  }
  puller_->request(n, pull_expires);
}

void consumer::give(std::uint32_t n) {
  if (options_.no_ack || n == 0) return;
  own_.give(n);
  global_->give(n);
}

void consumer::release() { give(1); }

void consumer::cancel(std::function<void()> done) {
  if (!channel_) return;
  cancelled_ = std::move(done);
  retry_.cancel();
  if (puller_) {
    puller_->stop();  // on_stopped follows what the server still sends
  } else {
    on_stopped();
  }
}

void consumer::stop() {
  if (!channel_) return;
  channel_ = nullptr;
  cancelled_ = nullptr;
  retry_.cancel();
  top_up_.cancel();
  if (puller_) puller_->stop();
  drop_reader();
}

// Its reader goes from the bus at once; one left by a process that died goes after its inactive
// threshold.
void consumer::drop_reader() {
  if (!reads_stream() || reader_dropped_) return;
  reader_dropped_ = true;
  delete_reader(options_.reader);
}

// Off the io thread: a delete waits for the bus.
void consumer::delete_reader(const std::string& reader) {
  boost::asio::post(bus_->worker_executor(), [bus = bus_, queue = routing::consumer_name(options_.queue), reader] {
    (void)bus->delete_stream_reader(queue, reader);
  });
}

void consumer::on_delivery(bus::delivery d) {
  if (!channel_) {
    if (!reads_stream()) bus_->return_unseen(d.reply);  // the channel is gone: back to the queue at once, never dropped
    return;
  }
  if (!channel_->ctx.is_open()) {
    // It raised an exception and waits to be closed: its open requests would bring the same
    // messages back again and again, so they end now, as closed() would end them.
    stop();
    if (!reads_stream()) bus_->return_unseen(d.reply);  // shown to no client: not counted as delivered
    return;
  }
  if (reads_stream()) {
    last_seq_ = std::max(last_seq_, d.stream_seq);
    // Its place in the stream queue, from 0 (the bus's stream sequences start at 1).
    const std::uint64_t offset = d.stream_seq > 0 ? d.stream_seq - 1 : 0;
    deliver(*channel_, options_.tag, false, shared_from_this(), std::move(d), delivery_count::never, offset);
    return pump();
  }
  last_seq_ = std::max(last_seq_, d.stream_seq);
  if (d.stream_seq <= delivered_before_remake_) d.delivered = std::max<std::uint64_t>(d.delivered, 2);
  if (passed_over(*channel_, options_.queue, d)) {
    give(1);
    pump();
    return;
  }
  auto self = shared_from_this();
  deliver(*channel_, options_.tag, options_.no_ack, options_.no_ack ? nullptr : self, std::move(d), shown_count_);
  pump();  // fewer asked for now: the window may have room again
}

void consumer::on_event(const bus::pull_event& e) {
  give(e.unfilled);
  if (!channel_) return;
  if (reads_stream() && e.status == bus::pull_status::consumer_gone) return reopen_reader();
  if (e.status == bus::pull_status::consumer_gone) return remake_consumer();
  switch (e.status) {
    case bus::pull_status::no_messages:
    case bus::pull_status::request_expired:
    case bus::pull_status::lost:      // its inbox was replaced: ask again on the new one
    case bus::pull_status::bytes_reached:
    case bus::pull_status::pin_lost:  // another consumer is the active one now: wait in line
      pump_consumers(*channel_);
      return;
    case bus::pull_status::denied:
      channel_->ctx.refuse(
          bus_failure_reply(bus::bus_errc::denied, "basic.consume of queue '" + options_.queue + "'", e.description, {}),
          wire::basic_consume::key);
      return;
    default:
      // The consumer is being recreated, the server is busy, or the bus is away: try again
      // shortly rather than spin. A deleted queue is announced separately (queue_deleted).
      retry_later();
  }
}

void consumer::on_stopped() {
  drop_reader();
  if (!cancelled_) return;
  cancel_done_ = true;
  auto keep = shared_from_this();  // `done` may drop the channel's reference
  auto done = std::move(cancelled_);
  cancelled_ = nullptr;
  done();
}

// What bounds a consumer in the end is the client's socket: while the connection's output is
// backlogged it asks the bus for nothing, so a slow reader leaves messages in the queue, not in
// the adaptor's memory.
bool consumer::wait_for_socket() {
  auto& port = channel_->ctx.port();
  if (!port.backlogged()) return false;
  drain_armed_ = true;
  port.when_drained([weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self) return;
    self->drain_armed_ = false;
    self->pump();
  });
  return true;
}

// Runs `then` on this consumer after `delay`, once at a time (`armed` meanwhile), unless the
// timer is cancelled or the consumer is gone.
template <class Then>
void consumer::later(boost::asio::steady_timer& timer, bool consumer::*armed, std::chrono::milliseconds delay,
                     Then then) {
  if (this->*armed) return;
  this->*armed = true;
  timer.expires_after(delay);
  timer.async_wait([weak = weak_from_this(), armed, then](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self) return;
    (*self).*armed = false;
    if (!ec) then(*self);
  });
}

// Less than half the window is free and nothing is asked for: the client may be waiting for its
// whole prefetch before it acks, so what is free is asked for shortly, unless more frees first.
void consumer::top_up_later() {
  later(top_up_, &consumer::top_up_armed_, top_up_delay, [](consumer& self) {
    if (!self.may_ask() || self.wait_for_socket()) return;
    if (self.puller_->asked() != 0) return self.pump();
    if (const std::uint32_t n = self.wanted(true); n > 0) self.ask(n);
  });
}

// The queue's bus consumer went (another replica found it unused an instant before this one read,
// or it was deleted behind the adaptor's back): it is made again, as a first reader makes it.
void consumer::remake_consumer() {
  delivered_before_remake_ = last_seq_;
  auto& b = channel_->ctx.state();
  b.forget_consumer(options_.queue);
  b.after_consumer_made(options_.queue, channel_->ctx.executor(), [weak = weak_from_this()](const bus::bus_status&) {
    if (auto self = weak.lock()) self->retry_later();  // a failure is tried again the same way
  });
}

void consumer::retry_later() {
  later(retry_, &consumer::retry_armed_, pull_retry_delay, [](consumer& self) { self.pump(); });
}

}  // namespace amqp::broker
