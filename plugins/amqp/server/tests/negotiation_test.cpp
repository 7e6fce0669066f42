#include <doctest/doctest.h>

#include "negotiation.hpp"

using namespace amqp;
using namespace amqp::server;

namespace {

wire::connection_tune_ok tune_ok(std::uint16_t channels, std::uint32_t frame, std::uint16_t heartbeat) {
  wire::connection_tune_ok ok;
  ok.channel_max = channels;
  ok.frame_max = frame;
  ok.heartbeat = heartbeat;
  return ok;
}

tuned accepted(const tune_result& r) {
  REQUIRE(std::holds_alternative<tuned>(r));
  return std::get<tuned>(r);
}

const wire::field_value* entry(const wire::field_table& t, std::string_view name) { return wire::find(t, name); }

}  // namespace

TEST_CASE("connection.start offers 0-9, PLAIN AMQPLAIN, en_US and the server properties") {
  broker::settings s;
  s.product = "cloud";
  s.version = "1.2.3";
  const auto start = make_connection_start(s);
  CHECK(start.version_major == 0);
  CHECK(start.version_minor == 9);
  CHECK(start.mechanisms == "PLAIN AMQPLAIN");
  CHECK(start.locales == "en_US");
  const auto& props = start.server_properties;
  REQUIRE(entry(props, "product"));
  CHECK(std::get<std::string>(entry(props, "product")->value) == "cloud");
  CHECK(std::get<std::string>(entry(props, "version")->value) == "1.2.3");
  CHECK(entry(props, "platform"));
  CHECK(entry(props, "copyright"));
  CHECK(entry(props, "information"));
  const auto* caps = entry(props, "capabilities");
  REQUIRE(caps);
  const auto& table = std::get<wire::field_table>(caps->value);
  for (const char* claimed : {"publisher_confirms", "basic.nack", "consumer_cancel_notify", "per_consumer_qos"}) {
    CAPTURE(claimed);
    REQUIRE(entry(table, claimed));
    CHECK(std::get<bool>(entry(table, claimed)->value));
  }
  REQUIRE(entry(table, "exchange_exchange_bindings"));
  CHECK_FALSE(std::get<bool>(entry(table, "exchange_exchange_bindings")->value));
  CHECK(entry(table, "connection.blocked") == nullptr);  // never sent, so never claimed
}

TEST_CASE("connection.tune offers the settings") {
  broker::settings s;
  const auto tune = make_connection_tune(s);
  CHECK(tune.channel_max == 2047);
  CHECK(tune.frame_max == 128 * 1024);
  CHECK(tune.heartbeat == 60);
}

TEST_CASE("only the offered mechanisms are accepted") {
  CHECK(is_offered_mechanism("PLAIN"));
  CHECK(is_offered_mechanism("AMQPLAIN"));
  CHECK_FALSE(is_offered_mechanism("EXTERNAL"));
  CHECK(is_offered_mechanism("EXTERNAL", true));  // beside a verified client certificate
  CHECK(is_offered_mechanism("PLAIN", true));
  CHECK(make_connection_start({}, true).mechanisms == "EXTERNAL PLAIN AMQPLAIN");
  CHECK(make_connection_start({}).mechanisms == "PLAIN AMQPLAIN");
  CHECK_FALSE(is_offered_mechanism("plain"));
  CHECK_FALSE(is_offered_mechanism(""));
}

TEST_CASE("channel-max: 0 or above the offer becomes the offer, below it is kept") {
  broker::settings s;
  CHECK(accepted(negotiate(s, tune_ok(0, 0, 0))).channel_max == 2047);
  CHECK(accepted(negotiate(s, tune_ok(65535, 0, 0))).channel_max == 2047);
  CHECK(accepted(negotiate(s, tune_ok(10, 0, 0))).channel_max == 10);
}

TEST_CASE("frame-max: 0 or above the offer becomes the offer, the minimum 4096 is allowed") {
  broker::settings s;
  CHECK(accepted(negotiate(s, tune_ok(0, 0, 0))).frame_max == 131072);
  CHECK(accepted(negotiate(s, tune_ok(0, 1 << 20, 0))).frame_max == 131072);
  CHECK(accepted(negotiate(s, tune_ok(0, 4096, 0))).frame_max == 4096);
  CHECK(accepted(negotiate(s, tune_ok(0, 65536, 0))).frame_max == 65536);
}

TEST_CASE("frame-max below the protocol minimum is refused with a sentence naming it") {
  broker::settings s;
  auto r = negotiate(s, tune_ok(0, 4095, 0));
  REQUIRE(std::holds_alternative<std::string>(r));
  CHECK(std::get<std::string>(r).find("4095") != std::string::npos);
  CHECK(std::get<std::string>(r).find("4096") != std::string::npos);
}

TEST_CASE("heartbeat: the client's choice, 0 disables") {
  broker::settings s;
  CHECK(accepted(negotiate(s, tune_ok(0, 0, 0))).heartbeat_seconds == 0);
  CHECK(accepted(negotiate(s, tune_ok(0, 0, 2))).heartbeat_seconds == 2);
  CHECK(accepted(negotiate(s, tune_ok(0, 0, 60))).heartbeat_seconds == 60);
}
