#pragma once
// The deliveries a client received and has not settled: how many of each queue (a count's
// held_here) and their ack subjects, so that each is reported in progress before its ack wait
// runs out, however long its holder keeps it; and the queues settled since their last sync
// (client_impl::sync_settlements), so that a count waits for the server to apply only those; and
// the lowest stream sequence held of each queue, which a NAK of a later one waits for
// (requeue_order.hpp, the order gate).
// Thread-safe: nats threads add, settling threads remove, the progress thread reads.
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace amqp::bus::detail {

class held_deliveries {
 public:
  void add(std::string_view queue, std::string reply, std::uint64_t seq) {
    std::lock_guard lock{mutex_};
    ++counts_[std::string{queue}];
    seqs_[std::string{queue}].insert(seq);
    seq_of_[reply] = seq;
    recent_.insert(std::move(reply));
  }
  // No longer counted as held: settled, or a NAK is on its way (`sent` false: it is reported in
  // progress until stop_reporting).
  void settled(std::string_view queue, const std::string& reply, bool sent) {
    std::lock_guard lock{mutex_};
    if (auto it = counts_.find(std::string{queue}); it != counts_.end() && --it->second == 0) counts_.erase(it);
    if (auto seq = seq_of_.find(reply); seq != seq_of_.end()) {
      if (auto held = seqs_.find(std::string{queue}); held != seqs_.end()) {
        held->second.erase(seq->second);
        if (held->second.empty()) seqs_.erase(held);
      }
      seq_of_.erase(seq);
    }
    if (sent) forget_locked(reply);
    unsynced_.emplace(queue);
  }
  // No longer kept from its ack wait: its settlement was sent.
  void stop_reporting(const std::string& reply) {
    std::lock_guard lock{mutex_};
    forget_locked(reply);
  }
  std::uint64_t count(const std::string& queue) const {
    std::lock_guard lock{mutex_};
    return count_locked(queue);
  }
  // The lowest stream sequence of the queue held here; nullopt when none is.
  std::optional<std::uint64_t> lowest(const std::string& queue) const {
    std::lock_guard lock{mutex_};
    auto it = seqs_.find(queue);
    if (it == seqs_.end()) return std::nullopt;
    return *it->second.begin();
  }
  // The queue's settlements are to be synced before its next count.
  void mark_unsynced(const std::string& queue) {
    std::lock_guard lock{mutex_};
    unsynced_.insert(queue);
  }
  // True when the queue was settled since its last sync, which this one is; `held_then` gets the
  // queue's count at that instant.
  bool take_unsynced(const std::string& queue, std::uint64_t* held_then) {
    std::lock_guard lock{mutex_};
    if (held_then != nullptr) *held_then = count_locked(queue);
    return unsynced_.erase(queue) != 0;
  }
  // Called once a period: the ack subjects held since the previous call at least, each to be
  // reported in progress. A delivery is so reported within two periods of its arrival, and
  // then every period.
  std::vector<std::string> due() {
    std::lock_guard lock{mutex_};
    std::vector<std::string> out{older_.begin(), older_.end()};
    older_.merge(recent_);
    return out;
  }

 private:
  void forget_locked(const std::string& reply) {
    if (recent_.erase(reply) == 0) older_.erase(reply);
  }
  std::uint64_t count_locked(const std::string& queue) const {
    auto it = counts_.find(queue);
    return it == counts_.end() ? 0 : it->second;
  }

  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::uint64_t> counts_;  // by queue
  std::unordered_map<std::string, std::set<std::uint64_t>> seqs_;  // by queue: the stream sequences held
  std::unordered_map<std::string, std::uint64_t> seq_of_;          // by ack subject
  std::unordered_set<std::string> recent_;                 // arrived since the last due()
  std::unordered_set<std::string> older_;
  std::unordered_set<std::string> unsynced_;  // queues settled since their last sync
};

}  // namespace amqp::bus::detail
