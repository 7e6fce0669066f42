// Stream queues' own streams against the real server: made with their retention and changed in
// place, copies stored once per Nats-Msg-Id, readers (ack policy none) starting where asked and
// reading the same messages side by side.
#include <boost/asio/io_context.hpp>
#include <doctest/doctest.h>

#include <deque>

#include "bus_harness.hpp"

using namespace amqp::bus;
using namespace amqp::bus::test;
using namespace std::chrono_literals;

namespace {

struct harness : bus_harness {
  bus_status copy(const std::string& queue, const std::string& id, const std::string& body,
                  const std::string& routed_as = "amqp.d.s") {
    std::optional<bus_status> result;
    bus->publish_to_queue_stream(queue, id, "", body, routed_as, io.get_executor(),
                                 [&](bus_status s) { result = std::move(s); });
    REQUIRE(run_until([&] { return result.has_value(); }));
    return *result;
  }

  // The bodies a new reader starting at `start` gets, `n` of them at most.
  std::vector<delivery> read(const std::string& queue, const stream_start& start, std::size_t n,
                             std::chrono::milliseconds wait = 3s) {
    auto reader = bus->create_stream_reader(queue, start);
    REQUIRE_MESSAGE(reader.ok(), reader.error().text);
    auto got = std::make_shared<std::deque<delivery>>();
    puller_callbacks cb;
    cb.on_delivery = [got](delivery d) { got->push_back(std::move(d)); };
    auto p = bus->make_stream_puller(queue, *reader, io.get_executor(), std::move(cb));
    p->request(static_cast<std::uint32_t>(n), 5s);
    run_until([&] { return got->size() >= n; }, wait);
    p->stop();
    CHECK(bus->delete_stream_reader(queue, *reader).ok());
    return {got->begin(), got->end()};
  }
};

std::vector<std::string> bodies(const std::vector<delivery>& ds) {
  std::vector<std::string> out;
  for (const auto& d : ds) out.push_back(d.body);
  return out;
}

}  // namespace

TEST_CASE("a stream queue's stream: limits retention, its subject, its age and byte bounds, changed in place") {
  harness h;
  REQUIRE(h.bus->ensure_queue_stream("s", stream_limits{3600, 1'000'000}).ok());
  auto info = h.server.api("STREAM.INFO." + queue_stream_name("s"));
  const auto& config = info["config"];
  CHECK(config["retention"] == "limits");
  CHECK(config["subjects"] == nlohmann::json{"amqp-stream.s"});
  CHECK(config["max_age"] == 3600LL * 1'000'000'000LL);
  CHECK(config["max_bytes"] == 1'000'000);
  CHECK(config["discard"] == "old");
  REQUIRE(h.bus->ensure_queue_stream("s", stream_limits{0, -1}).ok());
  auto changed = h.server.api("STREAM.INFO." + queue_stream_name("s"));
  CHECK(changed["config"]["max_age"] == 0);
  CHECK(changed["config"]["max_bytes"] == -1);
  CHECK(changed["created"] == info["created"]);
  REQUIRE(h.bus->delete_queue_stream("s").ok());
  CHECK(h.bus->delete_queue_stream("s").ok());  // absent is fine
  CHECK(h.bus->queue_stream_state("s").error().kind == bus_errc::not_found);
}

TEST_CASE("a copy made again with the same id is stored once, with its routed-as subject and sequence") {
  harness h;
  REQUIRE(h.bus->ensure_queue_stream("s", {}).ok());
  REQUIRE(h.copy("s", "7", "a", "amqp.t.x.k").ok());
  REQUIRE(h.copy("s", "7", "a", "amqp.t.x.k").ok());
  REQUIRE(h.copy("s", "8", "b").ok());
  auto state = h.bus->queue_stream_state("s");
  REQUIRE(state.ok());
  CHECK(state->messages == 2);
  auto got = h.read("s", stream_start{stream_start::from::first}, 2);
  REQUIRE(got.size() == 2);
  CHECK(got[0].shown_subject() == "amqp.t.x.k");
  CHECK(got[0].stream_seq == 1);
  CHECK(got[1].stream_seq == 2);
}

TEST_CASE("readers start at first, last, a sequence, a time or what comes next, and two read the same messages") {
  harness h;
  REQUIRE(h.bus->ensure_queue_stream("s", {}).ok());
  for (int i = 0; i < 5; ++i) REQUIRE(h.copy("s", std::to_string(i), "m" + std::to_string(i)).ok());
  using from = stream_start::from;
  CHECK(bodies(h.read("s", {from::first}, 5)) == std::vector<std::string>{"m0", "m1", "m2", "m3", "m4"});
  CHECK(bodies(h.read("s", {from::first}, 5)) == std::vector<std::string>{"m0", "m1", "m2", "m3", "m4"});
  CHECK(bodies(h.read("s", {from::last}, 5, 500ms)) == std::vector<std::string>{"m4"});
  CHECK(bodies(h.read("s", {from::sequence, 4}, 5, 500ms)) == std::vector<std::string>{"m3", "m4"});
  CHECK(bodies(h.read("s", {from::sequence, 50}, 5, 500ms)).empty());  // beyond the end: waits
  stream_start recent{from::time};
  recent.time = std::chrono::system_clock::now() - 1h;
  CHECK(h.read("s", recent, 5).size() == 5);
  recent.time = std::chrono::system_clock::now() + 1h;
  CHECK(h.read("s", recent, 5, 500ms).empty());
  CHECK(h.read("s", {from::next}, 5, 500ms).empty());
  CHECK(h.bus->queue_stream_state("s")->messages == 5);  // nothing was taken away
}

TEST_CASE("a stream queue's duplicate window outlasts a long ack wait, and never its max age") {
  nats_server server;
  auto o = options_for(server.url());
  o.ack_wait = std::chrono::seconds(300);
  auto c = client::open(o);
  REQUIRE_MESSAGE(c.ok(), c.error().text);
  auto& bus = **c;
  REQUIRE(bus.ensure_queue_stream("long", {}).ok());
  CHECK(server.api("STREAM.INFO." + queue_stream_name("long"))["config"]["duplicate_window"] == 360LL * 1'000'000'000LL);
  REQUIRE(bus.ensure_queue_stream("aged", stream_limits{60, -1}).ok());
  CHECK(server.api("STREAM.INFO." + queue_stream_name("aged"))["config"]["duplicate_window"] == 60LL * 1'000'000'000LL);
  auto d = client::open(options_for(server.url()));  // the default ack wait: the server's window
  REQUIRE(d.ok());
  REQUIRE((*d)->ensure_queue_stream("plain", {}).ok());
  CHECK(server.api("STREAM.INFO." + queue_stream_name("plain"))["config"]["duplicate_window"] == 120LL * 1'000'000'000LL);
  client::close_and_release(*d, std::chrono::steady_clock::now() + 10s);
  client::close_and_release(*c, std::chrono::steady_clock::now() + 10s);
}
