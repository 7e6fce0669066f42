#include <doctest/doctest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "amqp/routing/topology.hpp"

using namespace amqp::routing;
using amqp::wire::reply_code;

TEST_CASE("bucket keys") {
  CHECK(exchange_key("events") == "x.events");
  CHECK(queue_key("orders") == "q.orders");
  CHECK(*parse_bucket_key("x.events") == bucket_key{bucket_key::kind::exchange, "events"});
  CHECK(*parse_bucket_key("q.orders") == bucket_key{bucket_key::kind::queue, "orders"});
  CHECK(*parse_bucket_key("u.orders") == bucket_key{bucket_key::kind::use, "orders"});
  CHECK(use_key("orders") == "u.orders");
  // Under either CLOUD_AMQP_NAMES mode: a key means the name it spells.
  CHECK(queue_key("celery@h.celery.pidbox") == "q.celery=40h=2Ecelery=2Epidbox");
  CHECK(exchange_key("orders.dlx") == "x.orders=2Edlx");
  CHECK(exchange_key("amq-topic") == "x.=61mq-topic");
  CHECK(use_key("a.b") == "u.a=2Eb");
  CHECK(*parse_bucket_key("q.a=2Eb") == bucket_key{bucket_key::kind::queue, "a.b"});
  CHECK(*parse_bucket_key("x.=61mq-topic") == bucket_key{bucket_key::kind::exchange, "amq-topic"});
  CHECK(*parse_bucket_key("x.=5F") == bucket_key{bucket_key::kind::exchange, "_"});
  for (std::string_view bad : {"", "x", "x.", "q.", "z.a", "xx.a", "q.a.b", "x.amq.topic", "x._",
                               "q.a b", "x.amq-topic", "q.a=2eb", "q.=41", "x.amq=2Eheaders", "q.=FF"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_bucket_key(bad));
  }
}

TEST_CASE("exchange JSON is the reference's, extras only when set") {
  CHECK(encode_exchange({exchange_kind::topic, true, false, false}) ==
        R"({"durable":true,"kind":"topic"})");
  CHECK(encode_exchange({exchange_kind::direct, false, true, true}) ==
        R"({"auto_delete":true,"durable":false,"internal":true,"kind":"direct"})");
  for (const exchange_def& def : {exchange_def{exchange_kind::fanout, true, false, false},
                                  exchange_def{exchange_kind::direct, false, true, true},
                                  exchange_def{exchange_kind::topic, false, false, true}}) {
    auto back = parse_exchange(encode_exchange(def));
    REQUIRE(back);
    CHECK(*back == def);
  }
  // What the Go reference writes reads back.
  auto go = parse_exchange(R"({"kind":"topic","durable":true})");
  REQUIRE(go);
  CHECK(*go == exchange_def{exchange_kind::topic, true, false, false});
}

TEST_CASE("queue JSON is the reference's, optional members omitted") {
  CHECK(encode_queue({true, false, false, {}}) == R"({"durable":true})");
  CHECK(encode_queue({false, true, true, {{"x", "k"}, {"", "q"}}}) ==
        R"({"auto_delete":true,"bindings":[{"exchange":"x","key":"k"},{"exchange":"","key":"q"}],)"
        R"("durable":false,"exclusive":true})");
  const queue_def def{true, false, true, {{"events", "order.#"}, {"amq.fanout", ""}}};
  auto back = parse_queue(encode_queue(def));
  REQUIRE(back);
  CHECK(*back == def);
  auto go = parse_queue(R"({"durable":true,"bindings":null,"future":1})");
  REQUIRE(go);
  CHECK(*go == queue_def{true, false, false, {}});
}

TEST_CASE("the message TTL round-trips, and a previous release's binding windows are read and dropped") {
  queue_def def{true, false, false, {{"x", "k"}, {"y", ""}}};
  def.message_ttl = 0;  // present, even at zero
  const auto json = encode_queue(def);
  CHECK(json == R"({"bindings":[{"exchange":"x","key":"k"},{"exchange":"y","key":""}],"durable":true,"message_ttl":0})");
  auto back = parse_queue(json);
  REQUIRE(back);
  CHECK(*back == def);
  auto old = parse_queue(R"({"bindings":[{"after":42,"exchange":"x","key":"k"},{"exchange":"y","key":""}],"durable":true,)"
                         R"("message_ttl":0,"retired":[{"after":7,"filters":["amqp.x.old"],"until":40}]})");
  REQUIRE(old);
  CHECK(*old == def);
  for (std::string_view bad : {R"({"durable":true,"message_ttl":-5})", R"({"durable":true,"message_ttl":"5"})"}) {
    CAPTURE(bad);
    auto q = parse_queue(bad);
    REQUIRE_FALSE(q);
    CHECK(q.error().text.find("malformed queue") != std::string::npos);
  }
}

TEST_CASE("a dead-letter target, a delivery limit and an expiry round-trip, omitted when unset") {
  queue_def def{true, false, false, {}};
  def.dead_letter = dead_letter_target{"dlx", std::nullopt};
  def.delivery_limit = 0;
  CHECK(encode_queue(def) == R"({"dead_letter":{"exchange":"dlx"},"delivery_limit":0,"durable":true})");
  def.expires = 1500;
  CHECK(encode_queue(def) == R"({"dead_letter":{"exchange":"dlx"},"delivery_limit":0,"durable":true,"expires":1500})");
  auto back = parse_queue(encode_queue(def));
  REQUIRE(back);
  CHECK(*back == def);
  def.dead_letter = dead_letter_target{"", "parked"};
  CHECK(encode_queue(def) ==
        R"({"dead_letter":{"exchange":"","routing_key":"parked"},"delivery_limit":0,"durable":true,"expires":1500})");
  back = parse_queue(encode_queue(def));
  REQUIRE(back);
  CHECK(*back == def);
  for (std::string_view bad : {R"({"durable":true,"dead_letter":"dlx"})", R"({"durable":true,"dead_letter":{}})",
                               R"({"durable":true,"dead_letter":{"exchange":1}})",
                               R"({"durable":true,"dead_letter":{"exchange":"x","routing_key":2}})",
                               R"({"durable":true,"delivery_limit":-3})", R"({"durable":true,"delivery_limit":"3"})",
                               R"({"durable":true,"expires":-1})", R"({"durable":true,"expires":"1s"})"}) {
    CAPTURE(bad);
    auto q = parse_queue(bad);
    REQUIRE_FALSE(q);
    CHECK(q.error().text.find("malformed queue") != std::string::npos);
  }
}

TEST_CASE("malformed values are refused with a sentence, never thrown") {
  for (std::string_view bad : {"", "{", "[]", "null", "\"x\"", R"({"durable":true})",
                               R"({"kind":7})", R"({"kind":"headers"})", R"({"kind":"topic","durable":"yes"})",
                               "{\"kind\":\"top\xff\"}"}) {
    CAPTURE(bad);
    auto e = parse_exchange(bad);
    REQUIRE_FALSE(e);
    CHECK(e.error().code == reply_code::internal_error);
    CHECK(e.error().text.find("malformed exchange") != std::string::npos);
  }
  for (std::string_view bad : {"", "{}x", "[]", R"({"durable":1})", R"({"bindings":{}})",
                               R"({"bindings":[1]})", R"({"bindings":[{"exchange":1,"key":"k"}]})",
                               R"({"exclusive":"no"})"}) {
    CAPTURE(bad);
    auto q = parse_queue(bad);
    REQUIRE_FALSE(q);
    CHECK(q.error().code == reply_code::internal_error);
    CHECK(q.error().text.find("malformed queue") != std::string::npos);
  }
}

TEST_CASE("a length limit and its overflow round-trip, omitted when unset") {
  queue_def def{true, false, false, {}};
  def.max_length = 0;
  CHECK(encode_queue(def) == R"({"durable":true,"max_length":0})");
  def.overflow = overflow_mode::reject_publish_dlx;
  CHECK(encode_queue(def) == R"({"durable":true,"max_length":0,"overflow":"reject-publish-dlx"})");
  auto back = parse_queue(encode_queue(def));
  REQUIRE(back);
  CHECK(*back == def);
  topology t;
  CHECK_FALSE(t.has_length_limits());
  t.put_queue("limited", def);
  CHECK(t.has_length_limits());
  t.put_queue("limited", queue_def{true, false, false, {}});
  CHECK_FALSE(t.has_length_limits());
  for (std::string_view bad : {R"({"durable":true,"max_length":-1})", R"({"durable":true,"overflow":"drop-tail"})",
                               R"({"durable":true,"overflow":1})"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_queue(bad));
  }
}

TEST_CASE("a single active consumer round-trips, omitted when off, and must be a boolean") {
  queue_def def{true, false, false, {}};
  CHECK(encode_queue(def) == R"({"durable":true})");
  def.single_active_consumer = true;
  CHECK(encode_queue(def) == R"({"durable":true,"single_active_consumer":true})");
  auto back = parse_queue(encode_queue(def));
  REQUIRE(back);
  CHECK(back->single_active_consumer);
  auto off = parse_queue(R"({"durable":true,"exclusive":false,"auto_delete":false,"single_active_consumer":false})");
  REQUIRE(off);
  CHECK_FALSE(off->single_active_consumer);
  auto bad = parse_queue(R"({"durable":true,"single_active_consumer":"yes"})");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().text.find("single_active_consumer") != std::string::npos);
}

TEST_CASE("the declared x-queue-type round-trips, a value without one is a classic queue that named none") {
  queue_def def{true, false, false, {}};
  def.declared_type = queue_type::quorum;
  CHECK(encode_queue(def) == R"({"durable":true,"type":"quorum"})");
  auto back = parse_queue(encode_queue(def));
  REQUIRE(back);
  CHECK(*back == def);
  CHECK(back->type() == queue_type::quorum);
  def.declared_type = queue_type::classic;
  CHECK(encode_queue(def) == R"({"durable":true,"type":"classic"})");
  // Stores written before the type was kept.
  auto old = parse_queue(R"({"durable":true})");
  REQUIRE(old);
  CHECK_FALSE(old->declared_type);
  CHECK(old->type() == queue_type::classic);
  def.declared_type = queue_type::stream;
  CHECK(encode_queue(def) == R"({"durable":true,"type":"stream"})");
  auto stream = parse_queue(encode_queue(def));
  REQUIRE(stream);
  CHECK(stream->type() == queue_type::stream);
  for (std::string_view bad : {R"({"durable":true,"type":"lazy"})", R"({"durable":true,"type":1})"}) {
    CAPTURE(bad);
    auto q = parse_queue(bad);
    REQUIRE_FALSE(q);
    CHECK(q.error().text.find("\"type\" is not classic, quorum or stream") != std::string::npos);
  }
}

TEST_CASE("an unlimited delivery limit (x-delivery-limit -1) round-trips as -1") {
  queue_def def{true, false, false, {}};
  def.declared_type = queue_type::quorum;
  def.unlimited_deliveries = true;
  CHECK(encode_queue(def) == R"({"delivery_limit":-1,"durable":true,"type":"quorum"})");
  auto back = parse_queue(encode_queue(def));
  REQUIRE(back);
  CHECK(*back == def);
  CHECK_FALSE(parse_queue(R"({"durable":true,"delivery_limit":-2})"));
}
