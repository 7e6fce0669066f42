#pragma once
// Publisher confirms for one channel: which sequence numbers the bus has settled, and which
// basic.ack / basic.nack frames that allows us to send.
//
// The bus may settle publishes out of order (each JetStream publish acknowledgement arrives
// on its own). The client reads `multiple` as "every unconfirmed sequence at or below this
// one", so a coalesced confirm is only correct when every lower sequence not yet confirmed
// to the client settled the same way. We therefore confirm strictly from the low watermark
// up: settlements above a gap wait until the gap settles, and each maximal run of equal
// outcomes becomes one frame (multiple when the run is longer than one).
//
// Frames are also coalesced across settlements: the channel holds what became sendable and
// sends it once per turn of its executor (the bus's answers arrive one by one but in bursts),
// merging each frame into the previous held one when both have the same outcome. That is the
// same rule: every tag below the merged run was either sent earlier or is covered by an
// earlier held frame, which goes out first. Fewer, `multiple` confirms are what RabbitMQ
// sends too, and they let a windowed publisher refill its window in bursts.
#include <cstdint>
#include <map>
#include <vector>

namespace amqp::broker {

class publish_confirms {
 public:
  enum class outcome : std::uint8_t { ack, nack };
  // One frame to send: basic.ack or basic.nack(delivery_tag, multiple).
  struct confirm {
    outcome kind = outcome::ack;
    std::uint64_t delivery_tag = 0;
    bool multiple = false;
    bool operator==(const confirm&) const = default;
  };

  // confirm.select: sequences start again at 1 (a repeated select is a no-op for the
  // numbering, as in RabbitMQ).
  void select() noexcept;
  bool enabled() const noexcept { return enabled_; }
  // The sequence number of the next publish (call once per publish, in arrival order).
  std::uint64_t next() noexcept;
  // Records the bus's answer for `seq`; returns the frames that became sendable.
  std::vector<confirm> settle(std::uint64_t seq, outcome o);
  // Holds `frames` (in settle order) for the next flush, coalesced as above. Returns true
  // when nothing was held before, i.e. when the caller must schedule a flush.
  bool hold(const std::vector<confirm>& frames);
  // The held frames, in order; nothing is held afterwards.
  std::vector<confirm> take_held();
  // Publishes still waiting for the bus (or for a lower sequence to settle).
  std::size_t unconfirmed() const noexcept { return issued_ - confirmed_; }

 private:
  bool enabled_ = false;
  std::uint64_t issued_ = 0;     // highest sequence handed out
  std::uint64_t confirmed_ = 0;  // every sequence <= this was sent to the client
  std::map<std::uint64_t, outcome> settled_;  // settled above the watermark, not yet sent
  std::vector<confirm> held_;                 // sendable, waiting for the flush
  bool flush_due_ = false;                    // a flush is scheduled for held_
};

}  // namespace amqp::broker
