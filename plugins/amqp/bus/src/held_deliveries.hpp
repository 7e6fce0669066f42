#pragma once
// The deliveries a client received and has not settled: how many of each queue (a count's
// held_here) and their ack subjects, so that each is reported in progress before its ack wait
// runs out, however long its holder keeps it; and the queues settled since their last sync
// (client_impl::sync_settlements), so that a count waits for the server to apply only those.
// Thread-safe: nats threads add, settling threads remove, the progress thread reads.
#include <cstdint>
#include <map>
#include <mutex>
#include <functional>
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
    auto it = seqs_.find(queue);
    if (it == seqs_.end()) it = seqs_.emplace(std::string{queue}, std::multiset<std::uint64_t>{}).first;
    it->second.insert(seq);
    recent_.insert(std::move(reply));
  }
  // No longer counted as held: settled, or a NAK is on its way (`sent` false: it is reported in
  // progress until stop_reporting). `seq` is the delivery's stream sequence, from its ack subject.
  void settled(std::string_view queue, std::uint64_t seq, const std::string& reply, bool sent) {
    std::lock_guard lock{mutex_};
    if (auto held = seqs_.find(queue); held != seqs_.end()) {
      if (auto one = held->second.find(seq); one != held->second.end()) held->second.erase(one);
      if (held->second.empty()) seqs_.erase(held);
    }
    if (sent) forget_locked(reply);
    if (!unsynced_.contains(queue)) unsynced_.emplace(queue);
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
  // Every queue this client holds deliveries of, with how many.
  std::map<std::string, std::uint64_t> counts() const {
    std::lock_guard lock{mutex_};
    std::map<std::string, std::uint64_t> out;
    for (const auto& [queue, seqs] : seqs_) out.emplace(queue, seqs.size());
    return out;
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
  std::uint64_t count_locked(std::string_view queue) const {
    auto it = seqs_.find(queue);
    return it == seqs_.end() ? 0 : it->second.size();
  }

  // Looked up by a queue's name as a view of an ack subject, without a string made for it.
  struct name_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  template <class V>
  using by_name = std::unordered_map<std::string, V, name_hash, std::equal_to<>>;

  mutable std::mutex mutex_;
  // By queue: the stream sequences held. A count is their number, and a settlement of one not
  // held (settled twice, or never noted) changes none.
  by_name<std::multiset<std::uint64_t>> seqs_;
  std::unordered_set<std::string> recent_;      // arrived since the last due()
  std::unordered_set<std::string> older_;
  std::unordered_set<std::string, name_hash, std::equal_to<>> unsynced_;  // queues settled since their last sync
};

}  // namespace amqp::bus::detail
