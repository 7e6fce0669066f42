#include <doctest/doctest.h>

#include "plugin_api/status.hpp"

using cloud::plugin_api::status;

TEST_CASE("status::ok is ok and carries no message") {
  const auto s = status::ok();
  CHECK(s.is_ok());
  CHECK(static_cast<bool>(s));
  CHECK(s.message().empty());
}

TEST_CASE("status::error carries its message") {
  const auto s = status::error("port 4222 is taken; set CLOUD_PUBSUB_PORT");
  CHECK_FALSE(s.is_ok());
  CHECK_FALSE(static_cast<bool>(s));
  CHECK(s.message() == "port 4222 is taken; set CLOUD_PUBSUB_PORT");
}
