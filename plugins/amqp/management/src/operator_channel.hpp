#pragma once
// One AMQP channel the management API speaks through to a vhost's broker, as a client would, so a
// declaration, deletion, purge, publish or get made over HTTP means what it means over AMQP,
// refusals included (broker.hpp's seam: the API is this channel's connection). Everything runs on
// the executor it is given, which must be serial; one method at a time.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amqp/broker/broker.hpp"
#include "amqp/wire/methods.hpp"
#include "amqp/wire/properties.hpp"
#include "amqp/wire/reply_code.hpp"

namespace amqp::management {

class operator_channel final : public broker::connection_port {
 public:
  struct received {
    wire::method method;
    std::string property_octets;  // a delivery's, verbatim
    std::string body;
  };
  struct answer {
    std::vector<received> frames;        // what the broker sent, in order
    std::optional<wire::refusal> refused;  // the channel's (or connection's) exception
    bool timed_out = false;
  };
  using done_fn = std::function<bool(const received&)>;

  // `connection_id`: unique in the process (exclusive owners); `user`: as a publish's user_id is
  // checked against ("" when authentication is off).
  operator_channel(std::shared_ptr<broker::broker> b, std::shared_ptr<bus::client> bus,
                   boost::asio::any_io_executor ex, std::uint64_t connection_id, std::string user,
                   std::chrono::milliseconds timeout);
  ~operator_channel() override;

  // Sends `m`, and resumes once a frame satisfies `done`, the channel is refused, or the timeout
  // passes. After a refusal the next call opens a fresh channel.
  boost::asio::awaitable<answer> call(wire::method m, done_fn done);
  boost::asio::awaitable<answer> publish(wire::basic_publish m, std::string property_octets, std::string body,
                                         done_fn done);
  // Settlements, which the broker does not answer.
  void tell(wire::method m);

  // ---- connection_port
  void send(std::string frames) override;
  std::uint32_t frame_max() const override { return 128 * 1024; }
  std::uint64_t connection_id() const override { return connection_id_; }
  boost::asio::any_io_executor executor() override { return ex_; }
  std::shared_ptr<bus::client> bus() override { return bus_; }
  const std::string& user() const override { return user_; }
  bool backlogged() const override { return false; }
  void when_drained(std::function<void()> resume) override;
  void publish_handed(std::size_t) override {}
  void publish_answered(std::size_t) override {}
  void close_channel(std::uint16_t channel, wire::reply_code code, std::string sentence,
                     wire::method_key offending) override;
  void close_connection(wire::reply_code code, std::string sentence, wire::method_key offending) override;

 private:
  broker::channel& channel();
  void refused(wire::reply_code code, std::string sentence);
  boost::asio::awaitable<answer> wait(done_fn done);
  void finish();

  std::shared_ptr<broker::broker> broker_;
  std::shared_ptr<bus::client> bus_;
  boost::asio::any_io_executor ex_;
  std::uint64_t connection_id_;
  std::string user_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<broker::channel> channel_;
  std::uint16_t next_channel_id_ = 1;
  answer now_;
  done_fn done_;
  bool finished_ = false;
  boost::asio::steady_timer event_;
};

}  // namespace amqp::management
