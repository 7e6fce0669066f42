#include "fake_bus.hpp"

#include <boost/asio/post.hpp>
#include <algorithm>
#include <iterator>
#include <limits>
#include <string_view>

#include "amqp/bus/base64.hpp"
#include "amqp/subject_match.hpp"

namespace amqp::broker::test {
namespace {

bus::bus_error not_found(const std::string& what) { return {what + ": not found", 0, bus::bus_errc::not_found}; }

}  // namespace

// A puller's requests live in the fake bus (waiting_); deliveries and events are posted to its
// executor, so they arrive in the order the bus decided them, as the real puller's do.
class fake_puller final : public bus::puller, public std::enable_shared_from_this<fake_puller> {
 public:
  fake_puller(std::shared_ptr<fake_bus> bus, std::string queue, boost::asio::any_io_executor ex,
              bus::puller_callbacks cb, int priority)
      : bus_(std::move(bus)), queue_(std::move(queue)), ex_(std::move(ex)), callbacks_(std::move(cb)),
        priority_(priority) {}
  ~fake_puller() override { bus_->forget_requests(*this); }

  void request(std::uint32_t batch, std::chrono::milliseconds expires) override {
    if (stopping_ || batch == 0) return;
    if (queue_ != bus::due_consumer) bus_->requests_.push_back({queue_, batch, expires, priority_});
    asked_ += batch;
    bus_->request(shared_from_this(), batch, expires);
  }
  std::uint32_t asked() const override { return asked_; }
  std::uint32_t window_in_bytes() const override { return std::numeric_limits<std::uint32_t>::max(); }
  void stop() override {
    if (stopping_) return;
    stopping_ = true;
    bus_->forget_requests(*this);  // what was not served yet will not be
    asked_ = 0;
    // After what was already sent: the executor runs posted work in order.
    boost::asio::post(ex_, [self = shared_from_this()] {
      auto on_stopped = std::move(self->callbacks_.on_stopped);
      self->callbacks_ = {};
      if (on_stopped) on_stopped();
    });
  }
  const std::string& queue() const override { return queue_; }

  // The bus sent one message (posted to the executor).
  void send(bus::delivery d) {
    boost::asio::post(ex_, [self = shared_from_this(), d = std::move(d)]() mutable {
      if (self->asked_ > 0) --self->asked_;
      if (!self->callbacks_.on_delivery) return self->bus_->nak(d.reply);  // nobody listens: back
      self->callbacks_.on_delivery(std::move(d));
    });
  }
  void event(bus::pull_event e) {
    boost::asio::post(ex_, [self = shared_from_this(), e] {
      self->asked_ -= std::min(self->asked_, e.unfilled);
      if (self->callbacks_.on_event) self->callbacks_.on_event(e);
    });
  }

 private:
  std::shared_ptr<fake_bus> bus_;  // a puller may outlive the broker in a posted handler
  std::string queue_;
  boost::asio::any_io_executor ex_;
  bus::puller_callbacks callbacks_;
  int priority_ = 0;
  std::uint32_t asked_ = 0;
  bool stopping_ = false;
};

fake_bus::fake_bus(boost::asio::io_context& io) : io_(io) {
  max_payload_ = 1024 * 1024;
  consumers_[bus::due_consumer].filters = {std::string{bus::due_subject_root} + ".>"};
}

fake_bus::~fake_bus() = default;

// ---- what tests do

std::uint64_t fake_bus::store(const std::string& subject, const std::string& property_octets,
                              const std::string& body) {
  stream_.push_back({subject, property_octets, body});
  const std::uint64_t seq = stream_.size();
  for (auto& [name, c] : consumers_) {
    if (matches(c, subject)) dispatch(name);
  }
  return seq;
}

std::size_t fake_bus::publishes_waiting() const {
  return static_cast<std::size_t>(
      std::count_if(publishes_.begin(), publishes_.end(), [](const pending_publish& p) { return !p.answered; }));
}

void fake_bus::complete_publish(std::size_t index, bus::bus_status outcome) {
  auto& p = publishes_.at(index);
  if (p.answered) return;
  p.answered = true;
  const bool duplicate = outcome && !p.msg_id.empty() && !stored_ids_.insert(p.msg_id).second;
  if (outcome && !duplicate) store(p.subject, p.property_octets, p.body);
  boost::asio::post(p.ex, [done = std::move(p.done), outcome]() mutable { done(outcome); });
}

std::vector<settlement> fake_bus::settlements_of(settlement::kind k) const {
  std::vector<settlement> out;
  std::copy_if(settlements_.begin(), settlements_.end(), std::back_inserter(out),
               [k](const settlement& s) { return s.what == k; });
  return out;
}

std::uint64_t fake_bus::ready(const std::string& consumer) const {
  auto it = consumers_.find(consumer);
  if (it != consumers_.end()) return pending_count(it->second) + it->second.requeued.size();
  // Not read yet: what its subject holds (a queue's consumer name is its subject's last word).
  const std::string subject = "amqp._." + consumer;
  return static_cast<std::uint64_t>(
      std::count_if(stream_.begin(), stream_.end(), [&](const message& m) { return !m.purged && m.subject == subject; }));
}

std::uint64_t fake_bus::unsettled(const std::string& consumer) const {
  auto it = consumers_.find(consumer);
  if (it == consumers_.end()) return 0;
  return static_cast<std::uint64_t>(std::count_if(it->second.ack_pending.begin(), it->second.ack_pending.end(),
                                                  [](const auto& e) { return !e.second.reply.empty(); }));
}

std::map<std::string, std::uint64_t> fake_bus::holdings() const {
  std::map<std::string, std::uint64_t> out;
  for (const auto& [consumer, state] : consumers_)
    if (auto n = unsettled(consumer)) out.emplace(consumer, n);
  return out;
}

bool fake_bus::holds(const std::string& reply) const {
  auto known = replies_.find(reply);
  if (known == replies_.end()) return false;
  auto c = consumers_.find(known->second.first);
  if (c == consumers_.end()) return false;
  auto h = c->second.ack_pending.find(known->second.second);
  return h != c->second.ack_pending.end() && h->second.reply == reply;
}

std::uint32_t fake_bus::open_requests(const std::string& consumer) const {
  std::uint32_t n = 0;
  for (const auto& w : waiting_) {
    auto p = w.puller.lock();
    if (p && p->queue() == consumer) n += w.left;
  }
  return n;
}

// ---- the stream and its consumers

bool fake_bus::matches(const consumer_state& c, const std::string& subject) const {
  return std::any_of(c.filters.begin(), c.filters.end(),
                     [&](const std::string& f) { return subject_matches(f, subject); });
}

std::optional<std::uint64_t> fake_bus::next_pending(const consumer_state& c) const {
  for (std::uint64_t seq = c.cursor + 1; seq <= stream_.size(); ++seq) {
    if (!stream_[seq - 1].purged && matches(c, stream_[seq - 1].subject)) return seq;
  }
  return std::nullopt;
}

std::uint64_t fake_bus::pending_count(const consumer_state& c) const {
  std::uint64_t n = 0;
  for (std::uint64_t seq = c.cursor + 1; seq <= stream_.size(); ++seq)
    n += !stream_[seq - 1].purged && matches(c, stream_[seq - 1].subject);
  return n;
}

std::optional<bus::delivery> fake_bus::take(const std::string& consumer) {
  auto& c = consumers_.at(consumer);
  std::uint64_t seq = 0;
  if (!c.requeued.empty()) {
    seq = c.requeued.front();
    c.requeued.pop_front();
  } else if (auto next = next_pending(c)) {
    seq = *next;
    c.cursor = seq;
  } else {
    return std::nullopt;
  }
  c.last_active_ms = now_ms();
  auto& h = c.ack_pending[seq];
  ++h.deliveries;
  h.reply = "$JS.ACK.AMQP." + consumer + "." + std::to_string(seq) + "." + std::to_string(++reply_serial_);
  replies_[h.reply] = {consumer, seq};
  handed_out_.push_back({h.reply, consumer, seq});
  const auto& m = stream_[seq - 1];
  bus::delivery d;
  d.subject = m.subject;
  d.amqp_props = m.property_octets;
  d.body = m.body;
  d.reply = h.reply;
  d.stream_seq = seq;
  d.delivered = h.deliveries;
  d.pending = pending_count(c);
  d.stored_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  return d;
}

void fake_bus::dispatch(const std::string& consumer) {
  if (!consumers_.contains(consumer)) return;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto p = it->puller.lock();
    if (!p) {
      it = waiting_.erase(it);
      continue;
    }
    if (p->queue() != consumer) {
      ++it;
      continue;
    }
    while (it->left > 0) {
      auto d = take(consumer);
      if (!d) return;
      --it->left;
      p->send(std::move(*d));
    }
    it = waiting_.erase(it);
  }
}

void fake_bus::request(const std::shared_ptr<fake_puller>& p, std::uint32_t batch, std::chrono::milliseconds expires) {
  if (!consumers_.contains(p->queue())) {
    return p->event({bus::pull_status::consumer_gone, 409, "Consumer Deleted", batch});
  }
  if (expires.count() == 0) {  // no wait: one message now, or 404
    if (auto d = take(p->queue())) {
      p->send(std::move(*d));
      if (batch > 1) p->event({bus::pull_status::no_messages, 404, "No Messages", batch - 1});
      return;
    }
    return p->event({bus::pull_status::no_messages, 404, "No Messages", batch});
  }
  waiting_.push_back({p, batch});
  dispatch(p->queue());
}

void fake_bus::forget_requests(const fake_puller& p) {
  std::erase_if(waiting_, [&](const waiting_request& w) {
    auto locked = w.puller.lock();
    return !locked || locked.get() == &p;
  });
}

void fake_bus::settle(const std::string& reply, settlement::kind how) {
  ++times_settled_[reply];
  auto known = replies_.find(reply);
  if (known == replies_.end()) return settlements_.push_back({how, {}, 0, true});
  const auto [consumer, seq] = known->second;
  replies_.erase(known);
  auto c = consumers_.find(consumer);
  if (c == consumers_.end()) return settlements_.push_back({how, consumer, seq, true});  // deleted since
  auto h = c->second.ack_pending.find(seq);
  if (h == c->second.ack_pending.end() || h->second.reply != reply) {
    return settlements_.push_back({how, consumer, seq, true});
  }
  settlements_.push_back({how, consumer, seq, false});
  c->second.last_active_ms = now_ms();
  if (how == settlement::kind::nak) {
    h->second.reply.clear();
    c->second.requeued.push_back(seq);
    dispatch(consumer);
  } else {
    c->second.ack_pending.erase(h);
    settled_consumers_.insert(consumer);
  }
}

std::vector<std::string> fake_bus::take_settled() {
  std::vector<std::string> out(settled_consumers_.begin(), settled_consumers_.end());
  settled_consumers_.clear();
  return out;
}

bus::bus_status fake_bus::purge_subject_below(const std::string& subject, std::uint64_t below) {
  for (std::size_t i = 0; i + 1 < below && i < stream_.size(); ++i)
    if (subject_matches(subject, stream_[i].subject)) stream_[i].purged = true;
  return bus::bus_ok();
}

// ---- the bucket

void fake_bus::notify(const std::string& key, std::optional<std::string> value, std::uint64_t revision) {
  if (!watch_ex_ || !on_change_) return;
  boost::asio::post(*watch_ex_, [cb = on_change_, key, value = std::move(value), revision] {
    (*cb)(key, value, revision);
  });
}

std::uint64_t fake_bus::write(const std::string& key, const std::string& value) {
  kv_[key] = {value, ++kv_revision_};
  notify(key, value, kv_revision_);
  return kv_revision_;
}

bus::bus_result<bus::topology_watch> fake_bus::watch_topology(boost::asio::any_io_executor ex, on_change_fn on_change,
                                                              std::optional<std::chrono::steady_clock::time_point>) {
  for (const auto& [key, entry] : kv_) on_change(key, entry.value, entry.revision);  // the replay, synchronous
  watch_ex_ = std::move(ex);
  on_change_ = std::make_shared<on_change_fn>(std::move(on_change));
  return bus::topology_watch{};  // a handle without state: the fake keeps the callback
}

bus::bus_result<std::vector<bus::kv_keyed_entry>> fake_bus::kv_snapshot(std::chrono::steady_clock::time_point) {
  std::vector<bus::kv_keyed_entry> out;
  for (const auto& [key, entry] : kv_) out.push_back({key, entry});
  return out;
}

bus::bus_result<bus::kv_entry> fake_bus::kv_get(const std::string& key) {
  auto it = kv_.find(key);
  if (it == kv_.end()) return not_found("key " + key);
  return it->second;
}

bus::bus_result<std::uint64_t> fake_bus::kv_create(const std::string& key, const std::string& value) {
  if (kv_.contains(key)) return bus::bus_error{"key " + key + " exists", 10071, bus::bus_errc::conflict};
  return write(key, value);
}

bus::bus_result<std::uint64_t> fake_bus::kv_update(const std::string& key, const std::string& value,
                                                   std::uint64_t expected_revision) {
  auto it = kv_.find(key);
  if (it == kv_.end() || it->second.revision != expected_revision)
    return bus::bus_error{"key " + key + ": wrong last sequence", 10071, bus::bus_errc::conflict};
  return write(key, value);
}

bus::bus_result<std::uint64_t> fake_bus::kv_put(const std::string& key, const std::string& value) {
  return write(key, value);
}

bus::bus_status fake_bus::kv_delete(const std::string& key) {
  if (kv_.erase(key) == 0) return not_found("key " + key);
  notify(key, std::nullopt, ++kv_revision_);
  return bus::bus_ok();
}

// ---- queues

bus::bus_status fake_bus::ensure_queue_consumer(const std::string& queue, const std::vector<std::string>& filters,
                                                bus::queue_sharing) {
  consumers_[queue].filters = filters;  // a new one starts at the first message
  return bus::bus_ok();
}

bus::bus_status fake_bus::delete_queue_consumer(const std::string& queue) {
  consumers_.erase(queue);
  // Its waiting requests end as the server ends them (409, no count of what they did not bring).
  std::vector<std::pair<std::shared_ptr<fake_puller>, std::uint32_t>> ended;
  std::erase_if(waiting_, [&](const waiting_request& w) {
    auto p = w.puller.lock();
    if (!p || p->queue() != queue) return !p;
    ended.emplace_back(std::move(p), w.left);
    return true;
  });
  for (auto& [p, left] : ended) p->event({bus::pull_status::consumer_gone, 409, "Consumer Deleted", left});
  return bus::bus_ok();
}

bus::bus_result<std::vector<std::string>> fake_bus::queues_to_converge() { return std::vector<std::string>{}; }

bus::bus_result<std::map<std::string, std::vector<std::string>>> fake_bus::queue_consumer_filters() {
  std::map<std::string, std::vector<std::string>> all;
  for (const auto& [name, c] : consumers_) {
    if (name.starts_with('~')) continue;  // the adaptor's own are no queues
    auto sorted = c.filters;
    std::sort(sorted.begin(), sorted.end());
    all.emplace(name, std::move(sorted));
  }
  return all;
}

bus::bus_result<bus::queue_info> fake_bus::queue_info(const std::string& queue) {
  auto it = consumers_.find(queue);
  if (it == consumers_.end()) return not_found("consumer " + queue);
  const auto& c = it->second;
  bus::queue_info info;
  info.num_pending = pending_count(c);
  info.num_ack_pending = c.ack_pending.size();
  info.held_here = unsettled(queue);
  info.delivered_stream_seq = c.cursor;
  info.last_active_ms = c.last_active_ms;
  info.ack_floor_stream_seq = c.ack_pending.empty() ? c.cursor : c.ack_pending.begin()->first - 1;
  info.filters = c.filters;
  std::sort(info.filters.begin(), info.filters.end());
  return info;
}

bus::bus_result<bus::queue_info> fake_bus::peek_queue(const std::string& queue) { return queue_info(queue); }

bus::bus_result<std::map<std::string, bus::queue_info>> fake_bus::peek_all_queues() {
  std::map<std::string, bus::queue_info> all;
  for (const auto& [name, c] : consumers_)
    if (!name.starts_with('~')) all.emplace(name, *queue_info(name));  // the adaptor's own are no queues
  return all;
}

bus::bus_result<std::size_t> fake_bus::retarget_schedules(
    const std::function<std::optional<std::string>(std::string_view target)>& retarget) {
  std::size_t moved = 0;
  for (auto& d : delayed_) {
    if (d.fired || d.purged) continue;
    if (auto target = retarget(d.subject)) {
      d.subject = std::move(*target);
      ++moved;
    }
  }
  return moved;
}

bus::bus_result<std::map<std::string, std::uint64_t>> fake_bus::stored_per_subject(const std::string& filter) {
  std::map<std::string, std::uint64_t> out;
  for (const auto& m : stream_)
    if (!m.purged && subject_matches(filter, m.subject)) ++out[m.subject];
  return out;
}

bus::bus_status fake_bus::purge_subject(const std::string& subject) {
  if (failing_purges_ > 0) {
    --failing_purges_;
    return bus::bus_error{"drop the messages on " + subject + ": Timeout", 0, bus::bus_errc::timeout};
  }
  for (auto& m : stream_)
    if (m.subject == subject) m.purged = true;
  if (subject.ends_with(".>")) {
    const auto prefix = subject.substr(0, subject.size() - 2);
    for (auto& d : delayed_)
      if (d.schedule_prefix == prefix && !d.fired) d.purged = true;
  }
  return bus::bus_ok();
}

bus::bus_status fake_bus::purge_queue(const std::string& queue, const std::vector<std::string>& filters,
                                      bus::queue_sharing sharing) {
  consumers_.erase(queue);
  return ensure_queue_consumer(queue, filters, sharing);
}

bus::bus_result<std::optional<bus::stored_message>> fake_bus::next_message(std::uint64_t from,
                                                                           const std::vector<std::string>& filters) {
  consumer_state probe{filters, from == 0 ? 0 : from - 1, {}, {}};
  auto seq = next_pending(probe);
  if (!seq) return std::optional<bus::stored_message>{};
  return std::optional<bus::stored_message>{bus::stored_message{*seq, stream_[*seq - 1].subject}};
}

bus::bus_result<bus::delivery> fake_bus::read_message(std::uint64_t seq) {
  if (seq == 0 || seq > stream_.size() || stream_[seq - 1].purged || unreadable_.contains(seq))
    return not_found("message " + std::to_string(seq));
  const auto& m = stream_[seq - 1];
  bus::delivery d;
  d.subject = m.subject;
  d.amqp_props = m.property_octets;
  d.body = m.body;
  d.stream_seq = seq;
  return d;
}

// ---- publishing and pulling

void fake_bus::publish(std::string subject, std::string amqp_props_b64, std::string body, std::string,
                       boost::asio::any_io_executor ex, std::function<void(bus::bus_status)> done) {
  auto props = bus::base64_decode(amqp_props_b64);
  publishes_.push_back({std::move(subject), props.value_or(std::string{}), std::move(body), std::move(ex),
                        std::move(done), false, {}});
  if (!manual_publishes_) complete_publish(publishes_.size() - 1, bus::bus_ok());
}

void fake_bus::publish_identified(std::string subject, std::string msg_id, std::string amqp_props_b64,
                                  std::string body, std::string, boost::asio::any_io_executor ex,
                                  std::function<void(bus::bus_status)> done) {
  auto props = bus::base64_decode(amqp_props_b64);
  publishes_.push_back({std::move(subject), props.value_or(std::string{}), std::move(body), std::move(ex),
                        std::move(done), false, std::move(msg_id)});
  if (!manual_publishes_) complete_publish(publishes_.size() - 1, bus::bus_ok());
}

void fake_bus::publish_delayed(std::string subject, std::string schedule_prefix, std::chrono::system_clock::time_point at,
                               std::string amqp_props_b64, std::string body, boost::asio::any_io_executor ex,
                               std::function<void(bus::bus_status)> done) {
  auto props = bus::base64_decode(amqp_props_b64);
  delayed_.push_back({std::move(subject), std::move(schedule_prefix), at, props.value_or(std::string{}), std::move(body)});
  boost::asio::post(ex, [done = std::move(done)] { done(bus::bus_ok()); });
}

void fake_bus::fire_delayed(std::size_t index) {
  auto& d = delayed_.at(index);
  if (d.fired || d.purged) return;
  d.fired = true;
  store(d.subject, d.property_octets, d.body);
}

std::shared_ptr<bus::puller> fake_bus::make_puller(const std::string& queue, boost::asio::any_io_executor ex,
                                                   bus::puller_callbacks callbacks, bus::queue_sharing,
                                                   int priority) {
  return std::make_shared<fake_puller>(std::static_pointer_cast<fake_bus>(shared_from_this()), queue, std::move(ex),
                                       std::move(callbacks), priority);
}

bus::bus_result<bus::stream_state> fake_bus::queue_stream_state(const std::string& queue) {
  auto it = queue_streams_.find(queue);
  if (it == queue_streams_.end()) return bus::bus_error{"no stream for queue " + queue, 0, bus::bus_errc::not_found};
  const auto n = it->second.msg_ids.size();
  return bus::stream_state{n, n == 0 ? std::uint64_t{0} : std::uint64_t{1}, n};
}

void fake_bus::publish_to_queue_stream(const std::string& queue, std::string msg_id, std::string, std::string body,
                                       std::string routed_as, boost::asio::any_io_executor ex,
                                       std::function<void(bus::bus_status)> done) {
  auto& stream = queue_streams_[queue];
  stream.msg_ids.push_back(std::move(msg_id));
  stream.bodies.push_back(std::move(body));
  stream.routed_as.push_back(std::move(routed_as));
  boost::asio::post(ex, [done = std::move(done)] { done(bus::bus_ok()); });
}

// A reader's puller on no queue of the fake's: its requests stay open and bring nothing.
std::shared_ptr<bus::puller> fake_bus::make_stream_puller(const std::string& queue, const std::string& reader,
                                                          boost::asio::any_io_executor ex,
                                                          bus::puller_callbacks callbacks) {
  return std::make_shared<fake_puller>(std::static_pointer_cast<fake_bus>(shared_from_this()),
                                       "~stream-" + queue + "-" + reader, std::move(ex), std::move(callbacks), 0);
}

std::shared_ptr<bus::direct_subscription> fake_bus::subscribe_direct(const std::string&, boost::asio::any_io_executor,
                                                                     std::function<void(bus::delivery)>) {
  return std::make_shared<bus::direct_subscription>();
}

void fake_bus::publish_direct(const std::string&, std::string, std::string, boost::asio::any_io_executor ex,
                              std::function<void(bool)> done) {
  boost::asio::post(ex, [done = std::move(done)] { done(false); });
}

bus::bus_result<std::shared_ptr<bus::client>> fake_bus::sign_in(const bus::credentials&,
                                                                std::chrono::steady_clock::time_point) {
  return bus::bus_error{"the fake bus has no users", 0, bus::bus_errc::denied};
}

bus::bus_status fake_bus::join(const bus::client&) { return bus::bus_ok(); }

bus::bus_status fake_bus::may_publish(std::string_view subject) {
  for (const auto& filter : publish_denied_)
    if (subject_matches(filter, subject))
      return bus::bus_error{"publish to " + std::string{subject} + ": the bus does not let user 'fake' publish to " +
                                std::string{subject},
                            0, bus::bus_errc::denied};
  return bus::bus_ok();
}

void fake_bus::close() {
  on_change_.reset();
  watch_ex_.reset();
  waiting_.clear();
}

}  // namespace amqp::broker::test
