// A write's body as the AMQP method it becomes; a malformed one is 400 naming the field.
#include <doctest/doctest.h>

#include "amqp/bus/base64.hpp"
#include "writes.hpp"

using namespace amqp;
using namespace amqp::management;
using json = nlohmann::json;

TEST_CASE("writes: a queue declaration, RabbitMQ's defaults (durable) and rabbitmqadmin's strings") {
  const auto plain = queue_declaration("q", "");
  REQUIRE(plain.value);
  CHECK((plain.value->queue == "q" && plain.value->durable && !plain.value->auto_delete && !plain.value->passive));
  const auto asked = queue_declaration("q", R"({"durable":"false","auto_delete":true,"arguments":{"x-max-length":3}})");
  REQUIRE(asked.value);
  CHECK((!asked.value->durable && asked.value->auto_delete));
  CHECK(asked.value->arguments.entries.size() == 1);
}

TEST_CASE("writes: a malformed body is refused naming its field, never half read") {
  CHECK(queue_declaration("q", R"({"durable":"perhaps"})").why == R"(durable must be true or false, not "perhaps")");
  CHECK(queue_declaration("q", "[1]").why == "the request body must be a JSON object");
  CHECK(queue_declaration("q", "{\"durable\":").why == "the request body must be a JSON object");
  CHECK(queue_declaration("q", R"({"arguments":[1]})").why.starts_with("arguments: "));
  CHECK(exchange_declaration("x", R"({"durable":true})").why == R"(type is required, e.g. {"type":"direct"})");
  CHECK(exchange_declaration("x", R"({"type":"topic","internal":2})").why == "internal must be true or false, not 2");
  CHECK(binding_request("x", "q", R"({"routing_key":7})").why == "routing_key must be a string, not 7");
  CHECK(binding_request("x", "q", R"({"arguments":{"x-match":"all"}})").why ==
        "binding arguments are not implemented; bind without them");
  CHECK(get_messages_request(R"({"count":"x"})").why == R"(count must be an integer, not "x")");
  CHECK(get_messages_request(R"({"ackmode":"keep"})").why.starts_with("ackmode must be ack_requeue_true"));
  CHECK(get_messages_request(R"({"encoding":"hex"})").why == "encoding must be auto or base64");
  CHECK(publication_request("x", R"({"payload_encoding":"hex"})").why == "payload_encoding must be string or base64, not 'hex'");
  CHECK(publication_request("x", R"({"payload":"@@","payload_encoding":"base64"})").why == "payload is not valid base64");
  CHECK(publication_request("x", R"({"properties":{"content-type":"text/plain"}})")
            .why.starts_with("properties.content-type is not a basic property"));
}

TEST_CASE("writes: an exchange declaration and a binding") {
  const auto x = exchange_declaration("orders", R"({"type":"topic","durable":"false"})");
  REQUIRE(x.value);
  CHECK((x.value->exchange == "orders" && x.value->type == "topic" && !x.value->durable && !x.value->internal));
  const auto b = binding_request("orders", "eu", R"({"routing_key":"eu.#"})");
  REQUIRE(b.value);
  CHECK((b.value->exchange == "orders" && b.value->queue == "eu" && b.value->routing_key == "eu.#"));
}

TEST_CASE("writes: a publication is mandatory, and amq.default is the default exchange") {
  const auto p = publication_request(
      "amq.default", R"({"routing_key":"q","payload":"aGk=","payload_encoding":"base64","properties":{"delivery_mode":2}})");
  REQUIRE(p.value);
  CHECK(p.value->method.exchange == "");
  CHECK(p.value->method.routing_key == "q");
  CHECK(p.value->method.mandatory);
  CHECK(p.value->payload == "hi");
  CHECK(p.value->properties.delivery_mode == std::uint8_t{2});
  CHECK(publication_request("orders", R"({"payload":"x"})").value->method.exchange == "orders");
}

TEST_CASE("writes: a get's message is text when it is printable, else base64, cut to truncate") {
  const auto how = get_messages_request(R"({"count":"2","ackmode":"ack_requeue_false","truncate":2})");
  REQUIRE(how.value);
  CHECK((how.value->count == 2 && how.value->ackmode == "ack_requeue_false" && !how.value->base64));
  wire::basic_get_ok ok{5, true, "orders", "eu.1", 3};
  const auto text = got_message_json(ok, wire::encode_properties({}), "hello", *how.value);
  CHECK((text["payload"] == "he" && text["payload_bytes"] == 5 && text["payload_encoding"] == "string"));
  CHECK((text["redelivered"] == true && text["exchange"] == "orders" && text["message_count"] == 3));
  get_request whole;
  const auto binary = got_message_json(ok, wire::encode_properties({}), std::string("\x01\x02", 2), whole);
  CHECK((binary["payload"] == bus::base64_encode(std::string("\x01\x02", 2)) && binary["payload_encoding"] == "base64"));
}

TEST_CASE("writes: a query flag is set by \"true\" only") {
  const query q{{"if-unused", "true"}, {"if-empty", "yes"}};
  CHECK(query_flag(q, "if-unused"));
  CHECK_FALSE(query_flag(q, "if-empty"));
  CHECK_FALSE(query_flag(q, "absent"));
}

// Found by management_fuzz (fuzz/corpus/get_latin1_message, get_cut_character): octets that are
// not UTF-8 were written as text, and the reply's dump() threw.
TEST_CASE("writes: a got message that is not UTF-8, or is cut inside a character, is base64") {
  const wire::basic_get_ok ok{1, false, "", "q", 0};
  const auto latin1 = got_message_json(ok, wire::encode_properties({}), "caf\xE9", get_request{});
  CHECK((latin1["payload_encoding"] == "base64" && latin1["payload"] == bus::base64_encode("caf\xE9")));
  CHECK_NOTHROW((void)latin1.dump());
  get_request cut;
  cut.truncate = 4;
  const auto halved = got_message_json(ok, wire::encode_properties({}), "caf\xC3\xA9", cut);
  CHECK((halved["payload_encoding"] == "base64" && halved["payload"] == bus::base64_encode("caf\xC3")));
  const auto whole = got_message_json(ok, wire::encode_properties({}), "caf\xC3\xA9", get_request{});
  CHECK((whole["payload_encoding"] == "string" && whole["payload"] == "caf\xC3\xA9"));
}
