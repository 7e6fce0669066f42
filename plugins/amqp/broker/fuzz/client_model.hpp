#pragma once
// What one client channel knows from its side of the socket, and the invariants the broker owes
// it (checked as each method arrives): delivery tags, prefetch, publisher confirms. A broken
// invariant aborts with a message naming it, which is what makes the fuzzer report the input.
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>

#include "amqp/wire/codec.hpp"

namespace amqp::broker::fuzz {

[[noreturn]] void violated(const std::string& what);
// SEQUENCE_FUZZ_TRACE=1: each action and each method received is printed, to read a finding.
bool tracing();

class client_channel {
 public:
  explicit client_channel(std::uint16_t id) : id_(id) {}

  // ---- what the client sent (methods reach the broker's channel in this order)
  void sent_qos(std::uint16_t prefetch, bool global) { qos_sent_.push_back({prefetch, global}); }
  void sent_consume(bool no_ack) { consumes_sent_.push_back(no_ack); }
  void sent_get(bool no_ack) { gets_sent_.push_back(no_ack); }
  void sent_confirm_select() { confirming_ = true; }
  void sent_publish();
  // A method that expects a reply (wire::method_info::synchronous).
  void sent_synchronous() { ++synchronous_sent_; }
  // ack / nack / reject / recover: the client forgets what it settled. The broker applies them in
  // the channel's method order, possibly after deliveries the client has not received yet, so one
  // that may cover unseen tags leaves those deliveries' fate open until a later reply (below).
  void sent_settle(std::uint64_t tag, bool multiple);
  void sent_recover();

  // What the client would settle next: an outstanding tag, a settled one, one never given.
  bool has_unacked() const { return !unacked_.empty(); }
  std::uint64_t unacked_tag(std::size_t pick) const;
  std::uint64_t last_tag() const { return last_tag_; }

  // ---- what the client received on this channel
  void receive(const wire::method& m);

  // Every publish of a confirming channel was confirmed (once the bus answered them all).
  void check_all_confirmed() const;

 private:
  struct consumer_seen {
    std::uint64_t serial = 0;  // tells a consumer from a later one with the same tag
    bool no_ack = false;
    std::uint16_t prefetch = 0;
  };
  struct unacked_delivery {
    std::uint64_t consumer_serial = 0;  // 0: basic.get-ok (bound by no prefetch)
    bool maybe_settled = false;         // arrived while a settle covering its tag was unapplied
  };
  // A settle that may cover tags above the last one seen, [first, last], until the broker has
  // surely applied it: once a reply to a method sent after it arrives.
  struct open_settle {
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    std::uint64_t replies_before = 0;  // synchronous methods sent before it
  };
  void settle_unseen(std::uint64_t first, std::uint64_t last);
  void received_reply();
  bool maybe_settled(std::uint64_t tag) const;
  void delivered(std::uint64_t tag);
  void deliver(const wire::basic_deliver& d);
  void get_ok(const wire::basic_get_ok& g);
  void confirm(std::uint64_t tag, bool multiple, const char* what);
  void check_prefetch(const consumer_seen& c) const;
  std::string where() const;

  std::uint16_t id_;
  std::uint64_t last_tag_ = 0;
  std::map<std::uint64_t, unacked_delivery> unacked_;
  std::deque<open_settle> open_settles_;
  std::uint64_t synchronous_sent_ = 0;
  std::uint64_t replies_received_ = 0;
  std::map<std::string, consumer_seen> consumers_;  // by tag, from consume-ok to cancel(-ok)
  std::uint64_t consumer_serial_ = 0;
  // Per-consumer prefetch and the channel's global one, as the broker applied them (qos-ok).
  std::uint16_t consumer_prefetch_ = 0;
  std::uint16_t global_prefetch_ = 0;
  // Lowering a global prefetch cannot recall what the bus was already asked for: until the
  // consumers that existed then are gone, the bound is the highest one they ran under.
  std::uint16_t global_grace_ = 0;
  std::uint64_t grace_until_serial_ = 0;  // consumers up to this serial run under the grace
  std::deque<std::pair<std::uint16_t, bool>> qos_sent_;
  std::deque<bool> consumes_sent_;
  std::deque<bool> gets_sent_;
  bool confirming_ = false;
  std::uint64_t next_publish_seq_ = 0;
  std::set<std::uint64_t> unconfirmed_;
};

}  // namespace amqp::broker::fuzz
