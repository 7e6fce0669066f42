// The nats-server version floor of the amqp plugin (bus_version.hpp): parsing, ordering, and the
// sentence that refuses a mount.
#include <doctest/doctest.h>

#include "bus_version.hpp"

using namespace amqp::server;

namespace {

server_version parsed(std::string_view text) {
  const auto v = parse_server_version(text);
  REQUIRE(v.has_value());
  return *v;
}

int order(std::string_view a, std::string_view b) { return compare(parsed(a), parsed(b)); }

}  // namespace

TEST_CASE("versions as nats-server states them are parsed") {
  const auto v = parsed("2.15.2");
  CHECK(v.major == 2);
  CHECK(v.minor == 15);
  CHECK(v.patch == 2);
  CHECK(v.prerelease.empty());
  CHECK(parsed("2.11.0-RC.1").prerelease == "RC.1");
  CHECK(parsed("2.10.16+build.5").prerelease.empty());
  CHECK(parsed("2.12.0-beta.2+abc").prerelease == "beta.2");
}

TEST_CASE("what is not MAJOR.MINOR.PATCH is not a version") {
  for (const char* text : {"", "2", "2.10", "2.10.", "v2.10.16", "2.10.16 ", " 2.10.16", "2.x.1", "2.10.16-",
                           "2.10.16+", "2.10.16-rc 1", "2..16", "-2.10.16", "2.10.1234567890", "unknown"}) {
    CAPTURE(text);
    CHECK_FALSE(parse_server_version(text).has_value());
  }
}

TEST_CASE("versions order numerically, a prerelease before its release") {
  CHECK(order("2.10.16", "2.10.16") == 0);
  CHECK(order("2.10.15", "2.10.16") < 0);
  CHECK(order("2.9.10", "2.10.16") < 0);    // numerically, not as text
  CHECK(order("2.10.27", "2.10.16") > 0);
  CHECK(order("2.15.2", "2.10.16") > 0);
  CHECK(order("3.0.0", "2.99.99") > 0);
  CHECK(order("2.10.16-RC.1", "2.10.16") < 0);
  CHECK(order("2.10.16", "2.10.16-RC.1") > 0);
  CHECK(order("2.11.0-RC.1", "2.10.16") > 0);
  CHECK(order("2.10.16+meta", "2.10.16") == 0);
}

TEST_CASE("the minimum is 2.14.3") {
  CHECK(minimum_server_version == "2.14.3");
  CHECK(parse_server_version(minimum_server_version).has_value());
}

TEST_CASE("servers at or above the minimum are accepted") {
  for (const char* v : {"2.14.3", "2.14.5", "2.15.0-RC.1", "2.15.2", "3.0.0"}) {
    CAPTURE(v);
    CHECK_FALSE(refuse_server_version(std::string(v)).has_value());
  }
}

TEST_CASE("a server below the minimum is refused naming its version, the minimum and the remedy") {
  for (const char* v : {"2.9.10", "2.10.27", "2.12.12", "2.14.2", "2.14.3-RC.2", "1.4.1"}) {
    CAPTURE(v);
    const auto refusal = refuse_server_version(std::string(v));
    REQUIRE(refusal.has_value());
    CHECK(refusal->find(std::string("nats-server ") + v + ", older than 2.14.3") != std::string::npos);
    CHECK(refusal->find("CLOUD_PUBSUB_URL") != std::string::npos);
    CHECK(refusal->find("NATS_SERVER_BIN") != std::string::npos);
  }
}

TEST_CASE("an absent or unparsable version is refused, saying so") {
  for (const std::optional<std::string>& none : {std::optional<std::string>{}, std::optional<std::string>{""}}) {
    const auto refusal = refuse_server_version(none);
    REQUIRE(refusal.has_value());
    CHECK(refusal->find("published no server_version") != std::string::npos);
    CHECK(refusal->find("2.14.3 or newer") != std::string::npos);
    CHECK(refusal->find("CLOUD_PUBSUB_URL") != std::string::npos);
  }
  const auto refusal = refuse_server_version(std::string("banana"));
  REQUIRE(refusal.has_value());
  CHECK(refusal->find("reports version \"banana\", which is not a version") != std::string::npos);
  CHECK(refusal->find("NATS_SERVER_BIN") != std::string::npos);
}
