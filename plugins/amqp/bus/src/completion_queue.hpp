#pragma once
// Publish completions on their way from nats threads to the executors that asked for them.
// Pub acks arrive in bursts; each burst bound for one executor is run by one posted handler,
// so a burst costs the channel one hand-off (a lock and a wake-up of its io thread), not one
// per message. Completions for one executor run in the order they were queued.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "amqp/bus/result.hpp"

namespace amqp::bus::detail {

class completion_queue : public std::enable_shared_from_this<completion_queue> {
 public:
  using done_fn = std::function<void(bus_status)>;

  // Thread-safe. `done(status)` runs on `ex`, after the completions queued for `ex` before it.
  void post(const boost::asio::any_io_executor& ex, done_fn done, bus_status status) {
    {
      std::lock_guard lock{mutex_};
      for (auto& b : batches_) {
        if (b.ex == ex) {  // a handler for this executor is already on its way
          b.ready.emplace_back(std::move(done), std::move(status));
          return;
        }
      }
      batches_.push_back(batch{ex, {}});
      batches_.back().ready.emplace_back(std::move(done), std::move(status));
    }
    boost::asio::post(ex, [self = shared_from_this(), ex] { self->run(ex); });
  }

 private:
  struct batch {
    boost::asio::any_io_executor ex;
    std::vector<std::pair<done_fn, bus_status>> ready;
  };

  void run(const boost::asio::any_io_executor& ex) {
    std::vector<std::pair<done_fn, bus_status>> ready;
    {
      std::lock_guard lock{mutex_};
      for (auto it = batches_.begin(); it != batches_.end(); ++it) {
        if (it->ex == ex) {
          ready = std::move(it->ready);
          batches_.erase(it);
          break;
        }
      }
    }
    for (auto& [done, status] : ready) done(std::move(status));
  }

  std::mutex mutex_;
  std::vector<batch> batches_;  // at most one per executor with a handler pending
};

}  // namespace amqp::bus::detail
