#pragma once
// The state behind a topology_watch handle: the nats.c watcher, the thread that waits on it
// after the initial replay, and the callback (released on stop so its captures go too).
#include <atomic>
#include <mutex>
#include <thread>

#include "amqp/bus/client.hpp"
#include "nats_handle.hpp"

namespace amqp::bus {

struct topology_watch::state {
  detail::kv_watcher_ptr watcher;
  boost::asio::any_io_executor ex;
  std::mutex mutex;
  std::shared_ptr<client::on_change_fn> on_change;  // released by stop()
  std::thread thread;
  std::atomic<bool> stopped{false};

  std::shared_ptr<client::on_change_fn> callback() {
    std::lock_guard lock{mutex};
    return on_change;
  }
  // The thread sees `stopped` within one poll (topology.cpp's watch_poll_ms); the watcher is
  // destroyed with this state, after the thread is done with it.
  void stop() {
    if (stopped.exchange(true)) return;
    if (thread.joinable() && thread.get_id() != std::this_thread::get_id()) thread.join();
    std::lock_guard lock{mutex};
    on_change.reset();
  }
  ~state() {
    stop();
    if (thread.joinable()) thread.detach();  // only when destroyed on its own thread
  }
};

}  // namespace amqp::bus
