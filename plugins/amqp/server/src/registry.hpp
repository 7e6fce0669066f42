#pragma once
// The live sessions of one server, so that shutdown can reach each of them and wait for them
// to end. Sessions register when accepted and unregister when destroyed (any thread).
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

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable emptied_;
  std::unordered_map<std::uint64_t, std::weak_ptr<session>> sessions_;
};

}  // namespace amqp::server
