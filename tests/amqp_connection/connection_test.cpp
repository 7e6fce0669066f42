// The AMQP connection level against the real `cloud` (real nats-server underneath), driven by
// rabbitmq-c where a stock client can say it and by a raw socket where no client would.
#include <doctest/doctest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <string_view>
#include <thread>
#include <vector>

#include "cloud_process.hpp"
#include "rabbit_client.hpp"
#include "raw_client.hpp"

using namespace cloud::test;
using namespace std::chrono_literals;
namespace wire = amqp::wire;
using clock_type = std::chrono::steady_clock;

namespace {

const amqp_field_value_t* find_entry(const amqp_table_t& table, std::string_view key) {
  for (int i = 0; i < table.num_entries; ++i) {
    if (to_string(table.entries[i].key) == key) return &table.entries[i].value;
  }
  return nullptr;
}

std::string text_entry(const amqp_table_t& table, std::string_view key) {
  const auto* v = find_entry(table, key);
  REQUIRE_MESSAGE(v, "server property ", key, " is missing");
  REQUIRE(v->kind == AMQP_FIELD_KIND_UTF8);
  return to_string(v->value.bytes);
}

bool bool_entry(const amqp_table_t& table, std::string_view key) {
  const auto* v = find_entry(table, key);
  REQUIRE_MESSAGE(v, "capability ", key, " is missing");
  REQUIRE(v->kind == AMQP_FIELD_KIND_BOOLEAN);
  return v->value.boolean != 0;
}

// A frame built by hand: what no client library would send.
std::string raw_frame(wire::frame_type type, std::uint16_t channel, std::uint32_t declared_size,
                      std::string_view payload) {
  std::string f;
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(channel >> 8));
  f.push_back(static_cast<char>(channel & 0xFF));
  for (int shift = 24; shift >= 0; shift -= 8) f.push_back(static_cast<char>((declared_size >> shift) & 0xFF));
  f.append(payload);
  if (payload.size() == declared_size) f.push_back(static_cast<char>(wire::frame_end));
  return f;
}

// The connection.close that a raw reader gets, or a failed check.
wire::connection_close expect_connection_close(raw_client& raw) {
  auto f = raw.read_method(10s);
  REQUIRE_MESSAGE(f, "no method frame arrived before EOF or timeout");
  REQUIRE(f->channel == 0);
  REQUIRE(std::holds_alternative<wire::connection_close>(*f->method));
  return std::get<wire::connection_close>(*f->method);
}

// After rabbitmq-c reported the server's connection.close: answer close-ok, as a client must,
// and expect the server to end the connection.
void finish_server_close(rabbit_connection& c) {
  amqp_connection_close_ok_t ok{};
  amqp_send_method(c.get(), 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
  auto raw = raw_client::borrow(c.fd());
  CHECK_MESSAGE(raw.wait_eof(5s), "the server kept the connection open after its connection.close");
}

server_close expect_close(const amqp_rpc_reply_t& reply) {
  auto closed = close_of(reply);
  REQUIRE_MESSAGE(closed, "expected the server to close, got reply type ", static_cast<int>(reply.reply_type));
  return *closed;
}

}  // namespace

TEST_CASE("handshake: rabbitmq-c logs in and sees the server's properties and capabilities") {
  cloud_process cloud;
  rabbit_connection c(cloud.amqp_port());
  REQUIRE(c.login().reply_type == AMQP_RESPONSE_NORMAL);

  const amqp_table_t* props = amqp_get_server_properties(c.get());
  REQUIRE(props);
  CHECK(text_entry(*props, "product") == "cloud");
  CHECK_FALSE(text_entry(*props, "version").empty());
  CHECK_FALSE(text_entry(*props, "platform").empty());
  CHECK_FALSE(text_entry(*props, "copyright").empty());
  CHECK_FALSE(text_entry(*props, "information").empty());
  const auto* caps = find_entry(*props, "capabilities");
  REQUIRE(caps);
  REQUIRE(caps->kind == AMQP_FIELD_KIND_TABLE);
  CHECK(bool_entry(caps->value.table, "publisher_confirms"));
  CHECK(bool_entry(caps->value.table, "basic.nack"));
  CHECK(bool_entry(caps->value.table, "consumer_cancel_notify"));
  CHECK(bool_entry(caps->value.table, "per_consumer_qos"));
  CHECK_FALSE(bool_entry(caps->value.table, "exchange_exchange_bindings"));
  CHECK(find_entry(caps->value.table, "connection.blocked") == nullptr);

  CHECK(amqp_connection_close(c.get(), AMQP_REPLY_SUCCESS).reply_type == AMQP_RESPONSE_NORMAL);
}

TEST_CASE("handshake: a mechanism the server did not offer is refused with 403") {
  // rabbitmq-c will not send a mechanism the server did not list, so this one is by hand.
  cloud_process cloud;
  raw_client raw(cloud.amqp_port());
  raw.send(std::string_view(reinterpret_cast<const char*>(wire::protocol_header.data()), 8));
  auto start = raw.read_method(10s);
  REQUIRE(start);
  REQUIRE(std::holds_alternative<wire::connection_start>(*start->method));
  wire::connection_start_ok start_ok;
  start_ok.mechanism = std::string("EXTERNAL");
  start_ok.locale = std::string("en_US");
  raw.send_method(0, start_ok);
  const auto close = expect_connection_close(raw);
  CHECK(close.reply_code == 403);
  CHECK(close.reply_text.find("EXTERNAL") != std::string::npos);
  CHECK(close.reply_text.find("PLAIN") != std::string::npos);
  raw.send_method(0, wire::connection_close_ok{});
  CHECK(raw.wait_eof(5s));
}

TEST_CASE("negotiation: channel-max and frame-max are the smaller offer, and enforced") {
  cloud_process cloud;
  SUBCASE("a client with no limits gets the server's: 2047 channels, 128 KiB frames") {
    rabbit_connection c(cloud.amqp_port());
    REQUIRE(c.login(0, 1 << 20, 0).reply_type == AMQP_RESPONSE_NORMAL);
    CHECK(amqp_get_channel_max(c.get()) == 2047);
    CHECK(amqp_get_frame_max(c.get()) == 131072);
    CHECK(amqp_connection_close(c.get(), AMQP_REPLY_SUCCESS).reply_type == AMQP_RESPONSE_NORMAL);
  }
  SUBCASE("a client's smaller limits hold, and a frame over its frame-max is 501") {
    rabbit_connection c(cloud.amqp_port());
    REQUIRE(c.login(10, 4096, 0).reply_type == AMQP_RESPONSE_NORMAL);
    CHECK(amqp_get_channel_max(c.get()) == 10);
    CHECK(amqp_get_frame_max(c.get()) == 4096);
    auto raw = raw_client::borrow(c.fd());
    raw.send(raw_frame(wire::frame_type::body, 1, 4992, std::string(4992, 'x')));  // 5000 octets in all
    const auto close = expect_connection_close(raw);
    CHECK(close.reply_code == 501);
    CHECK(close.reply_text.find("5000") != std::string::npos);
    CHECK(close.reply_text.find("4096") != std::string::npos);
    CHECK(raw.wait_eof(5s));
  }
  SUBCASE("a frame-max under the protocol's 4096 is refused with 530") {
    raw_client raw(cloud.amqp_port());
    raw.handshake(0, 1024, 0);
    const auto close = expect_connection_close(raw);
    CHECK(close.reply_code == 530);
    CHECK(close.reply_text.find("1024") != std::string::npos);
    raw.send_method(0, wire::connection_close_ok{});
    CHECK(raw.wait_eof(5s));
  }
}

TEST_CASE("channels: hundreds open and close on one connection, and ids are reused") {
  cloud_process cloud;
  rabbit_connection c(cloud.amqp_port());
  REQUIRE(c.login().reply_type == AMQP_RESPONSE_NORMAL);
  constexpr int count = 300;
  for (int ch = 1; ch <= count; ++ch) {
    REQUIRE(amqp_channel_open(c.get(), static_cast<amqp_channel_t>(ch)));
    REQUIRE(amqp_get_rpc_reply(c.get()).reply_type == AMQP_RESPONSE_NORMAL);
  }
  for (int ch = 1; ch <= count; ++ch) {
    REQUIRE(amqp_channel_close(c.get(), static_cast<amqp_channel_t>(ch), AMQP_REPLY_SUCCESS).reply_type ==
            AMQP_RESPONSE_NORMAL);
  }
  REQUIRE(amqp_channel_open(c.get(), 1));
  CHECK(amqp_get_rpc_reply(c.get()).reply_type == AMQP_RESPONSE_NORMAL);
  CHECK(amqp_channel_open(c.get(), 2047));
  CHECK(amqp_get_rpc_reply(c.get()).reply_type == AMQP_RESPONSE_NORMAL);
  CHECK(amqp_connection_close(c.get(), AMQP_REPLY_SUCCESS).reply_type == AMQP_RESPONSE_NORMAL);
}

TEST_CASE("channels: misuse is 504 CHANNEL_ERROR and the connection closes") {
  cloud_process cloud;
  rabbit_connection c(cloud.amqp_port());
  REQUIRE(c.login(10, 131072, 0).reply_type == AMQP_RESPONSE_NORMAL);
  server_close closed;
  SUBCASE("channel.open on channel 0") {
    amqp_channel_open(c.get(), 0);
    closed = expect_close(amqp_get_rpc_reply(c.get()));
    CHECK(closed.text.find("channel 0") != std::string::npos);
  }
  SUBCASE("a channel over the negotiated channel-max") {
    amqp_channel_open(c.get(), 11);
    closed = expect_close(amqp_get_rpc_reply(c.get()));
    CHECK(closed.text.find("channel-max of 10") != std::string::npos);
  }
  SUBCASE("a method on a channel that was never opened") {
    amqp_basic_qos(c.get(), 5, 0, 10, 0);
    closed = expect_close(amqp_get_rpc_reply(c.get()));
    CHECK(closed.text.find("channel 5") != std::string::npos);
    CHECK(closed.text.find("not open") != std::string::npos);
  }
  SUBCASE("channel.open on a channel already open") {
    REQUIRE(amqp_channel_open(c.get(), 3));
    REQUIRE(amqp_get_rpc_reply(c.get()).reply_type == AMQP_RESPONSE_NORMAL);
    amqp_channel_open(c.get(), 3);
    closed = expect_close(amqp_get_rpc_reply(c.get()));
    CHECK(closed.text.find("already open") != std::string::npos);
  }
  CHECK(closed.connection);
  CHECK(closed.code == 504);
  CHECK(closed.text.rfind("CHANNEL_ERROR - ", 0) == 0);
  finish_server_close(c);
}

TEST_CASE("a wrong protocol header is answered with the raw 8-octet AMQP 0-9-1 header, then EOF") {
  cloud_process cloud;
  std::string hello;
  SUBCASE("an HTTP request") { hello = std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"); }
  SUBCASE("AMQP 0-10") { hello = std::string("AMQP\x01\x01\x00\x0a", 8); }
  raw_client raw(cloud.amqp_port());
  raw.send(hello);
  std::string answer;
  while (auto more = raw.read_some(10s)) answer += *more;
  CHECK(raw.eof());
  CHECK(answer == std::string("AMQP\x00\x00\x09\x01", 8));
}

TEST_CASE("a frame over frame-max is refused with 501 FRAME_ERROR before it is read, and the connection closes") {
  cloud_process cloud;
  rabbit_connection c(cloud.amqp_port());
  REQUIRE(c.login().reply_type == AMQP_RESPONSE_NORMAL);
  auto raw = raw_client::borrow(c.fd());
  // Only the header of a 1 GiB method frame: the server must judge it without waiting for it.
  raw.send(raw_frame(wire::frame_type::method, 0, 1u << 30, {}));
  const auto close = expect_connection_close(raw);
  CHECK(close.reply_code == 501);
  CHECK(close.reply_text.find("131072") != std::string::npos);
  CHECK(raw.wait_eof(5s));
}

TEST_CASE("heartbeats arrive every half interval, and a silent client is dropped after two intervals") {
  cloud_process cloud;
  rabbit_connection c(cloud.amqp_port());
  REQUIRE(c.login(0, 131072, 2).reply_type == AMQP_RESPONSE_NORMAL);
  REQUIRE(amqp_get_heartbeat(c.get()) == 2);
  const auto silent_since = clock_type::now();  // connection.open was our last frame
  auto raw = raw_client::borrow(c.fd());
  std::vector<clock_type::time_point> beats;
  while (auto f = raw.read_frame(10s)) {
    if (f->type == wire::frame_type::heartbeat) beats.push_back(f->at);
  }
  const auto dropped_after = clock_type::now() - silent_since;
  CHECK(raw.eof());
  CHECK(dropped_after >= 3800ms);
  CHECK(dropped_after <= 7s);
  REQUIRE(beats.size() >= 3);
  for (std::size_t i = 1; i < beats.size(); ++i) {
    const auto gap = std::chrono::duration_cast<std::chrono::milliseconds>(beats[i] - beats[i - 1]);
    CAPTURE(gap.count());
    CHECK(gap >= 700ms);
    CHECK(gap <= 1600ms);
  }
}

TEST_CASE("a client that answers heartbeats is kept past two intervals") {
  cloud_process cloud;
  rabbit_connection c(cloud.amqp_port());
  REQUIRE(c.login(0, 131072, 1).reply_type == AMQP_RESPONSE_NORMAL);
  REQUIRE(amqp_channel_open(c.get(), 1));
  REQUIRE(amqp_get_rpc_reply(c.get()).reply_type == AMQP_RESPONSE_NORMAL);
  // rabbitmq-c sends its heartbeats while it waits for a frame.
  const auto until = clock_type::now() + 3500ms;
  while (clock_type::now() < until) {
    amqp_frame_t frame;
    timeval tv{0, 200000};
    const int rc = amqp_simple_wait_frame_noblock(c.get(), &frame, &tv);
    REQUIRE((rc == AMQP_STATUS_OK || rc == AMQP_STATUS_TIMEOUT));
  }
  CHECK(amqp_channel_close(c.get(), 1, AMQP_REPLY_SUCCESS).reply_type == AMQP_RESPONSE_NORMAL);
  CHECK(amqp_connection_close(c.get(), AMQP_REPLY_SUCCESS).reply_type == AMQP_RESPONSE_NORMAL);
}

TEST_CASE("the handshake deadline (CLOUD_AMQP_HANDSHAKE_TIMEOUT) drops a silent or stalled client") {
  cloud_process cloud(std::map<std::string, std::string>{{"CLOUD_AMQP_HANDSHAKE_TIMEOUT", "1"}});
  SUBCASE("silent from the start") {
    raw_client raw(cloud.amqp_port());
    const auto t0 = clock_type::now();
    CHECK(raw.wait_eof(10s));
    const auto waited = clock_type::now() - t0;
    CHECK(waited >= 900ms);
    CHECK(waited <= 4s);
  }
  SUBCASE("stalled after connection.start") {
    raw_client raw(cloud.amqp_port());
    const auto t0 = clock_type::now();
    raw.send(std::string_view(reinterpret_cast<const char*>(wire::protocol_header.data()), 8));
    auto start = raw.read_method(5s);
    REQUIRE(start);
    CHECK(std::holds_alternative<wire::connection_start>(*start->method));
    CHECK(raw.wait_eof(10s));
    CHECK(clock_type::now() - t0 >= 900ms);
  }
  SUBCASE("a client that finished the handshake is not affected") {
    rabbit_connection c(cloud.amqp_port());
    REQUIRE(c.login().reply_type == AMQP_RESPONSE_NORMAL);
    std::this_thread::sleep_for(1500ms);
    REQUIRE(amqp_channel_open(c.get(), 1));
    CHECK(amqp_get_rpc_reply(c.get()).reply_type == AMQP_RESPONSE_NORMAL);
    CHECK(amqp_connection_close(c.get(), AMQP_REPLY_SUCCESS).reply_type == AMQP_RESPONSE_NORMAL);
  }
}

TEST_CASE("malformed amqp settings fail the boot, naming the variable") {
  const char* variable = "";
  std::string value;
  SUBCASE("handshake timeout") {
    variable = "CLOUD_AMQP_HANDSHAKE_TIMEOUT";
    value = "0";
  }
  SUBCASE("port") {
    variable = "CLOUD_AMQP_PORT";
    value = "56x72";
  }
  try {
    cloud_process cloud({{variable, value}}, std::chrono::seconds(60));
    FAIL("cloud booted with ", variable, "=", value);
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    CHECK(what.find("exited with status") != std::string::npos);
    CHECK(what.find(variable) != std::string::npos);
    CHECK(what.find("amqp listening on") == std::string::npos);
  }
}

TEST_CASE("a body over the bus's max payload is refused on its header with 311, and the connection survives") {
  cloud_process cloud(std::map<std::string, std::string>{{"CLOUD_PUBSUB_MAX_PAYLOAD", "65536"}});
  rabbit_connection c(cloud.amqp_port());
  REQUIRE(c.login().reply_type == AMQP_RESPONSE_NORMAL);
  REQUIRE(amqp_channel_open(c.get(), 1));
  REQUIRE(amqp_get_rpc_reply(c.get()).reply_type == AMQP_RESPONSE_NORMAL);

  const std::string body(100000, 'x');
  amqp_bytes_t bytes{body.size(), const_cast<char*>(body.data())};
  REQUIRE(amqp_basic_publish(c.get(), 1, amqp_cstring_bytes(""), amqp_cstring_bytes("anywhere"), 0, 0, nullptr,
                             bytes) == AMQP_STATUS_OK);
  amqp_frame_t frame;
  REQUIRE(amqp_simple_wait_frame(c.get(), &frame) == AMQP_STATUS_OK);
  REQUIRE(frame.frame_type == AMQP_FRAME_METHOD);
  CHECK(frame.channel == 1);
  const auto closed = close_of(frame.payload.method);
  REQUIRE(closed);
  CHECK_FALSE(closed->connection);
  CHECK(closed->code == 311);
  CHECK(closed->text.find("100000") != std::string::npos);
  CHECK(closed->text.find("65536") != std::string::npos);
  CHECK(closed->text.find("CLOUD_PUBSUB_MAX_PAYLOAD") != std::string::npos);
  CHECK(closed->class_id == wire::basic_publish::key.class_id);
  CHECK(closed->method_id == wire::basic_publish::key.method_id);
  amqp_channel_close_ok_t ok{};
  REQUIRE(amqp_send_method(c.get(), 1, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) == AMQP_STATUS_OK);

  // The connection is still there: the same id and another one open again.
  REQUIRE(amqp_channel_open(c.get(), 1));
  CHECK(amqp_get_rpc_reply(c.get()).reply_type == AMQP_RESPONSE_NORMAL);
  REQUIRE(amqp_channel_open(c.get(), 2));
  CHECK(amqp_get_rpc_reply(c.get()).reply_type == AMQP_RESPONSE_NORMAL);
  CHECK(amqp_connection_close(c.get(), AMQP_REPLY_SUCCESS).reply_type == AMQP_RESPONSE_NORMAL);
}

TEST_CASE("content out of order is a connection error") {
  cloud_process cloud;
  raw_client raw(cloud.amqp_port());
  raw.handshake(0, 131072, 0);
  auto open_ok = raw.read_method(10s);
  REQUIRE(open_ok);
  REQUIRE(std::holds_alternative<wire::connection_open_ok>(*open_ok->method));
  raw.send_method(1, wire::channel_open{});
  auto channel_ok = raw.read_method(10s);
  REQUIRE(channel_ok);
  REQUIRE(std::holds_alternative<wire::channel_open_ok>(*channel_ok->method));
  std::uint16_t expected = 0;
  SUBCASE("a body frame with no publish before it is 505") {
    raw.send(raw_frame(wire::frame_type::body, 1, 3, "abc"));
    expected = 505;
  }
  SUBCASE("a method between a publish and its content is 505") {
    raw.send_method(1, wire::basic_publish{});
    raw.send_method(1, wire::basic_qos{});
    expected = 505;
  }
  SUBCASE("body frames beyond the declared size are 501") {
    raw.send_method(1, wire::basic_publish{});
    std::string header;
    wire::encode_content_header(header, 1, wire::basic_publish::key.class_id, 2, std::string_view("\0\0", 2));
    raw.send(header);
    raw.send(raw_frame(wire::frame_type::body, 1, 3, "abc"));
    expected = 501;
  }
  SUBCASE("a content header on channel 0 is 505") {
    std::string header;
    wire::encode_content_header(header, 0, wire::basic_publish::key.class_id, 2, std::string_view("\0\0", 2));
    raw.send(header);
    expected = 505;
  }
  const auto close = expect_connection_close(raw);
  CHECK(close.reply_code == expected);
  raw.send_method(0, wire::connection_close_ok{});
  CHECK(raw.wait_eof(5s));
}

TEST_CASE("shutdown closes every connection with 320 CONNECTION_FORCED and exits cleanly") {
  cloud_process cloud;
  rabbit_connection c(cloud.amqp_port());
  REQUIRE(c.login().reply_type == AMQP_RESPONSE_NORMAL);
  REQUIRE(amqp_channel_open(c.get(), 1));
  REQUIRE(amqp_get_rpc_reply(c.get()).reply_type == AMQP_RESPONSE_NORMAL);
  REQUIRE(::kill(cloud.pid(), SIGTERM) == 0);
  amqp_frame_t frame;
  REQUIRE(amqp_simple_wait_frame(c.get(), &frame) == AMQP_STATUS_OK);
  REQUIRE(frame.frame_type == AMQP_FRAME_METHOD);
  const auto closed = close_of(frame.payload.method);
  REQUIRE(closed);
  CHECK(closed->connection);
  CHECK(closed->code == 320);
  CHECK(closed->text.find("shutting down") != std::string::npos);
  finish_server_close(c);
  CHECK(cloud.stop() == 0);
}

TEST_CASE("pika connects, opens a channel and closes cleanly") {
  cloud_process cloud;
  const std::string port = std::to_string(cloud.amqp_port());
  std::vector<std::string> args{CLOUD_TEST_PYTHON, CLOUD_TEST_PIKA_SCRIPT, port};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  REQUIRE(::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) == 0);
  int status = 0;
  const auto deadline = clock_type::now() + 60s;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (clock_type::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL("the pika script did not finish within 60 s");
    }
    std::this_thread::sleep_for(50ms);
  }
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
