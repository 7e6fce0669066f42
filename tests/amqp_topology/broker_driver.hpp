#pragma once
// Drives the broker through its seam (amqp/broker/broker.hpp) the way server::session does:
// methods in, frames out, channel.close bookkeeping. The broker runs on a real bus client
// against a real nats-server; only the socket is replaced by this recorder.
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <span>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "amqp/broker/broker.hpp"
#include "amqp/bus/client.hpp"
#include "amqp/wire/codec.hpp"
#include "amqp/wire/frame.hpp"

namespace topology_test {

using namespace std::chrono_literals;
namespace broker = amqp::broker;
namespace wire = amqp::wire;

// What the broker did in answer: a method frame, or a channel/connection exception.
struct closed_event {
  bool connection = false;
  std::uint16_t channel = 0;
  wire::reply_code code = wire::reply_code::reply_success;
  std::string text;
  wire::method_key offending;
};
struct method_event {
  std::uint16_t channel = 0;
  wire::method method;
};
using event = std::variant<method_event, closed_event>;

// The io threads every broker and connection of a test runs on.
class io_threads {
 public:
  explicit io_threads(int n = 2) : guard_(io_.get_executor()) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { io_.run(); });
  }
  ~io_threads() {
    guard_.reset();
    io_.stop();
    for (auto& t : threads_) t.join();
  }
  boost::asio::io_context& io() { return io_; }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::vector<std::thread> threads_;
};

inline std::shared_ptr<amqp::bus::client> open_bus(const std::string& url) {
  amqp::bus::client_options options;
  options.url = url;
  options.deadline = std::chrono::steady_clock::now() + 20s;
  auto client = amqp::bus::client::open(options);
  if (!client) throw std::runtime_error("bus: " + client.error().text);
  return *client;
}

class connection final : public broker::connection_port {
 public:
  connection(boost::asio::io_context& io, std::shared_ptr<broker::broker> b, std::uint64_t id)
      : strand_(boost::asio::make_strand(io)), broker_(std::move(b)), id_(id) {}

  ~connection() override { close(); }

  // Ends the connection as the session does: every channel closed(), then connection_closed.
  void close() {
    if (ended_) return;
    ended_ = true;
    run([this] {
      for (auto& [id, ch] : channels_) ch->closed();
      channels_.clear();
      broker::connection_closed(*broker_, id_);
    });
  }

  void open_channel(std::uint16_t id) {
    run([this, id] { channels_[id] = broker::open_channel(broker_, *this, id); });
  }

  // Sends a method and waits for the next event on that channel.
  template <class M>
  event call(std::uint16_t channel, M m, std::chrono::milliseconds wait = 15s) {
    send_only(channel, std::move(m));
    return next(channel, wait);
  }

  template <class M>
  void send_only(std::uint16_t channel, M m) {
    boost::asio::post(strand_, [this, channel, m = std::move(m)]() mutable {
      auto it = channels_.find(channel);
      if (it != channels_.end()) it->second->on_method(wire::method{std::move(m)});
    });
  }

  // The next event on `channel` (or a connection exception), in arrival order.
  event next(std::uint16_t channel, std::chrono::milliseconds wait = 15s) {
    std::unique_lock lock(mutex_);
    event found;
    bool ok = cv_.wait_for(lock, wait, [&] {
      for (auto it = events_.begin(); it != events_.end(); ++it) {
        bool match = std::visit([&](const auto& e) {
          if constexpr (std::is_same_v<std::decay_t<decltype(e)>, closed_event>) {
            return e.connection || e.channel == channel;
          } else {
            return e.channel == channel;
          }
        }, *it);
        if (match) {
          found = std::move(*it);
          events_.erase(it);
          return true;
        }
      }
      return false;
    });
    if (!ok) throw std::runtime_error("no answer from the broker within the wait");
    return found;
  }

  bool quiet(std::uint16_t channel, std::chrono::milliseconds wait) {
    try {
      next(channel, wait);
      return false;
    } catch (const std::runtime_error&) {
      return true;
    }
  }

  // ---- connection_port
  void send(std::string frames) override {
    std::span<const std::uint8_t> rest(reinterpret_cast<const std::uint8_t*>(frames.data()), frames.size());
    while (!rest.empty()) {
      auto parsed = wire::parse_frame(rest, 1 << 20);
      if (parsed.state != wire::parse_result::status::complete) throw std::logic_error("broker sent a bad frame");
      if (parsed.frame.type == wire::frame_type::method) {
        auto m = wire::decode_method(parsed.frame.payload);
        if (!m) throw std::logic_error("broker sent an undecodable method: " + m.error().text);
        push(method_event{parsed.frame.channel, std::move(*m)});
      }
      rest = rest.subspan(parsed.consumed);
    }
  }
  std::uint32_t frame_max() const override { return 128 * 1024; }
  std::uint64_t connection_id() const override { return id_; }
  boost::asio::any_io_executor executor() override { return strand_; }
  void close_channel(std::uint16_t channel, wire::reply_code code, std::string text,
                     wire::method_key offending) override {
    push(closed_event{false, channel, code, std::move(text), offending});
    auto it = channels_.find(channel);
    if (it != channels_.end()) {
      it->second->closed();
      // The session destroys the channel after close-ok; the test reopens ids at will.
      boost::asio::post(strand_, [this, channel] { channels_.erase(channel); });
    }
  }
  void close_connection(wire::reply_code code, std::string text, wire::method_key offending) override {
    push(closed_event{true, 0, code, std::move(text), offending});
  }

 private:
  template <class Fn>
  void run(Fn fn) {
    std::promise<void> done;
    boost::asio::post(strand_, [&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  }
  void push(event e) {
    {
      std::lock_guard lock(mutex_);
      events_.push_back(std::move(e));
    }
    cv_.notify_all();
  }

  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  std::shared_ptr<broker::broker> broker_;
  std::uint64_t id_;
  std::map<std::uint16_t, std::unique_ptr<broker::channel>> channels_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<event> events_;
  bool ended_ = false;
};

// Convenience accessors for assertions.
template <class M>
const M* as(const event& e) {
  const auto* m = std::get_if<method_event>(&e);
  return m ? std::get_if<M>(&m->method) : nullptr;
}
inline const closed_event* as_closed(const event& e) { return std::get_if<closed_event>(&e); }

}  // namespace topology_test
