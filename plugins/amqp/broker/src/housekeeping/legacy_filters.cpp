#include "housekeeping/legacy_filters.hpp"

#include <boost/asio/post.hpp>
#include <algorithm>

#include "amqp/routing/names.hpp"
#include "broker_state.hpp"
#include "topology/topology_store.hpp"

namespace amqp::broker {
namespace {

// A queue whose consumer does not move (nobody consumes it) is looked at less and less often.
constexpr int slowest_seconds = 32;

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<std::string> without(const std::vector<std::string>& all, const std::vector<std::string>& some) {
  std::vector<std::string> out;
  for (const auto& f : all)
    if (std::find(some.begin(), some.end(), f) == some.end()) out.push_back(f);
  return out;
}

bool reads_any_of(const std::vector<std::string>& filters, const std::vector<std::string>& old) {
  return std::any_of(old.begin(), old.end(), [&](const std::string& f) {
    return std::find(filters.begin(), filters.end(), f) != filters.end();
  });
}

std::string listed(const std::vector<std::string>& filters) {
  std::string out;
  for (const auto& f : filters) out += (out.empty() ? "" : ", ") + f;
  return out;
}

}  // namespace

legacy_filters::legacy_filters(strand on) : strand_(on), timer_(on) {}

std::optional<bus::bus_error> legacy_filters::load(broker& b) {
  auto consumers = b.bus().queue_consumer_filters();
  if (!consumers) return consumers.error();
  // Nothing publishes to exchange subjects once every replica runs this release: what the old
  // filters hold was stored by now.
  auto mark = b.bus().last_sequence();
  if (!mark) return mark.error();
  // The bus names consumers; the mirror knows which queue each one is, and its own subject.
  const auto own_by_consumer = b.read_topology([](const routing::topology& t) {
    std::map<std::string, std::pair<std::string, std::vector<std::string>>> out;
    for (const auto& entry : t.queues())
      out.emplace(routing::consumer_name(entry.first), std::pair{entry.first, sorted(t.queue_filters(entry.first))});
    return out;
  });
  std::lock_guard lock(mutex_);
  for (const auto& [consumer, filters] : *consumers) {
    auto known = own_by_consumer.find(consumer);
    if (known == own_by_consumer.end()) continue;  // deleted since, or not a queue's
    const auto& [queue, own] = known->second;
    if (own.empty() || filters == own) continue;
    queues_[queue] = legacy_queue{filters, without(filters, own), *mark};
    b.note("queue '" + queue + "' keeps the filters of the previous release (" + listed(filters) +
           ") until what they hold up to stream sequence " + std::to_string(*mark) + " is settled");
  }
  return std::nullopt;
}

void legacy_filters::start(std::weak_ptr<broker> b) {
  broker_ = std::move(b);
  boost::asio::post(strand_, [self = shared_from_this()] { self->arm(); });
}

void legacy_filters::stop() {
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
  }
  boost::asio::post(strand_, [self = shared_from_this()] { self->timer_.cancel(); });
}

bool legacy_filters::stopped() const {
  std::lock_guard lock(mutex_);
  return stopped_;
}

std::optional<std::vector<std::string>> legacy_filters::filters_of(const std::string& queue) const {
  std::lock_guard lock(mutex_);
  auto it = queues_.find(queue);
  if (it == queues_.end() || it->second.settled) return std::nullopt;
  return it->second.filters;
}

bool legacy_filters::empty() const {
  std::lock_guard lock(mutex_);
  return queues_.empty();
}

void legacy_filters::forget(const std::string& queue) {
  std::lock_guard lock(mutex_);
  queues_.erase(queue);
}

// On strand_: a look every second while legacy queues are left; none once they are all narrow.
void legacy_filters::arm() {
  {
    std::lock_guard lock(mutex_);
    if (stopped_ || queues_.empty()) return;
  }
  timer_.expires_after(std::chrono::seconds(1));
  timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& ec) {
    auto self = weak.lock();
    auto b = self ? self->broker_.lock() : nullptr;
    if (ec || !b || self->stopped()) return;
    boost::asio::post(b->bus_executor(), [self, b] { self->round(b); });
  });
}

void legacy_filters::round(const std::shared_ptr<broker>& b) {
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [queue, q] : due(now)) {
    if (stopped()) return;
    paced(*b, queue, look(*b, queue, q), now);
  }
  boost::asio::post(strand_, [self = shared_from_this()] { self->arm(); });
}

std::vector<std::pair<std::string, legacy_filters::legacy_queue>> legacy_filters::due(
    std::chrono::steady_clock::time_point now) const {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<std::string, legacy_queue>> out;
  for (const auto& entry : queues_)
    if (entry.second.due <= now) out.push_back(entry);
  return out;
}

legacy_filters::look_result legacy_filters::look(broker& b, const std::string& queue, const legacy_queue& q) {
  auto info = b.bus().peek_queue(routing::consumer_name(queue));
  if (!info) {
    if (info.error().kind == bus::bus_errc::not_found) return {look_result::done};  // the queue went
    b.warn("looking whether queue '" + queue + "' still holds messages of its previous filters: " +
           info.error().text + " (tried again in a second)");
    return {look_result::failed};
  }
  // Narrowed: by this process's last look, or by another replica of this release.
  if (!reads_any_of(info->filters, q.old)) return {look_result::done};
  if (!q.settled) {
    auto left = nothing_left(b, queue, q, *info);
    if (!left) return {look_result::failed};
    if (!*left) return {look_result::left, info->ack_floor_stream_seq};
  }
  narrow(b, queue);
  return {look_result::narrowing};
}

// A message delivered and not settled is still stored, so a look from the ack floor on finds it.
std::optional<bool> legacy_filters::nothing_left(broker& b, const std::string& queue, const legacy_queue& q,
                                                 const bus::queue_info& info) {
  if (info.ack_floor_stream_seq >= q.mark) return true;
  auto next = b.bus().next_message(info.ack_floor_stream_seq + 1, q.old);
  if (!next) {
    b.warn("looking whether queue '" + queue + "' still holds messages of its previous filters: " +
           next.error().text + " (tried again in a second)");
    return std::nullopt;
  }
  return !*next || (*next)->seq > q.mark;
}

// From now on filters_of answers the queue's own subject, so a re-declare narrows it too; the
// next look confirms it (a converge another thread began with the old filters may land after
// this one: it is narrowed again).
void legacy_filters::narrow(broker& b, const std::string& queue) {
  {
    std::lock_guard lock(mutex_);
    auto it = queues_.find(queue);
    if (it == queues_.end()) return;
    it->second.settled = true;
  }
  if (auto failed = store::converge_consumer(b, b.bus(), queue))
    b.warn("narrowing queue '" + queue + "' to its own subject: " + failed->text + " (tried again in a second)");
}

void legacy_filters::paced(broker& b, const std::string& queue, const look_result& r,
                           std::chrono::steady_clock::time_point now) {
  bool narrowed_here = false;
  {
    std::lock_guard lock(mutex_);
    auto it = queues_.find(queue);
    if (it == queues_.end()) return;
    auto& q = it->second;
    if (r.what == look_result::done) {
      narrowed_here = q.settled;
      queues_.erase(it);
    } else {
      const bool moved = r.what != look_result::left || r.ack_floor != q.ack_floor;
      q.seconds = moved ? 1 : std::min(slowest_seconds, q.seconds * 2);
      q.ack_floor = r.ack_floor;
      q.due = now + std::chrono::seconds(q.seconds);
    }
  }
  if (narrowed_here)
    b.note("queue '" + queue + "' reads only its own subject now: what it held from the previous release is settled");
}

}  // namespace amqp::broker
