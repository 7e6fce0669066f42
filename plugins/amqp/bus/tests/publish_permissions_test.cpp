// A user's publish permissions as the server reports and applies them, without a server.
#include <doctest/doctest.h>

#include "publish_permissions.hpp"

using namespace amqp::bus::detail;
using namespace std::chrono_literals;

TEST_CASE("permits: deny wins, a non-empty allow list must match, wildcards as NATS matches them") {
  const subject_permission none;
  CHECK(permits(none, "amqp.secret.k"));
  const subject_permission deny_only{{}, {"amqp.secret.>"}};
  CHECK_FALSE(permits(deny_only, "amqp.secret.k"));
  CHECK_FALSE(permits(deny_only, "amqp.secret.a.b"));
  CHECK(permits(deny_only, "amqp.secret"));  // `>` takes at least one token
  CHECK(permits(deny_only, "amqp.open.k"));
  const subject_permission allow_and_deny{{"amqp.*.k", "$JS.API.>"}, {"amqp.secret.*"}};
  CHECK(permits(allow_and_deny, "amqp.open.k"));
  CHECK_FALSE(permits(allow_and_deny, "amqp.open.other"));  // not allowed
  CHECK_FALSE(permits(allow_and_deny, "amqp.secret.k"));    // allowed, and denied
}

TEST_CASE("publish_permission_of: the publish side of a $SYS.REQ.USER.INFO answer") {
  const auto bob = publish_permission_of(
      R"({"server":{"name":"n"},"data":{"user":"bob","account":"AMQP","permissions":)"
      R"({"publish":{"allow":["amqp.>"],"deny":["amqp.secret.>"]},"subscribe":{"deny":["x"]}}}})");
  REQUIRE(bob);
  CHECK(bob->allow == std::vector<std::string>{"amqp.>"});
  CHECK(bob->deny == std::vector<std::string>{"amqp.secret.>"});
  // A user without permissions (or with subscribe ones only) may publish everything.
  const auto alice = publish_permission_of(R"({"data":{"user":"alice","account":"AMQP"}})");
  REQUIRE(alice);
  CHECK(alice->allow.empty());
  CHECK(alice->deny.empty());
  const auto refused = publish_permission_of(R"({"server":{},"error":{"code":400}})");
  REQUIRE_FALSE(refused);
  CHECK(refused.error().find("400") != std::string::npos);
  CHECK_FALSE(publish_permission_of("not json"));
}

TEST_CASE("publish_permissions: a refusal to say forgets what was said, a failure to say does not") {
  publish_permissions p;
  const publish_permissions::clock::time_point t0{};
  CHECK(p.judge("amqp.x.k").is == publish_permissions::verdict::unknown);
  p.learn({{}, {"amqp.secret.>"}}, t0);
  CHECK(p.judge("amqp.x.k").is == publish_permissions::verdict::allowed);
  CHECK(p.judge("amqp.secret.k").is == publish_permissions::verdict::denied);
  p.not_told("timeout", false, t0 + 1s);
  CHECK(p.judge("amqp.secret.k").is == publish_permissions::verdict::denied);
  p.not_told("refused", true, t0 + 2s);
  const auto judged = p.judge("amqp.x.k");
  CHECK(judged.is == publish_permissions::verdict::unknown);
  CHECK(judged.why_unknown == "refused");
}

TEST_CASE("publish_permissions: an answer is trusted for a while, then asked again") {
  publish_permissions p;
  const publish_permissions::clock::time_point t0{};
  p.learn({}, t0);
  CHECK_FALSE(p.stale(t0 + publish_permissions::trusted_for - 1ms));
  CHECK(p.stale(t0 + publish_permissions::trusted_for));
}
