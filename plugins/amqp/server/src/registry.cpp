#include "registry.hpp"

namespace amqp::server {

void session_registry::add(std::uint64_t id, std::weak_ptr<session> s) {
  std::lock_guard lock(mutex_);
  sessions_.emplace(id, std::move(s));
}

void session_registry::remove(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  sessions_.erase(id);
  if (sessions_.empty()) emptied_.notify_all();
}

std::vector<std::shared_ptr<session>> session_registry::live() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<session>> out;
  for (const auto& [id, weak] : sessions_) {
    if (auto s = weak.lock()) out.push_back(std::move(s));
  }
  return out;
}

std::size_t session_registry::size() const {
  std::lock_guard lock(mutex_);
  return sessions_.size();
}

bool session_registry::wait_empty(std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(mutex_);
  return emptied_.wait_until(lock, deadline, [this] { return sessions_.empty(); });
}

}  // namespace amqp::server
