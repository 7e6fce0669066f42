// The basic class, settling side: basic.ack, nack, reject and recover, and the requeue of what a
// channel still holds when it ends (the design: the top of channel/basic.hpp).
#include <algorithm>
#include <utility>
#include <vector>

#include "channel/basic.hpp"
#include "channel/handler_support.hpp"
#include "deliver/consumer.hpp"
#include "housekeeping/dead_letter.hpp"

namespace amqp::broker {
namespace {

void unknown_tag(basic_state& s, std::uint64_t tag, wire::method_key during) {
  s.ctx.fail(wire::reply_code::precondition_failed, "unknown delivery tag " + std::to_string(tag), during,
             "settle only tags delivered on this channel and not yet acknowledged, rejected or recovered");
}

enum class settlement { ack, requeue, drop };

// Settles deliveries taken out of `outstanding`. Requeues go in stream order, which is the order
// the bus redelivers them in.
void settle_all(basic_state& s, std::vector<outstanding_delivery> done, settlement how) {
  auto& bus = s.ctx.bus();
  if (how == settlement::requeue) {
    std::stable_sort(done.begin(), done.end(),
                     [](const auto& a, const auto& b) { return a.stream_seq < b.stream_seq; });
  }
  if (how == settlement::ack) broker::count(s.ctx.state().message_counters().acknowledged, done.size());
  for (auto& d : done) {
    if (d.stream) {
      // A stream queue's reader needs no settlement: an ack, or the channel's end, frees credit.
      if (d.owner) d.owner->release();
      continue;
    }
    switch (how) {
      case settlement::ack: bus.ack(d.reply); break;
      case settlement::requeue: bus.nak(d.reply); break;
      case settlement::drop:
        give_up_rejected(s.ctx.state(), s.ctx.executor(), d.queue(), std::move(d.reply), d.stream_seq);
        break;
    }
    if (d.owner) d.owner->release();
  }
}

// basic.ack / nack / reject. An unknown tag closes the channel, and settles nothing: one never
// delivered on this channel, or, without `multiple`, one not outstanding. A `multiple` settle of a
// delivered tag settles what is outstanding up to it, even nothing (HIP-1326, "Acknowledgement,
// and what bounds a consumer").
void settle(basic_state& s, std::uint64_t tag, bool multiple, settlement how,
            wire::method_key during) {
  std::vector<outstanding_delivery> done;
  if (tag > s.next_tag) return unknown_tag(s, tag, during);
  if (multiple) {
    auto end = tag == 0 ? s.outstanding.end() : s.outstanding.upper_bound(tag);
    for (auto it = s.outstanding.begin(); it != end;) {
      done.push_back(std::move(it->second));
      it = s.outstanding.erase(it);
    }
  } else {
    auto it = s.outstanding.find(tag);
    if (it == s.outstanding.end()) return unknown_tag(s, tag, during);
    done.push_back(std::move(it->second));
    s.outstanding.erase(it);
  }
  if (how != settlement::ack) {
    auto stream = std::find_if(done.begin(), done.end(), [](const outstanding_delivery& d) { return d.stream; });
    if (stream != done.end()) {
      return s.ctx.fail_connection(wire::reply_code::not_implemented,
                                   "basic.nack and basic.reject not supported by stream queues queue " +
                                       quoted(stream->queue()) + in_vhost(s.ctx),
                                   during,
                                   "a stream queue keeps every message for its readers: ack what was read, and "
                                   "read again from an x-stream-offset");
    }
  }
  settle_all(s, std::move(done), how);
  pump_consumers(s);
}

}  // namespace

void requeue_all(basic_state& s) {
  std::vector<outstanding_delivery> done;
  done.reserve(s.outstanding.size());
  for (auto& [tag, d] : s.outstanding) done.push_back(std::move(d));
  s.outstanding.clear();
  settle_all(s, std::move(done), settlement::requeue);
}

void basic_class::on_method(wire::basic_ack m) {
  settle(*state_, m.delivery_tag, m.multiple, settlement::ack, wire::basic_ack::key);
}

void basic_class::on_method(wire::basic_reject m) {
  settle(*state_, m.delivery_tag, false, m.requeue ? settlement::requeue : settlement::drop,
         wire::basic_reject::key);
}

void basic_class::on_method(wire::basic_nack m) {
  settle(*state_, m.delivery_tag, m.multiple, m.requeue ? settlement::requeue : settlement::drop,
         wire::basic_nack::key);
}

void basic_class::on_method(wire::basic_recover) {
  // Either requeue value: the bus redelivers to whichever consumer pulls next (basic.hpp).
  auto& s = *state_;
  requeue_all(s);
  s.ctx.reply(wire::basic_recover_ok{});
  pump_consumers(s);
}

void basic_class::on_method(wire::basic_recover_async) {
  state_->ctx.fail(wire::reply_code::not_implemented,
                   "basic.recover-async is not implemented; use basic.recover, which is answered",
                   wire::basic_recover_async::key);
}

}  // namespace amqp::broker
