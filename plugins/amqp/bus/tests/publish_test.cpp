// Publish → pull → settle, against the real server, with interest retention.
#include <boost/asio/io_context.hpp>
#include <doctest/doctest.h>

#include <atomic>
#include <deque>
#include <initializer_list>
#include <limits>
#include <set>
#include <thread>

#include "bus_harness.hpp"

using namespace amqp::bus;
using namespace amqp::bus::test;
using namespace std::chrono_literals;

namespace {

struct harness : bus_harness {
  explicit harness(std::size_t max_in_flight = 4096, std::chrono::seconds ack_wait = client_options{}.ack_wait)
      : bus_harness([=](client_options& o) {
          o.max_publish_in_flight = max_in_flight;
          o.ack_wait = ack_wait;
        }) {}

  bus_status publish_one(const std::string& subject, const std::string& props, const std::string& body) {
    std::optional<bus_status> result;
    bus->publish(subject, props.empty() ? "" : base64_encode(props), body, {}, io.get_executor(),
                 [&](bus_status s) { result = std::move(s); });
    REQUIRE(run_until([&] { return result.has_value(); }));
    return *result;
  }

  std::uint64_t stream_messages() { return server.api("STREAM.INFO.AMQP")["state"]["messages"].get<std::uint64_t>(); }
  // The consumer has nothing left to deliver and nothing unacked (limits retention keeps the
  // messages themselves until purged).
  bool settled(const std::string& consumer) {
    auto info = server.api("CONSUMER.INFO.AMQP." + consumer);
    return info.value("num_pending", 1) == 0 && info.value("num_ack_pending", 1) == 0;
  }
};

// A puller whose callbacks record what they get. The callbacks hold the state shared, not the
// collector: a puller outlives its owner until its inbox is drained.
struct collector {
  struct seen {
    std::deque<delivery> deliveries;
    std::deque<pull_event> events;
    bool stopped = false;
    bool delivered_after_stop = false;
  };
  std::shared_ptr<seen> state = std::make_shared<seen>();
  std::deque<delivery>& deliveries = state->deliveries;
  std::deque<pull_event>& events = state->events;
  std::shared_ptr<puller> p;
  collector(harness& h, const std::string& queue, queue_sharing sharing = queue_sharing::all_consumers,
            int priority = lowest_consumer_priority)
      : collector(*h.bus, h.io, queue, sharing, priority) {}
  collector(client& bus, boost::asio::io_context& io, const std::string& queue,
            queue_sharing sharing = queue_sharing::all_consumers, int priority = lowest_consumer_priority) {
    puller_callbacks cb;
    cb.on_delivery = [s = state](delivery d) {
      s->delivered_after_stop = s->delivered_after_stop || s->stopped;
      s->deliveries.push_back(std::move(d));
    };
    cb.on_event = [s = state](pull_event e) { s->events.push_back(std::move(e)); };
    cb.on_stopped = [s = state] { s->stopped = true; };
    p = bus.make_puller(queue, io.get_executor(), std::move(cb), sharing, priority);
  }
  bool stopped() const { return state->stopped; }
  std::vector<std::string> bodies() const {
    std::vector<std::string> out;
    for (const auto& d : deliveries) out.push_back(d.body);
    return out;
  }
};

// Until the server lists `n` waiting requests of `queue`: the order it got them in is then settled.
bool waiting_requests(harness& h, const std::string& queue, std::uint64_t n) {
  return h.run_until([&] { return h.server.api("CONSUMER.INFO.AMQP." + queue)["num_waiting"] == n; });
}

// Acks what each collector got, then stops it and waits until it has.
void ack_and_stop(harness& h, std::initializer_list<collector*> collectors) {
  for (auto* c : collectors) {
    for (const auto& d : c->deliveries) h.bus->ack(d.reply);
    c->p->stop();
    REQUIRE(h.run_until([&] { return c->stopped(); }));
  }
}

// What one basic.get-style pull found.
struct got {
  std::optional<delivery> message;
  pull_event empty;
};

// One no-wait pull of one message, run to its answer.
got get_one(harness& h, const std::string& queue) {
  collector col(h, queue);
  col.p->request(1, 0ms);
  REQUIRE(h.run_until([&] { return !col.deliveries.empty() || !col.events.empty(); }));
  got g;
  if (!col.deliveries.empty()) g.message = col.deliveries.front();
  if (!col.events.empty()) g.empty = col.events.front();
  CHECK(col.p->asked() == 0);
  col.p->stop();
  return g;
}

}  // namespace

TEST_CASE("publish → pull → ack round trip keeps body and properties, the acked message leaves") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("jobs", {"amqp.d.jobs"}).ok());
  const std::string props{"\x90\x00\x0atext/plain\x02", 14};
  auto published = h.publish_one("amqp.d.jobs", props, "hello");
  REQUIRE_MESSAGE(published.ok(), published.error().text);
  CHECK(h.stream_messages() == 1);

  collector col(h, "jobs");
  col.p->request(10, 2s);
  CHECK(col.p->asked() == 10);
  REQUIRE(h.run_until([&] { return !col.deliveries.empty(); }));
  CHECK(col.p->asked() == 9);
  const delivery d = col.deliveries.front();
  CHECK(d.subject == "amqp.d.jobs");
  CHECK(d.body == "hello");
  CHECK(d.amqp_props == props);
  CHECK(d.delivered == 1);
  CHECK(d.stream_seq == 1);
  CHECK(d.pending == 0);

  const auto before_ack = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch()).count();
  h.bus->ack(d.reply);
  REQUIRE(h.run_until([&] { return h.settled("jobs"); }));
  auto info = h.bus->queue_info("jobs");
  REQUIRE(info.ok());
  CHECK(info->num_ack_pending == 0);
  // The ack is the consumer's last activity, by the server's clock (which is this machine's).
  CHECK(info->last_active_ms + 1000 >= static_cast<std::uint64_t>(before_ack));
  CHECK(info->last_active_ms <= static_cast<std::uint64_t>(before_ack) + 5000);
  // The request ends at its expiry, reporting what it did not bring.
  REQUIRE(h.run_until([&] { return !col.events.empty(); }, 5s));
  CHECK(col.events.front().status == pull_status::request_expired);
  CHECK(col.events.front().unfilled == 9);
  CHECK(col.p->asked() == 0);
  col.p->stop();
}

TEST_CASE("a delayed publish is stored as a schedule now and on its due subject when due, the schedule then gone") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("later", {"amqp._.later"}).ok());
  const std::string props{"\x90\x00\x0atext/plain\x02", 14};
  std::optional<bus_status> stored;
  const auto due = std::chrono::system_clock::now() + 1200ms;
  const std::string due_subject = std::string{due_subject_root} + ".dx.k";
  h.bus->publish_delayed(due_subject, std::string{delayed_subject_root} + ".dx", due, base64_encode(props), "hello",
                         h.io.get_executor(), [&](bus_status s) { stored = std::move(s); });
  REQUIRE(h.run_until([&] { return stored.has_value(); }));
  REQUIRE_MESSAGE(stored->ok(), stored->error().text);
  // Kept by the delayed holder; nothing due yet.
  CHECK(h.stream_messages() == 1);

  collector router(h, due_consumer);
  router.p->request(1, 10s);
  REQUIRE(h.run_until([&] { return !router.deliveries.empty(); }, 10s));
  CHECK(std::chrono::system_clock::now() >= due);
  const delivery d = router.deliveries.front();
  CHECK(d.subject == due_subject);
  CHECK(d.body == "hello");
  CHECK(d.amqp_props == props);
  // The router's copy, sent twice (a retry after a crash): stored once.
  const std::string copy_id = "due." + std::to_string(d.stream_seq) + ".later";
  for (int i = 0; i < 2; ++i) {
    std::optional<bus_status> copied;
    h.bus->publish_identified("amqp._.later", copy_id, base64_encode(props), "hello", "amqp.dx.k",
                              h.io.get_executor(), [&](bus_status s) { copied = std::move(s); });
    REQUIRE(h.run_until([&] { return copied.has_value(); }));
    REQUIRE_MESSAGE(copied->ok(), copied->error().text);
  }
  h.bus->ack(d.reply);
  router.p->stop();
  auto later = h.bus->queue_info("later");
  REQUIRE(later.ok());
  CHECK(later->ready() == 1);

  collector col(h, "later");
  col.p->request(1, 2s);
  REQUIRE(h.run_until([&] { return !col.deliveries.empty(); }));
  CHECK(col.deliveries.front().routed_as == "amqp.dx.k");
  h.bus->ack(col.deliveries.front().reply);
  // The fired schedule is purged, the due message and its copy acked.
  CHECK(h.run_until([&] { return h.settled("later") && h.settled(due_consumer); }));
  col.p->stop();
}

TEST_CASE("a request is bounded in bytes: a filled one is silent, one that meets its bound says what it left") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("big", {"amqp._.big"}).ok());
  const std::string body(600'000, 'x');
  for (int i = 0; i < 30; ++i) REQUIRE(h.publish_one("amqp._.big", "", body).ok());
  collector col(h, "big");
  CHECK(col.p->window_in_bytes() == std::numeric_limits<std::uint32_t>::max());  // nothing seen yet

  // Filled with bytes to spare: the server's "409 Batch Completed" is not an event.
  col.p->request(2, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 2; }));
  h.run_until([] { return false; }, 300ms);
  CHECK(col.events.empty());
  CHECK(col.p->asked() == 0);
  // Half a request's bound, in messages of the largest size seen.
  CHECK(col.p->window_in_bytes() == (h.bus->request_max_bytes() / 2) / 600'400);

  // 28 more asked for, 16 MiB at most: the server stops at the message that would pass it.
  col.p->request(28, 2s);
  REQUIRE(h.run_until([&] { return !col.events.empty(); }));
  const pull_event e = col.events.front();
  CHECK(e.status == pull_status::bytes_reached);
  CHECK(col.deliveries.size() - 2 + e.unfilled == 28);
  CHECK(col.deliveries.size() - 2 == h.bus->request_max_bytes() / 600'400);
  CHECK(col.p->asked() == 0);
  col.p->stop();
}

TEST_CASE("nak redelivers with delivered = 2, term settles") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("work", {"amqp.d.work"}).ok());
  REQUIRE(h.publish_one("amqp.d.work", "", "task").ok());
  collector col(h, "work");
  col.p->request(1, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 1; }));
  CHECK(col.deliveries[0].amqp_props.empty());
  CHECK(col.events.empty());  // a filled request ends without an event
  h.bus->nak(col.deliveries[0].reply);
  col.p->request(1, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 2; }));
  CHECK(col.deliveries[1].delivered == 2);
  CHECK(col.deliveries[1].stream_seq == col.deliveries[0].stream_seq);
  CHECK(col.deliveries[1].body == "task");

  h.bus->term(col.deliveries[1].reply);
  REQUIRE(h.run_until([&] { return h.settled("work"); }));
  col.p->request(1, 300ms);
  REQUIRE(h.run_until([&] { return !col.events.empty(); }));
  CHECK(col.events.front().status == pull_status::request_expired);
  CHECK(col.events.front().code == 408);
  CHECK(col.events.front().unfilled == 1);
  CHECK(col.deliveries.size() == 2);
  col.p->stop();
}

// A delivery that reached the client for a consumer already gone was never shown to anyone: as
// in RabbitMQ, where it would have stayed in the queue, its count leaves that out.
TEST_CASE("a delivery returned unseen comes back uncounted, a requeue once it was shown counted") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("unseen", {"amqp.d.unseen"}).ok());
  REQUIRE(h.publish_one("amqp.d.unseen", "", "task").ok());
  collector col(h, "unseen");
  col.p->request(1, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 1; }));
  CHECK(col.deliveries[0].delivered == 1);
  h.bus->return_unseen(col.deliveries[0].reply);
  col.p->request(1, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 2; }));
  CHECK(col.deliveries[1].stream_seq == col.deliveries[0].stream_seq);
  CHECK(col.deliveries[1].delivered == 1);  // the bus's second delivery, the first one shown
  h.bus->return_unseen(col.deliveries[1].reply);
  col.p->request(1, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 3; }));
  CHECK(col.deliveries[2].delivered == 1);
  h.bus->nak(col.deliveries[2].reply);  // shown, then requeued: its next delivery is a redelivery
  col.p->request(1, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 4; }));
  CHECK(col.deliveries[3].delivered == 2);
  h.bus->ack(col.deliveries[3].reply);
  REQUIRE(h.run_until([&] { return h.settled("unseen"); }));
  col.p->stop();
}

// A consumer's new leader that never heard of deliveries its old leader made hands them out
// again as first deliveries (the soak saw a paused old leader do the same once resumed). The
// consumer made again from the stream's start, under the same puller, does just that here.
TEST_CASE("a message the consumer hands out again as a first delivery reaches the puller as a redelivery") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("again", {"amqp.d.again"}).ok());
  for (const char* body : {"one", "two"}) REQUIRE(h.publish_one("amqp.d.again", "", body).ok());
  collector col(h, "again");
  col.p->request(2, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 2; }));
  CHECK(col.deliveries[0].delivered == 1);
  CHECK(col.deliveries[1].delivered == 1);

  // Interest retention drops what no consumer holds: another one keeps the messages meanwhile.
  auto config = h.server.api("CONSUMER.INFO.AMQP.again")["config"];
  config["deliver_policy"] = "all";
  auto keeper = config;
  keeper["durable_name"] = "keeper";
  REQUIRE_FALSE(h.server.api("CONSUMER.DURABLE.CREATE.AMQP.keeper", {{"stream_name", "AMQP"}, {"config", keeper}})
                    .contains("error"));
  REQUIRE(h.server.api("CONSUMER.DELETE.AMQP.again").value("success", false));
  const auto made = h.server.api("CONSUMER.DURABLE.CREATE.AMQP.again", {{"stream_name", "AMQP"}, {"config", config}});
  REQUIRE_MESSAGE(!made.contains("error"), made.dump());
  col.p->request(2, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 4; }));
  for (std::size_t i : {2u, 3u}) {
    CHECK(col.deliveries[i].stream_seq == col.deliveries[i - 2].stream_seq);
    CHECK(col.deliveries[i].delivered == 2);
  }
  col.p->stop();
  REQUIRE(h.run_until([&] { return col.stopped(); }));
}

// nats-server applies NAKs and pull requests from separate queues; the client holds a queue's
// pull until its NAKs are answered, so a requeued message is never overtaken by a later one.
TEST_CASE("a pull right after a nak gets the requeued message first, every time") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("order", {"amqp.d.order"}).ok());
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

TEST_CASE("requeued messages come back in the order they were nak'ed, ahead of what was never delivered") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("rq", {"amqp.d.rq"}).ok());
  for (int i = 1; i <= 8; ++i) REQUIRE(h.publish_one("amqp.d.rq", "", "m" + std::to_string(i)).ok());
  collector col(h, "rq");
  col.p->request(5, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 5; }));
  for (const auto& d : col.deliveries) h.bus->nak(d.reply);  // m1..m5, in stream order
  col.p->request(8, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 13; }));
  std::vector<std::string> again;
  for (std::size_t i = 5; i < 13; ++i) again.push_back(col.deliveries[i].body);
  CHECK(again == std::vector<std::string>{"m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"});
  for (std::size_t i = 5; i < 10; ++i) CHECK(col.deliveries[i].delivered == 2);
  for (std::size_t i = 10; i < 13; ++i) CHECK(col.deliveries[i].delivered == 1);
  col.p->stop();
}

// A NAK goes at once, whatever earlier delivery of the queue the client still holds: the next
// pull gets the requeued messages, in the order they were nak'ed.
TEST_CASE("naks of later deliveries while an earlier one is held: the next pulls get them first, in nak order") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("held", {"amqp.d.held"}).ok());
  for (int i = 1; i <= 5; ++i) REQUIRE(h.publish_one("amqp.d.held", "", "m" + std::to_string(i)).ok());
  collector col(h, "held");
  col.p->request(3, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 3; }));
  h.bus->nak(col.deliveries[2].reply);  // m3, then m2; m1 stays held
  h.bus->nak(col.deliveries[1].reply);
  col.p->request(1, 2s);  // sent right after the naks
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 4; }));
  CHECK(col.deliveries[3].body == "m3");
  CHECK(col.deliveries[3].delivered == 2);
  col.p->request(3, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 7; }));
  CHECK(col.bodies() == std::vector<std::string>{"m1", "m2", "m3", "m3", "m2", "m4", "m5"});
  CHECK(col.deliveries[4].delivered == 2);
  CHECK(col.events.empty());
  ack_and_stop(h, {&col});
}

TEST_CASE("requests pipeline: several outstanding at once, all accounted for") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("pipe", {"amqp.d.pipe"}).ok());
  collector col(h, "pipe");
  for (int i = 0; i < 3; ++i) col.p->request(4, 5s);
  CHECK(col.p->asked() == 12);
  h.run_until([] { return false; }, 200ms);  // the requests wait on the server
  CHECK(h.server.api("CONSUMER.INFO.AMQP.pipe")["num_waiting"] == 3);
  for (int i = 0; i < 10; ++i) REQUIRE(h.publish_one("amqp.d.pipe", "", "m" + std::to_string(i)).ok());
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 10; }));
  CHECK(col.p->asked() == 2);
  for (std::size_t i = 0; i < 10; ++i) CHECK(col.deliveries[i].body == "m" + std::to_string(i));
  col.p->stop();
  REQUIRE(h.run_until([&] { return col.stopped(); }));
  REQUIRE(col.events.size() == 1);  // what the requests did not bring ends with the inbox
  CHECK(col.events.front().status == pull_status::lost);
  CHECK(col.events.front().unfilled == 2);
  CHECK(col.p->asked() == 0);
}

// There is no call that cancels a pull request: stop() ends them by draining the inbox.
TEST_CASE("stop ends the open requests at once: what is published afterwards is for others, at once") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("s", {"amqp.d.s"}).ok());
  collector col(h, "s");
  col.p->request(10, 30s);
  h.run_until([] { return false; }, 200ms);  // the request waits on the server
  col.p->stop();
  // Long before the request's 30 s expiry: the server lost interest in its inbox.
  REQUIRE(h.run_until([&] { return col.stopped(); }, 10s));
  REQUIRE(h.publish_one("amqp.d.s", "", "after").ok());
  REQUIRE(h.bus->count_publishes().ok());  // as basic.get does after a confirm
  auto got = get_one(h, "s");
  REQUIRE(got.message.has_value());
  CHECK(got.message->body == "after");
  CHECK(got.message->delivered == 1);
  CHECK(col.deliveries.empty());
  CHECK(h.server.api("CONSUMER.INFO.AMQP.s")["num_waiting"] == 0);
}

TEST_CASE("stop with messages on their way: each reaches the callback before on_stopped, none is lost") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("race", {"amqp.d.race"}).ok());
  for (int round = 0; round < 20; ++round) {
    collector col(h, "race");
    col.p->request(50, 30s);
    int stored = 0;
    for (int i = 0; i < 20; ++i)
      h.bus->publish("amqp.d.race", "", std::to_string(round) + "-" + std::to_string(i), {}, h.io.get_executor(),
                     [&](bus_status s) { stored += s.ok() ? 1 : 0; });
    h.run_until([&] { return stored > 0; }, 5s);
    col.p->stop();  // while the server is sending
    REQUIRE(h.run_until([&] { return col.stopped() && stored == 20; }, 5s));
    CHECK_FALSE(col.state->delivered_after_stop);
    for (const auto& d : col.deliveries) h.bus->ack(d.reply);
    REQUIRE(h.bus->count_publishes().ok());  // as basic.get does after a confirm
    // What the puller did not get is in the queue, ready at once (not held by a dead request).
    std::size_t rest = 0;
    for (;;) {
      auto g = get_one(h, "race");
      if (!g.message) {
        CHECK(g.empty.status == pull_status::no_messages);
        break;
      }
      h.bus->ack(g.message->reply);
      ++rest;
    }
    CHECK(col.deliveries.size() + rest == 20);
  }
}

// nats-server lists a drained inbox's requests until it next looks at them; a NAK applied before
// then finds only those and puts the first requeued message behind the others (m2 m3 m4 m5 m1,
// every round, when the naks go out at once). The client holds the queue's NAKs until the drain
// is over and the server dropped them.
TEST_CASE("naks made as a puller stops with requests open come back in the order they were made") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("closing", {"amqp.d.closing"}).ok());
  for (int round = 0; round < 10; ++round) {
    CAPTURE(round);
    for (int i = 1; i <= 5; ++i) REQUIRE(h.publish_one("amqp.d.closing", "", "m" + std::to_string(i)).ok());
    collector col(h, "closing");
    col.p->request(8, 10s);  // three left open when the five arrived
    REQUIRE(h.run_until([&] { return col.deliveries.size() == 5; }));
    col.p->stop();  // as a closing channel does: its consumer stops, then it requeues
    for (const auto& d : col.deliveries) h.bus->nak(d.reply);
    REQUIRE(h.run_until([&] { return col.stopped(); }));
    std::vector<std::string> again;
    for (int i = 0; i < 5; ++i) {
      auto g = get_one(h, "closing");
      REQUIRE(g.message.has_value());
      again.push_back(g.message->body);
      h.bus->ack(g.message->reply);
    }
    CHECK(again == std::vector<std::string>{"m1", "m2", "m3", "m4", "m5"});
  }
}

// A consumer cancelled while the server is still sending what its last request asked for (large
// messages: the server has taken several for the request before it sends them). What the
// puller got is requeued afterwards (basic.nack after basic.cancel-ok); what it never got must
// stay as it was (never redelivered), and the requeued ones go back to their places, ahead of
// it, as in RabbitMQ: m4 m5 (redelivered) m6 ... in stream order.
TEST_CASE("a request ended by stop while the server sends leaves what it did not bring unseen, in order") {
  harness h;
  constexpr int rounds = 10;
  constexpr int stored = 40;
  const std::string padding(200 << 10, '.');
  const auto name_of = [](const delivery& d) { return d.body.substr(0, d.body.find('.')); };
  for (int round = 0; round < rounds; ++round) {
    CAPTURE(round);
    const std::string queue = "cancelled" + std::to_string(round);
    const std::string subject = "amqp.d." + queue;
    REQUIRE(h.bus->ensure_queue_consumer(queue, {subject}).ok());
    for (int i = 1; i <= stored; ++i) REQUIRE(h.publish_one(subject, "", "m" + std::to_string(i) + padding).ok());
    // Stops as the first message of its second request arrives, with the rest on their way.
    auto got = std::make_shared<std::vector<delivery>>();
    auto stopped = std::make_shared<bool>(false);
    auto self = std::make_shared<std::weak_ptr<puller>>();
    puller_callbacks cb;
    cb.on_delivery = [got, self](delivery d) {
      got->push_back(std::move(d));
      if (got->size() == 6)
        if (auto p = self->lock()) p->stop();
    };
    cb.on_stopped = [stopped] { *stopped = true; };
    auto p = h.bus->make_puller(queue, h.io.get_executor(), std::move(cb), queue_sharing::all_consumers,
                                lowest_consumer_priority);
    *self = p;
    p->request(5, 10s);
    REQUIRE(h.run_until([&] { return got->size() == 5; }));
    h.bus->ack((*got)[0].reply);
    h.bus->ack((*got)[1].reply);
    p->request(30, 10s);  // the credit the acks gave back
    REQUIRE(h.run_until([&] { return *stopped; }, 10s));
    h.bus->ack((*got)[2].reply);
    for (std::size_t i = 3; i < got->size(); ++i) h.bus->nak((*got)[i].reply);
    // "name/delivered count", in the order the queue gives them.
    std::string again;
    std::string expected;
    for (int i = 4; i <= stored; ++i) {
      auto g = get_one(h, queue);
      REQUIRE(g.message.has_value());
      again += name_of(*g.message) + "/" + std::to_string(g.message->delivered) + " ";
      h.bus->ack(g.message->reply);
      // Delivered once already: the ones the puller brought; the others never were.
      const bool brought = static_cast<std::size_t>(i) <= got->size();
      expected += "m" + std::to_string(i) + (brought ? "/2 " : "/1 ");
    }
    INFO("the puller brought " << got->size());
    CHECK(again == expected);
    h.bus->delete_queue_consumer(queue);
  }
}

TEST_CASE("get: a message when one is ready, 404 when none, the requeued one first") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("g", {"amqp.d.g"}).ok());
  auto empty = get_one(h, "g");
  CHECK_FALSE(empty.message.has_value());
  CHECK(empty.empty.status == pull_status::no_messages);
  REQUIRE(h.publish_one("amqp.d.g", "", "one").ok());
  REQUIRE(h.publish_one("amqp.d.g", "", "two").ok());
  // As basic.get does: a pull asked right after a confirm may find the message uncounted.
  REQUIRE(h.bus->count_publishes().ok());
  auto first = get_one(h, "g");
  REQUIRE(first.message.has_value());
  CHECK(first.message->body == "one");
  CHECK(first.message->pending == 1);
  h.bus->nak(first.message->reply);
  auto again = get_one(h, "g");  // asked right after the nak: the requeued message first
  REQUIRE(again.message.has_value());
  CHECK(again.message->body == "one");
  CHECK(again.message->delivered == 2);
  h.bus->ack(again.message->reply);
}

TEST_CASE("consumer priorities: the higher one's request is served while it asks, the lower one's once it is filled") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("prio", {"amqp.d.prio"}).ok());
  const auto config = h.server.api("CONSUMER.INFO.AMQP.prio")["config"];
  CHECK(config["priority_policy"] == "prioritized");
  CHECK(config["priority_groups"] == nlohmann::json{"amqp"});
  // The lower one asks first: the server's order of arrival does not decide.
  collector low(h, "prio", queue_sharing::all_consumers, 0);
  low.p->request(10, 10s);
  REQUIRE(waiting_requests(h, "prio", 1));
  collector high(h, "prio", queue_sharing::all_consumers, 7);
  high.p->request(3, 10s);
  REQUIRE(waiting_requests(h, "prio", 2));
  for (int i = 0; i < 5; ++i) REQUIRE(h.publish_one("amqp.d.prio", "", "m" + std::to_string(i)).ok());
  REQUIRE(h.run_until([&] { return high.deliveries.size() + low.deliveries.size() == 5; }));
  CHECK(high.bodies() == std::vector<std::string>{"m0", "m1", "m2"});
  CHECK(low.bodies() == std::vector<std::string>{"m3", "m4"});
  // The higher one asks again: it is served first again, the lower one's request still open.
  high.p->request(1, 10s);
  REQUIRE(waiting_requests(h, "prio", 2));
  REQUIRE(h.publish_one("amqp.d.prio", "", "m5").ok());
  REQUIRE(h.run_until([&] { return high.deliveries.size() == 4; }));
  CHECK(high.deliveries.back().body == "m5");
  CHECK(low.deliveries.size() == 2);
  ack_and_stop(h, {&high, &low});
}

TEST_CASE("consumer priorities: equal ones are served in turn") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("even", {"amqp.d.even"}).ok());
  collector a(h, "even", queue_sharing::all_consumers, 4);
  a.p->request(10, 10s);
  REQUIRE(waiting_requests(h, "even", 1));
  collector b(h, "even", queue_sharing::all_consumers, 4);
  b.p->request(10, 10s);
  REQUIRE(waiting_requests(h, "even", 2));
  for (int i = 0; i < 6; ++i) REQUIRE(h.publish_one("amqp.d.even", "", "m" + std::to_string(i)).ok());
  REQUIRE(h.run_until([&] { return a.deliveries.size() + b.deliveries.size() == 6; }));
  CHECK(a.bodies() == std::vector<std::string>{"m0", "m2", "m4"});
  CHECK(b.bodies() == std::vector<std::string>{"m1", "m3", "m5"});
  ack_and_stop(h, {&a, &b});
}

// A store from before consumer priorities: its queue consumers have no priority group.
TEST_CASE("a queue consumer without a priority group still serves pulls and gets, and is converged in place") {
  harness h;
  const nlohmann::json old_config{{"durable_name", "old"},          {"deliver_policy", "new"},
                                  {"ack_policy", "explicit"},       {"ack_wait", 30'000'000'000LL},
                                  {"max_deliver", -1},              {"max_ack_pending", -1},
                                  {"max_waiting", 4096},            {"replay_policy", "instant"},
                                  {"filter_subjects", {"amqp.d.old"}}};
  const auto made = h.server.api("CONSUMER.DURABLE.CREATE.AMQP.old", {{"stream_name", "AMQP"}, {"config", old_config}});
  REQUIRE_MESSAGE(!made.contains("error"), made.dump());
  CHECK_FALSE(made["config"].contains("priority_policy"));
  REQUIRE(h.bus->ensure_queue_consumer("new", {"amqp.d.new"}).ok());
  auto stale = h.bus->queues_to_converge();
  REQUIRE(stale.ok());
  CHECK(*stale == std::vector<std::string>{"old"});

  // Unconverged, it ignores the requests' group and level: a consumer and a get are served.
  collector col(h, "old", queue_sharing::all_consumers, 9);
  col.p->request(1, 10s);
  REQUIRE(h.publish_one("amqp.d.old", "", "pulled").ok());
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 1; }));
  CHECK(col.deliveries.front().body == "pulled");
  REQUIRE(h.publish_one("amqp.d.old", "", "got").ok());
  REQUIRE(h.bus->count_publishes().ok());
  auto got = get_one(h, "old");
  REQUIRE(got.message.has_value());
  CHECK(got.message->body == "got");

  // Converged in place (same consumer, what it holds kept): prioritized from then on.
  REQUIRE(h.bus->ensure_queue_consumer("old", {"amqp.d.old"}).ok());
  const auto info = h.server.api("CONSUMER.INFO.AMQP.old");
  CHECK(info["config"]["priority_policy"] == "prioritized");
  CHECK(info["created"] == made["created"]);
  CHECK(info["num_ack_pending"] == 2);
  stale = h.bus->queues_to_converge();
  REQUIRE(stale.ok());
  CHECK(stale->empty());
  h.bus->ack(col.deliveries.front().reply);
  h.bus->ack(got.message->reply);
  collector low(h, "old", queue_sharing::all_consumers, 0);
  low.p->request(5, 10s);
  REQUIRE(waiting_requests(h, "old", 1));
  collector high(h, "old", queue_sharing::all_consumers, 1);
  high.p->request(5, 10s);
  REQUIRE(waiting_requests(h, "old", 2));
  REQUIRE(h.publish_one("amqp.d.old", "", "after").ok());
  REQUIRE(h.run_until([&] { return high.deliveries.size() == 1; }));
  CHECK(low.deliveries.empty());
  for (auto* c : {&col, &low, &high}) {
    c->p->stop();
    REQUIRE(h.run_until([&] { return c->stopped(); }));
  }
}

// A store of the release before #55's step 3: a queue consumer reads its bindings' subjects too.
TEST_CASE("queue_consumer_filters lists every queue consumer's filters, sorted, and queue_info carries them") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("narrow", {"amqp._.narrow"}).ok());
  REQUIRE(h.bus->ensure_queue_consumer("wide", {"amqp.t.a.*", "amqp._.wide", "amqp.f.>"}).ok());
  auto listed = h.bus->queue_consumer_filters();
  REQUIRE(listed.ok());
  CHECK(listed->at("narrow") == std::vector<std::string>{"amqp._.narrow"});
  CHECK(listed->at("wide") == std::vector<std::string>{"amqp._.wide", "amqp.f.>", "amqp.t.a.*"});
  for (const auto& [name, filters] : *listed) CHECK_FALSE(name.starts_with('~'));  // no probe, no holder
  auto info = h.bus->peek_queue("wide");
  REQUIRE(info.ok());
  CHECK(info->filters == listed->at("wide"));
}

TEST_CASE("get on a queue that does not exist answers that the consumer is gone") {
  harness h;
  auto none = get_one(h, "missing");
  CHECK_FALSE(none.message.has_value());
  CHECK(none.empty.status == pull_status::consumer_gone);
}

TEST_CASE("queue_info: ready counts what was never delivered and what was requeued, at once") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("count", {"amqp.d.count"}).ok());
  for (int i = 0; i < 4; ++i) REQUIRE(h.publish_one("amqp.d.count", "", "m" + std::to_string(i)).ok());
  CHECK(h.bus->queue_info("count")->ready() == 4);
  collector col(h, "count");
  col.p->request(3, 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 3; }));
  auto held = h.bus->queue_info("count");
  REQUIRE(held.ok());
  CHECK(held->num_pending == 1);
  CHECK(held->num_ack_pending == 3);
  CHECK(held->held_here == 3);
  CHECK(held->ready() == 1);
  h.bus->nak(col.deliveries[0].reply);
  h.bus->nak(col.deliveries[1].reply);
  h.bus->ack(col.deliveries[2].reply);
  // Asked at once: the settlements sent before are applied first.
  auto requeued = h.bus->queue_info("count");
  REQUIRE(requeued.ok());
  CHECK(requeued->held_here == 0);
  CHECK(requeued->num_ack_pending == 2);
  CHECK(requeued->ready() == 3);
  col.p->stop();
}

TEST_CASE("queue_info counts every publish confirmed before it, at once") {
  // The server confirms a publish before it tells the stream's consumers of it; a count asked
  // in between would miss the message.
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("confirmed", {"amqp.d.confirmed"}).ok());
  for (std::uint64_t i = 1; i <= 500; ++i) {
    REQUIRE(h.publish_one("amqp.d.confirmed", "", "m").ok());
    auto info = h.bus->queue_info("confirmed");
    REQUIRE(info.ok());
    REQUIRE(info->ready() == i);
  }
}

namespace {

std::vector<std::string> probe_consumers(harness& h) {
  std::vector<std::string> probes;
  const auto names = h.server.api("CONSUMER.NAMES.AMQP");
  for (const auto& name : names["consumers"])
    if (name.get<std::string>().starts_with("~counts-")) probes.push_back(name);
  return probes;
}

}  // namespace

// The count's probe message is taken with a pull, and a JetStream delivery names the message's
// subject, not the reply's: on a shared request inbox it reached its request only while no other
// request was in flight, so with other channels' bus requests going on, the take waited out the
// bus timeout and the probe consumer was dropped and made again.
TEST_CASE("counting publishes while other bus requests are in flight keeps its probe and deletes its message") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("busy", {"amqp.d.busy"}).ok());
  std::atomic<bool> done{false};
  std::thread other([&] {
    while (!done) (void)h.bus->peek_queue("busy");
  });
  constexpr int rounds = 30;
  for (int i = 0; i < rounds; ++i) {
    REQUIRE(h.publish_one("amqp.d.busy", "", "m").ok());
    REQUIRE(h.bus->count_publishes().ok());
  }
  done = true;
  other.join();
  const auto probes = probe_consumers(h);
  REQUIRE(probes.size() == 1);
  const auto probe = h.server.api("CONSUMER.INFO.AMQP." + probes[0]);
  // One probe consumer all along, each of its messages deleted once counted.
  CHECK(probe["num_pending"] == 0);
  CHECK(h.stream_messages() == rounds);
}

TEST_CASE("a probe consumer the server dropped (idle, or an operator) is made again, and the count still holds") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("vanish", {"amqp.d.vanish"}).ok());
  REQUIRE(h.publish_one("amqp.d.vanish", "", "one").ok());
  REQUIRE(h.bus->count_publishes().ok());
  auto probes = probe_consumers(h);
  REQUIRE(probes.size() == 1);
  h.server.api("CONSUMER.DELETE.AMQP." + probes[0]);
  REQUIRE(h.publish_one("amqp.d.vanish", "", "two").ok());
  auto info = h.bus->queue_info("vanish");  // counts after the probe, made again
  REQUIRE(info.ok());
  CHECK(info->ready() == 2);
  CHECK(probe_consumers(h) == probes);  // the same name: one per client
}

TEST_CASE("a queue deleted under a waiting pull reports the consumer gone (409) and what it did not bring") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("doomed", {"amqp.d.doomed"}).ok());
  collector col(h, "doomed");
  col.p->request(3, 5s);
  h.run_until([] { return false; }, 300ms);  // the request waits on the server
  REQUIRE(h.bus->delete_queue_consumer("doomed").ok());
  REQUIRE(h.run_until([&] { return !col.events.empty(); }));
  CHECK(col.events.front().status == pull_status::consumer_gone);
  CHECK(col.events.front().code == 409);
  // The 409 does not say how much went unfilled: the inbox is replaced, and once it is drained
  // the whole of what was asked is accounted for.
  REQUIRE(h.run_until([&] { return col.p->asked() == 0; }));
  std::uint32_t unfilled = 0;
  for (const auto& e : col.events) unfilled += e.unfilled;
  CHECK(unfilled == 3);
  CHECK(col.events.back().status == pull_status::lost);
  col.p->stop();
}

TEST_CASE("limits retention: what a queue settled stays until purged below its ack floor") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("kept", {"amqp._.kept"}).ok());
  for (int i = 0; i < 3; ++i) REQUIRE(h.publish_one("amqp._.kept", "", "m").ok());
  collector col(h, "kept");
  col.p->request(2, 1s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == 2; }, 3s));
  for (const auto& d : col.deliveries) h.bus->ack(d.reply);
  CHECK(h.bus->take_settled() == std::vector<std::string>{"kept"});
  CHECK(h.bus->take_settled().empty());
  auto info = h.bus->queue_info("kept");
  REQUIRE_MESSAGE(info.ok(), info.error().text);
  CHECK(h.stream_messages() == 3);
  REQUIRE(h.bus->purge_subject_below("amqp._.kept", info->ack_floor_stream_seq + 1).ok());
  CHECK(h.stream_messages() == 1);  // the one never delivered
  CHECK(h.bus->queue_info("kept")->num_pending == 1);
  col.p->stop();
}

TEST_CASE("a publish no stream stores is refused through done") {
  harness h;
  auto r = h.publish_one("elsewhere.x", "", "body");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().text.find("no JetStream stream stores this subject") != std::string::npos);
}

TEST_CASE("1,000 pipelined publishes all complete, beyond the in-flight bound") {
  harness h{64};
  REQUIRE(h.bus->ensure_queue_consumer("bulk", {"amqp.d.bulk"}).ok());
  int ok = 0;
  int failed = 0;
  for (int i = 0; i < 1000; ++i)
    h.bus->publish("amqp.d.bulk", "", std::to_string(i), {}, h.io.get_executor(),
                   [&](bus_status s) { (s.ok() ? ok : failed) += 1; });
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
  col.p->stop();
}

TEST_CASE("a queue's consumer made after the queue was sent messages delivers them") {
  // Another replica routes to a queue once its bucket entry exists, before its consumer does; and
  // a replica that learns of a consumer late picks its start from its own copy of the stream.
  harness h;
  for (int i = 0; i < 3; ++i) REQUIRE(h.publish_one("amqp._.early", "", "m").ok());
  REQUIRE(h.bus->ensure_queue_consumer("early", {"amqp._.early"}).ok());
  CHECK(h.bus->queue_info("early")->num_pending == 3);
}

TEST_CASE("purge_queue drops only that queue's messages") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("a", {"amqp.f", "amqp.f.>"}).ok());
  REQUIRE(h.bus->ensure_queue_consumer("b", {"amqp.f", "amqp.f.>"}).ok());
  for (int i = 0; i < 3; ++i) REQUIRE(h.publish_one("amqp.f.x", "", "m").ok());
  CHECK(h.bus->queue_info("a")->ready() == 3);
  auto purged = h.bus->purge_queue("a", {"amqp.f", "amqp.f.>"});
  REQUIRE_MESSAGE(purged.ok(), purged.error().text);
  CHECK(h.bus->queue_info("a")->num_pending == 0);
  CHECK(h.bus->queue_info("b")->num_pending == 3);
  CHECK(h.stream_messages() == 3);
}

TEST_CASE("purge_subject drops that subject's messages, whoever holds them, and no other") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("a", {"amqp._.a", "amqp.f.>"}).ok());
  REQUIRE(h.bus->ensure_queue_consumer("b", {"amqp.f.>"}).ok());
  for (int i = 0; i < 3; ++i) REQUIRE(h.publish_one("amqp._.a", "", "own").ok());
  REQUIRE(h.publish_one("amqp.f.x", "", "shared").ok());
  auto purged = h.bus->purge_subject("amqp._.a");
  REQUIRE_MESSAGE(purged.ok(), purged.error().text);
  CHECK(h.bus->queue_info("a")->num_pending == 1);
  CHECK(h.bus->queue_info("b")->num_pending == 1);
  CHECK(h.stream_messages() == 1);
}

TEST_CASE("last_sequence and next_message read the stream where a queue's routes begin and end") {
  harness h;
  auto empty = h.bus->last_sequence();
  REQUIRE_MESSAGE(empty.ok(), empty.error().text);
  REQUIRE(h.bus->ensure_queue_consumer("a", {"amqp.f.>", "amqp.g"}).ok());
  for (const char* subject : {"amqp.f.x", "amqp.g", "amqp.f.y"}) REQUIRE(h.publish_one(subject, "", "m").ok());
  CHECK(*h.bus->last_sequence() == *empty + 3);
  auto g = h.bus->next_message(*empty + 1, {"amqp.g"});
  REQUIRE_MESSAGE(g.ok(), g.error().text);
  REQUIRE(g->has_value());
  CHECK((*g)->seq == *empty + 2);
  CHECK((*g)->subject == "amqp.g");
  auto f = h.bus->next_message(*empty + 2, {"amqp.g", "amqp.f.>"});  // the earliest of either
  REQUIRE(f->has_value());
  CHECK((*f)->seq == *empty + 2);
  auto y = h.bus->next_message(*empty + 3, {"amqp.g", "amqp.f.>"});
  REQUIRE(y->has_value());
  CHECK((*y)->subject == "amqp.f.y");
  CHECK_FALSE(h.bus->next_message(*empty + 4, {"amqp.g", "amqp.f.>"})->has_value());
}

TEST_CASE("read_message reads one stored message in full, and says not_found where there is none") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("kept", {"amqp.d.kept"}).ok());
  const auto before = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  REQUIRE(h.publish_one("amqp.d.kept", std::string("\x10\x00\x05hello", 5 + 3), "body").ok());
  const auto seq = *h.bus->last_sequence();
  auto got = h.bus->read_message(seq);
  REQUIRE_MESSAGE(got.ok(), got.error().text);
  CHECK(got->subject == "amqp.d.kept");
  CHECK(got->amqp_props == std::string("\x10\x00\x05hello", 8));
  CHECK(got->body == "body");
  CHECK(got->stream_seq == seq);
  CHECK(got->reply.empty());
  CHECK(got->stored_ns + 1'000'000'000 >= static_cast<std::uint64_t>(before));  // the server's clock, roughly ours
  auto none = h.bus->read_message(seq + 1);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().kind == bus_errc::not_found);
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

TEST_CASE("close fails nothing silently: later publishes, pulls and counts are refused through their callbacks") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("x", {"amqp.d.x"}).ok());
  REQUIRE(h.publish_one("amqp.d.x", "", "before").ok());  // a count after it would probe
  h.bus->close();
  h.bus->close();  // idempotent
  std::optional<bus_status> r;
  h.bus->publish("amqp.d.x", "", "b", {}, h.io.get_executor(), [&](bus_status s) { r = std::move(s); });
  REQUIRE(h.run_until([&] { return r.has_value(); }));
  CHECK_FALSE(r->ok());
  auto g = get_one(h, "x");
  CHECK_FALSE(g.message.has_value());
  CHECK(g.empty.status == pull_status::other);
  CHECK(g.empty.unfilled == 1);
  CHECK(h.bus->publishes_uncounted());
  auto counted = h.bus->count_publishes();  // the probe's connection is gone: refused, not used
  REQUIRE_FALSE(counted.ok());
  CHECK(counted.error().text.find("closed") != std::string::npos);
}

namespace {

// Publishes `bodies` to amqp.d.<queue>, pulls `pulled` of them and acks those whose index is in
// `acked`; the rest stay unacknowledged, as a process that died would leave them.
void fill_and_leave_unacked(harness& h, const std::string& queue, int bodies, std::size_t pulled,
                            const std::set<std::size_t>& acked) {
  for (int i = 0; i < bodies; ++i) REQUIRE(h.publish_one("amqp.d." + queue, "", "m" + std::to_string(i)).ok());
  collector col(h, queue);
  col.p->request(static_cast<std::uint32_t>(pulled), 2s);
  REQUIRE(h.run_until([&] { return col.deliveries.size() == pulled; }));
  for (std::size_t i : acked) h.bus->ack(col.deliveries[i].reply);
  REQUIRE(h.run_until([&] { return h.bus->queue_info(queue)->num_ack_pending == pulled - acked.size(); }));
  col.p->stop();
  REQUIRE(h.run_until([&] { return col.stopped(); }));
}

// Pulls until `count` messages arrived (or the timeout); returns their bodies in arrival order.
std::vector<std::string> pull_bodies(harness& h, const std::string& queue, std::size_t count) {
  collector col(h, queue);
  col.p->request(static_cast<std::uint32_t>(count) + 1, 2s);
  h.run_until([&] { return col.deliveries.size() >= count; }, 3s);
  std::vector<std::string> bodies;
  for (auto& d : col.deliveries) bodies.push_back(d.body);
  col.p->stop();
  return bodies;
}

}  // namespace

TEST_CASE("reclaim at open: unacked deliveries of a dead process come back at once, in order, nothing dropped") {
  harness h;
  REQUIRE(h.bus->ensure_queue_consumer("jobs", {"amqp.d.jobs"}).ok());
  REQUIRE(h.bus->ensure_queue_consumer("other", {"amqp.d.jobs"}).ok());  // holds the same messages
  fill_and_leave_unacked(h, "jobs", 8, 6, {0, 2, 4});  // m1 m3 m5 unacked, m6 m7 never delivered

  auto o = options_for(h.server.url());
  o.reclaim_unacked = true;
  auto reopened = client::open(o);
  REQUIRE_MESSAGE(reopened.ok(), reopened.error().text);
  CHECK(h.stream_messages() == 8);  // `other` still holds all of them
  CHECK(pull_bodies(h, "jobs", 5) == std::vector<std::string>{"m1", "m3", "m5", "m6", "m7"});
  CHECK(pull_bodies(h, "other", 8).size() == 8);  // untouched: it had delivered nothing
  (*reopened)->close();
}

// The ack wait is CLOUD_AMQP_ACK_WAIT's least (6 s): a holder's progress report goes every second,
// and a shorter wait leaves a loaded machine too little margin for it.
TEST_CASE("a delivery held past its ack wait is not redelivered, one whose holder is gone comes back after it") {
  harness h(4096, 6s);
  REQUIRE(h.bus->ensure_queue_consumer("held", {"amqp.d.held"}).ok());
  REQUIRE(h.publish_one("amqp.d.held", "", "kept").ok());
  collector holder(h, "held");
  holder.p->request(1, 2s);
  REQUIRE(h.run_until([&] { return holder.deliveries.size() == 1; }));

  // Another puller asks for two ack waits and more: the held message stays its holder's.
  collector other(h, "held");
  other.p->request(1, 13s);
  REQUIRE(h.run_until([&] { return !other.events.empty(); }, 16s));
  CHECK(other.deliveries.empty());
  CHECK(other.events.front().status == pull_status::request_expired);
  const auto info = h.server.api("CONSUMER.INFO.AMQP.held");
  CHECK(info["num_ack_pending"] == 1);
  CHECK(info["num_redelivered"] == 0);

  // A second client takes the next message and goes without settling it, as a process that dies.
  REQUIRE(h.publish_one("amqp.d.held", "", "orphan").ok());
  auto o = options_for(h.server.url());
  o.ack_wait = 6s;
  auto gone = client::open(o);
  REQUIRE_MESSAGE(gone.ok(), gone.error().text);
  {
    collector taker(**gone, h.io, "held");
    taker.p->request(1, 2s);
    REQUIRE(h.run_until([&] { return taker.deliveries.size() == 1; }));
    CHECK(taker.deliveries[0].body == "orphan");
    (*gone)->close();
  }
  other.p->request(1, 9s);
  REQUIRE(h.run_until([&] { return !other.deliveries.empty(); }, 11s));
  CHECK(other.deliveries[0].body == "orphan");
  CHECK(other.deliveries[0].delivered == 2);
  h.bus->ack(other.deliveries[0].reply);
  h.bus->ack(holder.deliveries[0].reply);
  REQUIRE(h.run_until([&] { return h.settled("held"); }));
  holder.p->stop();
  other.p->stop();
}

TEST_CASE("direct messages: received by a subscriber, said so, to nobody, said so, nothing stored") {
  harness h;
  std::deque<delivery> got;
  auto sub = h.bus->subscribe_direct("amqp-reply.t1", h.io.get_executor(), [&](delivery d) { got.push_back(std::move(d)); });
  REQUIRE(sub);
  // The subscription goes to the server on the client's control connection, and the publish on
  // the other one, which the server may read first. A request on the control connection is
  // answered only after the server has taken the subscription before it.
  CHECK(h.bus->peek_queue("none").error().kind == bus_errc::not_found);
  const std::string props{"\x90\x00\x0atext/plain\x02", 14};
  std::optional<bool> received;
  h.bus->publish_direct("amqp-reply.t1", base64_encode(props), "answer", h.io.get_executor(),
                        [&](bool r) { received = r; });
  REQUIRE(h.run_until([&] { return received.has_value() && !got.empty(); }));
  CHECK(*received);
  CHECK(got.front().body == "answer");
  CHECK(got.front().amqp_props == props);
  CHECK(got.front().reply.empty());
  CHECK(got.front().delivered == 1);

  received.reset();
  h.bus->publish_direct("amqp-reply.nobody", "", "lost", h.io.get_executor(), [&](bool r) { received = r; });
  REQUIRE(h.run_until([&] { return received.has_value(); }));
  CHECK_FALSE(*received);

  sub.reset();  // unsubscribed: the requester is gone
  received.reset();
  h.run_until([] { return false; }, 100ms);
  h.bus->publish_direct("amqp-reply.t1", "", "late", h.io.get_executor(), [&](bool r) { received = r; });
  REQUIRE(h.run_until([&] { return received.has_value(); }));
  CHECK_FALSE(*received);
  CHECK(got.size() == 1);
  CHECK(h.server.api("STREAM.INFO.AMQP")["state"]["messages"] == 0);
}

TEST_CASE("a single-active queue serves one puller at a time, and the next once the first stops") {
  harness h;
  const auto single = queue_sharing::single_active;
  REQUIRE(h.bus->ensure_queue_consumer("solo", {"amqp.d.solo"}, single).ok());
  collector first(h, "solo", single);
  first.p->request(10, 5s);
  h.run_until([] { return false; }, 100ms);
  collector second(h, "solo", single);
  second.p->request(10, 5s);
  for (int i = 0; i < 3; ++i) REQUIRE(h.publish_one("amqp.d.solo", "", "m" + std::to_string(i)).ok());
  REQUIRE(h.run_until([&] { return first.deliveries.size() == 3; }));
  h.run_until([] { return false; }, 300ms);
  CHECK(second.deliveries.empty());
  REQUIRE(h.publish_one("amqp.d.solo", "", "after").ok());
  // Stopped, and what it held requeued at once (a closing channel): the second is given that
  // first, in order, and then the rest.
  first.p->stop();
  for (const auto& d : first.deliveries) h.bus->nak(d.reply);
  REQUIRE(h.run_until([&] { return first.stopped(); }));
  REQUIRE(h.run_until([&] { return second.deliveries.size() == 4; }));
  std::vector<std::string> bodies;
  for (const auto& d : second.deliveries) bodies.push_back(d.body);
  CHECK(bodies == std::vector<std::string>{"m0", "m1", "m2", "after"});
  for (const auto& d : second.deliveries) h.bus->ack(d.reply);
  second.p->stop();
  REQUIRE(h.run_until([&] { return second.stopped(); }));
}

TEST_CASE("a queue without a consumer counts what its subject holds, and once it has one, the consumer's counts") {
  harness h;
  REQUIRE(h.bus->retains_by_limits());
  for (int i = 0; i < 3; ++i) REQUIRE(h.publish_one("amqp._.idle", "", "m").ok());
  REQUIRE(h.publish_one("amqp._.other", "", "m").ok());
  auto stored = h.bus->stored_per_subject("amqp._.>");
  REQUIRE_MESSAGE(stored.ok(), stored.error().text);
  CHECK(*stored == std::map<std::string, std::uint64_t>{{"amqp._.idle", 3}, {"amqp._.other", 1}});
  CHECK(h.bus->stored_per_subject("amqp._.none")->empty());

  auto idle = queue_counts(*h.bus, "idle", "amqp._.idle", false);
  REQUIRE_MESSAGE(idle.ok(), idle.error().text);
  CHECK(idle->ready() == 3);
  REQUIRE(h.bus->ensure_queue_consumer("idle", {"amqp._.idle"}).ok());
  auto first = get_one(h, "idle");
  REQUIRE(first.message);
  auto read = queue_counts(*h.bus, "idle", "amqp._.idle", false);
  REQUIRE_MESSAGE(read.ok(), read.error().text);
  CHECK(read->num_pending == 2);
  CHECK(read->num_ack_pending == 1);
  h.bus->ack(first.message->reply);
}
