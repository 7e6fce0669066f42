// Which publishes the server refused, without a server: an injected clock.
#include <doctest/doctest.h>

#include "permission_denials.hpp"

using namespace amqp::bus::detail;
using namespace std::chrono_literals;

TEST_CASE("permission_denials: a refusal counts for requests sent before it, of its subject only") {
  permission_denials denials;
  const permission_denials::time_point t0{};
  denials.note("$JS.API.STREAM.INFO.AMQP", t0 + 10ms);
  CHECK(denials.since("$JS.API.STREAM.INFO.AMQP", t0));
  CHECK(denials.since("$JS.API.STREAM.INFO.AMQP", t0 + 10ms));
  CHECK_FALSE(denials.since("$JS.API.STREAM.INFO.AMQP", t0 + 11ms));  // sent after it: not this one's
  CHECK_FALSE(denials.since("$JS.API.STREAM.INFO.OTHER", t0));
}

TEST_CASE("permission_denials: only the latest are remembered") {
  permission_denials denials;
  const permission_denials::time_point t0{};
  denials.note("first", t0);
  for (std::size_t i = 0; i < permission_denials::remembered; ++i) denials.note("s" + std::to_string(i), t0 + 1ms);
  CHECK_FALSE(denials.since("first", t0));
  CHECK(denials.since("s0", t0));
}
