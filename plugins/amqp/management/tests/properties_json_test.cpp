// AMQP values and properties as the management API writes and reads them in JSON.
#include <doctest/doctest.h>

#include "properties_json.hpp"

using namespace amqp;
using namespace amqp::management;
using json = nlohmann::json;

TEST_CASE("management json: a table from JSON takes RabbitMQ's types, and back") {
  std::string why;
  auto t = table_of(json{{"x-message-ttl", 60000}, {"x-dead-letter-exchange", "dlx"}, {"flag", true},
                          {"list", {1, "a"}}, {"nested", {{"k", nullptr}}}},
                    why);
  REQUIRE(t);
  const auto* ttl = wire::find(*t, "x-message-ttl");
  REQUIRE(ttl);
  CHECK(std::holds_alternative<std::int64_t>(ttl->value));
  CHECK(to_json(*t) == json{{"x-message-ttl", 60000}, {"x-dead-letter-exchange", "dlx"}, {"flag", true},
                            {"list", {1, "a"}}, {"nested", {{"k", nullptr}}}});
  CHECK_FALSE(table_of(json::array(), why));
  CHECK_FALSE(why.empty());
}

TEST_CASE("management json: properties by their AMQP names, checked") {
  std::string why;
  auto p = properties_of(json{{"content_type", "text/plain"}, {"delivery_mode", 2}, {"headers", {{"h", "v"}}},
                              {"timestamp", 1700000000}},
                         why);
  REQUIRE(p);
  CHECK(p->content_type == "text/plain");
  CHECK(p->delivery_mode == 2);
  CHECK(p->timestamp == 1700000000u);
  CHECK(to_json(*p) == json{{"content_type", "text/plain"}, {"delivery_mode", 2}, {"headers", {{"h", "v"}}},
                            {"timestamp", 1700000000}});
  CHECK_FALSE(properties_of(json{{"delivery_mode", 300}}, why));
  CHECK(why.find("delivery_mode") != std::string::npos);
  why.clear();
  CHECK_FALSE(properties_of(json{{"content_type", 5}}, why));
  CHECK(why.find("content_type") != std::string::npos);
  why.clear();
  CHECK_FALSE(properties_of(json{{"content-type", "text/plain"}}, why));  // a typo is refused, not ignored
  CHECK(why.find("properties.content-type is not a basic property") != std::string::npos);
}
