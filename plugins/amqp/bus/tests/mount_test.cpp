// client::open: the mount steps, each failing with a message that names the step.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nats_server.hpp"

using namespace amqp::bus;
using namespace amqp::bus::test;
using namespace std::chrono_literals;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("open creates stream AMQP (limits retention) and bucket amqp, and is idempotent") {
  nats_server server;
  auto first = client::open(options_for(server.url()));
  REQUIRE_MESSAGE(first.ok(), first.error().text);
  auto stream = server.api("STREAM.INFO.AMQP");
  CHECK(stream["config"]["subjects"] == nlohmann::json::array({"amqp.>"}));
  CHECK(stream["config"]["retention"] == "limits");
  CHECK(stream["config"]["storage"] == "file");
  auto bucket = server.api("STREAM.INFO.KV_amqp");
  CHECK(bucket["config"]["max_msgs_per_subject"] == 1);
  CHECK(first.value()->max_payload() > 0);
  (*first)->close();

  auto second = client::open(options_for(server.url()));
  REQUIRE_MESSAGE(second.ok(), second.error().text);
  CHECK(server.api("STREAM.INFO.AMQP")["created"] == stream["created"]);  // verified, not recreated
}

TEST_CASE("a pre-existing AMQP stream with other retention or subjects is refused and left as it was") {
  nats_server server;
  SUBCASE("retention") {
    server.api("STREAM.CREATE.AMQP", {{"name", "AMQP"}, {"subjects", {"amqp.>"}}, {"retention", "workqueue"}});
    auto c = client::open(options_for(server.url()));
    REQUIRE_FALSE(c.ok());
    CHECK(contains(c.error().text, "stream AMQP:"));
    CHECK(contains(c.error().text, "retention is workqueue, expected limits"));
    CHECK(server.api("STREAM.INFO.AMQP")["config"]["retention"] == "workqueue");
  }
  SUBCASE("subjects") {
    server.api("STREAM.CREATE.AMQP", {{"name", "AMQP"}, {"subjects", {"legacy.>"}}, {"retention", "interest"}});
    auto c = client::open(options_for(server.url()));
    REQUIRE_FALSE(c.ok());
    CHECK(contains(c.error().text, "stream AMQP:"));
    CHECK(contains(c.error().text, "subjects are [legacy.>], expected [amqp.>]"));
    CHECK(server.api("STREAM.INFO.AMQP")["config"]["subjects"] == nlohmann::json::array({"legacy.>"}));
  }
}

TEST_CASE("a stream AMQP an earlier release made with interest retention is opened, and made limits on demand") {
  nats_server server;
  server.api("STREAM.CREATE.AMQP", {{"name", "AMQP"}, {"subjects", {"amqp.>"}}, {"retention", "interest"}});
  auto c = client::open(options_for(server.url()));
  REQUIRE_MESSAGE(c.ok(), c.error().text);
  CHECK(server.api("STREAM.INFO.AMQP")["config"]["retention"] == "interest");
  auto made = (*c)->use_limits_retention();
  REQUIRE_MESSAGE(made.ok(), made.error().text);
  CHECK(*made);
  CHECK(server.api("STREAM.INFO.AMQP")["config"]["retention"] == "limits");
}

TEST_CASE("open allows message schedules on stream AMQP, also on one made before without them") {
  nats_server server;
  server.api("STREAM.CREATE.AMQP", {{"name", "AMQP"}, {"subjects", {"amqp.>"}}, {"retention", "interest"}});
  auto c = client::open(options_for(server.url()));
  REQUIRE_MESSAGE(c.ok(), c.error().text);
  const auto config = server.api("STREAM.INFO.AMQP")["config"];
  CHECK(config["allow_msg_schedules"] == true);
  CHECK(config["allow_rollup_hdrs"] == true);  // what schedules need, the server sets with them
  const auto holder = server.api("CONSUMER.INFO.AMQP.~delayed");
  CHECK(holder["config"]["filter_subject"] == "amqp.~delayed.>");
  const auto due = server.api("CONSUMER.INFO.AMQP.~due");
  CHECK(due["config"]["filter_subject"] == "amqp.~due.>");
  CHECK(due["config"]["ack_policy"] == "explicit");
}

TEST_CASE("a stream KV_amqp that is not a key-value bucket fails the bucket step") {
  nats_server server;
  server.api("STREAM.CREATE.KV_amqp", {{"name", "KV_amqp"}, {"subjects", {"other.>"}}});
  auto c = client::open(options_for(server.url()));
  REQUIRE_FALSE(c.ok());
  CHECK(contains(c.error().text, "bucket amqp:"));
  CHECK(contains(c.error().text, "KV_amqp"));
}

TEST_CASE("a bus without JetStream fails the stream step, naming JetStream") {
  nats_server server{false};
  auto c = client::open(options_for(server.url()));
  REQUIRE_FALSE(c.ok());
  CHECK(contains(c.error().text, "stream AMQP:"));
  CHECK(contains(c.error().text, "JetStream is not enabled"));
}

TEST_CASE("an unreachable bus fails the dial step") {
  const std::string url = "nats://127.0.0.1:" + std::to_string(dead_port());
  const auto started = std::chrono::steady_clock::now();
  auto c = client::open(options_for(url, 3s));
  REQUIRE_FALSE(c.ok());
  CHECK(contains(c.error().text, "dial " + url + ":"));
  CHECK(std::chrono::steady_clock::now() - started < 4s);
}

TEST_CASE("a bus that accepts but never speaks is abandoned at the deadline") {
  // A listening socket nobody accepts on: TCP connects, the NATS INFO never comes.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(fd, 4) == 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string url = "nats://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  const auto started = std::chrono::steady_clock::now();
  auto c = client::open(options_for(url, 1500ms));
  const auto took = std::chrono::steady_clock::now() - started;
  close(fd);
  REQUIRE_FALSE(c.ok());
  CHECK(contains(c.error().text, "dial " + url));
  CHECK(took < 3s);
}

TEST_CASE("a comma-separated URL list dials the first live server") {
  nats_server server;
  const std::string url = "nats://127.0.0.1:" + std::to_string(dead_port()) + ", " + server.url();
  auto c = client::open(options_for(url));
  REQUIRE_MESSAGE(c.ok(), c.error().text);
}

TEST_CASE("open leaves only the delayed consumers behind") {
  nats_server server;
  auto c = client::open(options_for(server.url()));
  REQUIRE_MESSAGE(c.ok(), c.error().text);
  CHECK(server.api("CONSUMER.NAMES.AMQP", nlohmann::json::object())["consumers"] == nlohmann::json::array({"~delayed", "~due"}));
}
