// Queue consumers: exact filters, the server's stored config, purge.
#include <doctest/doctest.h>

#include "nats_server.hpp"

using namespace amqp::bus;
using namespace amqp::bus::test;

TEST_CASE("ensure_queue_consumer: the server's config carries exactly the asked filter") {
  nats_server server;
  auto c = client::open(options_for(server.url()));
  REQUIRE_MESSAGE(c.ok(), c.error().text);
  auto& bus = **c;
  REQUIRE_FALSE(bus.multi_filter());

  auto made = bus.ensure_queue_consumer("jobs", {{"amqp.d.jobs"}, "amqp.d.jobs"});
  REQUIRE_MESSAGE(made.ok(), made.error().text);
  auto info = server.api("CONSUMER.INFO.AMQP.jobs");
  CHECK(info["config"]["filter_subject"] == "amqp.d.jobs");
  CHECK_FALSE(info["config"].contains("filter_subjects"));
  CHECK(info["config"]["max_ack_pending"] == -1);
  CHECK(info["config"]["ack_policy"] == "explicit");
  CHECK(info["config"]["deliver_policy"] == "new");
  CHECK(info["config"]["ack_wait"] == 300'000'000'000LL);
  CHECK(info["config"]["durable_name"] == "jobs");

  // The same filters again: nothing to do, the consumer is untouched.
  made = bus.ensure_queue_consumer("jobs", {{"amqp.d.jobs"}, "amqp.d.jobs"});
  REQUIRE_MESSAGE(made.ok(), made.error().text);
  CHECK(server.api("CONSUMER.INFO.AMQP.jobs")["created"] == info["created"]);

  // Bind: the cover widens. nats-server 2.9 would accept an in-place filter update and then skip
  // matching messages on pull, so the durable is replaced, resuming where the old one stood.
  made = bus.ensure_queue_consumer("jobs", {{"amqp.d.jobs", "amqp.t.a.>", "amqp.t.a"}, "amqp.>"});
  REQUIRE_MESSAGE(made.ok(), made.error().text);
  auto widened = server.api("CONSUMER.INFO.AMQP.jobs");
  CHECK(widened["config"]["filter_subject"] == "amqp.>");
  CHECK(widened["config"]["deliver_policy"] == "by_start_sequence");
  CHECK(widened["config"]["opt_start_seq"] == 1);

  auto q = bus.queue_info("jobs");
  REQUIRE(q.ok());
  CHECK(q->num_pending == 0);
}

TEST_CASE("ensure_queue_consumer refuses what would be an unfiltered or misnamed consumer") {
  nats_server server;
  auto c = client::open(options_for(server.url()));
  REQUIRE_MESSAGE(c.ok(), c.error().text);
  auto none = (*c)->ensure_queue_consumer("jobs", {{}, ""});
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().text.find("no filter subject") != std::string::npos);
  auto dotted = (*c)->ensure_queue_consumer("a.b", {{"amqp.d.x"}, "amqp.d.x"});
  REQUIRE_FALSE(dotted.ok());
  CHECK(dotted.error().text.find("one subject word") != std::string::npos);
  CHECK(server.api("CONSUMER.LIST.AMQP", nlohmann::json::object())["total"] == 0);
}

TEST_CASE("delete_queue_consumer: absent is fine; queue_info of an absent queue is not_found") {
  nats_server server;
  auto c = client::open(options_for(server.url()));
  REQUIRE_MESSAGE(c.ok(), c.error().text);
  CHECK((*c)->delete_queue_consumer("nothing").ok());
  auto info = (*c)->queue_info("nothing");
  REQUIRE_FALSE(info.ok());
  CHECK(info.error().kind == bus_errc::not_found);
  REQUIRE((*c)->ensure_queue_consumer("q", {{"amqp.d.q"}, "amqp.d.q"}).ok());
  CHECK((*c)->delete_queue_consumer("q").ok());
  CHECK(server.api("CONSUMER.INFO.AMQP.q")["error"]["err_code"] == 10014);
}
