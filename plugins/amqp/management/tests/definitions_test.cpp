// RabbitMQ's definitions file: written as it exports, read as it imports, refusing what it cannot apply.
#include <doctest/doctest.h>

#include "definitions.hpp"
#include "topology_fixture.hpp"

using namespace amqp;
using namespace amqp::management;
using json = nlohmann::json;

using testing::orders_topology;

TEST_CASE("definitions: an export has what RabbitMQ's has, without the standard exchanges or exclusive queues") {
  const auto file = export_definitions({{"/", orders_topology()}}, "0.1.0", false);
  CHECK(file["vhosts"] == json::array({{{"name", "/"}}}));
  CHECK(file["exchanges"] == json::array({{{"name", "orders"}, {"vhost", "/"}, {"type", "topic"}, {"durable", true},
                                           {"auto_delete", false}, {"internal", false}, {"arguments", json::object()}}}));
  CHECK(file["queues"] == json::array({{{"name", "eu"}, {"vhost", "/"}, {"durable", true}, {"auto_delete", false},
                                        {"arguments", {{"x-message-ttl", 60000}, {"x-dead-letter-exchange", "dlx"}}}}}));
  CHECK(file["bindings"] == json::array({{{"source", "orders"}, {"vhost", "/"}, {"destination", "eu"},
                                          {"destination_type", "queue"}, {"routing_key", "eu.#"},
                                          {"arguments", json::object()}}}));
  // The queue's arguments are what it declared; the policy's are the policy's.
  CHECK(file["policies"] == json::array({{{"vhost", "/"}, {"name", "limit"}, {"pattern", "^eu$"}, {"apply-to", "queues"},
                                          {"definition", {{"max-length", 5}}}, {"priority", 0}}}));
  const auto one = export_definitions({{"/", orders_topology()}}, "0.1.0", true);
  CHECK_FALSE(one.contains("vhosts"));
  CHECK_FALSE(one["queues"][0].contains("vhost"));
}

TEST_CASE("definitions: what was exported imports back, entry for entry") {
  std::string why;
  const auto file = export_definitions({{"/", orders_topology()}}, "0.1.0", false);
  auto defs = import_definitions(file, std::nullopt, why);
  REQUIRE(defs);
  CHECK(defs->vhosts == std::vector<std::string>{"/"});
  REQUIRE(defs->exchanges.size() == 1);
  CHECK(defs->exchanges[0].type == "topic");
  REQUIRE(defs->queues.size() == 1);
  CHECK(defs->queues[0].arguments["x-message-ttl"] == 60000);
  REQUIRE(defs->bindings.size() == 1);
  CHECK(defs->bindings[0].routing_key == "eu.#");
  REQUIRE(defs->policies.size() == 1);
  CHECK(defs->policies[0].name == "limit");
  CHECK(defs->policies[0].vhost == "/");
  CHECK(routing::parse_policy(defs->policies[0].json, routing::name_rules::escaped));
  // The per-vhost shape: entries take the vhost of the path.
  auto into = import_definitions(export_definitions({{"/", orders_topology()}}, "0.1.0", true), "prod", why);
  REQUIRE(into);
  CHECK(into->queues[0].vhost == "prod");
}

TEST_CASE("definitions: a queue's x-queue-type is exported as declared, its default delivery limit not at all") {
  routing::topology t;
  routing::queue_def quorum;
  quorum.durable = true;
  quorum.declared_type = routing::queue_type::quorum;
  t.put_queue("orders", quorum);
  routing::queue_def named = routing::queue_def{};
  named.durable = true;
  named.declared_type = routing::queue_type::classic;
  t.put_queue("named", named);
  routing::queue_def plain;
  plain.durable = true;
  t.put_queue("plain", plain);
  const auto file = export_definitions({{"/", t}}, "0.1.0", true);
  REQUIRE(file["queues"].size() == 3);
  CHECK(file["queues"][0]["name"] == "named");
  CHECK(file["queues"][0]["arguments"] == json{{"x-queue-type", "classic"}});
  CHECK(file["queues"][1]["name"] == "orders");
  CHECK(file["queues"][1]["arguments"] == json{{"x-queue-type", "quorum"}});  // no x-delivery-limit: not declared
  CHECK(file["queues"][2]["arguments"] == json::object());
  std::string why;
  auto defs = import_definitions(file, "/", why);
  REQUIRE(defs);
  CHECK(defs->queues[1].arguments["x-queue-type"] == "quorum");
}

TEST_CASE("definitions: users, permissions, parameters and exchange bindings are refused, by name") {
  std::string why;
  CHECK_FALSE(import_definitions(json{{"users", {{{"name", "u"}}}}}, std::nullopt, why));
  CHECK(why.starts_with("users cannot be imported: users are the bus's"));
  CHECK_FALSE(import_definitions(json{{"parameters", {{{"name", "p"}}}}}, std::nullopt, why));
  CHECK(why.starts_with("parameters cannot be imported"));
  CHECK_FALSE(import_definitions(json{{"policies", {{{"pattern", "p"}}}}}, "/", why));
  CHECK(why.starts_with("a policy needs a name"));
  CHECK_FALSE(import_definitions(json{{"bindings", {{{"vhost", "/"}, {"source", "a"}, {"destination", "b"},
                                                      {"destination_type", "exchange"}, {"routing_key", ""}}}}},
                                 std::nullopt, why));
  CHECK(why.find("exchange-to-exchange bindings are not implemented") != std::string::npos);
  CHECK_FALSE(import_definitions(json{{"queues", {{{"name", "q"}}}}}, std::nullopt, why));
  CHECK(why.starts_with("an entry has no vhost"));
  // What RabbitMQ itself exports about its cluster is description, not configuration.
  CHECK(import_definitions(json{{"global_parameters", {{{"name", "cluster_name"}, {"value", "rabbit@h"}}}}, {"users", json::array()}},
                           std::nullopt, why));
}
