#include "harness.hpp"

#include <doctest/doctest.h>

#include <boost/asio/post.hpp>
#include <chrono>

#include "amqp/routing/subject.hpp"

namespace amqp::broker::test {
namespace {

// A bound on every wait: a test that fails ends within about a second, it never hangs.
constexpr int max_rounds = 1000;

}  // namespace

std::string subject_for(const std::string& queue) { return *routing::publish_subject("", queue); }
std::string consumer_of(const std::string& queue) { return routing::consumer_name(queue); }

// ---- fake_connection

void fake_connection::send(std::string octets_out) {
  const auto fault = decode_frames(octets_out, frame_max(), frames);
  REQUIRE_MESSAGE(!fault, *fault);
}

void fake_connection::when_drained(std::function<void()> resume) { boost::asio::post(io_, std::move(resume)); }

void fake_connection::close_channel(std::uint16_t channel, wire::reply_code code, std::string sentence,
                                    wire::method_key offending) {
  exceptions.push_back({channel, code, std::move(sentence), offending});
  if (on_channel_closed) on_channel_closed(channel);
}

void fake_connection::close_connection(wire::reply_code code, std::string sentence, wire::method_key offending) {
  exceptions.push_back({0, code, std::move(sentence), offending});
  if (on_connection_closed) on_connection_closed();
}

// ---- harness

harness::harness(std::chrono::seconds idle_consumer_after) : bus(std::make_shared<fake_bus>(io)), conn(io, bus) {
  settings s;
  s.node_name = "unit-test-node";
  s.idle_consumer_after = idle_consumer_after;
  s.log_warning = [this](std::string_view text) {
    MESSAGE("broker warning: " << text);
    warnings.emplace_back(text);
  };
  b = make_broker(io, bus, std::move(s));
  // As the session does: a channel exception closes the channel (closed()), then it goes.
  conn.on_channel_closed = [this](std::uint16_t id) {
    if (auto it = channels_.find(id); it != channels_.end()) it->second->closed();
    failed_.insert(id);
  };
  conn.on_connection_closed = [this] {
    for (auto& [id, c] : channels_) {
      c->closed();
      failed_.insert(id);
    }
  };
}

harness::~harness() {
  // The session's order at a connection's end: every channel closed, then the connection.
  for (auto& [id, c] : channels_) c->closed();
  channels_.clear();
  connection_closed(*b, conn.connection_id());
  stop_broker(*b);
  settle();
  std::weak_ptr<broker> gone = b;
  b.reset();
  settle();
  CHECK_MESSAGE(gone.expired(), "something still holds the broker after its stop");
  bus->close();
}

channel& harness::open(std::uint16_t id) {
  auto [it, fresh] = channels_.emplace(id, open_channel(b, conn, id));
  REQUIRE(fresh);
  return *it->second;
}

void harness::method(wire::method m, std::uint16_t id) {
  REQUIRE_MESSAGE(channels_.contains(id), "channel " << id << " is not open");
  channels_.at(id)->on_method(std::move(m));
}

void harness::publish(const std::string& exchange, const std::string& key, const std::string& body, bool mandatory,
                      std::uint16_t id) {
  publish_with({}, exchange, key, body, mandatory, id);
}

void harness::publish_with(const wire::basic_properties& properties, const std::string& exchange,
                           const std::string& key, const std::string& body, bool mandatory, std::uint16_t id) {
  REQUIRE(channels_.contains(id));
  wire::basic_publish m;
  m.exchange = exchange;
  m.routing_key = key;
  m.mandatory = mandatory;
  channels_.at(id)->on_publish(std::move(m), wire::encode_properties(properties), body);
}

void harness::close(std::uint16_t id) {
  auto it = channels_.find(id);
  REQUIRE(it != channels_.end());
  it->second->closed();
  channels_.erase(it);
}

std::string harness::declare(const std::string& queue, std::uint16_t id, wire::field_table arguments) {
  const auto before = count<wire::queue_declare_ok>(id);
  wire::queue_declare m;
  m.queue = queue;
  m.durable = true;
  m.arguments = std::move(arguments);
  method(m, id);
  REQUIRE(run_until([&] { return count<wire::queue_declare_ok>(id) > before; }));
  return consumer_of(queue);
}

void harness::qos(std::uint16_t prefetch, bool global, std::uint16_t id) {
  const auto before = count<wire::basic_qos_ok>(id);
  method(wire::basic_qos{0, prefetch, global}, id);
  REQUIRE(run_until([&] { return count<wire::basic_qos_ok>(id) > before; }));
}

void harness::consume(const std::string& queue, const std::string& tag, bool no_ack, std::uint16_t id) {
  const auto before = count<wire::basic_consume_ok>(id);
  wire::basic_consume m;
  m.queue = queue;
  m.consumer_tag = tag;
  m.no_ack = no_ack;
  method(m, id);
  REQUIRE(run_until([&] { return count<wire::basic_consume_ok>(id) > before; }));
}

void harness::confirm_select(std::uint16_t id) {
  method(wire::confirm_select{false}, id);
  REQUIRE(run_until([&] { return count<wire::confirm_select_ok>(id) == 1; }));
}

std::vector<std::uint64_t> harness::fill(const std::string& queue, int n, int first) {
  std::vector<std::uint64_t> seqs;
  for (int i = first; i < first + n; ++i)
    seqs.push_back(bus->store(subject_for(queue), wire::encode_properties({}), "m" + std::to_string(i)));
  return seqs;
}

bool harness::run_until(const std::function<bool()>& done) {
  for (int round = 0; round < max_rounds; ++round) {
    if (done()) return true;
    io.restart();
    if (io.poll() == 0) {
      io.restart();
      io.run_for(std::chrono::milliseconds(1));
    }
  }
  return done();
}

void harness::settle() {
  // Two quiet turns around a 5 ms wait: ready work, then whatever the 2 ms top-up timer starts.
  for (int quiet = 0, round = 0; quiet < 2 && round < max_rounds; ++round) {
    io.restart();
    if (io.poll() > 0) {
      quiet = 0;
      continue;
    }
    io.restart();
    quiet = io.run_for(std::chrono::milliseconds(5)) > 0 ? 0 : quiet + 1;
  }
}

std::vector<std::string> harness::delivered_bodies(std::uint16_t channel) const {
  std::vector<std::string> out;
  for (const auto& f : conn.frames)
    if (f.channel == channel && std::holds_alternative<wire::basic_deliver>(f.method)) out.push_back(f.body);
  return out;
}

std::vector<std::uint64_t> harness::delivered_tags(std::uint16_t channel) const {
  std::vector<std::uint64_t> out;
  for (const auto& d : all<wire::basic_deliver>(channel)) out.push_back(d.delivery_tag);
  return out;
}

std::vector<std::string> harness::method_names(std::uint16_t channel) const {
  std::vector<std::string> out;
  for (const auto& f : conn.frames)
    if (f.channel == channel) out.emplace_back(wire::info_of(f.method).name);
  return out;
}

}  // namespace amqp::broker::test
