#pragma once
// The broker's internal interface: what every handler file builds on (topology/exchange.cpp,
// topology/queue.cpp, channel_flow.cpp, refusals.cpp, and the basic class's publish/, deliver/
// and settle/ files).
//
// Threads, in one paragraph: every channel_context call is made on its connection's executor
// (connection_port::executor(): serial, one thread's). `broker` is shared by every connection
// of the process: its public members are safe to call from any connection's executor.
// Blocking bus calls never run on an io thread: run_on_bus() moves them to the bus client's
// worker pool and brings the result back to the connection's executor.
//
// A handler whose answer takes bus work is written as straight-line code: a coroutine (task)
// started by spawn(), which co_awaits on_bus() for each step.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "amqp/broker/broker.hpp"
#include "amqp/bus/client.hpp"
#include "amqp/routing/topology.hpp"
#include "amqp/wire/codec.hpp"
#include "amqp/wire/methods.hpp"
#include "amqp/wire/reply_code.hpp"
#include "broker_state.hpp"
#include "channel/bus_failure.hpp"

namespace amqp::broker {

// A handler's coroutine, on its channel's executor (channel_context::spawn).
template <class T = void>
using task = boost::asio::awaitable<T>;

// ---------------------------------------------------------------------------------------------
// turn: a method's turn on its channel. The channel's methods are answered in arrival order:
// the next one starts when this one's turn ends, at the first end() of any copy, or when the
// last copy is gone. A handler that answers at once just returns; one that answers from a
// continuation carries a copy into it. So a method ends exactly once, and a continuation
// dropped because the channel closed ends it too.
// ---------------------------------------------------------------------------------------------
class turn {
 public:
  turn() = default;  // no method's: ending it does nothing
  // The method is answered (its continuation may go on, e.g. a publish waiting for the bus).
  void end() {
    if (state_) state_->end();
  }

 private:
  friend class channel_context;
  // One allocation per method: the channel to tell, and whether it was told.
  struct state {
    explicit state(std::weak_ptr<channel_context> c) : channel(std::move(c)) {}
    state(const state&) = delete;
    state& operator=(const state&) = delete;
    ~state() { end(); }
    void end();  // channel.cpp
    std::weak_ptr<channel_context> channel;
    bool ended = false;
  };
  explicit turn(std::weak_ptr<channel_context> channel)
      : state_(std::make_shared<state>(std::move(channel))) {}
  std::shared_ptr<state> state_;
};

// Where a channel is in its life, as the broker sees it. Only forward: open → failed → closed,
// or open → closed.
enum class channel_phase {
  open,    // methods run and are answered
  failed,  // this side raised a channel or connection exception: nothing more goes out
  closed,  // closed() ran (either side closed it, or the connection ended): consumers stopped,
           // outstanding deliveries requeued
};

// ---------------------------------------------------------------------------------------------
// basic_class: the basic and confirm half of a channel (publish/, deliver/, settle/). The channel
// core (channel.cpp) owns one per channel and calls exactly these, on the connection's executor,
// one method at a time in arrival order.
// Its state, `basic_class::state`, is in basic.hpp; its members are defined in publish/publish.cpp,
// deliver/consume.cpp and settle/settle.cpp.
// ---------------------------------------------------------------------------------------------
class basic_class {
 public:
  explicit basic_class(channel_context& ctx);
  ~basic_class();
  basic_class(const basic_class&) = delete;
  basic_class& operator=(const basic_class&) = delete;

  // One per basic-class method a client sends: each answers or fails the channel. Those that
  // take the method's turn answer from a continuation that carries it (turn, below).
  void on_method(wire::basic_qos m);
  void on_method(wire::basic_consume m, turn method_turn);
  void on_method(wire::basic_cancel m, turn method_turn);
  void on_method(wire::basic_get m, turn method_turn);
  void on_method(wire::basic_ack m);
  void on_method(wire::basic_reject m);
  void on_method(wire::basic_nack m);
  void on_method(wire::basic_recover m);
  void on_method(wire::basic_recover_async m);
  // A complete publish. Its turn ends as soon as the publish is handed to the bus in order (the
  // confirm, if any, follows later) so a publisher is not held to one round trip.
  void on_publish(wire::basic_publish m, std::string property_octets, std::string body, turn method_turn);
  // The channel is gone: requeue outstanding deliveries, stop consumers (remove_consumer each).
  // Nothing may be sent any more. Called once.
  void closed();
  // Runs `work` once every publish this channel handed to the bus so far was answered (at once
  // when none is in flight), so that a method that reports on a queue after a publish on the
  // same channel sees that message, as a channel's methods are ordered in RabbitMQ. Dropped
  // when the channel closes first.
  void after_publishes(std::function<void()> work);
  // The broker deleted `queue` (queue.delete anywhere, its exclusive owner gone, auto-delete,
  // or another replica deleted it): send a server-initiated basic.cancel to each consumer of
  // this channel on it and stop them. Their registry entries are already gone.
  void queue_deleted(const std::string& queue);
  // A consumer of this channel may now ask the bus for messages (broker::first_in_line).
  void consumers_may_ask();

 private:
  struct state;
  std::unique_ptr<state> state_;
};

// ---------------------------------------------------------------------------------------------
// channel_context: one open channel, as the handler files see it. Held by shared_ptr: pending
// bus work keeps it alive after the channel closed, but then nothing is sent.
// ---------------------------------------------------------------------------------------------
class channel_context : public std::enable_shared_from_this<channel_context> {
 public:
  channel_context(std::shared_ptr<broker> b, connection_port& port, std::uint16_t id);
  ~channel_context();
  channel_context(const channel_context&) = delete;
  channel_context& operator=(const channel_context&) = delete;

  broker& state() { return *broker_; }
  // Valid only while is_open(): the session outlives its open channels, not their bus work.
  connection_port& port() { return port_; }
  std::uint16_t id() const { return id_; }
  std::uint64_t connection_id() const { return connection_id_; }
  const boost::asio::any_io_executor& executor() const { return executor_; }
  std::uint32_t frame_max() const { return frame_max_; }
  // The connection's bus client: its publishes, pulls and settlements go through it.
  bus::client& bus() { return *bus_; }
  const std::shared_ptr<bus::client>& bus_ptr() const { return bus_; }
  basic_class& basic() { return *basic_; }
  channel_phase phase() const { return phase_; }
  // False once the channel failed or closed: nothing may be sent any more, and handlers drop
  // their work.
  bool is_open() const { return phase_ == channel_phase::open; }
  // closed() ran: what is still answered by the bus goes straight back.
  bool is_closed() const { return phase_ == channel_phase::closed; }

  // Sends a method on this channel (one frame). Ignored once the channel is not open.
  template <class M>
  void reply(const M& m) {
    if (!is_open()) return;
    std::string out;
    wire::encode_method(out, id_, m);
    port_.send(std::move(out));
  }
  // Sends already-encoded frames (a delivery: method + header + bodies, as one unit).
  void send(std::string frames);

  // Channel exception: channel.close with `code` and the sentence (the session adds "<NAME> - "),
  // naming `offending`. Later methods of this channel are dropped; the session then calls
  // channel::closed(). Where the sentence is RabbitMQ's own fixed text, `remedy` says what to do
  // instead, in the log (RabbitMQ logs every channel exception too).
  void fail(wire::reply_code code, std::string_view sentence, wire::method_key offending,
            std::string_view remedy = {});
  // Connection exception (503, 541 …): connection.close, then the socket goes. `remedy` as fail's.
  void fail_connection(wire::reply_code code, std::string_view sentence, wire::method_key offending,
                       std::string_view remedy = {});
  // A refusal as AMQP says it: 503 COMMAND_INVALID (an empty or unknown exchange type) is a
  // connection exception, as RabbitMQ raises it; everything else closes the channel only.
  void refuse(const wire::refusal& r, wire::method_key offending);

  // Runs `work()` (blocking bus calls) on the bus pool, then `then(result)` on this channel's
  // executor — only if the channel is still open then. `work` may return void (`then()` takes
  // no argument then). An exception escaping `work` closes the channel through
  // bus_failure_reply (541, naming `during` and the exception's text). `work` must not touch the
  // channel.
  template <class Work, class Then>
  void run_on_bus(wire::method_key during, Work work, Then then);

  // Starts `handler` on this channel's executor. The method's turn ends when it returns, or
  // when its frame is destroyed because the channel closed while it waited (on_bus). An
  // exception escaping it closes the channel as run_on_bus's do (541, naming `during`).
  void spawn(wire::method_key during, task<> handler, turn method_turn);
  // Inside a handler: `co_await on_bus(during, std::move(work))` is run_on_bus as one step of
  // straight-line code. It resumes with work's result (std::monostate for void) while the channel
  // is open; otherwise the handler is never resumed, and its frame goes.
  // g++ 12 miscompiles two shapes, so handlers avoid them: a capturing lambda made inside a
  // co_await's expression is destroyed twice (name the work first), and a co_await inside a
  // condition resumes into freed state (`auto ok = co_await …; if (!ok)`).
  template <class Work>
  auto on_bus(wire::method_key during, Work&& work);

  // The queue an empty queue name means (AMQP: the channel's last declared queue). Fails the
  // channel with 404 and returns nullopt when nothing was declared on it yet.
  std::optional<std::string> resolve_queue(const std::string& name, wire::method_key during);
  std::string last_queue;

  // Confirm mode (confirm.select sets it; basic.publish reads it).
  bool confirms = false;

  // ---- channel.cpp only
  friend class turn;
  // The one transition function: phases only move forward (channel_phase).
  void enter(channel_phase next);
  // What runs when a method's turn ends while the channel is open (the core's next method).
  void on_turn_end(std::function<void()> next) { next_method_ = std::move(next); }
  // The turn of the method about to run.
  turn begin_turn() { return turn(weak_from_this()); }

 private:
  static std::string method_name_(wire::method_key key) {
    const auto* info = wire::find_method(key);
    return info != nullptr ? std::string(info->name) : std::string("the method");
  }
  static std::string describe_(const std::exception& e) {
    std::string text = e.what();
    return text.empty() ? std::string("unknown error") : text;
  }

  void log_remedy(wire::reply_code code, std::string_view sentence, wire::method_key offending,
                  std::string_view remedy) const;

  std::shared_ptr<broker> broker_;
  connection_port& port_;
  std::uint16_t id_;
  std::uint64_t connection_id_;
  std::uint32_t frame_max_;
  boost::asio::any_io_executor executor_;
  std::shared_ptr<bus::client> bus_;
  std::unique_ptr<basic_class> basic_;
  channel_phase phase_ = channel_phase::open;
  std::function<void()> next_method_;  // on_turn_end
};

template <class Work, class Then>
void channel_context::run_on_bus(wire::method_key during, Work work, Then then) {
  using result_t = std::invoke_result_t<Work&>;
  using value_t = std::conditional_t<std::is_void_v<result_t>, std::monostate, result_t>;
  boost::asio::post(broker_->bus_executor(), [self = shared_from_this(), during,
                                              work = std::move(work),
                                              then = std::move(then)]() mutable {
    std::optional<value_t> value;
    std::string error;
    {
      // `work` and its captures die here, before the continuation exists: a pool thread
      // must never drop the last reference to the broker.
      auto w = std::move(work);
      try {
        if constexpr (std::is_void_v<result_t>) {
          w();
          value.emplace();
        } else {
          value.emplace(w());
        }
      } catch (const std::exception& e) {
        error = describe_(e);
      }
    }
    auto exec = self->executor_;
    boost::asio::post(exec, [self = std::move(self), during, error = std::move(error),
                             value = std::move(value), then = std::move(then)]() mutable {
      if (!self->is_open()) return;
      if (!value) {
        self->refuse(bus_failure_reply(bus::bus_errc::failed, "the bus did not complete " + method_name_(during),
                                       error, "retry on a new channel"),
                     during);
        return;
      }
      if constexpr (std::is_void_v<result_t>) {
        then();
      } else {
        then(std::move(*value));
      }
    });
  });
}

template <class Work>
auto channel_context::on_bus(wire::method_key during, Work&& work) {
  using work_t = std::decay_t<Work>;
  using result_t = std::invoke_result_t<work_t&>;
  using value_t = std::conditional_t<std::is_void_v<result_t>, std::monostate, result_t>;
  return boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&, void(value_t)>(
      [this, during](auto handler, work_t w) {
        // Shared, so the continuation is copyable; dropped with it when the channel is closed.
        auto resume = std::make_shared<decltype(handler)>(std::move(handler));
        run_on_bus(during, std::move(w), [resume](auto&&... value) {
          (*resume)(value_t(std::forward<decltype(value)>(value)...));
        });
      },
      boost::asio::use_awaitable, std::forward<Work>(work));
}

}  // namespace amqp::broker
