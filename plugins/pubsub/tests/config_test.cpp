#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "config.hpp"

using namespace cloud::pubsub;

namespace {

config_result read(std::map<std::string, std::string> env) {
  return read_config([env](std::string_view v) -> std::optional<std::string> {
    const auto it = env.find(std::string{v});
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

}  // namespace

TEST_CASE("defaults: 127.0.0.1:4222, 8 MiB, ./data/pubsub, the shipped nats-server") {
  const auto r = read({});
  REQUIRE(r.value);
  CHECK_FALSE(r.value->external_url);
  CHECK(r.value->host == "127.0.0.1");
  CHECK(r.value->port == 4222);
  CHECK(r.value->max_payload == 8 * 1024 * 1024);
  CHECK(r.value->store_dir == "data/pubsub");
  CHECK_FALSE(r.value->server_bin);  // unset: default_server_binary beside the plugin
  CHECK(r.value->restarts == 10);
  CHECK_FALSE(r.value->sync_always);
}

TEST_CASE("CLOUD_DATA_DIR places the store, CLOUD_PUBSUB_STORE_DIR overrides it") {
  CHECK(read({{"CLOUD_DATA_DIR", "/var/lib/cloud"}}).value->store_dir == "/var/lib/cloud/pubsub");
  CHECK(read({{"CLOUD_DATA_DIR", "/a"}, {"CLOUD_PUBSUB_STORE_DIR", "/b"}}).value->store_dir == "/b");
}

TEST_CASE("each malformed value is refused naming the variable and the value") {
  const std::pair<const char*, const char*> cases[] = {
      {"CLOUD_PUBSUB_PORT", "42x"},        {"CLOUD_PUBSUB_PORT", "70000"},
      {"CLOUD_PUBSUB_PORT", "-1"},         {"CLOUD_PUBSUB_MAX_PAYLOAD", "0"},
      {"CLOUD_PUBSUB_MAX_PAYLOAD", "8M"},  {"CLOUD_PUBSUB_MAX_PAYLOAD", "67108865"},
      {"CLOUD_PUBSUB_HOST", "a b"},        {"CLOUD_PUBSUB_HOST", ""},
      {"CLOUD_PUBSUB_URL", "http://x:1"},  {"CLOUD_PUBSUB_URL", "nats://a:1,"},
      {"CLOUD_PUBSUB_STORE_DIR", ""},      {"NATS_SERVER_BIN", ""},
      {"CLOUD_PUBSUB_RESTARTS", "-1"},     {"CLOUD_PUBSUB_RESTARTS", "1001"},
      {"CLOUD_PUBSUB_SYNC", "sometimes"},  {"CLOUD_PUBSUB_SYNC", ""},
  };
  for (const auto& [variable, value] : cases) {
    const std::string shown = std::string{variable} + "=" + value;
    CAPTURE(shown);
    const auto r = read({{variable, value}});
    REQUIRE_FALSE(r.value);
    CHECK(r.error.find(std::string{variable} + "=\"" + value + "\" is malformed; expected") == 0);
  }
}

TEST_CASE("valid values are taken") {
  const auto r = read({{"CLOUD_PUBSUB_PORT", "0"},
                       {"CLOUD_PUBSUB_MAX_PAYLOAD", "1048576"},
                       {"CLOUD_PUBSUB_URL", "nats://10.0.0.1:4222,nats://10.0.0.2:4222"},
                       {"NATS_SERVER_BIN", "/opt/nats/nats-server"},
                       {"CLOUD_PUBSUB_RESTARTS", "0"},
                       {"CLOUD_PUBSUB_SYNC", "always"}});
  REQUIRE(r.value);
  CHECK(r.value->port == 0);
  CHECK(r.value->max_payload == 1048576);
  CHECK(r.value->external_url == "nats://10.0.0.1:4222,nats://10.0.0.2:4222");
  CHECK(r.value->server_bin == "/opt/nats/nats-server");
  CHECK(r.value->restarts == 0);
  CHECK(r.value->sync_always);
}

TEST_CASE("the default nats-server is ../bin/nats-server beside the plugin library") {
  CHECK(default_server_binary("/usr/lib/cloud/plugins/libcloud_pubsub.so") == "/usr/lib/cloud/bin/nats-server");
  CHECK(default_server_binary("/work/build/lib/cloud/plugins/libcloud_pubsub.so") ==
        "/work/build/lib/cloud/bin/nats-server");
  CHECK(default_server_binary("/opt/x/./plugins/libcloud_pubsub.so") == "/opt/x/bin/nats-server");
}

TEST_CASE("a bare NATS_SERVER_BIN is kept as given, to be searched on PATH") {
  CHECK(read({{"NATS_SERVER_BIN", "nats-server"}}).value->server_bin == "nats-server");
}

TEST_CASE("resolve_binary searches PATH for a bare name and checks an explicit path") {
  CHECK(resolve_binary("sh", std::string{"/nonexistent:/bin:/usr/bin"}).has_value());
  CHECK_FALSE(resolve_binary("no-such-binary-here", std::string{"/bin:/usr/bin"}));
  CHECK(resolve_binary("/bin/sh", std::nullopt) == std::filesystem::path{"/bin/sh"});
  CHECK_FALSE(resolve_binary("/nonexistent/nats-server", std::nullopt));
}

TEST_CASE("CLOUD_PUBSUB_CONFIG: a readable file, with its user and password beside it, never with CLOUD_PUBSUB_URL") {
  const auto file = std::filesystem::temp_directory_path() / "pubsub_config_test_users.conf";
  std::ofstream(file) << "accounts {}\n";
  const auto ok = read({{"CLOUD_PUBSUB_CONFIG", file.string()}, {"CLOUD_PUBSUB_USER", "svc"}, {"CLOUD_PUBSUB_PASSWORD", "pw"}});
  REQUIRE(ok.value);
  CHECK(ok.value->server_config == file);
  CHECK(ok.value->user == "svc");
  CHECK(ok.value->password == "pw");
  CHECK(read({{"CLOUD_PUBSUB_CONFIG", file.string()}}).value);  // users of its own, none for the adaptor
  const auto missing = read({{"CLOUD_PUBSUB_CONFIG", "/nonexistent/users.conf"}});
  REQUIRE_FALSE(missing.value);
  CHECK(missing.error.find("CLOUD_PUBSUB_CONFIG") != std::string::npos);
  CHECK(missing.error.find("/nonexistent/users.conf") != std::string::npos);
  const auto external = read({{"CLOUD_PUBSUB_CONFIG", file.string()}, {"CLOUD_PUBSUB_URL", "nats://127.0.0.1:4222"}});
  REQUIRE_FALSE(external.value);
  CHECK(external.error.find("unset one of them") != std::string::npos);
  for (const auto& env : {std::map<std::string, std::string>{{"CLOUD_PUBSUB_USER", "svc"}, {"CLOUD_PUBSUB_PASSWORD", "pw"}},
                          std::map<std::string, std::string>{{"CLOUD_PUBSUB_CONFIG", file.string()}, {"CLOUD_PUBSUB_USER", "svc"}}}) {
    const auto r = read(env);
    REQUIRE_FALSE(r.value);
    CHECK(r.error.find("CLOUD_PUBSUB_USER and CLOUD_PUBSUB_PASSWORD go together") == 0);
    CHECK(r.error.find("pw") == std::string::npos);
  }
  std::filesystem::remove(file);
}
