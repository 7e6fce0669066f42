#pragma once
// The deliveries a client received and has not settled: how many of each queue (a count's
// held_here) and their ack subjects, so that each is reported in progress before its ack wait
// runs out, however long its holder keeps it. Not thread-safe: the client guards it.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace amqp::bus::detail {

class held_deliveries {
 public:
  void add(std::string_view queue, std::string reply) {
    ++counts_[std::string{queue}];
    recent_.insert(std::move(reply));
  }
  // No longer counted as held: settled, or a NAK is on its way.
  void uncount(std::string_view queue) {
    if (auto it = counts_.find(std::string{queue}); it != counts_.end() && --it->second == 0) counts_.erase(it);
  }
  // No longer kept from its ack wait: its settlement was sent.
  void stop_reporting(const std::string& reply) {
    if (recent_.erase(reply) == 0) older_.erase(reply);
  }
  std::uint64_t count(const std::string& queue) const {
    auto it = counts_.find(queue);
    return it == counts_.end() ? 0 : it->second;
  }
  // Called once a period: the ack subjects held since the previous call at least, each to be
  // reported in progress. A delivery is so reported within two periods of its arrival, and
  // then every period.
  std::vector<std::string> due() {
    std::vector<std::string> out{older_.begin(), older_.end()};
    older_.merge(recent_);
    return out;
  }

 private:
  std::unordered_map<std::string, std::uint64_t> counts_;  // by queue
  std::unordered_set<std::string> recent_;                 // arrived since the last due()
  std::unordered_set<std::string> older_;
};

}  // namespace amqp::bus::detail
