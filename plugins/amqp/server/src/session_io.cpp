// A session's bytes: the reader (with input back-pressure), the writer (output in call order, one
// write per batch), and the watchdog (handshake, heartbeat and close deadlines).
#include <array>
#include <exception>

#include "registry.hpp"
#include "session.hpp"
#include "session_support.hpp"

namespace amqp::server {
namespace {

constexpr std::size_t max_write_batch = 64;  // frames gathered into one write

}  // namespace

// ---- reader ---------------------------------------------------------------------------------

awaitable<void> session::reader([[maybe_unused]] std::shared_ptr<session> self) {
  std::exception_ptr failure;
  try {
    error_code ec;
    co_await stream_.handshake(ec);
    if (ec) {
      warn("TLS handshake failed (" + ec.message() + "); closing");
      close_socket();
    } else {
      certificate_user_ = stream_.verified_peer_name();
      co_await read_loop();
    }
  } catch (...) {
    failure = std::current_exception();
  }
  // Whatever ended the input, the channels and the broker hear about it exactly once.
  if (failure) close_socket();
  teardown();
  if (failure) std::rethrow_exception(failure);
}

awaitable<void> session::read_loop() {
  for (;;) {
    handle_buffered();
    if (phase_ >= phase::ended) co_return;
    if (reading_paused()) {
      co_await wait_for_drain();
      continue;
    }
    // g++ 12 miscompiles a co_await inside an if-condition here (SIGILL when the coroutine
    // resumes): keep the awaited value in a variable.
    const bool more = co_await read_more();
    if (!more) co_return;
  }
}

awaitable<bool> session::read_more() {
  if (in_start_ > 0) {
    std::copy(in_.begin() + static_cast<std::ptrdiff_t>(in_start_),
              in_.begin() + static_cast<std::ptrdiff_t>(in_end_), in_.begin());
    in_end_ -= in_start_;
    in_start_ = 0;
  }
  if (in_end_ == in_.size()) {
    // parse_frame refuses a frame over frame-max from its header, so a buffer of frame-max
    // octets always holds a whole frame: the buffer never grows past it.
    const std::size_t limit = std::max<std::size_t>(frame_max_, wire::min_frame_max);
    if (in_.size() >= limit) {
      close_socket();
      co_return false;
    }
    in_.resize(std::min(in_.size() * 2, limit));
  }
  error_code ec;
  const std::size_t n = co_await stream_.read_some(net::buffer(in_.data() + in_end_, in_.size() - in_end_), ec);
  if (ec) co_return false;  // EOF, reset or our own close: the reader's end handles all alike
  in_end_ += n;
  last_read_ = clock::now();
  co_return true;
}

awaitable<void> session::wait_for_drain() {
  // Back-pressure: the client is not reading what we send, or the bus is not keeping up with
  // what it publishes, so we stop reading what it sends (and stop handing the broker more
  // work) until the writer has caught up and the bus has answered enough.
  reader_waiting_ = true;
  reader_wake_.expires_at(clock::time_point::max());
  error_code ec;
  co_await reader_wake_.async_wait(with_ec(ec));
  reader_waiting_ = false;
}

// ---- output and ending ------------------------------------------------------------------------

void session::enqueue(std::string frames) {
  if (frames.empty() || phase_ == phase::socket_closed) return;
  queued_bytes_ += frames.size();
  out_.push_back(std::move(frames));
  wake(writer_wake_);
}

void session::connection_exception(wire::reply_code code, const std::string& sentence, wire::method_key key) {
  if (ending()) return;
  warn("closing the connection: " + wire::reply_text(code, sentence));
  send_connection_close(code, sentence, key);
}

void session::send_connection_close(wire::reply_code code, const std::string& sentence, wire::method_key key) {
  if (ending()) return;
  wire::connection_close close;
  close.reply_code = static_cast<std::uint16_t>(code);
  close.reply_text = wire::reply_text(code, sentence);
  close.class_id = key.class_id;
  close.method_id = key.method_id;
  send_method(0, close);
  enter(phase::closing);
  // Only close-ok may follow: a consumer left running would take messages nobody can be sent
  // (a no-ack one loses them), so the channels end now, as RabbitMQ ends them. Posted: the
  // exception may be raised from inside one of those channels' handlers.
  net::post(executor_, [self = shared_from_this()] { self->release_channels(); });
  close_deadline_ = clock::now() + options_.close_timeout;
  wake(watchdog_timer_);
}

void session::end() { enter(phase::ended); }

// The client closed the connection and we answered close-ok. A client may have written more
// behind its close (amqplib pipelines publishes behind it): closing the socket on unread input
// would reset the connection and lose the close-ok at the peer. So the channels go now, what
// arrives is read and dropped, our side of the socket is shut once close-ok is out, and the
// socket closes at the client's EOF (or the close timeout).
void session::closed_by_client() {
  release_channels();
  enter(phase::draining);
  close_deadline_ = clock::now() + options_.close_timeout;
  wake(writer_wake_);
  wake(watchdog_timer_);
}

void session::release_channels() {
  for (auto& [id, slot] : channels_) close_broker_channel(slot);
  channels_.clear();
  count_channels();
  if (channels_released_) return;
  channels_released_ = true;
  if (!broker_) return;  // never opened a vhost
  registry_->counted(session_registry::event::connection_closed);
  try {
    broker::connection_closed(*broker_, id_);
  } catch (const std::exception& e) {
    warn(std::string("releasing the connection's exclusive queues failed: ") + e.what());
  }
}

void session::teardown() {
  enter(phase::ended);
  release_channels();
  // The writer flushes what is queued (a close-ok, say) and then closes the socket; the
  // watchdog bounds how long that may take.
  close_deadline_ = clock::now() + options_.close_timeout;
  wake(writer_wake_);
  wake(watchdog_timer_);
}

void session::close_socket() {
  if (phase_ == phase::socket_closed) return;
  enter(phase::socket_closed);
  error_code ec;
  // Closing a socket with unread input makes the kernel answer with a reset, which can
  // overtake our last frames (a close-ok) at the peer; what the peer sent after its close is
  // meaningless anyway, so it is read and dropped first.
  std::array<std::uint8_t, 4096> sink{};
  auto& socket = stream_.socket();
  while (!ec && socket.available(ec) > 0) socket.read_some(net::buffer(sink), ec);
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
  writer_wake_.cancel();
  reader_wake_.cancel();
  watchdog_timer_.cancel();
  on_drained_.clear();
}

// ---- writer -----------------------------------------------------------------------------------

awaitable<void> session::writer([[maybe_unused]] std::shared_ptr<session> self) {
  std::vector<std::string> batch;
  std::vector<net::const_buffer> buffers;
  bool send_side_shut = false;  // draining: the peer was sent EOF
  while (phase_ != phase::socket_closed) {
    if (out_.empty()) {
      if (phase_ >= phase::ended || (phase_ == phase::draining && stream_.tls())) {
        // Everything, down to the last close-ok, is on the wire. A TLS peer is told so with
        // close_notify (and what it still sends is read and dropped meanwhile); the close
        // deadline (watchdog) bounds the wait for its answer.
        error_code ignored;
        co_await stream_.end_tls(ignored);
        close_socket();
        co_return;
      }
      if (phase_ == phase::draining && !send_side_shut) {
        // The peer sees EOF after our last octet and closes; we keep reading until it does,
        // so that closing never turns into a reset that loses what we sent.
        send_side_shut = true;
        error_code ignored;
        stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      }
      writer_wake_.expires_at(clock::time_point::max());
      error_code ec;
      co_await writer_wake_.async_wait(with_ec(ec));
      continue;
    }
    batch.clear();
    buffers.clear();
    while (!out_.empty() && batch.size() < max_write_batch) {
      batch.push_back(std::move(out_.front()));
      out_.pop_front();
    }
    for (const auto& frames : batch) buffers.push_back(net::buffer(frames));
    error_code ec;
    co_await stream_.write(buffers, ec);
    for (const auto& frames : batch) queued_bytes_ -= frames.size();
    if (ec) {
      close_socket();
      co_return;
    }
    last_write_ = clock::now();
    if (queued_bytes_ <= options_.outbound_cap / 2) resume_producers();
  }
}

void session::when_drained(std::function<void()> resume) {
  if (phase_ == phase::socket_closed) return;
  if (!backlogged()) {
    net::post(executor_, std::move(resume));
    return;
  }
  on_drained_.push_back(std::move(resume));
}

void session::publish_answered(std::size_t cost) {
  publishing_ -= std::min(cost, publishing_);
  if (reader_waiting_ && !backlogged() && publishing_ <= options_.publish_cap / 2) wake(reader_wake_);
}

// The writer caught up: the reader (stopped by back-pressure) and anything that waited in
// when_drained go on. Callbacks are posted, not called: they may enqueue more output.
void session::resume_producers() {
  if (reader_waiting_ && publishing_ <= options_.publish_cap / 2) wake(reader_wake_);
  for (auto& resume : on_drained_) net::post(executor_, std::move(resume));
  on_drained_.clear();
}

// ---- watchdog ---------------------------------------------------------------------------------

awaitable<void> session::watchdog([[maybe_unused]] std::shared_ptr<session> self) {
  while (phase_ != phase::socket_closed) {
    const auto now = clock::now();
    if (!check_deadlines(now)) co_return;
    watchdog_timer_.expires_at(next_deadline(now));
    error_code ec;
    co_await watchdog_timer_.async_wait(with_ec(ec));
  }
}

bool session::check_deadlines(clock::time_point now) {
  if (ending()) {
    if (now < close_deadline_) return true;
    if (stream_.tls() && phase_ < phase::tls_ending) {
      // No close-ok in time: the writer ends the TLS session (close_notify) once its queue is
      // out, within one more close timeout.
      enter(phase::tls_ending);
      close_deadline_ = now + options_.close_timeout;
      wake(writer_wake_);
      return true;
    }
    close_socket();  // no close-ok, or the last write did not drain, in time
    return false;
  }
  if (phase_ != phase::running) {
    if (now < handshake_deadline_) return true;
    warn("did not complete the handshake within " + std::to_string(settings_.handshake_timeout.count()) +
         " s (CLOUD_AMQP_HANDSHAKE_TIMEOUT); dropped");
    close_socket();
    return false;
  }
  if (heartbeat_seconds_ == 0) return true;
  const std::chrono::milliseconds interval = std::chrono::seconds{heartbeat_seconds_};
  // While we are not reading (back-pressure), a writer that still makes progress is the
  // sign of life; otherwise any octet read is.
  const auto alive = reader_waiting_ ? std::max(last_read_, last_write_) : last_read_;
  if (now - alive >= 2 * interval) {
    warn("sent nothing for two heartbeat intervals (2 x " + std::to_string(heartbeat_seconds_) +
         " s); dropped");
    close_socket();
    return false;
  }
  if (now - last_write_ >= interval / 2 && out_.empty()) {
    std::string heartbeat;
    wire::encode_heartbeat(heartbeat);
    enqueue(std::move(heartbeat));
    last_write_ = now;
  }
  return true;
}

clock::time_point session::next_deadline(clock::time_point now) const {
  if (ending()) return close_deadline_;
  if (phase_ != phase::running) return handshake_deadline_;
  if (heartbeat_seconds_ == 0) return clock::time_point::max();
  const std::chrono::milliseconds interval = std::chrono::seconds{heartbeat_seconds_};
  const auto alive = reader_waiting_ ? std::max(last_read_, last_write_) : last_read_;
  auto next_beat = last_write_ + interval / 2;
  if (next_beat <= now) next_beat = now + interval / 2;  // a write is pending; look again later
  return std::min(alive + 2 * interval, next_beat);
}

}  // namespace amqp::server
