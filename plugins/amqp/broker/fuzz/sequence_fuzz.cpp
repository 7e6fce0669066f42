// libFuzzer target: the input is a sequence of client actions on one broker (several connections,
// several channels each) over the channel tests' in-memory bus (tests/fake_bus.hpp). After
// every action the client models check what arrived (client_model.hpp); at the end everything is
// closed, the io_context runs until it is quiet, and every delivery the bus handed out must
// have been settled exactly once. See the broker's README for the invariants.
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded (g++ 12)

#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "amqp/broker/broker.hpp"
#include "amqp/routing/subject.hpp"
#include "fake_bus.hpp"
#include "fuzz_connection.hpp"

namespace amqp::broker::fuzz {
namespace {

// Small alphabets, so that names collide and the same objects are touched from many sides.
constexpr std::array<const char*, 3> queues{"q1", "q2", "q3"};
constexpr std::array<const char*, 5> exchanges{"", "x1", "x2", "amq.topic", "missing"};
constexpr std::array<const char*, 3> exchange_types{"direct", "fanout", "topic"};
constexpr std::array<const char*, 5> keys{"q1", "q2", "q3", "k", "k.a"};
constexpr std::array<const char*, 3> consumer_tags{"c1", "c2", ""};  // "": the server names it
constexpr std::size_t connection_slots = 3;
constexpr std::uint16_t channel_ids = 3;
constexpr int max_actions = 64;
constexpr int quiet_rounds_bound = 2000;
constexpr std::size_t livelock_bound = 200000;  // handlers in a row without the io_context running dry

template <std::size_t N>
std::string pick(FuzzedDataProvider& in, const std::array<const char*, N>& names) {
  return names[in.ConsumeIntegralInRange<std::size_t>(0, N - 1)];
}

class world {
 public:
  world() : bus_(std::make_shared<test::fake_bus>(io_)) {
    settings s;
    s.node_name = "fuzz-node";
    s.log_warning = [](std::string_view) {};
    broker_ = make_broker(io_, bus_, std::move(s));
  }

  void run(FuzzedDataProvider& in) {
    for (int step = 0; step < max_actions && in.remaining_bytes() > 0; ++step) {
      act(in);
      drop_excepted();
    }
    finish();
  }

 private:
  enum class action : std::uint8_t {
    open, close, exchange_declare, exchange_delete, queue_declare, queue_bind, queue_unbind, queue_delete,
    queue_purge, qos, consume, cancel, publish, confirm_select, get, ack, nack, reject, recover, store,
    manual_publishes, complete_publish, poll, wait, drop, last = drop
  };
  static constexpr const char* action_names[] = {
      "open", "close", "exchange.declare", "exchange.delete", "queue.declare", "queue.bind", "queue.unbind",
      "queue.delete", "queue.purge", "basic.qos", "basic.consume", "basic.cancel", "basic.publish",
      "confirm.select", "basic.get", "basic.ack", "basic.nack", "basic.reject", "basic.recover", "store",
      "manual publishes", "complete a publish", "poll", "wait", "drop the connection"};

  void act(FuzzedDataProvider& in) {
    const auto what = static_cast<action>(in.ConsumeIntegralInRange<int>(0, static_cast<int>(action::last)));
    if (tracing()) std::fprintf(stderr, "action %d (%s)\n", static_cast<int>(what), action_names[static_cast<int>(what)]);
    switch (what) {
      case action::store: return store(in);
      case action::manual_publishes: return bus_->set_manual_publishes(in.ConsumeBool());
      case action::complete_publish: return complete_publish(in);
      case action::poll: return poll(in.ConsumeIntegralInRange<int>(1, 16));
      case action::wait: return wait();
      default: break;
    }
    auto& c = connection(in.ConsumeIntegralInRange<std::size_t>(0, connection_slots - 1));
    const auto ch = in.ConsumeIntegralInRange<std::uint16_t>(1, channel_ids);
    if (tracing()) std::fprintf(stderr, "  on connection %llu channel %u%s\n", static_cast<unsigned long long>(c.connection_id()), ch, c.usable(ch) ? "" : " (not open)");
    if (what == action::drop) return c.drop();
    if (what == action::open) return void(c.open(ch));
    if (!c.usable(ch)) return;
    if (what == action::close) return c.close(ch);
    channel_action(what, c, ch, in);
  }

  void channel_action(action what, fuzz_connection& c, std::uint16_t ch, FuzzedDataProvider& in) {
    auto& client = c.client(ch);
    auto method = [&](wire::method m) {
      if (wire::info_of(m).synchronous) client.sent_synchronous();
      c.broker_channel(ch).on_method(std::move(m));
    };
    switch (what) {
      case action::exchange_declare: {
        wire::exchange_declare m;
        m.exchange = pick(in, exchanges);
        m.type = pick(in, exchange_types);
        m.passive = in.ConsumeBool();
        m.durable = in.ConsumeBool();
        m.auto_delete = in.ConsumeBool();
        return method(m);
      }
      case action::exchange_delete: {
        wire::exchange_delete_ m;
        m.exchange = pick(in, exchanges);
        m.if_unused = in.ConsumeBool();
        return method(m);
      }
      case action::queue_declare: {
        wire::queue_declare m;
        m.queue = pick(in, queues);
        m.passive = in.ConsumeBool();
        m.durable = in.ConsumeBool();
        m.exclusive = in.ConsumeBool();
        m.auto_delete = in.ConsumeBool();
        return method(m);
      }
      case action::queue_bind:
      case action::queue_unbind: {
        const auto queue = pick(in, queues);
        const auto exchange = pick(in, exchanges);
        const auto key = in.ConsumeBool() ? std::string("#") : pick(in, keys);
        if (what == action::queue_bind) return method(wire::queue_bind{0, queue, exchange, key, false, {}});
        return method(wire::queue_unbind{0, queue, exchange, key, {}});
      }
      case action::queue_delete: {
        wire::queue_delete_ m;
        m.queue = pick(in, queues);
        m.if_unused = in.ConsumeBool();
        m.if_empty = in.ConsumeBool();
        return method(m);
      }
      case action::queue_purge: return method(wire::queue_purge{0, pick(in, queues), false});
      case action::qos: {
        const auto prefetch = in.ConsumeIntegralInRange<std::uint16_t>(0, 5);
        const bool global = in.ConsumeBool();
        client.sent_qos(prefetch, global);
        return method(wire::basic_qos{0, prefetch, global});
      }
      case action::consume: {
        wire::basic_consume m;
        m.queue = pick(in, queues);
        m.consumer_tag = pick(in, consumer_tags);
        m.no_ack = in.ConsumeBool();
        m.exclusive = in.ConsumeBool();
        client.sent_consume(m.no_ack);
        return method(m);
      }
      case action::cancel: return method(wire::basic_cancel{pick(in, consumer_tags), false});
      case action::publish: return publish(c, ch, in);
      case action::confirm_select:
        client.sent_confirm_select();
        return method(wire::confirm_select{false});
      case action::get: {
        const auto queue = pick(in, queues);
        const bool no_ack = in.ConsumeBool();
        client.sent_get(no_ack);
        return method(wire::basic_get{0, queue, no_ack});
      }
      case action::ack: {
        const auto tag = settle_tag(client, in);
        const bool multiple = in.ConsumeBool();
        client.sent_settle(tag, multiple);
        return method(wire::basic_ack{tag, multiple});
      }
      case action::nack: {
        const auto tag = settle_tag(client, in);
        const bool multiple = in.ConsumeBool();
        client.sent_settle(tag, multiple);
        return method(wire::basic_nack{tag, multiple, in.ConsumeBool()});
      }
      case action::reject: {
        const auto tag = settle_tag(client, in);
        client.sent_settle(tag, false);
        return method(wire::basic_reject{tag, in.ConsumeBool()});
      }
      case action::recover:
        client.sent_recover();
        return method(wire::basic_recover{in.ConsumeBool()});
      default: return;
    }
  }

  // Mostly a tag the client holds; sometimes one it settled already, one never given, or 0.
  static std::uint64_t settle_tag(const client_channel& client, FuzzedDataProvider& in) {
    const auto kind = in.ConsumeIntegralInRange<int>(0, 7);
    const auto pick = in.ConsumeIntegral<std::uint8_t>();
    if (kind < 5 && client.has_unacked()) return client.unacked_tag(pick);
    if (kind == 5 && client.last_tag() > 0) return 1 + pick % client.last_tag();
    if (kind == 6) return client.last_tag() + 1 + pick % 3;
    return 0;
  }

  void publish(fuzz_connection& c, std::uint16_t ch, FuzzedDataProvider& in) {
    wire::basic_publish m;
    m.exchange = pick(in, exchanges);
    m.routing_key = pick(in, keys);
    m.mandatory = in.ConsumeBool();
    c.client(ch).sent_publish();
    c.broker_channel(ch).on_publish(std::move(m), wire::encode_properties({}), "body");
  }

  // A message another publisher stored, on a queue's default route or an exchange's key.
  void store(FuzzedDataProvider& in) {
    const auto exchange = in.ConsumeBool() ? std::string() : pick(in, exchanges);
    const auto key = pick(in, keys);
    if (auto subject = routing::publish_subject(exchange, key); subject.ok())
      bus_->store(*subject, wire::encode_properties({}), "stored");
  }

  void complete_publish(FuzzedDataProvider& in) {
    const auto n = bus_->publish_count();
    if (n == 0) return;
    const auto start = in.ConsumeIntegralInRange<std::size_t>(0, n - 1);
    const auto outcome = in.ConsumeIntegralInRange<int>(0, 2);
    for (std::size_t i = 0; i < n; ++i) {
      const auto index = (start + i) % n;
      if (bus_->answered(index)) continue;
      if (outcome == 0) return bus_->complete_publish(index, bus::bus_ok());
      const auto kind = outcome == 1 ? bus::bus_errc::failed : bus::bus_errc::denied;
      return bus_->complete_publish(index, bus::bus_error{"fuzz: the bus refused the publish", 0, kind});
    }
  }

  fuzz_connection& connection(std::size_t slot) {
    auto& c = connections_[slot];
    if (!c || c->ended()) {
      if (c) ended_.push_back(std::move(c));  // kept: a late send to it must be seen
      c = std::make_unique<fuzz_connection>(io_, broker_, bus_, ++last_connection_id_);
    }
    return *c;
  }

  void drop_excepted() {
    for (auto& c : connections_)
      if (c && c->excepted()) c->drop();
  }

  void poll(int steps) {
    for (int i = 0; i < steps; ++i) {
      io_.restart();
      if (io_.poll_one() == 0) return;
      drop_excepted();
    }
  }

  // Runs what is ready, one handler at a time, so that work that keeps posting more (a livelock)
  // is reported as such instead of never returning.
  std::size_t ready_work() {
    std::size_t ran = 0;
    for (;;) {
      io_.restart();
      if (io_.poll_one() == 0) return ran;
      if (++ran > livelock_bound) violated("the io_context never runs out of ready work: a livelock");
    }
  }

  // Lets the short timers (a consumer's 2 ms top-up) fire.
  void wait() {
    io_.restart();
    io_.run_for(std::chrono::milliseconds(3));
    drop_excepted();
  }

  // Ready work until none is left and the short timers have had their turn, twice.
  void quiesce() {
    for (int quiet = 0, round = 0; quiet < 2 && round < quiet_rounds_bound; ++round) {
      const auto ran = ready_work();
      drop_excepted();
      if (ran > 0) {
        quiet = 0;
        continue;
      }
      io_.restart();
      quiet = io_.run_for(std::chrono::milliseconds(3)) > 0 ? 0 : quiet + 1;
      drop_excepted();
    }
  }

  void finish() {
    // Every publish the bus still holds is answered, then every confirming channel that is still
    // open must have had each of its publishes confirmed.
    bus_->set_manual_publishes(false);
    for (std::size_t i = 0; i < bus_->publish_count(); ++i)
      if (!bus_->answered(i)) bus_->complete_publish(i, bus::bus_ok());
    quiesce();
    for (auto& c : connections_)
      if (c && !c->ended())
        for (auto ch : c->usable_channels()) c->client(ch).check_all_confirmed();
    for (auto& c : connections_)
      if (c) c->drop();
    quiesce();
    check_settlements();
    stop_broker(*broker_);
    quiesce();
    std::weak_ptr<broker> gone = broker_;
    broker_.reset();
    connections_ = {};
    ended_.clear();
    quiesce();
    if (!gone.expired()) violated("something still holds the broker after its stop and every connection's end");
    bus_->close();
  }

  // Each delivery the bus handed out was settled exactly once, and the bus holds none.
  void check_settlements() const {
    for (const auto& h : bus_->handed_out()) {
      const auto times = bus_->times_settled(h.reply);
      if (times > 1)
        violated("delivery of message " + std::to_string(h.seq) + " from " + h.consumer + " settled " +
                 std::to_string(times) + " times");
      if (bus_->holds(h.reply))
        violated("the bus still holds message " + std::to_string(h.seq) + " of " + h.consumer +
                 " delivered to a channel that is gone: never settled");
    }
  }

  boost::asio::io_context io_;
  std::shared_ptr<test::fake_bus> bus_;
  std::shared_ptr<broker> broker_;
  std::array<std::unique_ptr<fuzz_connection>, connection_slots> connections_;
  std::vector<std::unique_ptr<fuzz_connection>> ended_;
  std::uint64_t last_connection_id_ = 0;
};

}  // namespace
}  // namespace amqp::broker::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  amqp::broker::fuzz::world w;
  w.run(in);
  return 0;
}
