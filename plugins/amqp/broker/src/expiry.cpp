#include "expiry.hpp"

#include <boost/asio/post.hpp>
#include <algorithm>
#include <charconv>

#include "amqp/routing/names.hpp"
#include "channel_context.hpp"
#include "dead_letter.hpp"

namespace amqp::broker {
namespace {

constexpr int slowest_idle_seconds = 8;
// Heads one queue gives up in one round; the rest wait for the next round, so that one queue's
// backlog of expired messages does not hold every other queue back.
constexpr int most_per_round = 256;

std::vector<std::string> sweepable(const routing::topology& t) {
  std::vector<std::string> names;
  for (const auto& [name, def] : t.queues())
    if (def.message_ttl || def.dead_letter || def.expires) names.push_back(name);
  return names;
}

}  // namespace

expiry_sweeper::expiry_sweeper(std::weak_ptr<broker> b, strand on)
    : broker_(std::move(b)), strand_(on), timer_(on) {}

void expiry_sweeper::start() {
  boost::asio::post(strand_, [self = shared_from_this()] { self->tick_soon(); });
}

void expiry_sweeper::stop() {
  boost::asio::post(strand_, [self = shared_from_this()] {
    self->stopped_ = true;
    self->timer_.cancel();
    self->round_.clear();
    self->puller_.reset();
  });
}

void expiry_sweeper::tick_soon() {
  if (stopped_) return;
  timer_.expires_after(std::chrono::seconds(1));
  timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self || ec || self->stopped_) return;
    auto b = self->broker_.lock();
    if (!b) return;
    auto queues = b->read_topology(sweepable);
    std::erase_if(self->paces_, [&](const auto& entry) {
      return !std::binary_search(queues.begin(), queues.end(), entry.first);
    });
    const auto now = std::chrono::steady_clock::now();
    std::erase_if(queues, [&](const std::string& q) { return now < self->paces_[q].due; });
    self->round_ = std::move(queues);
    self->next_queue();
  });
}

void expiry_sweeper::next_queue() {
  if (stopped_) return;
  if (round_.empty()) return tick_soon();
  auto b = broker_.lock();
  if (!b) return;
  std::string queue = std::move(round_.front());
  round_.erase(round_.begin());
  boost::asio::post(b->bus_executor(), [self = shared_from_this(), queue = std::move(queue)] {
    auto owner = self->broker_.lock();
    if (!owner) return;
    auto h = self->look(*owner, queue);
    auto& io = owner->io();  // not on a bus thread: the broker's last reference may be this one
    boost::asio::post(io, [owner = std::move(owner)] {});
    boost::asio::post(self->strand_, [self, queue, h] { self->looked(queue, h); });
  });
}

// Blocking, on the bus pool. Nothing to do while a pull of any replica waits on the queue (that
// reader finds what expired), or when the head was delivered before (requeued).
expiry_sweeper::head expiry_sweeper::look(broker& b, const std::string& queue) {
  auto info = b.bus().peek_queue(routing::consumer_name(queue));  // a count that lags only delays the look
  if (!info) return {};
  const auto expires = b.read_topology([&](const routing::topology& t) -> std::optional<std::uint64_t> {
    const auto* def = t.find_queue(queue);
    return def ? def->expires : std::nullopt;
  });
  head use;
  if (expires) {
    use = look_at_use(b, queue, *info, *expires);
    if (use.unused) return use;
  }
  auto h = look_at_head(b, queue, *info);
  if (!h.expires_at_ms || (use.expires_at_ms && *use.expires_at_ms < *h.expires_at_ms)) h.expires_at_ms = use.expires_at_ms;
  return h;
}

expiry_sweeper::head expiry_sweeper::look_at_use(broker& b, const std::string& queue, const bus::queue_info& info,
                                                 std::uint64_t expires) {
  if (info.num_waiting > 0 || info.num_ack_pending > 0 || b.consumer_count(queue) > 0) {
    return {false, false, wall_clock_ms() + expires / 2};  // in use: looked at again well before it could expire
  }
  std::uint64_t last = std::max(info.last_active_ms, b.last_use_here_ms(queue));
  if (auto stamp = b.bus().kv_get(routing::use_key(queue))) {
    std::uint64_t ms = 0;
    const auto& text = stamp->value;
    if (std::from_chars(text.data(), text.data() + text.size(), ms).ec == std::errc{}) last = std::max(last, ms);
  }
  if (wall_clock_ms() > last + expires) return {false, true, std::nullopt};
  return {false, false, last + expires};
}

expiry_sweeper::head expiry_sweeper::look_at_head(broker& b, const std::string& queue, const bus::queue_info& info) {
  if (info.num_waiting > 0 || info.requeued() > 0 || info.num_pending == 0) return {};
  const auto filters = b.filters_of(queue);
  if (filters.empty()) return {};
  auto next = b.bus().next_message(info.delivered_stream_seq + 1, filters);
  if (!next || !*next) return {};
  auto message = b.bus().read_message((*next)->seq);
  if (!message) return {};
  const auto rules = b.rules_for(queue, *message);
  if (!rules.routed) return {true, false, std::nullopt};  // acked unseen once taken
  const auto expiry = expiry_of(*message, rules.message_ttl);
  if (!expiry) return {};
  if (wall_clock_ms() > *expiry) return {true, false, std::nullopt};
  return {false, false, *expiry};
}

void expiry_sweeper::looked(const std::string& queue, const head& h) {
  if (stopped_) return;
  if (h.unused) {
    if (auto b = broker_.lock()) b->delete_queue(queue);
    paces_.erase(queue);
    return next_queue();
  }
  if (h.expired) return take(queue);
  auto& p = paces_[queue];
  p.taken = 0;
  if (h.expires_at_ms) {
    p.idle_seconds = 1;
    const auto wait = std::min<std::uint64_t>(*h.expires_at_ms - std::min(*h.expires_at_ms, wall_clock_ms()),
                                              slowest_idle_seconds * 1000);
    p.due = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait);
  } else {
    p.due = std::chrono::steady_clock::now() + std::chrono::seconds(p.idle_seconds);
    p.idle_seconds = std::min(slowest_idle_seconds, p.idle_seconds * 2);
  }
  next_queue();
}

// A pull of one from the queue's own consumer brings the head (or, when another reader came
// first, the message after it, which goes straight back).
void expiry_sweeper::take(const std::string& queue) {
  auto b = broker_.lock();
  if (!b) return;
  auto bus = b->bus_ptr();
  const std::uint64_t pull = ++pull_;
  bus::puller_callbacks callbacks;
  callbacks.on_delivery = [weak = weak_from_this(), bus, queue, pull](bus::delivery d) {
    auto self = weak.lock();
    auto owner = self ? self->broker_.lock() : nullptr;
    if (!owner || self->pull_ != pull || self->stopped_) return bus->nak(d.reply);
    ++self->pull_;  // answered
    const bool gave_up = passed_over(*owner, self->strand_, queue, d);
    if (!gave_up) bus->nak(d.reply);
    boost::asio::post(self->strand_, [self, queue, gave_up] { self->taken(queue, gave_up); });
  };
  callbacks.on_event = [weak = weak_from_this(), queue, pull](bus::pull_event) {
    auto self = weak.lock();
    if (!self || self->pull_ != pull) return;
    ++self->pull_;
    boost::asio::post(self->strand_, [self, queue] { self->taken(queue, false); });
  };
  puller_ = bus->make_puller(routing::consumer_name(queue), strand_, std::move(callbacks), b->sharing_of(queue));
  puller_->request(1, std::chrono::milliseconds(0));
}

void expiry_sweeper::taken(const std::string& queue, bool gave_up) {
  puller_.reset();
  if (stopped_) return;
  auto& p = paces_[queue];
  if (gave_up && ++p.taken < most_per_round) {
    round_.insert(round_.begin(), queue);  // the next head may have expired too
  } else {
    p.taken = 0;
    p.idle_seconds = 1;
    p.due = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  }
  next_queue();
}

}  // namespace amqp::broker
