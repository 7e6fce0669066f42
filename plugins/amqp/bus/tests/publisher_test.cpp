// The publisher's logic without a server: the connections are tokens, what it sends is recorded,
// the clock is injected, and answers are messages made here.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <boost/asio/io_context.hpp>
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "amqp/bus/client.hpp"
#include "error.hpp"
#include "publisher.hpp"
#include "requeue_order.hpp"

using namespace amqp::bus;
using namespace amqp::bus::detail;
using namespace std::chrono_literals;

namespace {

// Two connections the publisher never touches itself: only `send` sees them.
natsConnection* const buffered_conn = reinterpret_cast<natsConnection*>(0x1000);
natsConnection* const at_once_conn = reinterpret_cast<natsConnection*>(0x2000);

struct sent_message {
  bool at_once = false;
  std::string subject;
  std::string reply;
  std::string msg_id;  // Nats-Msg-Id, "" without
};

std::string header_of(natsMsg* msg, const char* key) {
  const char* value = nullptr;
  return natsMsgHeader_Get(msg, key, &value) == NATS_OK && value != nullptr ? value : "";
}

// The id a sent message's reply subject carries ("<inbox>.a.<id>").
std::uint64_t id_of(const sent_message& m) { return std::stoull(m.reply.substr(m.reply.rfind('.') + 1)); }

msg_ptr answer(const std::string& body, const std::optional<std::string>& status = std::nullopt) {
  natsMsg* raw = nullptr;
  REQUIRE(natsMsg_Create(&raw, "_INBOX.x.a.1", nullptr, body.data(), static_cast<int>(body.size())) == NATS_OK);
  msg_ptr msg{raw};
  if (status) REQUIRE(natsMsgHeader_Set(msg.get(), "Status", status->c_str()) == NATS_OK);
  return msg;
}
msg_ptr stored() { return answer(R"({"stream":"AMQP","seq":7})"); }
msg_ptr no_responders() { return answer("", "503"); }
msg_ptr replicating() {
  return answer(R"({"error":{"code":409,"err_code":10158,"description":"duplicate message id is in process"}})");
}
msg_ptr sequence_mismatch() {
  return answer(R"({"error":{"code":503,"err_code":10063,"description":"expected stream sequence does not match"}})");
}

struct fixture {
  fixture() { nats_Open(-1); }

  std::shared_ptr<publisher> make(bool retry) {
    publisher::parts parts;
    parts.completions = std::make_shared<completion_queue>();
    parts.released = &released;
    parts.naks = &naks;
    parts.confirmed = [this] { ++confirmed; };
    parts.send = [this](natsConnection* conn, natsMsg* msg) {
      const char* reply = natsMsg_GetReply(msg);
      sent.push_back(sent_message{conn == at_once_conn, natsMsg_GetSubject(msg), reply ? reply : "",
                                  header_of(msg, "Nats-Msg-Id")});
      return NATS_OK;
    };
    parts.now = [this] { return now; };
    publisher::settings s;
    s.timeout = 10s;
    s.attempt_timeout = 2s;
    s.retry = retry;
    return std::make_shared<publisher>(s, publisher::route{buffered_conn, "_INBOX.buffered"},
                                       publisher::route{at_once_conn, "_INBOX.at_once"}, std::move(parts),
                                       io.get_executor());
  }

  // Publishes to `subject`; its outcome goes to outcomes[id].
  void publish(publisher& p, std::uint64_t id, const std::string& subject = "amqp._.q") {
    p.publish(id, subject, "", "body", "", io.get_executor(), [this, id](bus_status s) { outcomes.emplace_back(id, s); });
  }
  void settle() {
    io.restart();
    io.poll();
  }
  // Runs the publisher's timers (real time; the clock they read is `now`) until `done` holds,
  // 5 s at most.
  template <class Done>
  bool run_until(Done done) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io.restart();
      if (io.run_one_for(50ms) == 0) std::this_thread::sleep_for(10ms);
    }
    return done();
  }
  std::vector<std::uint64_t> sent_ids() const {
    std::vector<std::uint64_t> ids;
    for (const auto& m : sent) ids.push_back(id_of(m));
    return ids;
  }

  boost::asio::io_context io;
  msg_batch_release released;
  requeue_order naks;
  publisher::clock::time_point now{};
  std::vector<sent_message> sent;
  std::vector<std::pair<std::uint64_t, bus_status>> outcomes;
  int confirmed = 0;
};

}  // namespace

TEST_CASE("publisher: a lone publish goes on the connection that sends at once, and is confirmed") {
  fixture f;
  auto p = f.make(false);
  f.publish(*p, 1);
  REQUIRE(f.sent.size() == 1);
  CHECK(f.sent[0].at_once);
  CHECK(f.sent[0].reply == "_INBOX.at_once.a.1");
  CHECK(f.sent[0].msg_id.empty());  // no retries on a stream of one replica
  p->answered(1, stored().get());
  f.settle();
  REQUIRE(f.outcomes.size() == 1);
  CHECK(f.outcomes[0].second.ok());
  CHECK(f.confirmed == 1);
  CHECK(p->backlog() == 0);
}

TEST_CASE("publisher: a burst goes out in order, and changes connection only once nothing is in flight") {
  fixture f;
  auto p = f.make(false);
  for (std::uint64_t id = 1; id <= 40; ++id) f.publish(*p, id);
  // A few at once; the rest wait until those are answered.
  REQUIRE(f.sent.size() == 16);
  for (const auto& m : f.sent) CHECK(m.at_once);
  CHECK(p->backlog() == 40);
  for (std::uint64_t id = 1; id <= 15; ++id) p->answered(id, stored().get());
  CHECK(f.sent.size() == 16);  // one still in flight at once: nothing changes connection yet
  p->answered(16, stored().get());
  // The backlog goes on the buffered connection, all of it, in publish order.
  REQUIRE(f.sent.size() == 40);
  for (std::size_t i = 16; i < 40; ++i) CHECK_FALSE(f.sent[i].at_once);
  std::vector<std::uint64_t> expected;
  for (std::uint64_t id = 1; id <= 40; ++id) expected.push_back(id);
  CHECK(f.sent_ids() == expected);
  for (std::uint64_t id = 17; id <= 40; ++id) p->answered(id, stored().get());
  f.settle();
  CHECK(f.outcomes.size() == 40);
  CHECK(f.confirmed == 40);
}

TEST_CASE("publisher: publishes wait while a NAK is unanswered, and go once it is") {
  fixture f;
  auto p = f.make(false);
  CHECK(f.naks.nak_made(7, "q", "$JS.ACK.AMQP.q.1.1.1.0.0", f.now));
  f.publish(*p, 1);
  f.publish(*p, 2);
  CHECK(f.sent.empty());
  CHECK(p->backlog() == 2);
  (void)f.naks.answered(7);
  p->naks_answered();
  CHECK(f.sent_ids() == std::vector<std::uint64_t>{1, 2});
}

TEST_CASE("publisher: a publish never answered fails once, after the timeout, and a late answer changes nothing") {
  fixture f;
  auto p = f.make(false);
  f.publish(*p, 1);
  f.now += 9s;
  p->sweep();
  f.settle();
  CHECK(f.outcomes.empty());
  f.now += 2s;
  p->sweep();
  f.settle();
  REQUIRE(f.outcomes.size() == 1);
  CHECK_FALSE(f.outcomes[0].second.ok());
  CHECK(f.outcomes[0].second.error().kind == bus_errc::timeout);
  p->answered(1, stored().get());
  f.settle();
  CHECK(f.outcomes.size() == 1);
  CHECK(f.confirmed == 0);
  CHECK(f.sent.size() == 1);  // without retries it is sent once
}

TEST_CASE("publisher: on a replicated stream, no responders and an unanswered attempt are sent again with the same id") {
  fixture f;
  auto p = f.make(true);
  f.publish(*p, 1);
  REQUIRE(f.sent.size() == 1);
  const std::string msg_id = f.sent[0].msg_id;
  CHECK_FALSE(msg_id.empty());
  p->answered(1, no_responders().get());  // its stream is electing a leader
  CHECK(f.sent.size() == 1);              // sent again after a pause, not at once
  f.now += 300ms;
  p->sweep();
  REQUIRE(f.sent.size() == 2);
  CHECK(f.sent[1].msg_id == msg_id);
  CHECK(f.sent[1].at_once == f.sent[0].at_once);  // on the connection its reply inbox is on
  f.now += 2100ms;  // that attempt went unanswered
  p->sweep();
  REQUIRE(f.sent.size() == 3);
  CHECK(f.sent[2].msg_id == msg_id);
  p->answered(1, stored().get());
  f.settle();
  REQUIRE(f.outcomes.size() == 1);
  CHECK(f.outcomes[0].second.ok());
}

// The sweep runs on its own timer here, as in the adaptor, rather than being called: the node
// leading the stream killed, a burst sent at once is answered "no responders" until another
// leads, and only the sweep sends it again.
TEST_CASE("publisher: a burst sent at once while its stream has no leader is sent again by the sweep's timer") {
  fixture f;
  auto p = f.make(true);
  for (std::uint64_t id = 1; id <= 20; ++id) f.publish(*p, id);  // arms the sweep's timer
  REQUIRE(f.sent.size() == 16);  // at once; the other 4 wait for these to be answered
  for (std::uint64_t id = 1; id <= 16; ++id) p->answered(id, no_responders().get());
  f.io.run_for(600ms);  // the timer fires before the retries are due
  CHECK(f.sent.size() == 16);
  f.now += 300ms;
  REQUIRE(f.run_until([&] { return f.sent.size() == 32; }));
  for (std::uint64_t id = 1; id <= 16; ++id) p->answered(id, stored().get());
  REQUIRE(f.sent.size() == 36);  // and the waiting ones go
  for (std::uint64_t id = 17; id <= 20; ++id) p->answered(id, stored().get());
  f.settle();
  CHECK(f.outcomes.size() == 20);
  for (const auto& [id, status] : f.outcomes) CHECK(status.ok());
}

TEST_CASE("publisher: a publish answered while its stream changes leader is asked again, not failed") {
  for (auto leader_changing : {&replicating, &sequence_mismatch}) {
    fixture f;
    auto p = f.make(true);
    f.publish(*p, 1);
    p->answered(1, leader_changing().get());
    f.settle();
    CHECK(f.outcomes.empty());
    f.now += 300ms;
    p->sweep();
    CHECK(f.sent.size() == 2);
    CHECK(f.sent[1].msg_id == f.sent[0].msg_id);  // the stream stores it once
    p->answered(1, stored().get());
    f.settle();
    REQUIRE(f.outcomes.size() == 1);
    CHECK(f.outcomes[0].second.ok());
  }
}

TEST_CASE("publisher: without retries, no responders fails the publish at once") {
  fixture f;
  auto p = f.make(false);
  f.publish(*p, 1);
  p->answered(1, no_responders().get());
  f.settle();
  REQUIRE(f.outcomes.size() == 1);
  CHECK_FALSE(f.outcomes[0].second.ok());
  CHECK(f.outcomes[0].second.error().text.find("no JetStream stream stores this subject") != std::string::npos);
}

TEST_CASE("publisher: a refused subject fails its publishes in flight, and only those") {
  fixture f;
  auto p = f.make(false);
  f.publish(*p, 1, "amqp._.denied");
  f.publish(*p, 2, "amqp._.fine");
  p->refuse_subject("amqp._.denied", failure("publish to amqp._.denied", "not permitted", bus_errc::denied));
  f.settle();
  REQUIRE(f.outcomes.size() == 1);
  CHECK(f.outcomes[0].first == 1);
  CHECK(f.outcomes[0].second.error().kind == bus_errc::denied);
  p->answered(2, stored().get());
  f.settle();
  CHECK(f.outcomes.size() == 2);
}

TEST_CASE("publisher: close fails every open publish once, and every later one") {
  fixture f;
  auto p = f.make(false);
  for (std::uint64_t id = 1; id <= 20; ++id) f.publish(*p, id);  // in flight and waiting
  p->close("closed");
  f.publish(*p, 21);
  f.settle();
  CHECK(f.outcomes.size() == 21);
  for (const auto& [id, status] : f.outcomes) CHECK_FALSE(status.ok());
  p->answered(1, stored().get());
  f.settle();
  CHECK(f.outcomes.size() == 21);
  CHECK(f.confirmed == 0);
}
