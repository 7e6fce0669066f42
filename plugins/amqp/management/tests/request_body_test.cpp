// A request body's fields, read as RabbitMQ's management API reads them.
#include <doctest/doctest.h>

#include "request_body.hpp"

using namespace amqp::management;

TEST_CASE("request body: booleans and numbers also come as strings, as rabbitmqadmin sends them") {
  std::string why;
  auto body = request_body::parse(R"({"durable":"false","auto_delete":true,"count":"3","truncate":50000})", why);
  REQUIRE(body);
  CHECK_FALSE(body->flag("durable", true));
  CHECK(body->flag("auto_delete", false));
  CHECK(body->number("count", 1) == 3);
  CHECK(body->number("truncate", -1) == 50000);
  CHECK(body->flag("internal", false) == false);  // absent: the default
  CHECK(body->text("routing_key", "k") == "k");
  CHECK_FALSE(body->error());
}

TEST_CASE("request body: a field of another form is the first error, named with its value") {
  std::string why;
  auto body = request_body::parse(R"({"durable":"yes","count":"3x","routing_key":7})", why);
  REQUIRE(body);
  body->flag("durable", true);
  body->number("count", 1);
  body->text("routing_key", "");
  REQUIRE(body->error());
  CHECK(*body->error() == "durable must be true or false, not \"yes\"");
}

TEST_CASE("request body: empty is an empty object, and anything but an object is refused") {
  std::string why;
  CHECK(request_body::parse("", why));
  CHECK_FALSE(request_body::parse("[1]", why));
  CHECK(why == "the request body must be a JSON object");
  CHECK_FALSE(request_body::parse("{", why));
}
