#include "requeue_order.hpp"

#include <iterator>

namespace amqp::bus::detail {

bool requeue_order::nak_made(std::uint64_t id, const std::string& queue, std::string reply, clock::time_point now) {
  std::lock_guard lock{mutex_};
  naks_.emplace(id, queue);
  auto& b = barriers_[queue];
  if (b.unanswered++ == 0) b.since = now;
  auto g = gates_.find(queue);
  if (g == gates_.end()) return true;
  g->second.held.emplace_back(id, std::move(reply));
  return false;
}

bool requeue_order::hold_pulls(const std::string& queue, resume_fn resume) {
  std::lock_guard lock{mutex_};
  auto b = barriers_.find(queue);
  if (b == barriers_.end()) return false;
  b->second.waiting.push_back(std::move(resume));
  return true;
}

std::vector<requeue_order::resume_fn> requeue_order::answered(std::uint64_t id) {
  std::lock_guard lock{mutex_};
  auto nak = naks_.find(id);
  if (nak == naks_.end()) return {};  // its barrier was already lifted by expire
  auto b = barriers_.find(nak->second);
  naks_.erase(nak);
  if (b == barriers_.end() || --b->second.unanswered > 0) return {};
  auto released = std::move(b->second.waiting);
  barriers_.erase(b);
  return released;
}

void requeue_order::drain_started(const std::string& queue, clock::time_point now) {
  std::lock_guard lock{mutex_};
  auto& g = gates_[queue];
  if (g.draining++ == 0) g.since = now;
}

std::vector<requeue_order::held_nak> requeue_order::drain_finished(const std::string& queue) {
  std::lock_guard lock{mutex_};
  std::vector<held_nak> held;
  auto g = gates_.find(queue);
  if (g == gates_.end() || --g->second.draining > 0) return held;
  release_gate_locked(queue, held);
  return held;
}

void requeue_order::release_gate_locked(const std::string& queue, std::vector<held_nak>& out) {
  auto g = gates_.find(queue);
  if (g == gates_.end()) return;
  std::move(g->second.held.begin(), g->second.held.end(), std::back_inserter(out));
  gates_.erase(g);
}

std::vector<requeue_order::resume_fn> requeue_order::expire(clock::time_point now, std::vector<held_nak>& unheld) {
  std::lock_guard lock{mutex_};
  std::vector<std::string> stale;
  for (const auto& [queue, g] : gates_)
    if (now - g.since >= drain_wait) stale.push_back(queue);
  for (const auto& queue : stale) release_gate_locked(queue, unheld);
  std::vector<resume_fn> released;
  for (auto b = barriers_.begin(); b != barriers_.end();) {
    if (now - b->second.since < requeue_wait) {
      ++b;
      continue;
    }
    std::erase_if(naks_, [&](const auto& nak) { return nak.second == b->first; });
    std::move(b->second.waiting.begin(), b->second.waiting.end(), std::back_inserter(released));
    b = barriers_.erase(b);
  }
  return released;
}

bool requeue_order::any_unanswered() const {
  std::lock_guard lock{mutex_};
  return !naks_.empty();
}

bool requeue_order::any_open() const {
  std::lock_guard lock{mutex_};
  return !barriers_.empty() || !gates_.empty();
}

}  // namespace amqp::bus::detail
