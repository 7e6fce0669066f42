#include "client_model.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace amqp::broker::fuzz {

void violated(const std::string& what) {
  std::fprintf(stderr, "\nINVARIANT BROKEN: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

bool tracing() {
  static const bool on = std::getenv("SEQUENCE_FUZZ_TRACE") != nullptr;
  return on;
}

std::string client_channel::where() const { return "channel " + std::to_string(id_) + ": "; }

void client_channel::sent_publish() {
  if (!confirming_) return;
  unconfirmed_.insert(++next_publish_seq_);
}

void client_channel::sent_settle(std::uint64_t tag, bool multiple) {
  constexpr auto all = std::numeric_limits<std::uint64_t>::max();
  if (!multiple) {
    unacked_.erase(tag);
    if (tag > last_tag_) settle_unseen(tag, tag);
  } else if (tag == 0) {
    unacked_.clear();
    settle_unseen(last_tag_ + 1, all);
  } else {
    unacked_.erase(unacked_.begin(), unacked_.upper_bound(tag));
    if (tag > last_tag_) settle_unseen(last_tag_ + 1, tag);
  }
}

void client_channel::sent_recover() {
  unacked_.clear();
  settle_unseen(last_tag_ + 1, std::numeric_limits<std::uint64_t>::max());
}

void client_channel::settle_unseen(std::uint64_t first, std::uint64_t last) {
  open_settles_.push_back({first, last, synchronous_sent_});
}

// Replies come in the order their methods were sent, so this one answers a method sent after
// every open settle it outnumbers: the broker applied those settles before answering it.
void client_channel::received_reply() {
  ++replies_received_;
  while (!open_settles_.empty() && replies_received_ > open_settles_.front().replies_before)
    open_settles_.pop_front();
}

bool client_channel::maybe_settled(std::uint64_t tag) const {
  return std::any_of(open_settles_.begin(), open_settles_.end(),
                     [&](const open_settle& s) { return s.first <= tag && tag <= s.last; });
}

std::uint64_t client_channel::unacked_tag(std::size_t pick) const {
  auto it = unacked_.begin();
  std::advance(it, pick % unacked_.size());
  return it->first;
}

void client_channel::receive(const wire::method& m) {
  if (const auto name = wire::info_of(m).name; name.ends_with("-ok") || name == "basic.get-empty") received_reply();
  if (const auto* d = std::get_if<wire::basic_deliver>(&m)) return deliver(*d);
  if (const auto* g = std::get_if<wire::basic_get_ok>(&m)) return get_ok(*g);
  if (std::holds_alternative<wire::basic_get_empty>(m)) {
    if (gets_sent_.empty()) violated(where() + "basic.get-empty without a basic.get");
    gets_sent_.pop_front();
    return;
  }
  if (const auto* a = std::get_if<wire::basic_ack>(&m)) return confirm(a->delivery_tag, a->multiple, "basic.ack");
  if (const auto* n = std::get_if<wire::basic_nack>(&m)) return confirm(n->delivery_tag, n->multiple, "basic.nack");
  if (std::holds_alternative<wire::basic_qos_ok>(m)) {
    if (qos_sent_.empty()) violated(where() + "basic.qos-ok without a basic.qos");
    const auto [prefetch, global] = qos_sent_.front();
    qos_sent_.pop_front();
    if (!global) {
      consumer_prefetch_ = prefetch;
      return;
    }
    const bool lowered = global_prefetch_ == 0 ? prefetch != 0 : prefetch != 0 && prefetch < global_prefetch_;
    if (lowered && !consumers_.empty()) {
      global_grace_ = global_prefetch_ == 0 ? std::numeric_limits<std::uint16_t>::max()
                                            : std::max(global_grace_, global_prefetch_);
      grace_until_serial_ = consumer_serial_;
    }
    global_prefetch_ = prefetch;
    return;
  }
  if (const auto* ok = std::get_if<wire::basic_consume_ok>(&m)) {
    if (consumes_sent_.empty()) violated(where() + "basic.consume-ok without a basic.consume");
    const bool no_ack = consumes_sent_.front();
    consumes_sent_.pop_front();
    if (consumers_.contains(ok->consumer_tag)) violated(where() + "consume-ok reuses live tag " + ok->consumer_tag);
    consumers_[ok->consumer_tag] = {++consumer_serial_, no_ack, consumer_prefetch_};
    return;
  }
  if (const auto* c = std::get_if<wire::basic_cancel_ok>(&m)) {
    consumers_.erase(c->consumer_tag);
    return;
  }
  if (const auto* c = std::get_if<wire::basic_cancel>(&m)) {  // the server's: the queue went
    consumers_.erase(c->consumer_tag);
    return;
  }
}

void client_channel::delivered(std::uint64_t tag) {
  if (last_tag_ == 0 && tag != 1) violated(where() + "first delivery tag " + std::to_string(tag) + ", not 1");
  if (tag <= last_tag_)
    violated(where() + "delivery tag " + std::to_string(tag) + " after " + std::to_string(last_tag_) +
             ": tags must strictly increase");
  last_tag_ = tag;
}

void client_channel::deliver(const wire::basic_deliver& d) {
  delivered(d.delivery_tag);
  auto c = consumers_.find(d.consumer_tag);
  if (c == consumers_.end())
    violated(where() + "basic.deliver for consumer '" + d.consumer_tag + "' the channel does not have (never, or cancelled)");
  if (c->second.no_ack) return;
  unacked_[d.delivery_tag] = {c->second.serial, maybe_settled(d.delivery_tag)};
  check_prefetch(c->second);
}

void client_channel::check_prefetch(const consumer_seen& c) const {
  // What may have been settled already is not counted: the bound is checked on what surely was not.
  const auto mine = std::count_if(unacked_.begin(), unacked_.end(), [&](const auto& u) {
    return u.second.consumer_serial == c.serial && !u.second.maybe_settled;
  });
  if (c.prefetch != 0 && mine > c.prefetch)
    violated(where() + "consumer holds " + std::to_string(mine) + " unacked deliveries over its prefetch " +
             std::to_string(c.prefetch));
  if (global_prefetch_ == 0) return;
  const bool in_grace = std::any_of(consumers_.begin(), consumers_.end(),
                                    [&](const auto& e) { return e.second.serial <= grace_until_serial_; });
  const std::uint32_t bound = in_grace ? std::max(global_grace_, global_prefetch_) : global_prefetch_;
  const auto all = std::count_if(unacked_.begin(), unacked_.end(), [](const auto& u) {
    return u.second.consumer_serial != 0 && !u.second.maybe_settled;
  });
  if (static_cast<std::uint32_t>(all) > bound)
    violated(where() + std::to_string(all) + " unacked consumer deliveries over the global prefetch " +
             std::to_string(bound));
}

void client_channel::get_ok(const wire::basic_get_ok& g) {
  if (gets_sent_.empty()) violated(where() + "basic.get-ok without a basic.get");
  const bool no_ack = gets_sent_.front();
  gets_sent_.pop_front();
  delivered(g.delivery_tag);
  if (!no_ack) unacked_[g.delivery_tag] = {0, maybe_settled(g.delivery_tag)};
}

void client_channel::confirm(std::uint64_t tag, bool multiple, const char* what) {
  const auto name = std::string(what) + (multiple ? " multiple " : " ") + std::to_string(tag);
  if (!confirming_) violated(where() + name + " on a channel not in confirm mode");
  if (!unconfirmed_.contains(tag))
    violated(where() + name + ": that publish was " + (tag > next_publish_seq_ ? "never made" : "already confirmed"));
  if (!multiple) {
    unconfirmed_.erase(tag);
    return;
  }
  unconfirmed_.erase(unconfirmed_.begin(), unconfirmed_.upper_bound(tag));
}

void client_channel::check_all_confirmed() const {
  if (!unconfirmed_.empty())
    violated(where() + std::to_string(unconfirmed_.size()) + " publishes never confirmed, first " +
             std::to_string(*unconfirmed_.begin()));
}

}  // namespace amqp::broker::fuzz
