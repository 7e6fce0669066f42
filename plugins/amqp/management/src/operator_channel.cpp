#include "operator_channel.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <span>

#include "amqp/wire/codec.hpp"
#include "amqp/wire/frame.hpp"

namespace amqp::management {
namespace {

std::span<const std::uint8_t> octets(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

}  // namespace

operator_channel::operator_channel(std::shared_ptr<broker::broker> b, std::shared_ptr<bus::client> bus,
                                   boost::asio::any_io_executor ex, std::uint64_t connection_id, std::string user,
                                   std::chrono::milliseconds timeout)
    : broker_(std::move(b)),
      bus_(std::move(bus)),
      ex_(ex),
      connection_id_(connection_id),
      user_(std::move(user)),
      timeout_(timeout),
      event_(std::move(ex)) {}

// What the channel held goes back (it is never acked by anyone else), and the connection's
// exclusive claims with it.
operator_channel::~operator_channel() {
  if (channel_) channel_->closed();
  channel_.reset();
  broker::connection_closed(*broker_, connection_id_);
}

broker::channel& operator_channel::channel() {
  if (!channel_) channel_ = broker::open_channel(broker_, *this, next_channel_id_++);
  return *channel_;
}

boost::asio::awaitable<operator_channel::answer> operator_channel::call(wire::method m, done_fn done) {
  now_ = answer{};
  done_ = std::move(done);
  finished_ = false;
  channel().on_method(std::move(m));
  auto a = co_await wait(std::move(done_));
  co_return a;
}

boost::asio::awaitable<operator_channel::answer> operator_channel::publish(wire::basic_publish m,
                                                                           std::string property_octets,
                                                                           std::string body, done_fn done) {
  now_ = answer{};
  done_ = std::move(done);
  finished_ = false;
  channel().on_publish(std::move(m), std::move(property_octets), std::move(body));
  auto a = co_await wait(std::move(done_));
  co_return a;
}

void operator_channel::tell(wire::method m) {
  now_ = answer{};
  done_ = [](const received&) { return false; };
  finished_ = false;
  channel().on_method(std::move(m));
}

boost::asio::awaitable<operator_channel::answer> operator_channel::wait(done_fn done) {
  done_ = std::move(done);
  if (!finished_) {
    event_.expires_after(timeout_);
    boost::system::error_code ec;
    co_await event_.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    // Cancelled: an answer came (finish); expired: none did.
    if (!ec) now_.timed_out = !finished_;
  }
  done_ = nullptr;
  co_return std::move(now_);
}

void operator_channel::finish() {
  if (finished_) return;
  finished_ = true;
  event_.cancel();
}

void operator_channel::send(std::string frames_out) {
  std::size_t at = 0;
  while (at < frames_out.size()) {
    auto parsed = wire::parse_frame(octets(frames_out).subspan(at), frame_max());
    if (parsed.state != wire::parse_result::status::complete) return;  // the broker's own frames: never
    at += parsed.consumed;
    const auto& f = parsed.frame;
    if (f.type == wire::frame_type::method) {
      auto m = wire::decode_method(f.payload);
      if (!m) continue;
      now_.frames.push_back(received{std::move(*m), {}, {}});
    } else if (f.type == wire::frame_type::header && !now_.frames.empty()) {
      if (auto h = wire::decode_content_header(f.payload))
        now_.frames.back().property_octets.assign(reinterpret_cast<const char*>(h->property_octets.data()),
                                                  h->property_octets.size());
    } else if (f.type == wire::frame_type::body && !now_.frames.empty()) {
      now_.frames.back().body.append(reinterpret_cast<const char*>(f.payload.data()), f.payload.size());
    }
  }
  // A delivery's content follows its method in the same call: judge once the call is whole.
  if (done_ && !now_.frames.empty() && done_(now_.frames.back())) finish();
}

void operator_channel::when_drained(std::function<void()> resume) { boost::asio::post(ex_, std::move(resume)); }

void operator_channel::refused(wire::reply_code code, std::string sentence) {
  now_.refused = wire::refusal{code, std::move(sentence)};
  if (channel_) {
    // As the session does: what it held goes back at once; the object, which is still on the
    // stack that raised the refusal, goes later.
    std::shared_ptr<broker::channel> gone{std::move(channel_)};
    gone->closed();
    boost::asio::post(ex_, [gone] {});
  }
  finish();
}

void operator_channel::close_channel(std::uint16_t, wire::reply_code code, std::string sentence, wire::method_key) {
  refused(code, std::move(sentence));
}

void operator_channel::close_connection(wire::reply_code code, std::string sentence, wire::method_key) {
  refused(code, std::move(sentence));
}

}  // namespace amqp::management
