// Publish → pull → settle, against the real server, with interest retention.
#include <boost/asio/io_context.hpp>
#include <doctest/doctest.h>

#include <deque>
#include <set>
#include <thread>

#include "nats_server.hpp"

using namespace amqp::bus;
using namespace amqp::bus::test;
using namespace std::chrono_literals;

namespace {

struct harness {
  nats_server server;
  std::shared_ptr<client> bus;
  boost::asio::io_context io;

  explicit harness(std::size_t max_in_flight = 4096) {
    auto o = options_for(server.url());
    o.max_publish_in_flight = max_in_flight;
    auto c = client::open(o);
    REQUIRE_MESSAGE(c.ok(), c.error().text);
    bus = *c;
  }
  ~harness() { bus->close(); }

  // Runs the io_context until `done()` or the timeout.
  template <class Pred>
  bool run_until(Pred done, std::chrono::milliseconds timeout = 5s) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!done() && std::chrono::steady_clock::now() < until) {
      io.run_for(10ms);
      io.restart();
    }
    return done();
  }

  bus_status publish_one(const std::string& subject, const std::string& props, const std::string& body) {
    std::optional<bus_status> result;
    bus->publish(subject, props.empty() ? "" : base64_encode(props), body, io.get_executor(),
                 [&](bus_status s) { result = std::move(s); });
    REQUIRE(run_until([&] { return result.has_value(); }));
    return *result;
  }

  std::uint64_t stream_messages() { return server.api("STREAM.INFO.AMQP")["state"]["messages"].get<std::uint64_t>(); }
};

struct collector {
  std::deque<delivery> deliveries;
  std::deque<pull_event> events;
  std::shared_ptr<puller> p;
  collector(harness& h, const std::string& queue) {
    p = h.bus->make_puller(queue, h.io.get_executor(), [this](delivery d) { deliveries.push_back(std::move(d)); },
                           [this](pull_event e) { events.push_back(std::move(e)); });
  }
};

}  // namespace

TEST_CASE("publish → pull → ack round trip keeps body and properties; the acked message leaves") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("jobs", {{"amqp.d.jobs"}, "amqp.d.jobs"}).ok());
  const std::string props{"\x90\x00\x0atext/plain\x02", 14};
  auto published = h.publish_one("amqp.d.jobs", props, "hello");
  REQUIRE_MESSAGE(published.ok(), published.error().text);
  CHECK(h.stream_messages() == 1);

  collector col(h, "jobs");
  col.p->request(10, 2s);
  REQUIRE(h.run_until([&] { return !col.deliveries.empty(); }));
  const delivery d = col.deliveries.front();
  CHECK(d.subject == "amqp.d.jobs");
  CHECK(d.body == "hello");
  CHECK(d.amqp_props == props);
  CHECK(d.delivered == 1);
  CHECK(d.stream_seq == 1);
  CHECK(d.pending == 0);

  h.bus->ack(d.reply);
  REQUIRE(h.run_until([&] { return h.stream_messages() == 0; }));  // interest retention
  auto info = h.bus->queue_info("jobs");
  REQUIRE(info.ok());
  CHECK(info->num_ack_pending == 0);
  col.p->stop();
}

TEST_CASE("nak redelivers with delivered = 2; term removes") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("work", {{"amqp.d.work"}, "amqp.d.work"}).ok());
  REQUIRE(h.publish_one("amqp.d.work", "", "task").ok());
  collector col(h, "work");
  col.p->request(1, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 1; }));
  CHECK(col.deliveries[0].amqp_props.empty());
  h.bus->nak(col.deliveries[0].reply);
  col.p->request(1, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 2; }));
  CHECK(col.deliveries[1].delivered == 2);
  CHECK(col.deliveries[1].stream_seq == col.deliveries[0].stream_seq);
  CHECK(col.deliveries[1].body == "task");

  h.bus->term(col.deliveries[1].reply);
  REQUIRE(h.run_until([&] { return h.stream_messages() == 0; }));
  col.p->request(1, 300ms);
  REQUIRE(h.run_until([&] { return !col.events.empty(); }));
  CHECK(col.events.front().status == pull_status::request_expired);
  CHECK(col.events.front().code == 408);
  CHECK(col.deliveries.size() == 2);
}

// nats-server applies NAKs and pull requests from separate queues; the client holds a queue's
// pull until its NAKs are answered, so a requeued message is never overtaken by a later one.
TEST_CASE("a pull right after a nak gets the requeued message first, every time") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("order", {{"amqp.d.order"}, "amqp.d.order"}).ok());
  for (int i = 1; i <= 5; ++i) REQUIRE(h.publish_one("amqp.d.order", "", "m" + std::to_string(i)).ok());
  collector col(h, "order");
  col.p->request(1, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 1; }));
  constexpr std::size_t rounds = 50;
  for (std::size_t round = 1; round <= rounds; ++round) {
    h.bus->nak(col.deliveries.back().reply);
    col.p->request(1, 2s);  // sent at once after the nak: the client must hold it back
    REQUIRE(h.run_until([&] { return col.deliveries.size() == round + 1; }));
    CHECK(col.deliveries.back().body == "m1");
    CHECK(col.deliveries.back().delivered == round + 1);
  }
  CHECK(col.events.empty());
  col.p->stop();
}

TEST_CASE("no_wait pull on an empty queue answers 404 no messages") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("empty", {{"amqp.d.empty"}, "amqp.d.empty"}).ok());
  collector col(h, "empty");
  col.p->request(1, 0ms);
  REQUIRE(h.run_until([&] { return !col.events.empty(); }));
  CHECK(col.events.front().status == pull_status::no_messages);
}

TEST_CASE("a queue deleted under a waiting pull reports the consumer gone (409)") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("doomed", {{"amqp.d.doomed"}, "amqp.d.doomed"}).ok());
  collector col(h, "doomed");
  col.p->request(1, 5s);
  h.run_until([] { return false; }, 300ms);  // the request waits on the server
  REQUIRE(h.bus->delete_queue_consumer("doomed").ok());
  REQUIRE(h.run_until([&] { return !col.events.empty(); }));
  CHECK(col.events.front().status == pull_status::consumer_gone);
  CHECK(col.events.front().code == 409);
}

TEST_CASE("interest retention: a message published while no queue holds it is not kept") {
  harness h;
  auto r = h.publish_one("amqp.d.nobody", "", "lost");
  REQUIRE_MESSAGE(r.ok(), r.error().text);  // the bus stored it, then dropped it: nobody is interested
  CHECK(h.stream_messages() == 0);
  REQUIRE(h.bus->ensure_queue_consumer("late", {{"amqp.d.nobody"}, "amqp.d.nobody"}).ok());
  auto info = h.bus->queue_info("late");
  REQUIRE(info.ok());
  CHECK(info->num_pending == 0);
}

TEST_CASE("a publish no stream stores is refused through done") {
  harness h;
  auto r = h.publish_one("elsewhere.x", "", "body");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().text.find("no JetStream stream stores this subject") != std::string::npos);
}

TEST_CASE("1,000 pipelined publishes all complete, beyond the in-flight bound") {
  harness h{64};
  REQUIRE(h.bus->ensure_queue_consumer("bulk", {{"amqp.d.bulk"}, "amqp.d.bulk"}).ok());
  int ok = 0;
  int failed = 0;
  std::vector<int> order;
  for (int i = 0; i < 1000; ++i)
    h.bus->publish("amqp.d.bulk", "", std::to_string(i), h.io.get_executor(), [&, i](bus_status s) {
      (s.ok() ? ok : failed) += 1;
      order.push_back(i);
    });
  CHECK(h.bus->publish_backlog() > 0);
  REQUIRE(h.run_until([&] { return ok + failed == 1000; }, 20s));
  CHECK(ok == 1000);
  CHECK(h.bus->publish_backlog() == 0);
  auto info = h.bus->queue_info("bulk");
  REQUIRE(info.ok());
  CHECK(info->num_pending == 1000);
  // Stored in publish order.
  collector col(h, "bulk");
  col.p->request(1000, 5s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 1000; }, 20s));
  bool in_order = true;
  for (std::size_t i = 0; i < col.deliveries.size(); ++i) in_order = in_order && col.deliveries[i].body == std::to_string(i);
  CHECK(in_order);
}

TEST_CASE("purge_queue drops only that queue's pending messages") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("a", {{"amqp.f.>", "amqp.f"}, "amqp.f.>"}).ok());
  REQUIRE(h.bus->ensure_queue_consumer("b", {{"amqp.f.>", "amqp.f"}, "amqp.f.>"}).ok());
  for (int i = 0; i < 3; ++i) REQUIRE(h.publish_one("amqp.f.x", "", "m").ok());
  auto purged = h.bus->purge_queue("a", {{"amqp.f.>", "amqp.f"}, "amqp.f.>"});
  REQUIRE_MESSAGE(purged.ok(), purged.error().text);
  CHECK(*purged == 3);
  CHECK(h.bus->queue_info("a")->num_pending == 0);
  CHECK(h.bus->queue_info("b")->num_pending == 3);
  CHECK(h.stream_messages() == 3);
}

TEST_CASE("after stop, a puller's callbacks never run and its late messages go back") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("s", {{"amqp.d.s"}, "amqp.d.s"}).ok());
  collector col(h, "s");
  col.p->request(1, 3s);
  h.run_until([] { return false; }, 200ms);  // the request reaches the server
  col.p->stop();
  REQUIRE(h.publish_one("amqp.d.s", "", "late").ok());
  h.run_until([] { return false; }, 500ms);
  CHECK(col.deliveries.empty());
  // Nak'd back at once, so another puller gets it now, not after the five-minute ack wait.
  collector other(h, "s");
  other.p->request(1, 2s);
  REQUIRE(h.run_until([&] { return !other.deliveries.empty(); }));
  CHECK(other.deliveries.front().body == "late");
}

TEST_CASE("run_blocking runs work off the caller and posts the result back") {
  harness h;
  std::optional<bus_result<queue_info>> got;
  std::thread::id worker;
  h.bus->run_blocking(
      h.io.get_executor(),
      [&] {
        worker = std::this_thread::get_id();
        return h.bus->queue_info("missing");
      },
      [&](bus_result<queue_info> r) { got = std::move(r); });
  REQUIRE(h.run_until([&] { return got.has_value(); }));
  CHECK(worker != std::this_thread::get_id());
  CHECK(got->error().kind == bus_errc::not_found);
}

TEST_CASE("close fails nothing silently: later publishes are refused through done") {
  harness h;
  h.bus->close();
  h.bus->close();  // idempotent
  std::optional<bus_status> r;
  h.bus->publish("amqp.d.x", "", "b", h.io.get_executor(), [&](bus_status s) { r = std::move(s); });
  REQUIRE(h.run_until([&] { return r.has_value(); }));
  CHECK_FALSE(r->ok());
}

namespace {

// Publishes `bodies` to amqp.d.<queue>, pulls `pulled` of them and acks `acked` of those.
void fill_and_leave_unacked(harness& h, const std::string& queue, int bodies, std::size_t pulled, std::size_t acked) {
  for (int i = 0; i < bodies; ++i) REQUIRE(h.publish_one("amqp.d." + queue, "", "m" + std::to_string(i)).ok());
  collector col(h, queue);
  col.p->request(static_cast<int>(pulled), 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == pulled; }));
  for (std::size_t i = 0; i < acked; ++i) h.bus->ack(col.deliveries[i].reply);
  REQUIRE(h.run_until([&] { return h.bus->queue_info(queue)->num_ack_pending == pulled - acked; }));
  col.p->stop();
}

// Pulls until `count` distinct bodies arrived (or the timeout); returns them.
std::set<std::string> pull_bodies(harness& h, const std::string& queue, std::size_t count) {
  collector col(h, queue);
  std::set<std::string> bodies;
  col.p->request(static_cast<int>(count) + 1, 3s);
  h.run_until([&] {
    for (auto& d : col.deliveries) bodies.insert(d.body);
    return bodies.size() >= count;
  });
  col.p->stop();
  return bodies;
}

}  // namespace

// Interest retention drops what only a deleted consumer owed: a replacement must never pass
// through a moment where no consumer holds the queue's messages.
TEST_CASE("a changed filter replaces the consumer without dropping a message it still owed") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("jobs", {{"amqp.d.jobs"}, "amqp.d.jobs"}).ok());
  fill_and_leave_unacked(h, "jobs", 5, 2, 1);  // m0 acked, m1 unacked, m2..m4 pending
  REQUIRE(h.stream_messages() == 4);

  auto widened = h.bus->ensure_queue_consumer("jobs", {{"amqp.d.jobs", "amqp.t.a"}, "amqp.>"});
  REQUIRE_MESSAGE(widened.ok(), widened.error().text);
  CHECK(h.stream_messages() == 4);
  CHECK(h.server.api("CONSUMER.NAMES.AMQP", nlohmann::json::object())["consumers"] == nlohmann::json{"jobs"});
  CHECK(pull_bodies(h, "jobs", 4) == std::set<std::string>{"m1", "m2", "m3", "m4"});
}

TEST_CASE("reclaim at open: unacked deliveries of a dead process come back at once, nothing dropped") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("jobs", {{"amqp.d.jobs"}, "amqp.d.jobs"}).ok());
  fill_and_leave_unacked(h, "jobs", 6, 4, 2);  // m0 m1 acked, m2 m3 unacked, m4 m5 pending

  auto o = options_for(h.server.url());
  o.reclaim_unacked = true;
  auto reopened = client::open(o);
  REQUIRE_MESSAGE(reopened.ok(), reopened.error().text);
  CHECK(h.stream_messages() == 4);
  CHECK((*reopened)->queue_info("jobs")->num_ack_pending == 0);
  CHECK(pull_bodies(h, "jobs", 4) == std::set<std::string>{"m2", "m3", "m4", "m5"});
  (*reopened)->close();
}

TEST_CASE("reclaim at open finishes a replacement a crash interrupted (only the holding consumer left)") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("jobs", {{"amqp.d.jobs"}, "amqp.d.jobs"}).ok());
  for (int i = 0; i < 3; ++i) REQUIRE(h.publish_one("amqp.d.jobs", "", "m" + std::to_string(i)).ok());
  auto config = h.server.api("CONSUMER.INFO.AMQP.jobs")["config"];
  config["durable_name"] = "jobs~hold";
  config["deliver_policy"] = "by_start_sequence";
  config["opt_start_seq"] = 1;
  REQUIRE_FALSE(h.server.api("CONSUMER.DURABLE.CREATE.AMQP.jobs~hold", {{"stream_name", "AMQP"}, {"config", config}})
                    .contains("error"));
  REQUIRE(h.server.api("CONSUMER.DELETE.AMQP.jobs")["success"] == true);  // the crash point
  REQUIRE(h.stream_messages() == 3);

  auto o = options_for(h.server.url());
  o.reclaim_unacked = true;
  auto reopened = client::open(o);
  REQUIRE_MESSAGE(reopened.ok(), reopened.error().text);
  CHECK(h.server.api("CONSUMER.NAMES.AMQP", nlohmann::json::object())["consumers"] == nlohmann::json{"jobs"});
  CHECK(pull_bodies(h, "jobs", 3) == std::set<std::string>{"m0", "m1", "m2"});
  (*reopened)->close();
}
