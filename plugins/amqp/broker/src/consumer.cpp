#include "consumer.hpp"

#include <utility>

#include "basic.hpp"
#include "delivery.hpp"

namespace amqp::broker {

// ---- pull_source ------------------------------------------------------------------------

std::shared_ptr<pull_source> pull_source::open(std::shared_ptr<broker> b, const std::string& queue,
                                               const boost::asio::any_io_executor& ex, sink* s) {
  std::shared_ptr<pull_source> self(new pull_source(b, queue, ex, s));
  // The callbacks keep the source alive until the puller stops (after a drain): a message
  // the server sends for a request we made must find someone to give it back.
  self->puller_ = b->bus().make_puller(
      queue, ex, [self](bus::delivery d) { self->on_delivery(std::move(d)); },
      [self](bus::pull_event e) { self->on_event(e); });
  return self;
}

void pull_source::request(std::uint32_t batch, std::chrono::milliseconds expires) {
  if (!sink_ || asked_ != 0 || batch == 0) return;
  asked_ = batch;
  request_ends_ = std::chrono::steady_clock::now() + expires;
  puller_->request(batch, expires);
}

pull_source::~pull_source() { end_draining(); }

void pull_source::detach() {
  sink_ = nullptr;
  if (asked_ == 0) {
    stop_puller();
    return;
  }
  // The request stays open on the server: the queue's next pulls wait for it (broker).
  draining_ = true;
  broker_->draining_opened(queue_);
  give_back_at(request_ends_ + pull_expiry_margin);
}

void pull_source::release() {
  released_ = true;
  if (asked_ == 0) give_back_held();
}

void pull_source::stop_puller() {
  if (!puller_) return;
  auto p = std::move(puller_);
  p->stop();  // releases the callbacks, and with them this object's self-references
}

void pull_source::on_delivery(bus::delivery d) {
  if (asked_ > 0) --asked_;
  if (!sink_) {
    hold(d);
    if (asked_ == 0) request_ended();  // complete: nothing can be handed back to it any more
    return;
  }
  // Deliveries that only bounced off a gone consumer's request are not redeliveries.
  const std::uint64_t unseen = broker_->take_unseen_deliveries(queue_, d.stream_seq);
  d.delivered = d.delivered > unseen ? d.delivered - unseen : 1;
  auto keep = shared_from_this();  // the sink may detach us inside on_message
  sink_->on_message(std::move(d));
  if (asked_ == 0 && sink_) sink_->on_request_end(nullptr, 0);
}

void pull_source::on_event(const bus::pull_event& e) {
  const std::uint32_t unfilled = asked_;
  asked_ = 0;
  if (!sink_) {
    request_ended();
    return;
  }
  sink_->on_request_end(&e, unfilled);
}

void pull_source::hold(const bus::delivery& d) {
  broker_->note_unseen_delivery(queue_, d.stream_seq);
  held_.push_back(d.reply);
  if (held_.size() == 1) give_back_at(request_ends_ + pull_expiry_margin);  // whatever else happens
}

// The detached source's request is over: held messages go back now if the consumer released
// them, else when it does (or at the fallback time hold() set).
void pull_source::request_ended() {
  if (released_) give_back_held();
  stop_puller();
  if (held_.empty()) end_draining();
}

void pull_source::give_back_at(std::chrono::steady_clock::time_point when) {
  give_back_timer_.expires_at(when);  // replaces an earlier wait
  // The handler owns the source: the held messages must go back even after the puller stopped.
  // At that time the request is over whether or not its end was reported.
  give_back_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec) return;
    self->give_back_held();
    self->end_draining();
  });
}

void pull_source::give_back_held() {
  if (held_.empty()) return;
  give_back_timer_.cancel();
  for (const auto& reply : held_) broker_->bus().nak(reply);
  held_.clear();
  if (asked_ == 0) end_draining();
}

// Before the queue's waiting pulls go: the naks above are already on their way to the bus,
// which sends a pull on this queue only once they are applied (bus client, "requeue before pull").
void pull_source::end_draining() {
  if (!draining_) return;
  draining_ = false;
  broker_->draining_closed(queue_);
}

// ---- consumer ---------------------------------------------------------------------------

consumer::consumer(basic_state& channel, options o)
    : channel_(&channel),
      options_(std::move(o)),
      broker_(channel.ctx.state_ptr()),
      global_(channel.global),
      retry_(channel.ctx.executor()) {
  own_.limit = options_.prefetch;
}

// Destroyed once it is cancelled and its last delivery is settled (each holds it): only then
// may what its source held go back (pull_source::release).
consumer::~consumer() {
  stop();
  if (source_) source_->release();
}

void consumer::start() {
  source_ = pull_source::open(broker_, options_.queue, channel_->ctx.executor(), this);
  pump();
}

std::uint32_t consumer::credit() const {
  if (options_.no_ack) return no_ack_pull_batch;
  std::uint32_t n = own_.available(max_pull_batch);
  // A channel-wide bound is shared: ask for a fair share, so an idle queue's open request
  // does not hold all of the channel's credit while another queue has messages waiting.
  if (global_->limit != 0) {
    std::uint32_t bounded = 0;
    for (const auto& [tag, c] : channel_->consumers) bounded += c->no_ack() ? 0 : 1;
    const std::uint32_t share = std::max<std::uint32_t>(1, global_->limit / std::max<std::uint32_t>(1, bounded));
    n = std::min({n, global_->available(max_pull_batch), share});
  }
  return n;
}

void consumer::pump() {
  if (!channel_ || !source_ || !source_->idle() || retry_armed_ || drain_armed_ || queue_wait_armed_) return;
  if (options_.no_ack && wait_for_socket()) return;
  const std::uint32_t n = credit();
  if (n == 0 || wait_for_queue()) return;  // nothing to ask for, or not yet

  if (!options_.no_ack) {
    own_.take(n);
    global_->take(n);
  }
  source_->request(n, pull_expires);
}

void consumer::give(std::uint32_t n) {
  if (options_.no_ack || n == 0) return;
  own_.give(n);
  global_->give(n);
}

void consumer::release() { give(1); }

void consumer::stop() {
  if (!channel_) return;
  channel_ = nullptr;
  retry_.cancel();
  if (source_) source_->detach();  // kept: the destructor releases what it held
}

void consumer::on_message(bus::delivery d) {
  if (!channel_) return;
  if (!delivers_to(*broker_, options_.queue, d.subject)) {
    // 2.9's single covering filter brought a message this queue is not bound to (DESIGN §5).
    broker_->bus().ack(d.reply);
    give(1);
    return;
  }
  auto self = shared_from_this();
  deliver(*channel_, options_.tag, options_.no_ack, options_.no_ack ? nullptr : self, std::move(d));
}

void consumer::on_request_end(const bus::pull_event* why, std::uint32_t unfilled) {
  if (!channel_) return;
  give(unfilled);
  if (why && why->status != bus::pull_status::request_expired &&
      why->status != bus::pull_status::no_messages) {
    // The consumer is being recreated, the server is busy, or the bus is away: try again
    // shortly rather than spin. A deleted queue is announced separately (queue_deleted).
    retry_later();
    return;
  }
  pump_consumers(*channel_);
}

// A cancelled consumer's request on this queue is still open on the server: pull after it is
// over, or this pull overtakes what it brings (broker::draining_opened).
bool consumer::wait_for_queue() {
  auto resume = [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self) return;
    self->queue_wait_armed_ = false;
    self->pump();
  };
  if (!broker_->wait_until_drained(options_.queue, channel_->ctx.executor(), std::move(resume))) return false;
  queue_wait_armed_ = true;
  return true;
}

// No credit bounds a no-ack consumer: what bounds it is the client's socket. While the
// connection's output is backlogged it asks the bus for nothing, so a slow reader holds
// messages in the queue, not in the adaptor's memory.
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

void consumer::retry_later() {
  retry_armed_ = true;
  retry_.expires_after(pull_retry_delay);
  retry_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self || ec) return;
    self->retry_armed_ = false;
    self->pump();
  });
}

}  // namespace amqp::broker
