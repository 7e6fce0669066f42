// The requeue order's books, without a server: an injected clock.
#include <boost/asio/io_context.hpp>
#include <doctest/doctest.h>

#include "requeue_order.hpp"

using namespace amqp::bus::detail;
using namespace std::chrono_literals;

namespace {

struct fixture {
  boost::asio::io_context io;
  requeue_order order;
  requeue_order::clock::time_point t0{};
  int resumed = 0;
  requeue_order::resume_fn resume() {
    return {io.get_executor(), [this] { ++resumed; }};
  }
  void run(std::vector<requeue_order::resume_fn> released) {
    for (auto& [ex, fn] : released) fn();
  }
};

}  // namespace

TEST_CASE("requeue_order: a queue's pulls wait for all its NAKs, and no other queue's") {
  fixture f;
  CHECK_FALSE(f.order.hold_pulls("q", f.resume()));  // nothing unanswered: pull at once
  CHECK(f.order.nak_made(1, "q", "$JS.ACK.AMQP.q.1.1.1.0.0", f.t0));
  CHECK(f.order.nak_made(2, "q", "$JS.ACK.AMQP.q.1.2.2.0.0", f.t0));
  CHECK(f.order.any_unanswered());
  CHECK_FALSE(f.order.hold_pulls("other", f.resume()));
  CHECK(f.order.hold_pulls("q", f.resume()));
  f.run(f.order.answered(1));
  CHECK(f.resumed == 0);  // one still unanswered
  f.run(f.order.answered(2));
  CHECK(f.resumed == 1);
  CHECK_FALSE(f.order.any_unanswered());
  CHECK_FALSE(f.order.any_open());
  CHECK(f.order.answered(2).empty());  // answered twice: nothing more
}

TEST_CASE("requeue_order: a server that does not answer holds a queue's pulls for requeue_wait at most") {
  fixture f;
  f.order.nak_made(1, "q", "r1", f.t0);
  CHECK(f.order.hold_pulls("q", f.resume()));
  std::vector<requeue_order::held_nak> unheld;
  f.run(f.order.expire(f.t0 + requeue_order::requeue_wait - 1ms, unheld));
  CHECK(f.resumed == 0);
  f.run(f.order.expire(f.t0 + requeue_order::requeue_wait, unheld));
  CHECK(f.resumed == 1);
  CHECK(unheld.empty());
  CHECK_FALSE(f.order.any_unanswered());
  CHECK(f.order.answered(1).empty());  // a late answer finds nothing to lift
}

TEST_CASE("requeue_order: NAKs made while a puller drains are held in call order until its last drain ends") {
  fixture f;
  f.order.drain_started("q", f.t0);
  f.order.drain_started("q", f.t0);
  CHECK_FALSE(f.order.nak_made(1, "q", "r1", f.t0));
  CHECK_FALSE(f.order.nak_made(2, "q", "r2", f.t0));
  CHECK(f.order.nak_made(3, "other", "r3", f.t0));  // another queue's goes at once
  CHECK(f.order.hold_pulls("q", f.resume()));        // held NAKs hold the pulls too
  CHECK(f.order.drain_finished("q").empty());         // one drain still on
  const auto held = f.order.drain_finished("q");
  REQUIRE(held.size() == 2);
  CHECK(held[0] == requeue_order::held_nak{1, "r1"});
  CHECK(held[1] == requeue_order::held_nak{2, "r2"});
  CHECK(f.order.nak_made(4, "q", "r4", f.t0));  // no drain now
}

TEST_CASE("requeue_order: a drain that never ends holds its queue's NAKs for drain_wait at most") {
  fixture f;
  f.order.drain_started("q", f.t0);
  CHECK_FALSE(f.order.nak_made(1, "q", "r1", f.t0 + requeue_order::drain_wait - 1ms));
  std::vector<requeue_order::held_nak> unheld;
  f.order.expire(f.t0 + requeue_order::drain_wait - 1ms, unheld);
  CHECK(unheld.empty());
  f.order.expire(f.t0 + requeue_order::drain_wait, unheld);
  REQUIRE(unheld.size() == 1);
  CHECK(unheld[0].second == "r1");
  CHECK(f.order.nak_made(2, "q", "r2", f.t0 + requeue_order::drain_wait));  // the gate is gone
  CHECK(f.order.drain_finished("q").empty());  // the late end of the drain finds nothing held
}
