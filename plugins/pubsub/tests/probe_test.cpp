// The probes against a real nats-server (and against things that are not one).
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "child_process.hpp"
#include "probe.hpp"

using namespace cloud::pubsub;
using namespace std::chrono_literals;

TEST_CASE("redacted hides the password or token of every URL of a list, and nothing else") {
  CHECK(redacted("nats://svc:s3cret@127.0.0.1:4222") == "nats://svc:***@127.0.0.1:4222");
  CHECK(redacted("nats://a:x@h1:1,nats://h2:2,b:y@h3:3") == "nats://a:***@h1:1,nats://h2:2,b:***@h3:3");
  CHECK(redacted("nats://t0ken@h:4222") == "nats://***@h:4222");
  CHECK(redacted("nats://127.0.0.1:4222") == "nats://127.0.0.1:4222");
}

TEST_CASE("split_url takes host and port from nats URLs") {
  CHECK(split_url("nats://127.0.0.1:4222") == std::make_pair(std::string{"127.0.0.1"}, std::uint16_t{4222}));
  CHECK(split_url("nats://user:pw@example.com:5000") == std::make_pair(std::string{"example.com"}, std::uint16_t{5000}));
  CHECK(split_url("nats://example.com") == std::make_pair(std::string{"example.com"}, std::uint16_t{4222}));
  CHECK(split_url("nats://[::1]:4223") == std::make_pair(std::string{"::1"}, std::uint16_t{4223}));
  CHECK_FALSE(split_url("nats://host:0"));
  CHECK_FALSE(split_url("nats://host:x"));
  CHECK_FALSE(split_url("nats://:4222"));
}

TEST_CASE("a port in use cannot be claimed, a free one can") {
  std::string error;
  const auto port = pick_free_port("127.0.0.1", error);
  REQUIRE(port != 0);
  CHECK(claim_port("127.0.0.1", port) == "");
}

TEST_CASE("a port whose last server just died, leaving TIME_WAIT sockets, can be claimed at once") {
  // A listener set up as nats-server's (Go sets SO_REUSEADDR); the server side closes first, as
  // a killed server's kernel does, so its end waits in TIME_WAIT.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(listener >= 0);
  const int on = 1;
  REQUIRE(::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) == 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), len) == 0);
  REQUIRE(::listen(listener, 1) == 0);
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const int client = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::connect(client, reinterpret_cast<sockaddr*>(&addr), len) == 0);
  const int served = ::accept(listener, nullptr, nullptr);
  REQUIRE(served >= 0);
  ::close(served);
  ::close(listener);
  char byte = 0;
  CHECK(::read(client, &byte, 1) == 0);  // the server's FIN arrived
  ::close(client);
  CHECK(claim_port("127.0.0.1", ntohs(addr.sin_port)) == "");
}

TEST_CASE("probing a closed port fails quickly with the reason") {
  std::string error;
  const auto port = pick_free_port("127.0.0.1", error);
  const auto r = probe_info("127.0.0.1", port, 1000ms);
  CHECK_FALSE(r.info);
  CHECK(r.error.find("Connection refused") != std::string::npos);
  CHECK(probe_jetstream("127.0.0.1", port, 1000ms).find("Connection refused") != std::string::npos);
}

namespace {

// Starts `binary` with JetStream on a free port, probes it, and checks what its INFO says.
void probe_real_server(const char* binary, const std::string& expected_version) {
  std::string error;
  const auto port = pick_free_port("127.0.0.1", error);
  REQUIRE(port != 0);
  const auto store = std::filesystem::temp_directory_path() /
                     ("probe_test_" + std::to_string(::getpid()) + "_" + std::to_string(port));
  std::filesystem::create_directories(store);
  child_process server;
  REQUIRE(server.start(binary, {"-js", "-a", "127.0.0.1", "-p", std::to_string(port), "-sd", store.string()}, {},
                       {}) == "");
  std::string js = "not tried";
  server_info seen;
  for (int i = 0; i < 100 && !js.empty(); ++i) {
    js = probe_jetstream("127.0.0.1", port, 1000ms, &seen);
    if (!js.empty()) std::this_thread::sleep_for(50ms);
  }
  CHECK(js == "");
  CHECK(seen.version == expected_version);  // what the launched server's INFO said
  const auto info = probe_info("127.0.0.1", port, 1000ms);
  REQUIRE(info.info);
  CHECK(info.info->jetstream);
  CHECK(info.info->version == expected_version);
  CHECK(info.info->max_payload == 1024 * 1024);  // nats-server's default
  CHECK(claim_port("127.0.0.1", port).find("Address already in use") != std::string::npos);
  server.stop(3000ms);
  std::filesystem::remove_all(store);
}

}  // namespace

TEST_CASE("the pinned nats-server passes both probes, states its version and holds its port") {
  probe_real_server(CLOUD_TEST_NATS_SERVER, CLOUD_TEST_NATS_SERVER_VERSION);
}

TEST_CASE("the floor nats-server passes both probes and states its version") {
  probe_real_server(CLOUD_TEST_NATS_SERVER_FLOOR, CLOUD_TEST_NATS_SERVER_FLOOR_VERSION);
}

TEST_CASE("json_string reads a string field of an INFO line") {
  const std::string info =
      R"({"server_id":"N1","version":"2.15.2","proto":1,"go":"go1.26.8","name":"a \"b\"","n":3})";
  CHECK(json_string(info, "version") == "2.15.2");
  CHECK(json_string(info, "go") == "go1.26.8");
  CHECK(json_string(info, "name") == R"(a "b")");
  CHECK(json_string(info, "proto") == "");    // a number, not a string
  CHECK(json_string(info, "missing") == "");
  CHECK(json_string(R"({"version":"2.1)", "version") == "");  // unterminated
  CHECK(json_string(R"({"version": "2.10.27"})", "version") == "2.10.27");
}
