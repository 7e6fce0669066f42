#pragma once
// A connection_port as the session implements it, for the sequence fuzzer: it decodes every
// frame the broker sends (frame_decoder.hpp) and hands each method to its channel's client
// model, and takes channel and connection exceptions as the session does, checking their
// reply codes. Several of them share one broker, one fake bus and one io_context.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "amqp/broker/broker.hpp"
#include "client_model.hpp"

namespace amqp::broker::fuzz {

class fuzz_connection final : public connection_port {
 public:
  fuzz_connection(boost::asio::io_context& io, std::shared_ptr<broker> b, std::shared_ptr<bus::client> bus,
                  std::uint64_t id)
      : io_(io), broker_(std::move(b)), bus_(std::move(bus)), id_(id) {}
  ~fuzz_connection() override;

  // ---- what the fuzzer does, as a client and as the session
  // channel.open: false when it is open already. A channel the broker closed is replaced
  // (the client's close-ok came).
  bool open(std::uint16_t ch);
  // The channel is open and no exception closed it.
  bool usable(std::uint16_t ch) const;
  channel& broker_channel(std::uint16_t ch) { return *channels_.at(ch).broker_side; }
  client_channel& client(std::uint16_t ch) { return *channels_.at(ch).client_side; }
  // The client's channel.close (or after an exception, its close-ok): the channel goes.
  void close(std::uint16_t ch);
  // The socket went (or a connection exception ended it): every channel closed, then the broker
  // told. Nothing may be sent to the connection afterwards.
  void drop();
  bool ended() const { return ended_; }
  bool excepted() const { return excepted_; }  // a connection exception is waiting for drop()
  std::vector<std::uint16_t> usable_channels() const;

  // ---- connection_port
  void send(std::string frames) override;
  std::uint32_t frame_max() const override { return 128 * 1024; }
  std::uint64_t connection_id() const override { return id_; }
  boost::asio::any_io_executor executor() override { return io_.get_executor(); }
  std::shared_ptr<bus::client> bus() override { return bus_; }
  const std::string& user() const override { return user_; }
  bool backlogged() const override { return false; }
  void when_drained(std::function<void()> resume) override;
  void publish_handed(std::size_t cost) override { publish_cost_ += static_cast<std::int64_t>(cost); }
  void publish_answered(std::size_t cost) override;
  void close_channel(std::uint16_t channel, wire::reply_code code, std::string sentence,
                     wire::method_key offending) override;
  void close_connection(wire::reply_code code, std::string sentence, wire::method_key offending) override;

 private:
  struct open_channel_state {
    std::unique_ptr<channel> broker_side;
    std::unique_ptr<client_channel> client_side;
    bool failed = false;  // a channel exception closed it; the client's close-ok has not come
  };
  std::string where() const { return "connection " + std::to_string(id_) + ": "; }

  boost::asio::io_context& io_;
  std::shared_ptr<broker> broker_;
  std::shared_ptr<bus::client> bus_;
  std::uint64_t id_;
  std::string user_;
  std::map<std::uint16_t, open_channel_state> channels_;
  std::int64_t publish_cost_ = 0;
  bool excepted_ = false;
  bool ended_ = false;
};

// A reply code of AMQP 0-9-1's table (wire/reply_code.hpp), other than reply-success.
bool is_amqp_exception_code(wire::reply_code code);

}  // namespace amqp::broker::fuzz
