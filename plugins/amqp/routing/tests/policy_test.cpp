#include <doctest/doctest.h>

#include <string>

#include "amqp/routing/policy.hpp"
#include "amqp/routing/topology.hpp"

using namespace amqp::routing;

namespace {

policy parsed(const std::string& json) {
  auto p = parse_policy(json, name_rules::escaped);
  REQUIRE_MESSAGE(p, json);
  return *p;
}

std::string refusal(const std::string& json) {
  auto p = parse_policy(json, name_rules::escaped);
  REQUIRE_FALSE_MESSAGE(p, json);
  return p.error().text;
}

void put_policy(topology& t, const std::string& name, const std::string& json) {
  REQUIRE_FALSE(t.apply(policy_key(name), json));
}

}  // namespace

TEST_CASE("a policy is read as RabbitMQ's API gives it and written back the same") {
  auto p = parsed(R"({"pattern":"^orders\\.","apply-to":"queues","priority":3,
                      "definition":{"message-ttl":1000,"expires":60000,"max-length":5,"delivery-limit":2,
                                    "dead-letter-exchange":"dlx","dead-letter-routing-key":"dead","overflow":"reject-publish"}})");
  CHECK(p.pattern == "^orders\\.");
  CHECK(p.apply_to == policy_target::queues);
  CHECK(p.priority == 3);
  CHECK(p.message_ttl == 1000u);
  CHECK(p.expires == 60000u);
  CHECK(p.max_length == 5u);
  CHECK(p.delivery_limit == 2u);
  CHECK(p.dead_letter_exchange == "dlx");
  CHECK(p.dead_letter_routing_key == "dead");
  CHECK(p.overflow == overflow_mode::reject_publish);
  CHECK(parsed(encode_policy(p)) == p);
  // Defaults, and a priority a form sent as text.
  auto q = parsed(R"({"pattern":".*","definition":{"message-ttl":0},"priority":"7"})");
  CHECK(q.apply_to == policy_target::all);
  CHECK(q.priority == 7);
}

TEST_CASE("a policy RabbitMQ would refuse, or one setting what the adaptor lacks, is refused naming why") {
  CHECK(refusal(R"({"definition":{"expires":10}})") == "the policy has no pattern");
  CHECK(refusal(R"({"pattern":"^a"})") == "the policy has no definition");
  CHECK(refusal(R"({"pattern":"^a","definition":{}})") == "no policy provided");
  CHECK(refusal(R"({"pattern":"(","definition":{"expires":10}})").find("pattern should be regular expression") == 0);
  CHECK(refusal(R"({"pattern":"^a","definition":{"message-ttl":-1}})") == "-1 is not a valid message TTL");
  CHECK(refusal(R"({"pattern":"^a","definition":{"message-ttl":"1"}})") == "\"1\" is not a valid message TTL");
  CHECK(refusal(R"({"pattern":"^a","definition":{"expires":0}})") == "0 is not a valid queue expiry");
  CHECK(refusal(R"({"pattern":"^a","definition":{"max-length":1.5}})") == "1.5 is not a valid maximum length");
  CHECK(refusal(R"({"pattern":"^a","definition":{"delivery-limit":-1}})") == "-1 is not a valid delivery limit");
  CHECK(refusal(R"({"pattern":"^a","definition":{"overflow":"nope"}})").find("\"nope\" is not a valid overflow value") == 0);
  CHECK(refusal(R"({"pattern":"^a","apply-to":"quorum_queues","definition":{"expires":10}})") ==
        "apply-to \"quorum_queues\" unrecognised; should be 'queues', 'exchanges' or 'all'");
  CHECK(refusal(R"({"pattern":"^a","priority":"x","definition":{"expires":10}})") ==
        "priority should be a number, actually was \"x\"");
  CHECK(refusal(R"({"pattern":"^a","definition":{"foo":1}})") == "'foo' is not a recognised policy setting");
  const auto lazy = refusal(R"({"pattern":"^a","definition":{"queue-mode":"lazy"}})");
  CHECK(lazy.find("policy setting 'queue-mode' is not implemented: ") == 0);
  CHECK(refusal(R"({"pattern":"^a","definition":{"max-length-bytes":10}})").find("'max-length-bytes' is not implemented") != std::string::npos);
  auto dotted = parse_policy(R"({"pattern":"^a","definition":{"dead-letter-exchange":"a.b"}})", name_rules::hip);
  REQUIRE_FALSE(dotted);
  CHECK(dotted.error().text.find("dead-letter-exchange: ") == 0);
}

TEST_CASE("an argument wins over a policy, except that the smaller of two limits applies") {
  queue_def declared;
  declared.message_ttl = 500;
  declared.max_length = 10;
  declared.dead_letter = dead_letter_target{"declared-dlx", std::nullopt};
  auto p = parsed(R"({"pattern":".","definition":{"message-ttl":9000,"max-length":5,"expires":100,"overflow":"reject-publish",
                      "dead-letter-exchange":"policy-dlx","dead-letter-routing-key":"k"}})");
  auto q = with_policy(declared, p);
  CHECK(q.message_ttl == 500u);
  CHECK(q.max_length == 5u);
  CHECK(q.expires == 100u);
  CHECK(q.overflow == overflow_mode::reject_publish);
  REQUIRE(q.dead_letter);
  CHECK(q.dead_letter->exchange == "declared-dlx");
  CHECK(q.dead_letter->routing_key == "k");
  // A routing key with no exchange anywhere dead-letters nothing.
  auto only_key = parsed(R"({"pattern":".","definition":{"dead-letter-routing-key":"k"}})");
  CHECK_FALSE(with_policy(queue_def{}, only_key).dead_letter);
}

TEST_CASE("a stream queue takes nothing from a policy: its messages are its readers'") {
  queue_def stream;
  stream.declared_type = queue_type::stream;
  auto p = parsed(R"({"pattern":".","definition":{"message-ttl":9000,"max-length":5,"expires":100,
                      "dead-letter-exchange":"policy-dlx"}})");
  CHECK(with_policy(stream, p) == stream);
}

TEST_CASE("the mirror applies the highest-priority matching policy and keeps what was declared") {
  topology t;
  queue_def declared;
  declared.durable = true;
  declared.message_ttl = 500;
  t.put_queue("orders.eu", declared);
  t.put_queue("audit", queue_def{});
  CHECK(t.policy_of("orders.eu") == nullptr);
  CHECK_FALSE(t.has_length_limits());

  put_policy(t, "limit", R"({"pattern":"^orders\\.","definition":{"max-length":3}})");
  REQUIRE(t.policy_of("orders.eu"));
  CHECK(*t.policy_of("orders.eu") == "limit");
  CHECK(t.find_queue("orders.eu")->max_length == 3u);
  CHECK(t.find_queue("orders.eu")->message_ttl == 500u);
  CHECK_FALSE(t.find_declared("orders.eu")->max_length);
  CHECK(t.has_length_limits());
  CHECK(t.policy_of("audit") == nullptr);

  // Higher priority wins; exchanges-only policies never apply to queues.
  put_policy(t, "short", R"({"pattern":"eu$","priority":5,"definition":{"message-ttl":100}})");
  put_policy(t, "exchanges", R"({"pattern":".*","priority":9,"apply-to":"exchanges","definition":{"message-ttl":1}})");
  CHECK(*t.policy_of("orders.eu") == "short");
  CHECK(t.find_queue("orders.eu")->message_ttl == 100u);
  CHECK_FALSE(t.find_queue("orders.eu")->max_length);
  CHECK_FALSE(t.has_length_limits());

  // A queue declared later gets the policy; one redeclared keeps it.
  t.put_queue("orders.us", queue_def{});
  CHECK(*t.policy_of("orders.us") == "limit");
  t.put_queue("orders.eu", declared);
  CHECK(t.find_queue("orders.eu")->message_ttl == 100u);

  // Erasing the policies gives back what was declared.
  CHECK_FALSE(t.apply(policy_key("short"), std::nullopt));
  CHECK_FALSE(t.apply(policy_key("limit"), std::nullopt));
  CHECK(t.policy_of("orders.eu") == nullptr);
  CHECK(*t.find_queue("orders.eu") == declared);
  CHECK_FALSE(t.has_length_limits());
  // A queue erased leaves nothing of its policy behind.
  put_policy(t, "limit", R"({"pattern":"^orders\\.","definition":{"max-length":3}})");
  CHECK(t.erase_queue("orders.us"));
  CHECK(t.policy_of("orders.us") == nullptr);
  CHECK(t.find_declared("orders.us") == nullptr);
}

TEST_CASE("put_policy names exactly the queues whose features changed") {
  topology t;
  t.put_queue("a1", queue_def{});
  t.put_queue("b1", queue_def{});
  auto changed = t.put_policy("p", *compile(parsed(R"({"pattern":"^a","definition":{"expires":1000}})")));
  CHECK(changed == std::vector<std::string>{"a1"});
  CHECK(t.put_policy("p", *compile(parsed(R"({"pattern":"^a","definition":{"expires":1000}})"))).empty());
  CHECK(t.erase_policy("p") == std::vector<std::string>{"a1"});
  CHECK(t.erase_policy("p").empty());
}

TEST_CASE("a malformed policy in the bucket is reported and changes nothing") {
  topology t;
  t.put_queue("a", queue_def{});
  CHECK(t.apply(policy_key("bad"), std::string_view{R"({"pattern":"^a","definition":{"foo":1}})"}));
  CHECK(t.policies().empty());
  CHECK(t.policy_of("a") == nullptr);
}

TEST_CASE("a quorum queue that sets no delivery limit works with RabbitMQ 4's 20, an argument or a policy wins") {
  topology t;
  queue_def quorum;
  quorum.durable = true;
  quorum.declared_type = queue_type::quorum;
  t.put_queue("q.default", quorum);
  CHECK(t.find_queue("q.default")->delivery_limit == quorum_default_delivery_limit);
  CHECK(quorum_default_delivery_limit == 20u);
  // What it declared stays without one: a redeclaration is compared with that.
  CHECK_FALSE(t.find_declared("q.default")->delivery_limit);

  auto explicit_limit = quorum;
  explicit_limit.delivery_limit = 50;  // above the default: the argument still wins
  t.put_queue("q.explicit", explicit_limit);
  CHECK(t.find_queue("q.explicit")->delivery_limit == 50u);

  queue_def classic;
  classic.durable = true;
  t.put_queue("c.plain", classic);
  CHECK_FALSE(t.find_queue("c.plain")->delivery_limit);
  classic.declared_type = queue_type::classic;
  t.put_queue("c.named", classic);
  CHECK_FALSE(t.find_queue("c.named")->delivery_limit);

  // A policy's delivery-limit replaces the default, above it too; gone, the default is back.
  put_policy(t, "retries", R"({"pattern":"^q\\.","definition":{"delivery-limit":100}})");
  CHECK(t.find_queue("q.default")->delivery_limit == 100u);
  CHECK(t.find_queue("q.explicit")->delivery_limit == 50u);  // the smaller of the two
  CHECK_FALSE(t.find_declared("q.default")->delivery_limit);
  CHECK_FALSE(t.apply(policy_key("retries"), std::nullopt));
  CHECK(t.find_queue("q.default")->delivery_limit == quorum_default_delivery_limit);
  // A policy without a delivery limit leaves the default.
  put_policy(t, "ttl", R"({"pattern":"^q\\.","definition":{"message-ttl":1000}})");
  CHECK(t.find_queue("q.default")->delivery_limit == quorum_default_delivery_limit);
  CHECK(t.find_queue("q.default")->message_ttl == 1000u);
}

TEST_CASE("a quorum queue with x-delivery-limit -1 has no default limit, a policy's limit still applies") {
  topology t;
  queue_def unlimited;
  unlimited.durable = true;
  unlimited.declared_type = queue_type::quorum;
  unlimited.unlimited_deliveries = true;
  t.put_queue("q.unlimited", unlimited);
  CHECK_FALSE(t.find_queue("q.unlimited")->delivery_limit);
  put_policy(t, "retries", R"({"pattern":"^q\\.","definition":{"delivery-limit":7}})");
  CHECK(t.find_queue("q.unlimited")->delivery_limit == 7u);
}
