// single_active: the pin the server gave one puller. The server pins the first request it serves
// on a pinned consumer and gives the queue's messages only to requests carrying that pin, until
// the pin is given back (UNPIN) or goes unrenewed for pin_timeout. A consumer whose prefetch is
// all in flight asks for nothing, so its pin is renewed by a request that cannot be served
// (client_impl::ask_nothing).
#pragma once

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace amqp::bus::detail {

class client_impl;

// A single_active queue's no-wait request meets the pinned puller's turn (the server leaves it
// waiting, never answered): it ends this long after, empty-handed. Also the nudge after a pause.
inline constexpr std::chrono::milliseconds pinned_no_wait_expires{100};

// Runs on its puller's executor, as does everything that calls it.
class pin_lease : public std::enable_shared_from_this<pin_lease> {
 public:
  pin_lease(std::weak_ptr<client_impl> owner, std::string queue, boost::asio::any_io_executor ex);

  const std::string& pin() const { return pin_; }  // "" none
  bool held() const { return !pin_.empty(); }
  // A delivery came with `pin`. A one-message pull (the expiry sweeper's, a length limit's) took
  // the queue only for its message: the consumers come first, so that pin goes back at once.
  void take(const std::string& pin, bool for_one_message);
  void carried();  // a request carrying the pin went out just now
  void lost();     // the server said the pin is no longer this puller's
  void stop();     // no more renewals

  // The puller is gone: the next pinned puller gets what its channel requeued first, in their
  // order. A NAK the server applies while the pinned puller asks for nothing meets only the
  // others' requests, which it may not serve, and goes back behind the other requeued messages;
  // so the queue is paused, `after_pause` lets the puller's NAKs go, and once the server has
  // answered them the pin is given back and the queue resumed. A pause ends by itself should
  // this process die in between.
  void hand_over(const std::shared_ptr<client_impl>& owner, std::function<void()> after_pause);

 private:
  void arm();
  void renew();
  void give_back();

  std::weak_ptr<client_impl> owner_;
  std::string queue_;
  boost::asio::any_io_executor ex_;
  std::string pin_;
  std::chrono::steady_clock::time_point renewed_{};  // the last request carrying the pin
  boost::asio::steady_timer renewal_;
  bool armed_ = false;
  bool stopping_ = false;
};

}  // namespace amqp::bus::detail
