#pragma once
// Drives broker channels through their public seam (amqp/broker/broker.hpp) on one io_context in
// the test's thread, against fake_bus: a fake connection_port decodes every frame the broker
// sends into method structs (with a message's properties and body), and records the channel and
// connection exceptions it is asked to raise, closing the channel as the session does.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "amqp/broker/broker.hpp"
#include "amqp/routing/names.hpp"
#include "amqp/wire/codec.hpp"
#include "fake_bus.hpp"
#include "frame_decoder.hpp"

// A failed CHECK on two vectors shows their elements, not "{?}".
namespace doctest {
template <class T>
struct StringMaker<std::vector<T>> {
  static String convert(const std::vector<T>& v) {
    String out = "{";
    for (std::size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : ", ") + toString(v[i]);
    return out + "}";
  }
};
}  // namespace doctest

namespace amqp::broker::test {

// A channel.close or connection.close the broker asked for.
struct exception_raised {
  std::uint16_t channel = 0;  // 0: the connection
  wire::reply_code code = wire::reply_code::reply_success;
  std::string sentence;  // bare: the session makes it "<NAME> - <sentence>"
  wire::method_key offending;
};

class fake_connection final : public connection_port {
 public:
  fake_connection(boost::asio::io_context& io, std::shared_ptr<bus::client> bus) : io_(io), bus_(std::move(bus)) {}

  void send(std::string frames) override;
  std::uint32_t frame_max() const override { return 128 * 1024; }
  std::uint64_t connection_id() const override { return 1; }
  boost::asio::any_io_executor executor() override { return io_.get_executor(); }
  std::shared_ptr<bus::client> bus() override { return bus_; }
  const std::string& user() const override { return user_; }
  bool backlogged() const override { return false; }
  void when_drained(std::function<void()> resume) override;
  void publish_handed(std::size_t cost) override { publish_cost += static_cast<std::int64_t>(cost); }
  void publish_answered(std::size_t cost) override { publish_cost -= static_cast<std::int64_t>(cost); }
  void close_channel(std::uint16_t channel, wire::reply_code code, std::string sentence,
                     wire::method_key offending) override;
  void close_connection(wire::reply_code code, std::string sentence, wire::method_key offending) override;

  std::vector<received> frames;                 // every method received, in order
  std::vector<exception_raised> exceptions;     // in order
  std::int64_t publish_cost = 0;               // handed minus answered: 0 when nothing is in flight
  // The session's part of a channel exception: channel::closed() at once (session.cpp).
  std::function<void(std::uint16_t)> on_channel_closed;
  std::function<void()> on_connection_closed;

 private:
  boost::asio::io_context& io_;
  std::shared_ptr<bus::client> bus_;
  std::string user_;
};

class harness {
 public:
  explicit harness(std::chrono::seconds idle_consumer_after = std::chrono::seconds{60});
  ~harness();

  std::vector<std::string> warnings;  // what the broker logged as warnings, in order
  harness(const harness&) = delete;
  harness& operator=(const harness&) = delete;

  boost::asio::io_context io;
  std::shared_ptr<fake_bus> bus;
  fake_connection conn;
  std::shared_ptr<broker> b;

  // ---- channels
  channel& open(std::uint16_t id = 1);
  void method(wire::method m, std::uint16_t id = 1);
  void publish(const std::string& exchange, const std::string& key, const std::string& body, bool mandatory = false,
               std::uint16_t id = 1);
  // A publish with these properties.
  void publish_with(const wire::basic_properties& properties, const std::string& exchange, const std::string& key,
                    const std::string& body, bool mandatory = false, std::uint16_t id = 1);
  // The session's close of a channel (client channel.close, or after an exception).
  void close(std::uint16_t id = 1);
  // False once the broker raised a channel exception on it (or the test closed it).
  bool is_open(std::uint16_t id) const { return channels_.contains(id) && !failed_.contains(id); }

  // ---- common steps (each runs until its answer came, REQUIREd)
  // Declares a durable queue (with `arguments`); returns its consumer name on the bus.
  std::string declare(const std::string& queue, std::uint16_t id = 1, wire::field_table arguments = {});
  void qos(std::uint16_t prefetch, bool global = false, std::uint16_t id = 1);
  void consume(const std::string& queue, const std::string& tag, bool no_ack = false, std::uint16_t id = 1);
  void confirm_select(std::uint16_t id = 1);
  // Stores `n` messages on the bus for the default exchange's route to `queue`, bodies "m1".."mn"
  // (first = 1); returns their stream sequences.
  std::vector<std::uint64_t> fill(const std::string& queue, int n, int first = 1);

  // ---- driving the io_context
  // Runs ready work until `done` holds; gives up after a bounded number of rounds (returns false).
  // Idle rounds wait 1 ms for timers (the consumer's top-up waits 2 ms).
  bool run_until(const std::function<bool()>& done);
  // Runs until nothing is ready and the short timers (top-up) have had their turn.
  void settle();

  // ---- what the client received
  template <class M>
  std::vector<M> all(std::uint16_t channel = 1) const {
    std::vector<M> out;
    for (const auto& f : conn.frames)
      if (f.channel == channel)
        if (const auto* m = std::get_if<M>(&f.method)) out.push_back(*m);
    return out;
  }
  template <class M>
  std::size_t count(std::uint16_t channel = 1) const { return all<M>(channel).size(); }
  // Bodies of basic.deliver frames, in order.
  std::vector<std::string> delivered_bodies(std::uint16_t channel = 1) const;
  std::vector<std::uint64_t> delivered_tags(std::uint16_t channel = 1) const;
  // Names of the methods received on the channel, in order ("basic.deliver", "basic.ack" ...).
  std::vector<std::string> method_names(std::uint16_t channel = 1) const;

 private:
  std::map<std::uint16_t, std::unique_ptr<channel>> channels_;
  std::set<std::uint16_t> failed_;  // closed by a channel or connection exception
};

// The default exchange's subject for a queue (what a publish with routing key `queue` goes to).
std::string subject_for(const std::string& queue);
std::string consumer_of(const std::string& queue);

}  // namespace amqp::broker::test
