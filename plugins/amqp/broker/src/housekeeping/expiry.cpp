#include "housekeeping/expiry.hpp"

#include <boost/asio/post.hpp>
#include <algorithm>
#include <charconv>
#include <iterator>

#include "amqp/routing/names.hpp"
#include "amqp/routing/subject.hpp"
#include "amqp/routing/topology.hpp"
#include "channel/channel_context.hpp"
#include "housekeeping/dead_letter.hpp"

namespace amqp::broker {

std::vector<expiry_look> expiries_of(const routing::topology& t, const std::vector<std::string>& queues,
                                     std::string_view property_octets) {
  std::vector<expiry_look> looks;
  if (!t.has_timed_queues()) return looks;
  auto own = wire::expiration_of(property_octets);
  const std::optional<std::uint64_t> expiration_ms = own ? *own : std::nullopt;
  for (const auto& queue : queues) {
    const auto* def = t.find_queue(queue);
    if (def == nullptr || !(def->message_ttl || def->dead_letter)) continue;
    auto ttl = def->message_ttl;
    if (expiration_ms) ttl = ttl ? std::min(*ttl, *expiration_ms) : *expiration_ms;
    if (ttl) looks.push_back({queue, *ttl});
  }
  return looks;
}

namespace {

// A look that found the queue being read (its own take's pull may still be listed), its head
// requeued, or the bus not answering looks again a second later, then twice as late each time
// up to this: what this replica cannot see happen (another replica's consumer going) is found then.
constexpr int slowest_again_seconds = 64;
// Heads one queue gives up in a row; then the other queues due get their look first.
constexpr int most_in_a_row = 256;

std::vector<std::string> sweepable(const routing::topology& t) {
  std::vector<std::string> names;
  for (const auto& [name, def] : t.queues())
    if (def.message_ttl || def.dead_letter || def.expires) names.push_back(name);
  return names;
}

expiry_sweeper::clock::time_point steady_at(std::uint64_t wall_ms) {
  const auto now_ms = wall_clock_ms();
  const auto ahead = wall_ms > now_ms ? wall_ms - now_ms : 0;
  return expiry_sweeper::clock::now() + std::chrono::milliseconds(ahead);
}

}  // namespace

expiry_sweeper::expiry_sweeper(std::weak_ptr<broker> b, strand on)
    : broker_(std::move(b)), strand_(on), timer_(on) {}

void expiry_sweeper::start() {
  boost::asio::post(strand_, [self = shared_from_this()] {
    auto b = self->broker_.lock();
    if (!b || self->stopped_) return;
    const auto now = clock::now();
    for (const auto& queue : b->read_topology(sweepable)) self->schedule(queue, now, true);
    self->arm();
  });
}

void expiry_sweeper::stop() {
  boost::asio::post(strand_, [self = shared_from_this()] {
    self->stopped_ = true;
    self->timer_.cancel();
    self->round_.clear();
    self->dues_.clear();
    self->due_of_.clear();
    self->puller_.reset();
  });
}

void expiry_sweeper::look_by(std::string queue, clock::time_point at) {
  boost::asio::post(strand_, [self = shared_from_this(), queue = std::move(queue), at] {
    if (self->stopped_) return;
    self->schedule(queue, at, true);
    if (!self->in_round_) self->arm();
  });
}

void expiry_sweeper::schedule(const std::string& queue, clock::time_point at, bool only_earlier) {
  auto it = due_of_.find(queue);
  if (it != due_of_.end()) {
    if (only_earlier && it->second <= at) return;
    dues_.erase({it->second, queue});
    it->second = at;
  } else {
    due_of_.emplace(queue, at);
  }
  dues_.emplace(at, queue);
}

void expiry_sweeper::unschedule(const std::string& queue) {
  auto it = due_of_.find(queue);
  if (it == due_of_.end()) return;
  dues_.erase({it->second, queue});
  due_of_.erase(it);
}

// The timer at the earliest look due; none while nothing is.
void expiry_sweeper::arm() {
  if (stopped_ || in_round_) return;
  timer_.cancel();
  if (dues_.empty()) return;
  timer_.expires_at(dues_.begin()->first);
  timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self || ec || self->stopped_) return;
    self->on_timer();
  });
}

void expiry_sweeper::on_timer() {
  if (in_round_) return;
  const auto now = clock::now();
  while (!dues_.empty() && dues_.begin()->first <= now) {
    auto [at, queue] = *dues_.begin();
    dues_.erase(dues_.begin());
    due_of_.erase(queue);
    round_.push_back(std::move(queue));
  }
  if (round_.empty()) return arm();
  in_round_ = true;
  next_queue();
}

void expiry_sweeper::next_queue() {
  if (stopped_) return;
  if (round_.empty()) {
    in_round_ = false;
    return arm();
  }
  auto b = broker_.lock();
  if (!b) return;
  std::string queue = std::move(round_.front());
  round_.pop_front();
  auto given_up = given_up_[queue];
  boost::asio::post(b->bus_executor(), [self = shared_from_this(), queue = std::move(queue), given_up] {
    auto owner = self->broker_.lock();
    if (!owner) return;
    auto h = self->look(*owner, queue, given_up);
    auto& io = owner->io();  // not on a bus thread: the broker's last reference may be this one
    boost::asio::post(io, [owner = std::move(owner)] {});
    boost::asio::post(self->strand_, [self, queue, h] { self->looked(queue, h); });
  });
}

// Blocking, on the bus pool. Nothing to do while a pull of any replica waits on the queue (that
// reader finds what expired), or when the head was delivered before (requeued).
expiry_sweeper::head expiry_sweeper::look(broker& b, const std::string& queue, const std::set<std::uint64_t>& given_up) {
  // A count that lags only delays the look.
  auto info = bus::queue_counts(b.bus(), routing::consumer_name(queue), routing::queue_subject(queue), true);
  if (!info) return {false, false, std::nullopt, info.error().kind != bus::bus_errc::not_found};
  const auto expires = b.read_topology([&](const routing::topology& t) -> std::optional<std::uint64_t> {
    const auto* def = t.find_queue(queue);
    return def ? def->expires : std::nullopt;
  });
  head use;
  if (expires) {
    use = look_at_use(b, queue, *info, *expires);
    if (use.unused) return use;
  }
  auto h = look_at_head(b, queue, *info, given_up);
  h.ack_floor = info->ack_floor_stream_seq;
  // The expired head is taken by a pull, on a consumer its first reader makes; none yet: looked at again.
  if (h.expired && !b.make_consumer(b.bus(), queue)) return {false, false, std::nullopt, true};
  if (!h.expires_at_ms || (use.expires_at_ms && *use.expires_at_ms < *h.expires_at_ms)) h.expires_at_ms = use.expires_at_ms;
  return h;
}

expiry_sweeper::head expiry_sweeper::look_at_use(broker& b, const std::string& queue, const bus::queue_info& info,
                                                 std::uint64_t expires) {
  const auto in_use = head{false, false, wall_clock_ms() + expires / 2};  // looked at again well before it could expire
  if (b.consumer_count(queue) > 0) {
    // Other replicas see a consumer only while it has a pull waiting; one holding all its prefetch
    // keeps the queue for them through the use stamp.
    b.note_use(queue, broker::use::consumer_lives);
    return in_use;
  }
  if (info.num_waiting > 0) return in_use;
  std::uint64_t last = std::max(info.last_active_ms, b.last_use_here_ms(queue));
  if (auto stamp = b.bus().kv_get(routing::use_key(queue))) {
    std::uint64_t ms = 0;
    const auto& text = stamp->value;
    if (std::from_chars(text.data(), text.data() + text.size(), ms).ec == std::errc{}) last = std::max(last, ms);
  }
  if (wall_clock_ms() > last + expires) return {false, true, std::nullopt};
  return {false, false, last + expires};
}

// When the first message of `queue` from stream sequence `from` on (skipping `skip`) expires.
expiry_sweeper::message_expiry expiry_sweeper::expiry_from(broker& b, const std::string& queue,
                                                           const std::vector<std::string>& filters,
                                                           std::uint64_t from, const std::set<std::uint64_t>& skip) {
  for (;;) {
    auto next = b.bus().next_message(from, filters);
    if (!next) return {true, false, std::nullopt};
    if (!*next) return {};
    if (skip.contains((*next)->seq)) {
      from = (*next)->seq + 1;
      continue;
    }
    auto message = b.bus().read_message((*next)->seq);
    if (!message) return {true, false, std::nullopt};
    return {false, true, expiry_of(*message, b.rules_for(queue).message_ttl)};
  }
}

expiry_sweeper::head expiry_sweeper::look_at_head(broker& b, const std::string& queue, const bus::queue_info& info,
                                                  const std::set<std::uint64_t>& given_up) {
  head again;
  again.again = true;
  if (info.num_waiting > 0) return again;  // read elsewhere: that reader finds what expired
  const auto own = static_cast<std::uint64_t>(
      std::distance(given_up.upper_bound(info.ack_floor_stream_seq), given_up.end()));
  const bool requeued = info.requeued() > own;
  if (!requeued && info.num_pending == 0) return {};  // nothing until the next publish
  const auto filters = b.filters_of(queue);
  if (filters.empty()) return {};
  message_expiry fresh;  // the first message never delivered
  if (info.num_pending > 0) fresh = expiry_from(b, queue, filters, info.delivered_stream_seq + 1, {});
  if (fresh.failed) return again;
  if (fresh.found && !fresh.at_ms) return requeued ? again : head{};  // it never expires, nor what is behind it
  if (!requeued) return fresh.found ? due_at(*fresh.at_ms) : head{};
  // A message delivered and not settled: requeued, or held by a reader on another replica (the
  // bus does not say which). A pull of one brings a requeued one first, else the head above, so
  // the queue is taken only once both have expired: one that has not must not be delivered.
  const auto unsettled = expiry_from(b, queue, filters, info.ack_floor_stream_seq + 1, given_up);
  if (unsettled.failed || !unsettled.found || !unsettled.at_ms) return again;
  return due_at(std::max(*unsettled.at_ms, fresh.found ? *fresh.at_ms : 0));
}

expiry_sweeper::head expiry_sweeper::due_at(std::uint64_t wall_ms) {
  if (wall_clock_ms() > wall_ms) return {true, false, std::nullopt};
  return {false, false, wall_ms};
}

int expiry_sweeper::back_off(const std::string& queue) {
  auto& seconds = again_seconds_[queue];
  seconds = seconds == 0 ? 1 : std::min(slowest_again_seconds, seconds * 2);
  return seconds;
}

void expiry_sweeper::looked(const std::string& queue, const head& h) {
  if (stopped_) return;
  if (auto it = given_up_.find(queue); it != given_up_.end()) {
    it->second.erase(it->second.begin(), it->second.upper_bound(h.ack_floor));
    if (it->second.empty()) given_up_.erase(it);
  }
  if (h.unused) {
    if (auto b = broker_.lock()) b->delete_queue(queue);
    taken_.erase(queue);
    return next_queue();
  }
  if (h.expired) return take(queue);
  taken_.erase(queue);
  if (h.again) {
    schedule(queue, clock::now() + std::chrono::seconds(back_off(queue)), true);
  } else {
    again_seconds_.erase(queue);
  }
  if (h.expires_at_ms) schedule(queue, steady_at(*h.expires_at_ms), true);
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
    // The next look comes once the head given up is settled, and does not count it as requeued
    // while the bus still counts it unacknowledged (given_up_).
    auto settled = [self, queue, seq = d.stream_seq] {
      boost::asio::post(self->strand_, [self, queue, seq] {
        self->given_up_[queue].insert(seq);
        self->taken(queue, true);
      });
    };
    if (passed_over(*owner, self->strand_, queue, d, std::move(settled))) return;
    bus->return_unseen(d.reply);  // no client saw it: its delivery count stays
    boost::asio::post(self->strand_, [self, queue] { self->taken(queue, false); });
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
  if (gave_up) again_seconds_.erase(queue);  // the queue moves: a look that must wait waits a second
  if (gave_up && ++taken_[queue] < most_in_a_row) {
    round_.push_front(queue);  // the next head may have expired too
  } else {
    // Looked at again after the other queues due when it gave up heads. When the pull brought
    // none (another reader came first, or holds the expired head), later, backing off as a look
    // that must wait, so that it never spins.
    taken_.erase(queue);
    schedule(queue, clock::now() + std::chrono::seconds(gave_up ? 0 : back_off(queue)), true);
  }
  next_queue();
}

}  // namespace amqp::broker
