// The held deliveries' bookkeeping, without a server: counts, progress reports, and which
// queues a count must sync first.
#include <doctest/doctest.h>

#include <algorithm>
#include <thread>

#include "held_deliveries.hpp"

using namespace amqp::bus::detail;

namespace {

bool reported(const std::vector<std::string>& due, const std::string& reply) {
  return std::find(due.begin(), due.end(), reply) != due.end();
}

}  // namespace

TEST_CASE("held_deliveries: a delivery is reported within two periods of arriving, then every period, until settled") {
  held_deliveries held;
  held.add("q", "r1", 1);
  CHECK_FALSE(reported(held.due(), "r1"));  // arrived in this period
  CHECK(reported(held.due(), "r1"));
  CHECK(reported(held.due(), "r1"));
  held.settled("q", 1, "r1", /*sent=*/true);
  CHECK(held.due().empty());
}

TEST_CASE("held_deliveries: a NAK on its way stops the count at once and the reports once it is sent") {
  held_deliveries held;
  held.add("q", "r1", 1);
  held.add("q", "r2", 2);
  CHECK(held.count("q") == 2);
  held.due();
  held.settled("q", 1, "r1", /*sent=*/false);
  CHECK(held.count("q") == 1);
  CHECK(reported(held.due(), "r1"));  // still held back from its ack wait
  held.stop_reporting("r1");
  const auto due = held.due();
  CHECK_FALSE(reported(due, "r1"));
  CHECK(reported(due, "r2"));
  CHECK(held.count("other") == 0);
}

TEST_CASE("held_deliveries: a queue is synced once per settlement run, with its count at that instant") {
  held_deliveries held;
  std::uint64_t held_then = 99;
  CHECK_FALSE(held.take_unsynced("q", &held_then));  // nothing settled: no sync
  CHECK(held_then == 0);
  held.add("q", "r1", 1);
  held.add("q", "r2", 2);
  held.settled("q", 1, "r1", true);
  CHECK(held.take_unsynced("q", &held_then));
  CHECK(held_then == 1);
  CHECK_FALSE(held.take_unsynced("q", nullptr));  // synced: the next count needs none
  held.mark_unsynced("q");                         // a sync that failed asks again
  CHECK(held.take_unsynced("q", nullptr));
}

TEST_CASE("held_deliveries: adds and settlements from several threads keep the count exact") {
  held_deliveries held;
  constexpr int per_thread = 10'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const std::string reply = std::to_string(t) + "." + std::to_string(i);
        held.add("q", reply, static_cast<std::uint64_t>(t * per_thread + i + 1));
        if (i % 2 == 0) held.settled("q", static_cast<std::uint64_t>(t * per_thread + i + 1), reply, true);
      }
    });
  std::thread reporter([&] {
    for (int i = 0; i < 1000; ++i) (void)held.due();
  });
  for (auto& th : threads) th.join();
  reporter.join();
  CHECK(held.count("q") == 4 * per_thread / 2);
}

TEST_CASE("held_deliveries: a count is of the sequences held, and settling one not held changes nothing") {
  held_deliveries held;
  held.add("q", "r3", 3);
  held.add("q", "r1", 1);
  held.add("other", "o1", 1);
  held.settled("q", 1, "r1", /*sent=*/false);  // a NAK on its way: no longer held
  CHECK(held.count("q") == 1);
  held.settled("q", 1, "r1", true);  // settled again
  held.settled("q", 7, "r7", true);  // never held here
  CHECK(held.count("q") == 1);
  held.settled("q", 3, "r3", true);
  CHECK(held.count("q") == 0);
  CHECK(held.count("other") == 1);
}
