#include "publish_confirms.hpp"

#include <utility>

namespace amqp::broker {

void publish_confirms::select() noexcept { enabled_ = true; }

std::uint64_t publish_confirms::next() noexcept { return ++issued_; }

std::vector<publish_confirms::confirm> publish_confirms::settle(std::uint64_t seq, outcome o) {
  std::vector<confirm> out;
  if (seq <= confirmed_ || seq > issued_) return out;  // late duplicate or foreign: ignore
  if (seq == confirmed_ + 1 && settled_.empty()) {
    // The common case, answers in publish order: nothing waits above the watermark.
    confirmed_ = seq;
    out.push_back({o, seq, false});
    return out;
  }
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

bool publish_confirms::hold(const std::vector<confirm>& frames) {
  for (const auto& f : frames) {
    if (!held_.empty() && held_.back().kind == f.kind) {
      held_.back() = {f.kind, f.delivery_tag, true};
    } else {
      held_.push_back(f);
    }
  }
  if (held_.empty() || flush_due_) return false;
  flush_due_ = true;
  return true;
}

std::vector<publish_confirms::confirm> publish_confirms::take_held() {
  flush_due_ = false;
  return std::exchange(held_, {});
}

}  // namespace amqp::broker
