#include "publish_confirms.hpp"

namespace amqp::broker {

void publish_confirms::select() noexcept { enabled_ = true; }

std::uint64_t publish_confirms::next() noexcept { return ++issued_; }

std::vector<publish_confirms::confirm> publish_confirms::settle(std::uint64_t seq, outcome o) {
  std::vector<confirm> out;
  if (seq <= confirmed_ || seq > issued_) return out;  // late duplicate or foreign: ignore
  settled_.emplace(seq, o);
  // Walk the contiguous run above the watermark, one frame per run of equal outcomes.
  auto it = settled_.begin();
  while (it != settled_.end() && it->first == confirmed_ + 1) {
    const outcome kind = it->second;
    std::uint64_t first = it->first;
    std::uint64_t last = first;
    for (;;) {
      it = settled_.erase(it);
      confirmed_ = last;
      if (it == settled_.end() || it->first != last + 1 || it->second != kind) break;
      last = it->first;
    }
    out.push_back({kind, last, last != first});
  }
  return out;
}

}  // namespace amqp::broker
