#include "publish/publish_confirms.hpp"

#include <utility>

namespace amqp::broker {

void publish_confirms::select() noexcept { enabled_ = true; }

std::uint64_t publish_confirms::next() noexcept { return ++issued_; }

std::vector<publish_confirms::confirm> publish_confirms::record(std::uint64_t seq, outcome o) {
  std::vector<confirm> out;
  if (seq <= confirmed_ || seq > issued_) return out;  // late duplicate or foreign: ignore
  if (seq == confirmed_ + 1 && answered_.empty()) {
    // The common case, answers in publish order: nothing waits above the watermark.
    confirmed_ = seq;
    out.push_back({o, seq, false});
    return out;
  }
  answered_.emplace(seq, o);
  // Walk the contiguous run above the watermark, one frame per run of equal outcomes.
  auto it = answered_.begin();
  while (it != answered_.end() && it->first == confirmed_ + 1) {
    const outcome kind = it->second;
    std::uint64_t first = it->first;
    std::uint64_t last = first;
    for (;;) {
      it = answered_.erase(it);
      confirmed_ = last;
      if (it == answered_.end() || it->first != last + 1 || it->second != kind) break;
      last = it->first;
    }
    out.push_back({kind, last, last != first});
  }
  return out;
}

bool publish_confirms::stage(const std::vector<confirm>& frames) {
  for (const auto& f : frames) {
    if (!staged_.empty() && staged_.back().kind == f.kind) {
      staged_.back() = {f.kind, f.delivery_tag, true};
    } else {
      staged_.push_back(f);
    }
  }
  if (staged_.empty() || flush_due_) return false;
  flush_due_ = true;
  return true;
}

std::vector<publish_confirms::confirm> publish_confirms::take_staged() {
  flush_due_ = false;
  return std::exchange(staged_, {});
}

}  // namespace amqp::broker
