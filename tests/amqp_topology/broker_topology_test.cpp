// The broker's topology behaviour (issue 4; HIP-1326 §1, §2, §4, §6) through its seam, on a
// real bus client and a real nats-server. One process may hold several brokers: each is a
// replica of the adaptor (its own bus connection, mirror and watch) on the one bus.
#include <doctest/doctest.h>

#include <nats/nats.h>

#include "amqp/routing/topology.hpp"
#include "broker_driver.hpp"
#include "channel_context.hpp"  // white box: the mirror and filters of a replica
#include "nats_process.hpp"

namespace topology_test {
namespace {

// One replica: its own bus connection and broker on shared io threads.
struct replica {
  replica(io_threads& io, const std::string& url, std::string node = {})
      : bus(open_bus(url)), b(make(io, bus, std::move(node))) {}
  ~replica() {
    broker::stop_broker(*b);
    bus->close();
  }
  static std::shared_ptr<broker::broker> make(io_threads& io, std::shared_ptr<amqp::bus::client> bus,
                                              std::string node) {
    broker::settings s;
    s.node_name = std::move(node);
    return broker::make_broker(io.io(), std::move(bus), std::move(s));
  }
  std::unique_ptr<connection> connect(std::uint64_t id) {
    auto c = std::make_unique<connection>(*io_, b, id);
    c->open_channel(1);
    return c;
  }
  std::shared_ptr<amqp::bus::client> bus;
  std::shared_ptr<broker::broker> b;
  boost::asio::io_context* io_ = nullptr;
};

struct fixture {
  temp_dir dir;
  nats_process nats{dir.path()};
  io_threads io;
  std::unique_ptr<replica> a = make_replica("node-a");

  std::unique_ptr<replica> make_replica(std::string node) {
    auto r = std::make_unique<replica>(io, nats.url(), std::move(node));
    r->io_ = &io.io();
    return r;
  }
};

wire::exchange_declare declare_exchange(std::string name, std::string type, bool durable = true) {
  wire::exchange_declare m;
  m.exchange = std::move(name);
  m.type = std::move(type);
  m.durable = durable;
  return m;
}

wire::queue_declare declare_queue(std::string name, bool durable = true) {
  wire::queue_declare m;
  m.queue = std::move(name);
  m.durable = durable;
  return m;
}

wire::queue_bind bind_queue(std::string q, std::string x, std::string key) {
  wire::queue_bind m;
  m.queue = std::move(q);
  m.exchange = std::move(x);
  m.routing_key = std::move(key);
  return m;
}

void require_closed(const event& e, wire::reply_code code, std::string_view fragment) {
  const auto* c = as_closed(e);
  REQUIRE_MESSAGE(c != nullptr, "expected a channel exception");
  CHECK_FALSE(c->connection);
  CHECK(c->code == code);
  CHECK_MESSAGE(c->text.find(fragment) != std::string::npos, c->text);
}

// The consumer's configuration as the server holds it, read with a raw JetStream API call.
nlohmann::json consumer_config(const std::string& url, const std::string& durable) {
  natsConnection* nc = nullptr;
  REQUIRE(natsConnection_ConnectTo(&nc, url.c_str()) == NATS_OK);
  natsMsg* reply = nullptr;
  const std::string subject = "$JS.API.CONSUMER.INFO.AMQP." + durable;
  natsStatus s = natsConnection_RequestString(&reply, nc, subject.c_str(), "", 5000);
  nlohmann::json doc;
  if (s == NATS_OK) doc = nlohmann::json::parse(std::string(natsMsg_GetData(reply), natsMsg_GetDataLength(reply)));
  natsMsg_Destroy(reply);
  natsConnection_Destroy(nc);
  REQUIRE(s == NATS_OK);
  return doc;
}

}  // namespace

TEST_CASE_FIXTURE(fixture, "exchange.declare: kinds, redeclare, passive, refusals") {
  auto c = a->connect(1);
  CHECK(as<wire::exchange_declare_ok>(c->call(1, declare_exchange("orders", "topic"))));
  CHECK(as<wire::exchange_declare_ok>(c->call(1, declare_exchange("orders", "topic"))));

  auto passive = declare_exchange("orders", "");
  passive.passive = true;
  CHECK(as<wire::exchange_declare_ok>(c->call(1, passive)));

  SUBCASE("a kind mismatch is 406 naming both kinds") {
    require_closed(c->call(1, declare_exchange("orders", "fanout")), wire::reply_code::precondition_failed,
                   "received 'fanout' but current is 'topic'");
  }
  SUBCASE("passive on a missing exchange is 404 and the connection survives") {
    auto missing = declare_exchange("nowhere", "");
    missing.passive = true;
    require_closed(c->call(1, missing), wire::reply_code::not_found, "no exchange 'nowhere' in vhost '/'");
    c->open_channel(2);
    CHECK(as<wire::exchange_declare_ok>(c->call(2, declare_exchange("orders", "topic"))));
  }
  SUBCASE("headers is 540 with the remedy") {
    require_closed(c->call(1, declare_exchange("h", "headers")), wire::reply_code::not_implemented,
                   "routes on something other than a name");
  }
  SUBCASE("a dotted name is refused naming it") {
    require_closed(c->call(1, declare_exchange("a.b", "direct")), wire::reply_code::precondition_failed, "a.b");
  }
  SUBCASE("amq.* names are reserved (403), the standard ones exist") {
    require_closed(c->call(1, declare_exchange("amq.mine", "direct")), wire::reply_code::access_refused, "amq.");
    c->open_channel(2);
    auto standard = declare_exchange("amq.topic", "");
    standard.passive = true;
    CHECK(as<wire::exchange_declare_ok>(c->call(2, standard)));
  }
  SUBCASE("exchange.bind is 540 with the remedy") {
    wire::exchange_bind m;
    m.destination = "orders";
    m.source = "amq.topic";
    require_closed(c->call(1, m), wire::reply_code::not_implemented, "bind the queue to each exchange");
  }
}

TEST_CASE_FIXTURE(fixture, "exchange.delete: default/standard refused, missing ok, if-unused") {
  auto c = a->connect(1);
  wire::exchange_delete_ del;
  del.exchange = "never-declared";
  CHECK(as<wire::exchange_delete_ok>(c->call(1, del)));

  CHECK(as<wire::exchange_declare_ok>(c->call(1, declare_exchange("logs", "fanout"))));
  CHECK(as<wire::queue_declare_ok>(c->call(1, declare_queue("log-reader"))));
  CHECK(as<wire::queue_bind_ok>(c->call(1, bind_queue("log-reader", "logs", ""))));

  SUBCASE("if-unused with a binding is 406") {
    del.exchange = "logs";
    del.if_unused = true;
    require_closed(c->call(1, del), wire::reply_code::precondition_failed, "in use");
  }
  SUBCASE("delete takes the bindings with it") {
    del.exchange = "logs";
    CHECK(as<wire::exchange_delete_ok>(c->call(1, del)));
    CHECK(as<wire::exchange_declare_ok>(c->call(1, declare_exchange("logs", "fanout"))));
    bool bound = a->b->read_topology([](const auto& t) { return t.has_bindings("logs"); });
    CHECK_FALSE(bound);
  }
  SUBCASE("the standard exchanges cannot be deleted") {
    del.exchange = "amq.direct";
    require_closed(c->call(1, del), wire::reply_code::access_refused, "amq.direct");
  }
}

TEST_CASE_FIXTURE(fixture, "queue.declare: server-named, passive, redeclare, counts") {
  auto c = a->connect(1);
  auto named = c->call(1, declare_queue(""));
  const auto* ok = as<wire::queue_declare_ok>(named);
  REQUIRE(ok);
  CHECK(ok->queue.rfind("amq-gen-", 0) == 0);
  CHECK(ok->message_count == 0);
  CHECK(ok->consumer_count == 0);

  SUBCASE("passive on a missing queue is 404") {
    auto m = declare_queue("absent");
    m.passive = true;
    require_closed(c->call(1, m), wire::reply_code::not_found, "no queue 'absent' in vhost '/'");
  }
  SUBCASE("redeclaring with other flags is 406 naming both") {
    CHECK(as<wire::queue_declare_ok>(c->call(1, declare_queue("jobs", true))));
    require_closed(c->call(1, declare_queue("jobs", false)), wire::reply_code::precondition_failed,
                   "inequivalent arg 'durable' for queue 'jobs' in vhost '/': received 'false' but current is 'true'");
  }
  SUBCASE("a dotted queue name is refused naming it") {
    require_closed(c->call(1, declare_queue("a.b")), wire::reply_code::precondition_failed, "a.b");
  }
  SUBCASE("message count is what the queue holds") {
    CHECK(as<wire::queue_declare_ok>(c->call(1, declare_queue("counted"))));
    std::promise<void> stored;
    a->bus->publish("amqp._.counted", "", "hello", a->io_->get_executor(),
                    [&](amqp::bus::bus_status s) { REQUIRE(s.ok()); stored.set_value(); });
    stored.get_future().wait();
    auto again = c->call(1, declare_queue("counted"));
    REQUIRE(as<wire::queue_declare_ok>(again));
    CHECK(as<wire::queue_declare_ok>(again)->message_count == 1);
  }
}

TEST_CASE_FIXTURE(fixture, "exclusive queues belong to one connection") {
  auto owner = a->connect(1);
  auto other = a->connect(2);
  auto m = declare_queue("mine", false);
  m.exclusive = true;
  CHECK(as<wire::queue_declare_ok>(owner->call(1, m)));
  require_closed(other->call(1, m), wire::reply_code::resource_locked, "exclusive");
  other->open_channel(2);
  require_closed(other->call(2, bind_queue("mine", "amq.direct", "k")), wire::reply_code::resource_locked, "mine");

  owner->close();  // the owner goes: the queue goes
  other->open_channel(3);
  auto passive = declare_queue("mine");
  passive.passive = true;
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    auto e = other->call(3, passive);
    if (as_closed(e)) {
      gone = as_closed(e)->code == wire::reply_code::not_found;
      other->open_channel(3);
    }
  }
  CHECK(gone);
}

TEST_CASE_FIXTURE(fixture, "queue.bind validates the key against the kind; unbind; purge; delete") {
  auto c = a->connect(1);
  CHECK(as<wire::exchange_declare_ok>(c->call(1, declare_exchange("t", "topic"))));
  CHECK(as<wire::exchange_declare_ok>(c->call(1, declare_exchange("d", "direct"))));
  CHECK(as<wire::queue_declare_ok>(c->call(1, declare_queue("q"))));

  SUBCASE("# before the end is 540 with the remedy") {
    require_closed(c->call(1, bind_queue("q", "t", "a.#.b")), wire::reply_code::not_implemented, "last");
  }
  SUBCASE("a wildcard on a direct exchange is refused") {
    const auto e = c->call(1, bind_queue("q", "d", "a.*"));
    REQUIRE(as_closed(e));
  }
  SUBCASE("binding to a missing exchange is 404") {
    require_closed(c->call(1, bind_queue("q", "nope", "k")), wire::reply_code::not_found, "no exchange 'nope'");
  }
  SUBCASE("binding a missing queue is 404") {
    require_closed(c->call(1, bind_queue("nope", "t", "k")), wire::reply_code::not_found, "no queue 'nope'");
  }
  SUBCASE("bind, unbind and purge") {
    CHECK(as<wire::queue_bind_ok>(c->call(1, bind_queue("q", "t", "a.#"))));
    auto filters = a->b->filters_of("q");
    CHECK(filters.exact == std::vector<std::string>{"amqp._.q", "amqp.t.a", "amqp.t.a.>"});

    std::promise<void> stored;
    a->bus->publish("amqp.t.a.b", "", "x", a->io_->get_executor(),
                    [&](amqp::bus::bus_status s) { REQUIRE(s.ok()); stored.set_value(); });
    stored.get_future().wait();
    wire::queue_purge purge;
    purge.queue = "q";
    auto purged = c->call(1, purge);
    REQUIRE(as<wire::queue_purge_ok>(purged));
    CHECK(as<wire::queue_purge_ok>(purged)->message_count == 1);

    wire::queue_unbind unbind;
    unbind.queue = "q";
    unbind.exchange = "t";
    unbind.routing_key = "a.#";
    CHECK(as<wire::queue_unbind_ok>(c->call(1, unbind)));
    CHECK(a->b->filters_of("q").exact == std::vector<std::string>{"amqp._.q"});
  }
  SUBCASE("delete: if-empty, missing, count") {
    std::promise<void> stored;
    a->bus->publish("amqp._.q", "", "x", a->io_->get_executor(),
                    [&](amqp::bus::bus_status s) { REQUIRE(s.ok()); stored.set_value(); });
    stored.get_future().wait();
    wire::queue_delete_ del;
    del.queue = "q";
    del.if_empty = true;
    require_closed(c->call(1, del), wire::reply_code::precondition_failed, "not empty");
    c->open_channel(2);
    del.if_empty = false;
    auto deleted = c->call(2, del);
    REQUIRE(as<wire::queue_delete_ok>(deleted));
    CHECK(as<wire::queue_delete_ok>(deleted)->message_count == 1);
    CHECK(as<wire::queue_delete_ok>(c->call(2, del)));  // absent: ok, as RabbitMQ
  }
}

TEST_CASE_FIXTURE(fixture, "channel.flow, tx and confirm.select") {
  auto c = a->connect(1);
  auto flow = c->call(1, wire::channel_flow{true});
  REQUIRE(as<wire::channel_flow_ok>(flow));
  CHECK(as<wire::channel_flow_ok>(flow)->active);
  CHECK(as<wire::confirm_select_ok>(c->call(1, wire::confirm_select{false})));
  c->send_only(1, wire::confirm_select{true});  // no_wait: no answer
  CHECK(c->quiet(1, 300ms));
  SUBCASE("flow(false) is 540 naming the remedy") {
    require_closed(c->call(1, wire::channel_flow{false}), wire::reply_code::not_implemented, "basic.qos");
  }
  SUBCASE("tx.select is 540 naming confirm.select") {
    require_closed(c->call(1, wire::tx_select{}), wire::reply_code::not_implemented, "confirm.select");
  }
}

TEST_CASE_FIXTURE(fixture, "two replicas share one topology") {
  auto b = make_replica("node-b");
  auto ca = a->connect(1);
  auto cb = b->connect(2);

  CHECK(as<wire::exchange_declare_ok>(ca->call(1, declare_exchange("shared-x", "direct"))));
  CHECK(as<wire::queue_declare_ok>(ca->call(1, declare_queue("shared"))));
  CHECK(as<wire::queue_bind_ok>(ca->call(1, bind_queue("shared", "shared-x", "k0"))));

  // Visible on B immediately after declare-ok.
  auto passive = declare_queue("shared");
  passive.passive = true;
  CHECK(as<wire::queue_declare_ok>(cb->call(2, passive)));
  auto passive_x = declare_exchange("shared-x", "");
  passive_x.passive = true;
  CHECK(as<wire::exchange_declare_ok>(cb->call(2, passive_x)));

  // Concurrent binds to one queue from both replicas: every one survives.
  for (int i = 1; i <= 6; ++i) {
    ca->send_only(1, bind_queue("shared", "shared-x", "a" + std::to_string(i)));
    cb->send_only(2, bind_queue("shared", "shared-x", "b" + std::to_string(i)));
  }
  for (int i = 1; i <= 6; ++i) {
    CHECK(as<wire::queue_bind_ok>(ca->next(1)));
    CHECK(as<wire::queue_bind_ok>(cb->next(2)));
  }
  auto stored = a->bus->kv_get("q.shared");
  REQUIRE(stored);
  auto def = amqp::routing::parse_queue(stored->value);
  REQUIRE(def);
  CHECK(def->bindings.size() == 13);

  // The consumer carries all of them (2.9: their cover; >= 2.10: exactly them).
  auto expected = b->b->filters_of("shared");
  CHECK(expected.exact.size() == 14);
  auto config = consumer_config(nats.url(), "shared")["config"];
  if (a->bus->multi_filter()) {
    CHECK(config["filter_subjects"].get<std::vector<std::string>>() == expected.exact);
  } else {
    CHECK(config["filter_subject"].get<std::string>() == expected.cover);
    CHECK(expected.cover == "amqp.*.*");
    CHECK_FALSE(config.contains("filter_subjects"));
  }

  // A delete on A is seen on B.
  wire::queue_delete_ del;
  del.queue = "shared";
  CHECK(as<wire::queue_delete_ok>(ca->call(1, del)));
  require_closed(cb->call(2, passive), wire::reply_code::not_found, "no queue 'shared'");
}

TEST_CASE("restart: durable topology survives, transient does not") {
  temp_dir dir;
  nats_process nats{dir.path()};
  io_threads io;
  {
    replica r(io, nats.url(), "node-r");
    r.io_ = &io.io();
    auto c = r.connect(1);
    CHECK(as<wire::exchange_declare_ok>(c->call(1, declare_exchange("keep-x", "topic", true))));
    CHECK(as<wire::exchange_declare_ok>(c->call(1, declare_exchange("drop-x", "topic", false))));
    CHECK(as<wire::queue_declare_ok>(c->call(1, declare_queue("keep", true))));
    CHECK(as<wire::queue_declare_ok>(c->call(1, declare_queue("drop", false))));
    CHECK(as<wire::queue_bind_ok>(c->call(1, bind_queue("keep", "keep-x", "a.*"))));
    c->close();
  }
  nats.restart();
  {
    replica r(io, nats.url(), "node-r");
    r.b->read_topology([](const amqp::routing::topology& t) {
      CHECK(t.find_exchange("keep-x") != nullptr);
      CHECK(t.find_exchange("drop-x") == nullptr);
      CHECK(t.find_queue("drop") == nullptr);
      const auto* keep = t.find_queue("keep");
      REQUIRE(keep != nullptr);
      CHECK(keep->bindings == std::vector<amqp::routing::binding>{{"keep-x", "a.*"}});
      return 0;
    });
    auto info = r.bus->queue_info("keep");
    CHECK(info.ok());
  }
}

TEST_CASE("a crashed node's transient queues end when that node restarts") {
  temp_dir dir;
  nats_process nats{dir.path()};
  io_threads io;
  {
    // No stop_broker: the process "crashed" with its transient queue in the bucket.
    auto bus = open_bus(nats.url());
    auto b = replica::make(io, bus, "node-c");
    connection c(io.io(), b, 1);
    c.open_channel(1);
    CHECK(as<wire::queue_declare_ok>(c.call(1, declare_queue("temp", false))));
    bus->close();
  }
  auto other = std::make_unique<replica>(io, nats.url(), "node-other");
  CHECK(other->b->read_topology([](const auto& t) { return t.find_queue("temp") != nullptr; }));
  replica restarted(io, nats.url(), "node-c");
  CHECK(restarted.b->read_topology([](const auto& t) { return t.find_queue("temp") == nullptr; }));
  auto gone = restarted.bus->kv_get("q.temp");
  CHECK_FALSE(gone.ok());
}

}  // namespace topology_test
