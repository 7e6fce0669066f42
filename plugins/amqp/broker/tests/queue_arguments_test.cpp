#include <doctest/doctest.h>

#include <string>

#include "topology/queue_arguments.hpp"

using namespace amqp;

namespace {

constexpr auto hip = routing::name_rules::hip;

wire::field_table arguments(std::string name, wire::field_value value) {
  wire::field_table t;
  t.entries.push_back(wire::table_entry{std::move(name), std::move(value)});
  return t;
}

}  // namespace

TEST_CASE("x-single-active-consumer is a boolean kept with the queue, not refused") {
  const auto on = arguments("x-single-active-consumer", wire::field_value{true});
  CHECK_FALSE(broker::refused_queue_argument(on));
  routing::queue_def def;
  std::string refusal;
  REQUIRE(broker::read_queue_arguments(on, "q", "/", hip, def, refusal));
  CHECK(def.single_active_consumer);

  routing::queue_def off_def;
  REQUIRE(broker::read_queue_arguments(arguments("x-single-active-consumer", wire::field_value{false}), "q", "/", hip, off_def,
                                       refusal));
  CHECK_FALSE(off_def.single_active_consumer);

  routing::queue_def bad_def;
  CHECK_FALSE(broker::read_queue_arguments(arguments("x-single-active-consumer", wire::field_value{std::int32_t{1}}),
                                           "q", "/", hip, bad_def, refusal));
  CHECK(refusal.find("invalid arg 'x-single-active-consumer' for queue 'q'") == 0);
  CHECK(refusal.find("not a boolean") != std::string::npos);
}

TEST_CASE("x-max-length and x-overflow are kept with the queue, the byte limit stays refused, naming the remedy") {
  wire::field_table both = arguments("x-max-length", wire::field_value{std::int32_t{10}});
  both.entries.push_back(wire::table_entry{"x-overflow", wire::field_value{std::string("reject-publish")}});
  CHECK_FALSE(broker::refused_queue_argument(both));
  routing::queue_def def;
  std::string refusal;
  REQUIRE(broker::read_queue_arguments(both, "q", "/", hip, def, refusal));
  CHECK(def.max_length == 10u);
  CHECK(def.overflow == routing::overflow_mode::reject_publish);

  routing::queue_def bad;
  CHECK_FALSE(broker::read_queue_arguments(arguments("x-overflow", wire::field_value{std::string("drop-tail")}), "q",
                                           "/", hip, bad, refusal));
  CHECK(refusal.find("not 'drop-head', 'reject-publish' or 'reject-publish-dlx'") != std::string::npos);
  CHECK_FALSE(broker::read_queue_arguments(arguments("x-max-length", wire::field_value{std::int32_t{-1}}), "q", "/", hip, bad,
                                           refusal));
  CHECK(refusal.find("negative") != std::string::npos);

  auto refused = broker::refused_queue_argument(arguments("x-max-length-bytes", wire::field_value{std::int32_t{10}}));
  REQUIRE(refused);
  CHECK(refused->find("'x-max-length-bytes' is not implemented") != std::string::npos);
  CHECK(refused->find("x-max-length (a count)") != std::string::npos);
}

TEST_CASE("x-dead-letter-exchange is a name the naming mode accepts") {
  const auto dotted = arguments("x-dead-letter-exchange", wire::field_value{std::string("orders.dlx")});
  routing::queue_def def;
  std::string refusal;
  CHECK_FALSE(broker::read_queue_arguments(dotted, "q", "/", hip, def, refusal));
  CHECK(refusal.find("'orders.dlx' holds '.'") != std::string::npos);
  REQUIRE(broker::read_queue_arguments(dotted, "q", "/", routing::name_rules::escaped, def, refusal));
  CHECK(def.dead_letter->exchange == "orders.dlx");
  const auto headers = arguments("x-dead-letter-exchange", wire::field_value{std::string("amq.headers")});
  CHECK_FALSE(broker::read_queue_arguments(headers, "q", "/", routing::name_rules::escaped, def, refusal));
  CHECK(refusal.find("headers exchange") != std::string::npos);
}

TEST_CASE("x-queue-type: classic and quorum are kept with the queue, any other type is RabbitMQ's 406 invalid arg") {
  std::string refusal;
  for (auto type : {routing::queue_type::classic, routing::queue_type::quorum}) {
    routing::queue_def def;
    CHECK(broker::read_queue_arguments(arguments("x-queue-type", wire::field_value{std::string{routing::to_string(type)}}),
                                       "q", "/", hip, def, refusal));
    CHECK(def.declared_type == type);
  }
  routing::queue_def none;
  CHECK(broker::read_queue_arguments(wire::field_table{}, "q", "/", hip, none, refusal));
  CHECK_FALSE(none.declared_type);
  CHECK(none.type() == routing::queue_type::classic);
  for (auto bad : {wire::field_value{std::string{"lazy"}}, wire::field_value{std::int32_t{1}}}) {
    routing::queue_def def;
    CHECK_FALSE(broker::read_queue_arguments(arguments("x-queue-type", bad), "q", "/", hip, def, refusal));
    CHECK(refusal.find("invalid arg 'x-queue-type' for queue 'q' in vhost '/'") == 0);
  }
}

TEST_CASE("refused_by_queue_type: only a new quorum queue, in RabbitMQ 3.10's order") {
  const auto quorum = arguments("x-queue-type", wire::field_value{std::string{"quorum"}});
  CHECK_FALSE(broker::refused_by_queue_type(quorum, true, false, false, false, "q", "/"));
  // Not quorum: nothing here (a classic queue may be anything; an odd type is read_queue_arguments').
  for (const auto& other : {wire::field_table{}, arguments("x-queue-type", wire::field_value{std::string{"classic"}}),
                            arguments("x-queue-type", wire::field_value{std::int32_t{1}})})
    CHECK_FALSE(broker::refused_by_queue_type(other, false, true, true, true, "q", "/"));
  CHECK(broker::refused_by_queue_type(quorum, false, true, true, false, "q", "/v") ==
        "invalid property 'auto-delete' for queue 'q' in vhost '/v'");
  CHECK(broker::refused_by_queue_type(quorum, false, true, false, false, "q", "/") ==
        "invalid property 'exclusive-owner' for queue 'q' in vhost '/'");
  CHECK(broker::refused_by_queue_type(quorum, false, false, false, false, "q", "/") ==
        "invalid property 'non-durable' for queue 'q' in vhost '/'");
  auto priority = quorum;
  priority.entries.push_back({"x-max-priority", wire::field_value{std::int32_t{5}}});
  CHECK(broker::refused_by_queue_type(priority, false, true, true, false, "q", "/") ==
        "invalid arg 'x-max-priority' for queue 'q' in vhost '/' of queue type rabbit_quorum_queue");
  CHECK(broker::refused_by_queue_type(priority, true, false, false, true, "amq.gen-x", "/") ==
        "Cannot declare a server-named queue for type rabbit_quorum_queue");
}

TEST_CASE("x-delivery-limit -1 is RabbitMQ 4's no limit, another negative is 406 naming both choices") {
  routing::queue_def def;
  std::string refusal;
  REQUIRE(broker::read_queue_arguments(arguments("x-delivery-limit", wire::field_value{std::int32_t{-1}}), "q", "/", hip,
                                       def, refusal));
  CHECK(def.unlimited_deliveries);
  CHECK_FALSE(def.delivery_limit);
  routing::queue_def bad;
  CHECK_FALSE(broker::read_queue_arguments(arguments("x-delivery-limit", wire::field_value{std::int32_t{-2}}), "q", "/",
                                           hip, bad, refusal));
  CHECK(refusal.find("invalid arg 'x-delivery-limit' for queue 'q'") == 0);
  CHECK(refusal.find("or -1 for no limit") != std::string::npos);
}
