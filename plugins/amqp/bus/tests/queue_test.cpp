// Queue consumers: exact filters updated in place, the server's stored config, the counts.
#include <doctest/doctest.h>

#include "nats_server.hpp"

using namespace amqp::bus;
using namespace amqp::bus::test;

TEST_CASE("ensure_queue_consumer: the server's config carries exactly the asked filters, updated in place") {
  nats_server server;
  auto c = client::open(options_for(server.url()));
  REQUIRE_MESSAGE(c.ok(), c.error().text);
  auto& bus = **c;

  auto made = bus.ensure_queue_consumer("jobs", {"amqp.d.jobs"});
  REQUIRE_MESSAGE(made.ok(), made.error().text);
  auto info = server.api("CONSUMER.INFO.AMQP.jobs");
  const auto& config = info["config"];
  const bool one_filter = config.value("filter_subject", std::string{}) == "amqp.d.jobs" ||
                          config.value("filter_subjects", nlohmann::json::array()) == nlohmann::json{"amqp.d.jobs"};
  CHECK(one_filter);
  CHECK(config["max_ack_pending"] == -1);
  CHECK(config["ack_policy"] == "explicit");
  // A queue's subject holds its own messages only: it starts at the first of them, whichever
  // replica picks the start (finding 10).
  CHECK(config["deliver_policy"] == "all");
  CHECK(config["ack_wait"] == 30'000'000'000LL);  // client_options' default
  CHECK(config["durable_name"] == "jobs");

  // Bind: more filters, on the same consumer (its creation time is unchanged).
  made = bus.ensure_queue_consumer("jobs", {"amqp.d.jobs", "amqp.t.a", "amqp.t.a.>"});
  REQUIRE_MESSAGE(made.ok(), made.error().text);
  auto widened = server.api("CONSUMER.INFO.AMQP.jobs");
  CHECK(widened["config"]["filter_subjects"] == nlohmann::json{"amqp.d.jobs", "amqp.t.a", "amqp.t.a.>"});
  CHECK(widened["created"] == info["created"]);
  CHECK(widened["config"]["deliver_policy"] == "all");

  // Unbind: back to one, in place again.
  made = bus.ensure_queue_consumer("jobs", {"amqp.d.jobs"});
  REQUIRE_MESSAGE(made.ok(), made.error().text);
  CHECK(server.api("CONSUMER.INFO.AMQP.jobs")["created"] == info["created"]);

  auto q = bus.queue_info("jobs");
  REQUIRE(q.ok());
  CHECK(q->num_pending == 0);
  CHECK(q->ready() == 0);

  // A consumer an earlier release made starts at "new", which the server does not let change:
  // it is updated in place and keeps it.
  auto earlier = info["config"];
  earlier["durable_name"] = "old";
  earlier["name"] = "old";
  earlier["deliver_policy"] = "new";
  earlier["filter_subjects"] = {"amqp.d.old", "amqp.t.old"};
  REQUIRE_FALSE(server.api("CONSUMER.DURABLE.CREATE.AMQP.old", {{"stream_name", "AMQP"}, {"config", earlier}})
                    .contains("error"));
  made = bus.ensure_queue_consumer("old", {"amqp._.old"});
  REQUIRE_MESSAGE(made.ok(), made.error().text);
  auto narrowed = server.api("CONSUMER.INFO.AMQP.old");
  CHECK(narrowed["config"]["deliver_policy"] == "new");
  CHECK(narrowed["config"]["filter_subjects"] == nlohmann::json{"amqp._.old"});
}

TEST_CASE("ensure_queue_consumer refuses what would be an unfiltered or misnamed consumer") {
  nats_server server;
  auto c = client::open(options_for(server.url()));
  REQUIRE_MESSAGE(c.ok(), c.error().text);
  auto none = (*c)->ensure_queue_consumer("jobs", {});
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().text.find("no filter subject") != std::string::npos);
  auto dotted = (*c)->ensure_queue_consumer("a.b", {"amqp.d.x"});
  REQUIRE_FALSE(dotted.ok());
  CHECK(dotted.error().text.find("one subject word") != std::string::npos);
  CHECK(server.api("CONSUMER.LIST.AMQP", nlohmann::json::object())["total"] == 2);  // the delayed consumers
}

TEST_CASE("ensure_queue_consumer: filters the server refuses leave no consumer behind") {
  nats_server server;
  auto c = client::open(options_for(server.url()));
  REQUIRE_MESSAGE(c.ok(), c.error().text);
  // Overlapping filters: JetStream refuses them (the caller normalizes; this one did not).
  auto overlapping = (*c)->ensure_queue_consumer("jobs", {"amqp.t.>", "amqp.t.a"});
  REQUIRE_FALSE(overlapping.ok());
  CHECK(server.api("CONSUMER.LIST.AMQP", nlohmann::json::object())["total"] == 2);  // the delayed consumers
}

TEST_CASE("delete_queue_consumer: absent is fine, queue_info of an absent queue is not_found") {
  nats_server server;
  auto c = client::open(options_for(server.url()));
  REQUIRE_MESSAGE(c.ok(), c.error().text);
  CHECK((*c)->delete_queue_consumer("nothing").ok());
  auto info = (*c)->queue_info("nothing");
  REQUIRE_FALSE(info.ok());
  CHECK(info.error().kind == bus_errc::not_found);
  REQUIRE((*c)->ensure_queue_consumer("q", {"amqp.d.q"}).ok());
  CHECK((*c)->delete_queue_consumer("q").ok());
  CHECK(server.api("CONSUMER.INFO.AMQP.q")["error"]["err_code"] == 10014);
}
