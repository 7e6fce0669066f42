#include "fuzz_connection.hpp"

#include <boost/asio/post.hpp>
#include <cstdio>

#include "frame_decoder.hpp"

namespace amqp::broker::fuzz {

bool is_amqp_exception_code(wire::reply_code code) {
  switch (code) {
#define AMQP_X(name, value, hard) case wire::reply_code::name:
    AMQP_REPLY_CODES(AMQP_X)
#undef AMQP_X
    return code != wire::reply_code::reply_success;
  }
  return false;
}

fuzz_connection::~fuzz_connection() {
  if (!ended_) drop();
}

bool fuzz_connection::open(std::uint16_t ch) {
  if (ended_ || excepted_) return false;
  if (auto it = channels_.find(ch); it != channels_.end()) {
    if (!it->second.failed) return false;
    channels_.erase(it);  // the close-ok of the broker's channel.close came: the id is free
  }
  auto& slot = channels_[ch];
  slot.client_side = std::make_unique<client_channel>(ch);
  slot.broker_side = open_channel(broker_, *this, ch);
  return true;
}

bool fuzz_connection::usable(std::uint16_t ch) const {
  auto it = channels_.find(ch);
  return !ended_ && !excepted_ && it != channels_.end() && !it->second.failed;
}

std::vector<std::uint16_t> fuzz_connection::usable_channels() const {
  std::vector<std::uint16_t> out;
  for (const auto& [id, slot] : channels_)
    if (usable(id)) out.push_back(id);
  return out;
}

void fuzz_connection::close(std::uint16_t ch) {
  auto it = channels_.find(ch);
  if (it == channels_.end()) return;
  if (!it->second.failed) it->second.broker_side->closed();
  channels_.erase(it);
}

void fuzz_connection::drop() {
  if (ended_) return;
  // The session's order at a connection's end: every channel closed, then the broker told.
  for (auto& [id, slot] : channels_)
    if (!slot.failed) slot.broker_side->closed();
  channels_.clear();
  ended_ = true;
  connection_closed(*broker_, id_);
}

void fuzz_connection::send(std::string octets) {
  if (ended_) violated(where() + "the broker sent frames after the connection ended");
  if (excepted_) return;  // the session drops what follows its connection.close
  std::vector<test::received> methods;
  if (auto fault = test::decode_frames(octets, frame_max(), methods)) violated(where() + *fault);
  for (auto& r : methods) {
    auto it = channels_.find(r.channel);
    if (it == channels_.end() || it->second.failed)
      violated(where() + "the broker sent " + std::string(wire::info_of(r.method).name) + " on channel " +
               std::to_string(r.channel) + ", which is not open (closed, or closed by an exception)");
    if (tracing())
      std::fprintf(stderr, "    <- connection %llu channel %u: %s\n", static_cast<unsigned long long>(id_), r.channel,
                   std::string(wire::info_of(r.method).name).c_str());
    it->second.client_side->receive(r.method);
  }
}

void fuzz_connection::when_drained(std::function<void()> resume) { boost::asio::post(io_, std::move(resume)); }

void fuzz_connection::publish_answered(std::size_t cost) {
  publish_cost_ -= static_cast<std::int64_t>(cost);
  if (publish_cost_ < 0) violated(where() + "more publish cost answered than handed (inbound flow control)");
}

void fuzz_connection::close_channel(std::uint16_t ch, wire::reply_code code, std::string sentence,
                                    wire::method_key) {
  if (ended_) violated(where() + "a channel exception after the connection ended: " + sentence);
  if (!is_amqp_exception_code(code))
    violated(where() + "channel exception with reply code " + std::to_string(static_cast<int>(code)) +
             ", outside AMQP's table: " + sentence);
  auto it = channels_.find(ch);
  // The session ignores an exception on a channel it does not hold open (session.cpp).
  if (excepted_ || it == channels_.end() || it->second.failed) return;
  if (tracing())
    std::fprintf(stderr, "    <- connection %llu channel %u: channel.close %d %s\n", static_cast<unsigned long long>(id_),
                 ch, static_cast<int>(code), sentence.c_str());
  it->second.failed = true;
  it->second.broker_side->closed();  // as the session does, at once
}

void fuzz_connection::close_connection(wire::reply_code code, std::string sentence, wire::method_key) {
  if (ended_) violated(where() + "a connection exception after the connection ended: " + sentence);
  if (!is_amqp_exception_code(code))
    violated(where() + "connection exception with reply code " + std::to_string(static_cast<int>(code)) +
             ", outside AMQP's table: " + sentence);
  if (tracing())
    std::fprintf(stderr, "    <- connection %llu: connection.close %d %s\n", static_cast<unsigned long long>(id_),
                 static_cast<int>(code), sentence.c_str());
  excepted_ = true;  // the socket goes at the fuzzer's next step (drop)
}

}  // namespace amqp::broker::fuzz
