#pragma once
// Delayed messages once due (delayed_delivery.hpp). The server stores a fired schedule's copy on
// its due subject, which one durable shared by every replica reads (bus::due_consumer), so each
// due message reaches one replica's router. It is routed there as a publish of that moment (the
// delayed-message plugin routes when the delay ends), one copy stored per queue reached, and acked
// once every copy is stored. A refused copy NAKs it, a second later, to be routed again; each copy
// carries Nats-Msg-Id `due.<stream seq>.<queue word>`, so routing one again stores nothing twice.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "amqp/bus/client.hpp"
#include "housekeeping/expiry.hpp"

namespace amqp::broker {

class broker;

class due_router final : public std::enable_shared_from_this<due_router> {
 public:
  // `ex` must be serial (a strand).
  due_router(std::weak_ptr<broker> owner, std::shared_ptr<bus::client> bus, boost::asio::any_io_executor ex);
  ~due_router();
  void start();
  void stop();  // idempotent; what it holds goes back to the consumer

 private:
  void pump();
  void on_delivery(bus::delivery d);
  void on_event(const bus::pull_event& e);
  void routed(const std::string& reply, const std::vector<expiry_look>& expiries, const bus::bus_status& outcome);
  void retry_soon();
  void hand_back_refused();

  std::weak_ptr<broker> owner_;
  std::shared_ptr<bus::client> bus_;
  boost::asio::any_io_executor ex_;
  std::shared_ptr<bus::puller> puller_;
  boost::asio::steady_timer retry_;  // after a refusal or a bus error only
  bool retry_armed_ = false;
  std::vector<std::string> refused_;  // replies NAK'ed when the retry timer fires
  std::uint32_t routing_ = 0;         // delivered, copies not yet stored
  bool stopped_ = false;
};

}  // namespace amqp::broker
