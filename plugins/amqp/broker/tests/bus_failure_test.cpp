#include <doctest/doctest.h>

#include "channel/bus_failure.hpp"

using amqp::bus::bus_errc;
using amqp::broker::bus_failure_reply;
using amqp::wire::reply_code;

TEST_CASE("a bus refusal of the user is 403 naming what was refused and the bus's reason") {
  const auto r = bus_failure_reply(bus_errc::denied, "basic.consume of queue 'vault'",
                                   "the bus does not let user 'bob' publish to $JS.API.CONSUMER.MSG.NEXT.AMQP.vault",
                                   "retry on a new channel");
  CHECK(r.code == reply_code::access_refused);
  CHECK(r.text == "basic.consume of queue 'vault': the bus does not let user 'bob' publish to "
                  "$JS.API.CONSUMER.MSG.NEXT.AMQP.vault");  // no remedy a retry could bring
}

TEST_CASE("a bus at a limit of its own is 406 with the bus's sentence alone, which names the limit and the remedy") {
  const auto r = bus_failure_reply(bus_errc::limit, "the bus did not complete the operation",
                                   "create consumer for queue q: the bus is at a consumer limit; raise it",
                                   "retry on a new channel");
  CHECK(r.code == reply_code::precondition_failed);
  CHECK(r.text == "create consumer for queue q: the bus is at a consumer limit; raise it");  // a retry fails the same way
}

TEST_CASE("every other bus failure is 541 with what did not happen, the cause and the remedy") {
  for (auto kind : {bus_errc::failed, bus_errc::timeout, bus_errc::not_found, bus_errc::conflict}) {
    const auto r = bus_failure_reply(kind, "the bus did not store the message", "no answer in 30000 ms",
                                     "publish it again");
    CHECK(r.code == reply_code::internal_error);
    CHECK(r.text == "the bus did not store the message (no answer in 30000 ms); publish it again");
  }
}
