// The client's reply subscription `<inbox>.>` for publish acks (`<inbox>.a.<publish id>`,
// publisher.hpp), answered NAKs (`<inbox>.n.<nak id>`) and direct publishes' receipts
// (`<inbox>.r.<id>`), settlement of deliveries, and the parsing of `$JS.ACK` subjects. Its
// callback runs on a nats thread: it hands each answer to its part, nothing else.
#include <boost/asio/post.hpp>
#include <array>
#include <charconv>
#include <cstdlib>
#include <tuple>

#include "client_impl.hpp"
#include "error.hpp"

namespace amqp::bus::detail {

namespace {

// A subject's tokens, up to the most a `$JS.ACK` subject has; more leave `size` 0. Without an
// allocation: every delivery and every settlement parses one.
struct subject_tokens {
  std::array<std::string_view, 12> t;
  std::size_t size = 0;
  const std::string_view& operator[](std::size_t i) const { return t[i]; }
};

subject_tokens tokens(std::string_view s) {
  subject_tokens out;
  std::size_t start = 0;
  for (;;) {
    if (out.size == out.t.size()) return subject_tokens{};
    std::size_t dot = s.find('.', start);
    out.t[out.size++] = s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (dot == std::string_view::npos) return out;
    start = dot + 1;
  }
}

bool to_u64(std::string_view s, std::uint64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size();
}

// Where the fields of a `$JS.ACK` subject start (the delivered count), or 0 if it is not one.
// v1: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
// v2: $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>[.<token>]
std::size_t ack_fields_at(const subject_tokens& t) {
  if (t.size < 9 || t[0] != "$JS" || t[1] != "ACK") return 0;
  if (t.size == 9) return 4;
  if (t.size >= 11) return 6;
  return 0;
}

}  // namespace

bool parse_ack_subject(std::string_view reply, delivery& out) {
  const auto t = tokens(reply);
  const std::size_t base = ack_fields_at(t);
  if (base == 0) return false;
  std::uint64_t cseq = 0;
  return to_u64(t[base], out.delivered) && to_u64(t[base + 1], out.stream_seq) &&
         to_u64(t[base + 2], cseq) && to_u64(t[base + 3], out.stored_ns) && to_u64(t[base + 4], out.pending);
}

std::string_view consumer_of(std::string_view reply) {
  const auto t = tokens(reply);
  const std::size_t at = ack_fields_at(t);
  return at == 0 ? std::string_view{} : t[at - 1];
}

std::optional<held_ref> held_ref_of(std::string_view reply) {
  const auto t = tokens(reply);
  const std::size_t at = ack_fields_at(t);
  held_ref out;
  if (at == 0 || !to_u64(t[at + 1], out.seq)) return std::nullopt;
  out.queue = t[at - 1];
  return out;
}

// ---- settlement ---------------------------------------------------------------------------

std::string_view client_impl::unhold(const std::string& reply, bool sent) {
  const auto ref = held_ref_of(reply);
  if (!ref) return {};
  held_.settled(ref->queue, ref->seq, reply, sent);
  return ref->queue;
}

// Sent before it stops counting as held: a count taken in between (on another thread) would
// otherwise see the delivery neither held here nor settled on the server, and count it as ready
// (a length limit would then drop one message too many).
std::string_view client_impl::settle(const std::string& reply, const char* verb) {
  if (closed_ || reply.rfind("$JS.ACK.", 0) != 0) return {};
  natsConnection_PublishString(conn_.get(), reply.c_str(), verb);
  return unhold(reply);
}

// The message leaves the queue: what was returned unseen of it no longer matters.
void client_impl::settle_for_good(const std::string& reply, const char* verb) {
  const auto consumer = settle(reply, verb);
  if (consumer.empty()) return;
  if (const auto ref = held_ref_of(reply)) unseen_.forget(ref->queue, ref->seq);
  std::lock_guard lock(settled_mutex_);
  if (!settled_.contains(consumer)) settled_.emplace(consumer);
}

std::vector<std::string> client_impl::take_settled() {
  std::lock_guard lock(settled_mutex_);
  std::vector<std::string> out(settled_.begin(), settled_.end());
  settled_.clear();
  return out;
}

void client_impl::ack(const std::string& reply) { settle_for_good(reply, "+ACK"); }
void client_impl::term(const std::string& reply) { settle_for_good(reply, "+TERM"); }

// nats-server takes a consumer's acknowledgements in order, from a queue of their own: an
// answered request on the consumer's ack subject proves every settlement sent before it was
// applied. The sentinel names a stream sequence no message has, so it changes nothing (a
// progress report for a message that is not pending), and the server still answers it.
bus_status client_impl::sync_settlements(const std::string& queue, const std::string& step,
                                         std::uint64_t* held_then) {
  if (!held_.take_unsynced(queue, held_then)) return bus_ok();  // nothing settled since the last sync
  const std::string sentinel = std::string{"$JS.ACK."} + stream_name + "." + queue + ".1.9223372036854775807.0.0.0";
  natsMsg* raw = nullptr;
  natsStatus s = natsConnection_RequestString(&raw, conn_.get(), sentinel.c_str(), "+WPI", request_timeout_ms());
  msg_ptr reply{raw};
  if (s == NATS_OK || s == NATS_NO_RESPONDERS) return bus_ok();  // no responders: no such consumer
  held_.mark_unsynced(queue);
  // A consumer deleted while it held the sentinel never answers it (the consumer's info says
  // so next); a server too slow to answer in time gives a count that may miss a late ack.
  if (s == NATS_TIMEOUT) return bus_ok();
  return nats_failure(step + ": waiting for the server to apply this queue's acknowledgements", s);
}

// ---- requeues (requeue_order.hpp) --------------------------------------------------------

void client_impl::nak(const std::string& reply) {
  if (closed_ || reply.rfind("$JS.ACK.", 0) != 0) return;
  const std::string queue{consumer_of(reply)};
  if (queue.empty() || inbox_.empty()) {
    settle(reply, "-NAK");  // nothing to hold a pull for
    return;
  }
  unhold(reply, /*sent=*/false);
  const std::uint64_t id = next_id_++;
  bool send_now = true;
  {
    std::lock_guard lock{mutex_};
    send_now = requeue_.nak_made(id, queue, reply, std::chrono::steady_clock::now());
    arm_sweep();
  }
  if (send_now) send_nak(id, reply);
}

void client_impl::return_unseen(const std::string& reply) {
  if (const auto ref = held_ref_of(reply)) unseen_.returned(ref->queue, ref->seq, std::chrono::steady_clock::now());
  nak(reply);
}

void client_impl::count_unseen(std::string_view queue, delivery& d) {
  const std::uint64_t unseen = unseen_.count(queue, d.stream_seq);
  d.delivered = d.delivered > unseen ? d.delivered - unseen : 1;
}

void client_impl::send_nak(std::uint64_t id, const std::string& reply) {
  held_.stop_reporting(reply);
  const std::string answer = inbox_ + ".n." + std::to_string(id);
  if (natsConnection_PublishRequestString(conn_.get(), reply.c_str(), answer.c_str(), "-NAK") != NATS_OK)
    nak_answered(id);  // not sent: nothing to wait for (the ack wait brings the message back)
}

bool client_impl::hold_pulls(const std::string& queue, const boost::asio::any_io_executor& ex,
                             std::function<void()> resume) {
  return requeue_.hold_pulls(queue, {ex, std::move(resume)});
}

void client_impl::nak_answered(std::uint64_t id) {
  std::vector<requeue_order::resume_fn> released;
  {
    std::lock_guard lock{mutex_};
    released = requeue_.answered(id);
  }
  for (auto& [ex, resume] : released) boost::asio::post(ex, std::move(resume));
  if (publisher_) publisher_->naks_answered();
}

void client_impl::drain_started(const std::shared_ptr<puller_impl>& p) {
  std::lock_guard lock{mutex_};
  draining_.emplace(p.get(), p);
  requeue_.drain_started(p->queue(), std::chrono::steady_clock::now());
  arm_sweep();
}

void client_impl::drain_finished(const puller_impl& p) {
  std::vector<requeue_order::held_nak> held;
  std::shared_ptr<puller_impl> done;  // destroyed outside the lock
  {
    std::lock_guard lock{mutex_};
    if (auto it = draining_.find(&p); it != draining_.end()) {
      done = std::move(it->second);
      draining_.erase(it);
    }
    held = requeue_.drain_finished(p.queue());
  }
  for (const auto& [id, reply] : held) send_nak(id, reply);
}

// ---- the subscription ---------------------------------------------------------------------

bus_status client_impl::start_inbox() {
  const std::string step = "reply subscription";
  for (auto [name, sub, conn] : {std::tuple{&inbox_, &inbox_sub_, conn_.get()},
                                 std::tuple{&at_once_inbox_, &at_once_sub_, control_.get()}}) {
    natsInbox* raw_inbox = nullptr;
    if (natsStatus s = natsInbox_Create(&raw_inbox); s != NATS_OK) return nats_failure(step, s);
    inbox_ptr inbox{raw_inbox};
    *name = inbox.get();
    if (name->size() > publisher::max_inbox_size)
      return failure(step, "nats.c made an inbox of " + std::to_string(name->size()) + " characters, more than " +
                               std::to_string(publisher::max_inbox_size));
    natsSubscription* raw = nullptr;
    natsStatus s = natsConnection_Subscribe(&raw, conn, (*name + ".>").c_str(), &client_impl::on_inbox_msg, this);
    if (s != NATS_OK) return nats_failure(step, s);
    sub->reset(raw);
    {
      std::lock_guard lock{inbox_done_mutex_};
      ++inbox_subs_open_;
    }
    // Deliveries are bounded by the batches asked for; do not let the default limits drop them.
    s = natsSubscription_SetPendingLimits(raw, 1'000'000, 1024 * 1024 * 1024);
    if (s == NATS_OK) s = natsSubscription_SetOnCompleteCB(raw, &client_impl::on_inbox_complete, this);
    if (s == NATS_OK) s = natsConnection_FlushTimeout(conn, request_timeout_ms());
    if (s != NATS_OK) return nats_failure(step, s);
  }
  {
    std::lock_guard lock{mutex_};
    sweep_timer_ = std::make_unique<boost::asio::steady_timer>(workers_->get_executor());
  }
  counts_ = std::make_unique<publish_counts>(
      control_.get(), inbox_.substr(inbox_.rfind('.') + 1),
      [this](std::string_view what, const std::string& api_subject, const json& body) { return api(what, api_subject, body); },
      request_timeout_ms());
  publisher_ = std::make_shared<publisher>(
      publisher::settings{options_.max_publish_in_flight, options_.publish_timeout, options_.publish_attempt_timeout,
                          retry_publishes_},
      publisher::route{conn_.get(), inbox_}, publisher::route{control_.get(), at_once_inbox_},
      publisher::parts{completions_, &released_, &requeue_, [this] { counts_->note_confirmed(); }},
      workers_->get_executor());
  progress_thread_ = std::jthread{[this](std::stop_token stop) { report_progress_until(stop); }};
  return bus_ok();
}

void client_impl::on_inbox_msg(natsConnection*, natsSubscription*, natsMsg* msg, void* closure) {
  auto* self = static_cast<client_impl*>(closure);
  msg_ptr owned{msg};
  self->route_inbox(owned.get());
  self->released_.release(std::move(owned));
}

void client_impl::on_inbox_complete(void* closure) {
  auto* self = static_cast<client_impl*>(closure);
  std::lock_guard lock{self->inbox_done_mutex_};
  --self->inbox_subs_open_;
  self->inbox_done_cv_.notify_all();
}

void client_impl::route_inbox(natsMsg* msg) {
  std::string_view subject = natsMsg_GetSubject(msg);
  const std::string& inbox = subject.starts_with(at_once_inbox_) ? at_once_inbox_ : inbox_;
  if (subject.size() < inbox.size() + 3) return;
  subject.remove_prefix(inbox.size() + 1);
  std::uint64_t id = 0;
  if (subject[1] != '.' || !to_u64(subject.substr(2), id)) return;
  if (subject[0] == 'n') return nak_answered(id);
  if (subject[0] == 'r') return complete_direct(id, !natsMsg_IsNoResponders(msg));
  if (subject[0] == 'f') return fence_answered(id, natsMsg_IsNoResponders(msg) ? 503 : std::atoi(header(msg, "Status").c_str()));
  if (subject[0] == 'a' && publisher_) publisher_->answered(id, msg);
}

}  // namespace amqp::bus::detail
