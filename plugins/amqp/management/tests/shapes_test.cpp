// The JSON each resource answers with, in RabbitMQ 3.x's shapes.
#include <doctest/doctest.h>

#include "shapes.hpp"
#include "topology_fixture.hpp"

using namespace amqp;
using namespace amqp::management;
using json = nlohmann::json;
using testing::orders_topology;

namespace {

connection_view pika() {
  return {.id = 7,
          .name = "127.0.0.1:53452 -> 127.0.0.1:5672",
          .vhost = "/",
          .user = "guest",
          .peer_host = "127.0.0.1",
          .peer_port = 53452,
          .host = "127.0.0.1",
          .channels = 2,
          .state = "running",
          .client_product = "Pika Python Client Library",
          .client_version = "1.3.2"};
}

}  // namespace

TEST_CASE("shapes: a queue has the bus's counts, its declared arguments and the policy applied beside them") {
  const auto t = orders_topology();
  bus::queue_info info;
  info.num_pending = 5;
  info.num_ack_pending = 3;
  info.held_here = 2;  // the third unsettled one is another replica's: ready, as queue.declare counts it
  const auto q = queue_json("/", "cloud@host", t, "eu", &info, 1);
  CHECK(q["name"] == "eu");
  CHECK(q["vhost"] == "/");
  CHECK(q["durable"] == true);
  CHECK(q["arguments"] == json{{"x-message-ttl", 60000}, {"x-dead-letter-exchange", "dlx"}});
  CHECK((q["messages"] == 8 && q["messages_ready"] == 6 && q["messages_unacknowledged"] == 2));
  CHECK(q["consumers"] == 1);
  CHECK(q["policy"] == "limit");
  CHECK(q["effective_policy_definition"] == json{{"max-length", 5}});
  CHECK(q["state"] == "running");
  CHECK(q["type"] == "classic");
  const auto down = queue_json("/", "cloud@host", t, "eu", nullptr, 0);
  CHECK((down["state"] == "down" && down["messages"] == 0));
}

TEST_CASE("shapes: exchanges, bindings (the default exchange's implicit one first) and policies") {
  const auto t = orders_topology();
  const auto x = exchange_json("/", "orders", *t.find_exchange("orders"));
  CHECK(x == json{{"name", "orders"}, {"vhost", "/"}, {"type", "topic"}, {"durable", true}, {"auto_delete", false},
                  {"internal", false}, {"arguments", json::object()}, {"user_who_performed_action", "rmq-internal"}});
  const auto listed = exchanges_json("/", t);
  CHECK(only(listed, "name", "orders") == json::array({x}));
  const auto b = only(bindings_json("/", t), "destination", "eu");
  REQUIRE(b.size() == 2);
  CHECK((b[0]["source"] == "" && b[0]["destination"] == "eu" && b[0]["routing_key"] == "eu"));
  CHECK(b[1] == json{{"source", "orders"}, {"vhost", "/"}, {"destination", "eu"}, {"destination_type", "queue"},
                     {"routing_key", "eu.#"}, {"arguments", json::object()}, {"properties_key", "eu.%23"}});
  CHECK(binding_json("/", "x", "q", "")["properties_key"] == "~");
  const auto p = policy_json("/", "limit", *t.policies().at("limit"));
  CHECK((p["name"] == "limit" && p["vhost"] == "/" && p["pattern"] == "^eu$" && p["apply-to"] == "queues"));
  CHECK(p["definition"] == json{{"max-length", 5}});
  CHECK(policies_json("/", t) == json::array({p}));
  CHECK(only(b, "source", "orders").size() == 1);
  CHECK(only(b, "source", "nowhere").empty());
}

TEST_CASE("shapes: connections, channels and consumers name each other as RabbitMQ's do") {
  const auto c = pika();
  const auto conn = connection_json(c, "cloud@host");
  CHECK((conn["name"] == c.name && conn["node"] == "cloud@host" && conn["channels"] == 2 && conn["peer_port"] == 53452));
  CHECK((conn["protocol"] == "AMQP 0-9-1" && conn["state"] == "running"));
  CHECK(conn["client_properties"]["product"] == "Pika Python Client Library");
  const auto ch = channel_json(c, 3, 1, "cloud@host");
  CHECK((ch["name"] == c.name + " (3)" && ch["number"] == 3 && ch["consumer_count"] == 1));
  CHECK(ch["connection_details"]["name"] == c.name);
  broker::consumer_view consumer{"eu", "ctag-1", 7, 3, false, true, 2};
  const auto known = consumer_json(consumer, "/", &c, "cloud@host");
  CHECK((known["consumer_tag"] == "ctag-1" && known["prefetch_count"] == 2 && known["ack_required"] == true));
  CHECK(known["queue"] == json{{"name", "eu"}, {"vhost", "/"}});
  CHECK(known["channel_details"]["name"] == ch["name"]);
  CHECK(known["channel_details"]["connection_name"] == c.name);
  const auto gone = consumer_json(consumer, "/", nullptr, "cloud@host");
  CHECK(gone["channel_details"] == json{{"number", 3}, {"node", "cloud@host"}});
}

TEST_CASE("shapes: a vhost and the node") {
  CHECK(vhost_json("prod")["name"] == "prod");
  CHECK(vhost_json("prod")["default_queue_type"] == "classic");
  CHECK(node_json("cloud@host") == json{{"name", "cloud@host"}, {"running", true}, {"type", "disc"}, {"being_drained", false}});
}

TEST_CASE("shapes: message_stats sums the vhosts' counts, each rate over the last sample interval") {
  const auto t0 = std::chrono::steady_clock::now();
  broker::message_counts older, newer, now;
  older.received = 10;
  newer.received = 30;  // 20 in 4 s: 5 a second
  now.received = 40;
  newer.acknowledged = 2;
  now.acknowledged = 2;
  const std::pair<counter_sample, counter_sample> last_two{{t0, older}, {t0 + std::chrono::seconds(4), newer}};
  broker::message_counts unsampled;
  unsampled.received = 1;
  const auto stats = message_stats({{now, &last_two}, {unsampled, nullptr}});
  CHECK(stats["publish"] == 41);
  CHECK(stats["publish_details"]["rate"].get<double>() == doctest::Approx(5.0));
  CHECK(stats["ack"] == 2);
  CHECK(stats["ack_details"]["rate"].get<double>() == doctest::Approx(0.5));
  CHECK(stats["get_empty_details"] == json{{"rate", 0.0}});
  CHECK(stats.contains("deliver_get"));
}
