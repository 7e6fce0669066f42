#include <doctest/doctest.h>

#include <string>

#include "queue_arguments.hpp"

using namespace amqp;

namespace {

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
  REQUIRE(broker::read_queue_arguments(on, "q", def, refusal));
  CHECK(def.single_active_consumer);

  routing::queue_def off_def;
  REQUIRE(broker::read_queue_arguments(arguments("x-single-active-consumer", wire::field_value{false}), "q", off_def,
                                       refusal));
  CHECK_FALSE(off_def.single_active_consumer);

  routing::queue_def bad_def;
  CHECK_FALSE(broker::read_queue_arguments(arguments("x-single-active-consumer", wire::field_value{std::int32_t{1}}),
                                           "q", bad_def, refusal));
  CHECK(refusal.find("invalid arg 'x-single-active-consumer' for queue 'q'") == 0);
  CHECK(refusal.find("not a boolean") != std::string::npos);
}

TEST_CASE("the length limits stay refused, naming the remedy") {
  auto refused = broker::refused_queue_argument(arguments("x-max-length", wire::field_value{std::int32_t{10}}));
  REQUIRE(refused);
  CHECK(refused->find("'x-max-length' is not implemented") != std::string::npos);
}
