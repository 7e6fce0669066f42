#include <doctest/doctest.h>

#include <cstdlib>

#include "options.hpp"

using namespace cloud::host;
using std::chrono::milliseconds;

TEST_CASE("durations accept 15s, 500ms and a bare number of seconds") {
  CHECK(parse_duration("15s") == milliseconds{15000});
  CHECK(parse_duration("500ms") == milliseconds{500});
  CHECK(parse_duration("15") == milliseconds{15000});
}

TEST_CASE("malformed durations are refused") {
  for (const char* text : {"", "s", "ms", "0", "0s", "-1", "1.5s", "15 s", "15m", "abc", "3601s",
                           "99999999999999999999"}) {
    CAPTURE(text);
    CHECK_FALSE(parse_duration(text));
  }
}

TEST_CASE("ports are 0-65535") {
  CHECK(parse_port("0") == 0);
  CHECK(parse_port("8000") == 8000);
  CHECK(parse_port("65535") == 65535);
  CHECK_FALSE(parse_port("65536"));
  CHECK_FALSE(parse_port("-1"));
  CHECK_FALSE(parse_port("80x"));
  CHECK_FALSE(parse_port(""));
}

TEST_CASE("a malformed CLOUD_STARTUP_TIMEOUT is refused naming the variable and value") {
  ::setenv("CLOUD_STARTUP_TIMEOUT", "soon", 1);
  const auto env = read_environment();
  ::unsetenv("CLOUD_STARTUP_TIMEOUT");
  REQUIRE_FALSE(env.value);
  CHECK(env.error.find("CLOUD_STARTUP_TIMEOUT=\"soon\" is malformed") == 0);
}

TEST_CASE("a malformed CLOUD_HTTP_PORT is refused naming the variable and value") {
  ::setenv("CLOUD_HTTP_PORT", "http", 1);
  const auto env = read_environment();
  ::unsetenv("CLOUD_HTTP_PORT");
  REQUIRE_FALSE(env.value);
  CHECK(env.error.find("CLOUD_HTTP_PORT=\"http\" is malformed") == 0);
}

TEST_CASE("defaults: 15s window, 127.0.0.1:8000") {
  ::unsetenv("CLOUD_STARTUP_TIMEOUT");
  ::unsetenv("CLOUD_HTTP_HOST");
  ::unsetenv("CLOUD_HTTP_PORT");
  const auto env = read_environment();
  REQUIRE(env.value);
  CHECK(env.value->startup_timeout == milliseconds{15000});
  CHECK(env.value->http_host == "127.0.0.1");
  CHECK(env.value->http_port == 8000);
}

TEST_CASE("command line: defaults derive from the executable's directory") {
  const auto opts = parse_command_line({}, "/opt/cloud/bin");
  REQUIRE(opts.value);
  CHECK(opts.value->manifest == "/opt/cloud/share/cloud/apps.json");
  CHECK(opts.value->plugin_dir == "/opt/cloud/lib/cloud/plugins");
  CHECK_FALSE(opts.value->check);
}

TEST_CASE("command line: flags and refusals") {
  const auto opts = parse_command_line({"--manifest", "/m.json", "--plugin-dir", "/p", "--check"}, "/x");
  REQUIRE(opts.value);
  CHECK(opts.value->manifest == "/m.json");
  CHECK(opts.value->plugin_dir == "/p");
  CHECK(opts.value->check);
  CHECK(parse_command_line({"--manifest"}, "/x").error == "--manifest needs a path; see --help");
  CHECK(parse_command_line({"--frobnicate"}, "/x").error == "unknown argument \"--frobnicate\"; see --help");
}
