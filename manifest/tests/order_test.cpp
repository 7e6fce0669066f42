// Freezes the shipped manifest: amqp dials pubsub's URL at mount (HIP-1326, "Fail closed at
// boot"), so the amqp row must come after pubsub, and both must be eager (amqp owns a listener).
#include <doctest/doctest.h>

#include "manifest/manifest.hpp"

TEST_CASE("manifest/apps.json mounts pubsub, then amqp, both eager") {
  const auto result = cloud::manifest::load(CLOUD_MANIFEST_SOURCE, {});
  REQUIRE_MESSAGE(result, result.error);
  const auto& rows = result.value->rows;
  REQUIRE(rows.size() >= 2);
  CHECK(rows[0].name == "pubsub");
  CHECK(rows[0].eager);
  CHECK(rows[0].library == "libcloud_pubsub.so");
  std::size_t amqp = rows.size();
  for (const auto& r : rows) {
    if (r.name == "amqp") amqp = r.index;
  }
  REQUIRE(amqp < rows.size());
  CHECK(amqp > 0);
  CHECK(rows[amqp].eager);
  CHECK(rows[amqp].library == "libcloud_amqp.so");
  CHECK(rows[amqp].prefixes == std::vector<std::string>{"/v1/amqp"});
  CHECK(rows[amqp].requires_ == std::vector<std::string>{"pubsub"});
}
