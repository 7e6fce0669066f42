// The topology bucket: revision-checked writes and the watch (replay first, then changes).
#include <boost/asio/io_context.hpp>
#include <doctest/doctest.h>

#include <atomic>
#include <map>
#include <thread>

#include "nats_server.hpp"

using namespace amqp::bus;
using namespace amqp::bus::test;
using namespace std::chrono_literals;

TEST_CASE("kv create/update/get/delete: conflicts and absence are distinguishable") {
  nats_server server;
  auto c = client::open(options_for(server.url()));
  REQUIRE_MESSAGE(c.ok(), c.error().text);
  auto& bus = **c;

  auto missing = bus.kv_get("q.none");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().kind == bus_errc::not_found);

  auto r1 = bus.kv_create("q.a", R"({"durable":true})");
  REQUIRE_MESSAGE(r1.ok(), r1.error().text);
  auto again = bus.kv_create("q.a", "{}");
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().kind == bus_errc::conflict);

  auto r2 = bus.kv_update("q.a", R"({"durable":false})", *r1);
  REQUIRE_MESSAGE(r2.ok(), r2.error().text);
  CHECK(*r2 > *r1);
  auto stale = bus.kv_update("q.a", "{}", *r1);  // someone else won: re-read, retry
  REQUIRE_FALSE(stale.ok());
  CHECK(stale.error().kind == bus_errc::conflict);
  CHECK(stale.error().js_code == 10071);

  auto got = bus.kv_get("q.a");
  REQUIRE_MESSAGE(got.ok(), got.error().text);
  CHECK(got->value == R"({"durable":false})");
  CHECK(got->revision == *r2);

  REQUIRE(bus.kv_delete("q.a").ok());
  auto gone = bus.kv_get("q.a");
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.error().kind == bus_errc::not_found);
  auto recreated = bus.kv_create("q.a", "{}");  // over the delete marker
  REQUIRE_MESSAGE(recreated.ok(), recreated.error().text);

  // kv_put writes whatever the key holds, absent or not.
  auto put = bus.kv_put("u.a", "1");
  REQUIRE_MESSAGE(put.ok(), put.error().text);
  auto overwritten = bus.kv_put("u.a", "2");
  REQUIRE_MESSAGE(overwritten.ok(), overwritten.error().text);
  CHECK(*overwritten > *put);
  CHECK(bus.kv_get("u.a")->value == "2");

  auto bad = bus.kv_get("q.has space");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().text.find("not a valid key") != std::string::npos);
}

TEST_CASE("watch: replay is synchronous, later changes arrive through the executor") {
  nats_server server;
  auto c = client::open(options_for(server.url()));
  REQUIRE_MESSAGE(c.ok(), c.error().text);
  auto& bus = **c;
  REQUIRE(bus.kv_create("x.logs", R"({"type":"fanout"})").ok());
  REQUIRE(bus.kv_create("q.jobs", R"({"bindings":[]})").ok());
  REQUIRE(bus.kv_delete("q.jobs").ok());  // replay of a deleted key: not delivered as a value

  boost::asio::io_context io;
  std::map<std::string, std::optional<std::string>> seen;
  std::thread::id caller = std::this_thread::get_id();
  bool replay_on_caller = true;
  int calls = 0;
  auto watch = bus.watch_topology(io.get_executor(), [&](std::string key, std::optional<std::string> value, std::uint64_t) {
    ++calls;
    replay_on_caller = replay_on_caller && std::this_thread::get_id() == caller;
    seen[key] = std::move(value);
  });
  REQUIRE_MESSAGE(watch.ok(), watch.error().text);
  // Before returning, the replay delivered what exists.
  CHECK(seen.at("x.logs") == std::optional<std::string>{R"({"type":"fanout"})"});
  CHECK((seen.count("q.jobs") == 0 || !seen.at("q.jobs").has_value()));
  CHECK(replay_on_caller);
  const int replayed = calls;

  REQUIRE(bus.kv_create("q.new", "v1").ok());
  REQUIRE(bus.kv_delete("x.logs").ok());
  const auto until = std::chrono::steady_clock::now() + 5s;
  while ((seen.count("q.new") == 0 || seen.at("x.logs").has_value()) && std::chrono::steady_clock::now() < until) {
    io.run_for(20ms);
    io.restart();
  }
  CHECK(seen.at("q.new") == std::optional<std::string>{"v1"});
  CHECK_FALSE(seen.at("x.logs").has_value());  // delete marker → nullopt
  CHECK(calls == replayed + 2);

  watch->stop();
  REQUIRE(bus.kv_create("q.after", "v").ok());
  io.run_for(300ms);
  CHECK(seen.count("q.after") == 0);  // nothing after stop
}

TEST_CASE("kv_snapshot: the live keys with their revisions, deleted keys absent") {
  nats_server server;
  auto c = client::open(options_for(server.url()));
  REQUIRE_MESSAGE(c.ok(), c.error().text);
  auto& bus = **c;
  auto empty = bus.kv_snapshot(std::chrono::steady_clock::now() + 5s);
  REQUIRE_MESSAGE(empty.ok(), empty.error().text);
  CHECK(empty->empty());

  auto logs = bus.kv_create("x.logs", R"({"type":"fanout"})");
  REQUIRE(logs.ok());
  REQUIRE(bus.kv_create("q.jobs", "v1").ok());
  REQUIRE(bus.kv_delete("q.jobs").ok());
  auto first = bus.kv_create("q.work", "v1");
  REQUIRE(first.ok());
  auto second = bus.kv_update("q.work", "v2", *first);
  REQUIRE(second.ok());

  auto snap = bus.kv_snapshot(std::chrono::steady_clock::now() + 5s);
  REQUIRE_MESSAGE(snap.ok(), snap.error().text);
  std::map<std::string, kv_entry> by_key;
  for (auto& e : *snap) by_key[e.key] = e.entry;
  REQUIRE(by_key.size() == 2);
  CHECK(by_key.at("x.logs").value == R"({"type":"fanout"})");
  CHECK(by_key.at("x.logs").revision == *logs);
  CHECK(by_key.at("q.work").value == "v2");
  CHECK(by_key.at("q.work").revision == *second);

  auto late = bus.kv_snapshot(std::chrono::steady_clock::now() - 1s);
  REQUIRE_FALSE(late.ok());
  CHECK(late.error().kind == bus_errc::timeout);
}

TEST_CASE("watch: stopped while the bucket changes under it (nothing leaks: LeakSanitizer checks at exit)") {
  nats_server server;
  auto c = client::open(options_for(server.url()));
  REQUIRE_MESSAGE(c.ok(), c.error().text);
  auto& bus = **c;
  std::atomic<bool> writing{true};
  std::thread writer([&] {
    for (int i = 0; writing; ++i) (void)bus.kv_create("q.churn" + std::to_string(i), "v");
  });
  boost::asio::io_context io;
  for (int round = 0; round < 40; ++round) {
    auto watch = bus.watch_topology(io.get_executor(), [](std::string, std::optional<std::string>, std::uint64_t) {});
    REQUIRE_MESSAGE(watch.ok(), watch.error().text);
    std::this_thread::sleep_for(std::chrono::milliseconds(3 * (round % 8)));
    watch->stop();
  }
  writing = false;
  writer.join();
  io.run_for(100ms);
}
