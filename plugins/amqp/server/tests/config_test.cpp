#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "config.hpp"

using namespace amqp::server;

namespace {

env_lookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string refusal_of(const config_result& r) {
  REQUIRE(std::holds_alternative<std::string>(r));
  return std::get<std::string>(r);
}

}  // namespace

TEST_CASE("defaults: loopback, 5672, no creds, 30 s handshake") {
  auto r = read_config(env_of({}));
  REQUIRE(std::holds_alternative<server_config>(r));
  const auto& c = std::get<server_config>(r);
  CHECK(c.host == "127.0.0.1");
  CHECK(c.port == 5672);
  CHECK(c.pubsub_creds.empty());
  CHECK(c.handshake_timeout == std::chrono::seconds(30));
  CHECK_FALSE(c.replicas);  // decided by the bus: 1 embedded, else up to 3
  CHECK(c.publish_timeout == std::chrono::seconds(30));
  CHECK(c.bus_timeout == std::chrono::seconds(5));
  CHECK(c.names == amqp::routing::name_rules::hip);
  CHECK(c.max_queues == 1'000'000);
}

TEST_CASE("every variable is read") {
  const auto creds = std::filesystem::temp_directory_path() / "amqp_server_config_test.creds";
  std::ofstream(creds) << "-----BEGIN NATS USER JWT-----\n";
  auto r = read_config(env_of({{"CLOUD_AMQP_HOST", "0.0.0.0"},
                               {"CLOUD_AMQP_PORT", "15672"},
                               {"CLOUD_AMQP_PUBSUB_CREDS", creds.string()},
                               {"CLOUD_AMQP_HANDSHAKE_TIMEOUT", "3"},
                               {"CLOUD_AMQP_REPLICAS", "5"},
                               {"CLOUD_AMQP_PUBLISH_TIMEOUT", "120"},
                               {"CLOUD_AMQP_BUS_TIMEOUT", "1"},
                               {"CLOUD_AMQP_ACK_WAIT", "6"},
                               {"CLOUD_AMQP_MAX_QUEUES", "100000000"},
                               {"CLOUD_AMQP_NAMES", "escaped"},
                               {"CLOUD_AMQP_AUTH", "bus"}}));
  std::filesystem::remove(creds);
  REQUIRE(std::holds_alternative<server_config>(r));
  const auto& c = std::get<server_config>(r);
  CHECK(c.host == "0.0.0.0");
  CHECK(c.port == 15672);
  CHECK(c.pubsub_creds == creds.string());
  CHECK(c.handshake_timeout == std::chrono::seconds(3));
  CHECK(c.replicas == 5);
  CHECK(c.publish_timeout == std::chrono::seconds(120));
  CHECK(c.bus_timeout == std::chrono::seconds(1));
  CHECK(c.ack_wait == std::chrono::seconds(6));
  CHECK(c.max_queues == 100'000'000);
  CHECK(c.names == amqp::routing::name_rules::escaped);
  CHECK(c.auth == server_config::auth_mode::bus);
}

TEST_CASE("authentication: none by default, and only on a loopback listener") {
  CHECK(std::get<server_config>(read_config(env_of({}))).auth == server_config::auth_mode::none);
  for (const char* loopback : {"127.0.0.1", "127.0.0.2", "::1"}) {
    CAPTURE(loopback);
    auto r = read_config(env_of({{"CLOUD_AMQP_HOST", loopback}, {"CLOUD_AMQP_AUTH", "none"}}));
    CHECK(std::holds_alternative<server_config>(r));
  }
  for (const char* reachable : {"0.0.0.0", "::", "192.0.2.7"}) {
    CAPTURE(reachable);
    for (const auto& vars : {std::map<std::string, std::string>{{"CLOUD_AMQP_HOST", reachable}},
                             std::map<std::string, std::string>{{"CLOUD_AMQP_HOST", reachable}, {"CLOUD_AMQP_AUTH", "none"}}}) {
      const auto text = refusal_of(read_config(env_of(vars)));
      CHECK(text.find(std::string("CLOUD_AMQP_HOST='") + reachable + "'") == 0);
      CHECK(text.find("CLOUD_AMQP_AUTH='none'") != std::string::npos);
      CHECK(text.find("set CLOUD_AMQP_AUTH=bus") != std::string::npos);
    }
    auto r = read_config(env_of({{"CLOUD_AMQP_HOST", reachable}, {"CLOUD_AMQP_AUTH", "bus"}}));
    REQUIRE(std::holds_alternative<server_config>(r));
    CHECK(std::get<server_config>(r).plain_listener);
  }
  // Client certificates say who connects: only the amqps listener opens.
  const auto pem = std::filesystem::temp_directory_path() / "amqp_server_config_test.pem";
  std::ofstream(pem) << "-----BEGIN CERTIFICATE-----\n";
  auto certified = read_config(env_of({{"CLOUD_AMQP_HOST", "0.0.0.0"}, {"CLOUD_AMQPS_CERT", pem.string()},
                                       {"CLOUD_AMQPS_KEY", pem.string()}, {"CLOUD_AMQPS_CA", pem.string()}}));
  std::filesystem::remove(pem);
  REQUIRE(std::holds_alternative<server_config>(certified));
  CHECK_FALSE(std::get<server_config>(certified).plain_listener);
  CHECK(std::get<server_config>(read_config(env_of({}))).plain_listener);
  for (const char* bad : {"", "BUS", "plain", "rabbitmq"}) {
    CAPTURE(bad);
    const auto text = refusal_of(read_config(env_of({{"CLOUD_AMQP_AUTH", bad}})));
    CHECK(text.find(std::string("CLOUD_AMQP_AUTH='") + bad + "' is not valid: expected none (") == 0);
  }
}

TEST_CASE("the management API and Prometheus ports: unset by default, 0 for any, refused when malformed") {
  const auto none = std::get<server_config>(read_config(env_of({})));
  CHECK_FALSE(none.management_port);
  CHECK_FALSE(none.prometheus_port);
  const auto both = std::get<server_config>(
      read_config(env_of({{"CLOUD_AMQP_MANAGEMENT_PORT", "15672"}, {"CLOUD_AMQP_PROMETHEUS_PORT", "0"}})));
  CHECK(both.management_port == 15672);
  CHECK(both.prometheus_port == 0);
  for (const char* variable : {"CLOUD_AMQP_MANAGEMENT_PORT", "CLOUD_AMQP_PROMETHEUS_PORT"}) {
    for (const char* bad : {"", "abc", "65536", "-1"}) {
      CAPTURE(variable);
      CAPTURE(bad);
      const auto text = refusal_of(read_config(env_of({{variable, bad}})));
      CHECK(text.find(std::string(variable) + "='" + bad + "'") == 0);
    }
  }
  // Reachable and unauthenticated, they would answer anyone: refused, naming both remedies.
  const auto text = refusal_of(read_config(
      env_of({{"CLOUD_AMQP_HOST", "0.0.0.0"}, {"CLOUD_AMQP_AUTH", "none"}, {"CLOUD_AMQP_MANAGEMENT_PORT", "15672"}})));
  CHECK(text.find("CLOUD_AMQP_HOST='0.0.0.0'") == 0);
  CHECK(text.find("set CLOUD_AMQP_AUTH=bus") != std::string::npos);
  CHECK(std::holds_alternative<server_config>(read_config(
      env_of({{"CLOUD_AMQP_HOST", "0.0.0.0"}, {"CLOUD_AMQP_AUTH", "bus"}, {"CLOUD_AMQP_MANAGEMENT_PORT", "15672"}}))));
}

TEST_CASE("a naming mode other than hip or escaped is refused naming the variable and the value") {
  for (const char* bad : {"", "HIP", "escape", "rabbitmq"}) {
    CAPTURE(bad);
    const auto text = refusal_of(read_config(env_of({{"CLOUD_AMQP_NAMES", bad}})));
    CHECK(text.find(std::string("CLOUD_AMQP_NAMES='") + bad + "' is not valid: expected hip (") == 0);
    CHECK(text.find("or escaped") != std::string::npos);
  }
}

TEST_CASE("the bus's bounds outside their ranges are refused naming the variable and the value") {
  const std::pair<const char*, const char*> cases[] = {
      {"CLOUD_AMQP_PUBLISH_TIMEOUT", "0"}, {"CLOUD_AMQP_PUBLISH_TIMEOUT", "121"},
      {"CLOUD_AMQP_BUS_TIMEOUT", "0"},     {"CLOUD_AMQP_BUS_TIMEOUT", "5s"},
      {"CLOUD_AMQP_ACK_WAIT", "5"},        {"CLOUD_AMQP_ACK_WAIT", "301"},
  };
  for (const auto& [variable, value] : cases) {
    CAPTURE(variable);
    CAPTURE(value);
    const auto text = refusal_of(read_config(env_of({{variable, value}})));
    CHECK(text.find(std::string(variable) + "='" + value + "' is not valid: expected whole seconds") == 0);
  }
}

TEST_CASE("a replica count outside 1..5 is refused naming the variable and the value") {
  for (const char* bad : {"0", "6", "3x", ""}) {
    CAPTURE(bad);
    const auto text = refusal_of(read_config(env_of({{"CLOUD_AMQP_REPLICAS", bad}})));
    CHECK(text == std::string("CLOUD_AMQP_REPLICAS='") + bad + "' is not valid: expected a replica count from 1 to 5");
  }
}

TEST_CASE("a queue limit outside 1..100000000 is refused naming the variable and the value") {
  for (const char* bad : {"0", "100000001", "1e6", "-1", ""}) {
    CAPTURE(bad);
    const auto text = refusal_of(read_config(env_of({{"CLOUD_AMQP_MAX_QUEUES", bad}})));
    CHECK(text == std::string("CLOUD_AMQP_MAX_QUEUES='") + bad +
                      "' is not valid: expected a number of queues from 1 to 100000000");
  }
}

TEST_CASE("port 0 asks for any free port") {
  auto r = read_config(env_of({{"CLOUD_AMQP_PORT", "0"}}));
  REQUIRE(std::holds_alternative<server_config>(r));
  CHECK(std::get<server_config>(r).port == 0);
}

TEST_CASE("a malformed port is refused naming the variable and the value") {
  for (const char* bad : {"abc", "65536", "-1", "5672x", " 5672", "", "99999999999999999999"}) {
    CAPTURE(bad);
    const auto text = refusal_of(read_config(env_of({{"CLOUD_AMQP_PORT", bad}})));
    CHECK(text.find("CLOUD_AMQP_PORT") != std::string::npos);
    CHECK(text.find(std::string("'") + bad + "'") != std::string::npos);
  }
}

TEST_CASE("a handshake timeout outside 1..3600 seconds is refused") {
  for (const char* bad : {"0", "3601", "1.5", "ten"}) {
    CAPTURE(bad);
    const auto text = refusal_of(read_config(env_of({{"CLOUD_AMQP_HANDSHAKE_TIMEOUT", bad}})));
    CHECK(text.find("CLOUD_AMQP_HANDSHAKE_TIMEOUT") != std::string::npos);
  }
}

TEST_CASE("an unreadable credentials file is refused naming the variable") {
  const auto text = refusal_of(read_config(env_of({{"CLOUD_AMQP_PUBSUB_CREDS", "/nonexistent/dir/x.creds"}})));
  CHECK(text.find("CLOUD_AMQP_PUBSUB_CREDS") != std::string::npos);
  CHECK(text.find("/nonexistent/dir/x.creds") != std::string::npos);
}

TEST_CASE("an empty host is refused") {
  const auto text = refusal_of(read_config(env_of({{"CLOUD_AMQP_HOST", ""}})));
  CHECK(text.find("CLOUD_AMQP_HOST") != std::string::npos);
}

TEST_CASE("pubsub's max_payload must be a positive number") {
  auto good = parse_max_payload("8388608");
  REQUIRE(std::holds_alternative<std::uint64_t>(good));
  CHECK(std::get<std::uint64_t>(good) == 8388608u);
  for (const char* bad : {"0", "-5", "8M", ""}) {
    CAPTURE(bad);
    auto r = parse_max_payload(bad);
    REQUIRE(std::holds_alternative<std::string>(r));
    CHECK(std::get<std::string>(r).find("CLOUD_PUBSUB_MAX_PAYLOAD") != std::string::npos);
  }
}

TEST_CASE("the amqps listener: on with a certificate and its key, its files readable") {
  const auto dir = std::filesystem::temp_directory_path();
  const auto cert = (dir / "amqp_server_config_test.pem").string();
  const auto key = (dir / "amqp_server_config_test.key").string();
  std::ofstream(cert) << "-----BEGIN CERTIFICATE-----\n";
  std::ofstream(key) << "-----BEGIN PRIVATE KEY-----\n";
  auto off = read_config(env_of({}));
  REQUIRE(std::holds_alternative<server_config>(off));
  CHECK_FALSE(std::get<server_config>(off).tls());
  CHECK(std::get<server_config>(off).tls_port == 5671);

  auto on = read_config(env_of({{"CLOUD_AMQPS_CERT", cert}, {"CLOUD_AMQPS_KEY", key}, {"CLOUD_AMQPS_CA", cert},
                                {"CLOUD_AMQPS_PORT", "0"}}));
  REQUIRE(std::holds_alternative<server_config>(on));
  const auto& c = std::get<server_config>(on);
  CHECK(c.tls());
  CHECK(c.tls_port == 0);
  CHECK(c.tls_key == key);
  CHECK(c.tls_ca == cert);

  CHECK(refusal_of(read_config(env_of({{"CLOUD_AMQPS_CERT", cert}}))).find("the amqps listener needs both CLOUD_AMQPS_CERT and CLOUD_AMQPS_KEY") == 0);
  CHECK(refusal_of(read_config(env_of({{"CLOUD_AMQPS_CA", cert}}))).find("the amqps listener needs both") == 0);
  CHECK(refusal_of(read_config(env_of({{"CLOUD_AMQPS_CERT", cert}, {"CLOUD_AMQPS_KEY", "/nonexistent/key.pem"}}))) ==
        "CLOUD_AMQPS_KEY='/nonexistent/key.pem' is not valid: expected a readable PEM file");
  CHECK(refusal_of(read_config(env_of({{"CLOUD_AMQPS_PORT", "65536"}}))).find("CLOUD_AMQPS_PORT='65536'") == 0);
  std::filesystem::remove(cert);
  std::filesystem::remove(key);
}

TEST_CASE("virtual hosts: name=user:password each, space-separated, never '/', never twice") {
  CHECK(std::get<server_config>(read_config(env_of({}))).vhosts.empty());
  auto r = read_config(env_of({{"CLOUD_AMQP_VHOSTS", " prod=svc-prod:p:w  staging=st:x\n"}}));
  REQUIRE(std::holds_alternative<server_config>(r));
  const auto& v = std::get<server_config>(r).vhosts;
  REQUIRE(v.size() == 2);
  CHECK((v[0].name == "prod" && v[0].user == "svc-prod" && v[0].password == "p:w"));
  CHECK((v[1].name == "staging" && v[1].user == "st" && v[1].password == "x"));
  for (const char* bad : {"prod", "prod=svc", "=svc:pw", "prod=:pw", "/=svc:pw", "a=u:p a=v:q"}) {
    CAPTURE(bad);
    const auto text = refusal_of(read_config(env_of({{"CLOUD_AMQP_VHOSTS", bad}})));
    CHECK(text.find("CLOUD_AMQP_VHOSTS='") == 0);
    CHECK(text.find(":p'") == std::string::npos);  // a password is never shown
  }
}
