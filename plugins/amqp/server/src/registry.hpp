#pragma once
// The live sessions of one server, so that shutdown can reach each of them and wait for them
// to end. Sessions register when accepted and unregister when destroyed (any thread). It also
// counts the connections (past connection.open) and channels they opened and ended, for an operator.
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace amqp::server {

class session;

class session_registry {
 public:
  void add(std::uint64_t id, std::weak_ptr<session> s);
  void remove(std::uint64_t id);
  // The sessions still alive.
  std::vector<std::shared_ptr<session>> live() const;
  std::size_t size() const;
  // True when every session has gone before `deadline`.
  bool wait_empty(std::chrono::steady_clock::time_point deadline) const;

  enum class event { connection_opened, connection_closed, channel_opened, channel_closed };
  void counted(event e) { events_[static_cast<std::size_t>(e)].fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t count_of(event e) const { return events_[static_cast<std::size_t>(e)].load(std::memory_order_relaxed); }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable emptied_;
  std::unordered_map<std::uint64_t, std::weak_ptr<session>> sessions_;
  std::array<std::atomic<std::uint64_t>, 4> events_{};
};

}  // namespace amqp::server
