#pragma once
// Publisher confirms for one channel: which sequence numbers the bus has answered, and which
// basic.ack / basic.nack frames that allows us to send.
//
// The bus may answer publishes out of order (each JetStream publish acknowledgement arrives
// on its own). The client reads `multiple` as "every unconfirmed sequence at or below this
// one", so a coalesced confirm is only correct when every lower sequence not yet confirmed
// to the client was answered the same way. We therefore confirm strictly from the low watermark
// up: answers above a gap wait until the gap is answered, and each maximal run of equal
// outcomes becomes one frame (multiple when the run is longer than one).
//
// Frames are also coalesced across answers: the channel stages what became sendable and
// sends it once per turn of its executor (the bus's answers arrive one by one but in bursts),
// merging each frame into the previous staged one when both have the same outcome. That is the
// same rule: every tag below the merged run was either sent earlier or is covered by an
// earlier staged frame, which goes out first. Fewer, `multiple` confirms are what RabbitMQ
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
  std::vector<confirm> record(std::uint64_t seq, outcome o);
  // Stages `frames` (in the order record returned them) for the next flush, coalesced as above.
  // Returns true when nothing was staged before, i.e. when the caller must schedule a flush.
  bool stage(const std::vector<confirm>& frames);
  // The staged frames, in order; nothing is staged afterwards.
  std::vector<confirm> take_staged();
  // Publishes still waiting for the bus (or for a lower sequence to be answered).
  std::size_t unconfirmed() const noexcept { return issued_ - confirmed_; }

 private:
  bool enabled_ = false;
  std::uint64_t issued_ = 0;     // highest sequence handed out
  std::uint64_t confirmed_ = 0;  // every sequence <= this was sent to the client
  std::map<std::uint64_t, outcome> answered_;  // answered above the watermark, not yet sent
  std::vector<confirm> staged_;                // sendable, waiting for the flush
  bool flush_due_ = false;                     // a flush is scheduled for staged_
};

}  // namespace amqp::broker
