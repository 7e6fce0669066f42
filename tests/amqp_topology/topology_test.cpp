// Topology through rabbitmq-c against the real `cloud` (HIP-1326: "Where it sits", "Exchanges,
// queues and bindings become subjects, consumers and filters", "What is not implemented, and how
// it says so", "Two facts a single process cannot answer for the fleet"): what the pika suite
// shows, what pika cannot send (every nowait flag: no -ok arrives and the effect happened, proven
// by the answer to the next synchronous method), exchange auto-delete, and two replicas on one
// bus.
#include <doctest/doctest.h>

#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <thread>

#include "cloud_process.hpp"
#include "rabbit_client.hpp"

using namespace cloud::test;
using namespace std::chrono_literals;

namespace {

amqp_bytes_t b(const char* s) { return amqp_cstring_bytes(s); }

std::string describe(const amqp_rpc_reply_t& reply) {
  if (auto closed = close_of(reply)) return std::to_string(closed->code) + " " + closed->text;
  if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) return amqp_error_string2(reply.library_error);
  return "reply type " + std::to_string(static_cast<int>(reply.reply_type));
}

// A logged-in connection that opens channels on demand; a channel the server closed is not
// reused, so every number is fresh.
class client {
 public:
  explicit client(std::uint16_t port) : conn_(port) {
    REQUIRE(conn_.login().reply_type == AMQP_RESPONSE_NORMAL);
  }
  amqp_connection_state_t get() const { return conn_.get(); }
  amqp_channel_t open() {
    const amqp_channel_t ch = next_++;
    amqp_channel_open(get(), ch);
    ok();
    return ch;
  }
  amqp_channel_t open_confirming() {
    const amqp_channel_t ch = open();
    amqp_confirm_select(get(), ch);
    ok();
    return ch;
  }
  // The last synchronous call was answered normally.
  void ok() const {
    const auto reply = amqp_get_rpc_reply(get());
    REQUIRE_MESSAGE(reply.reply_type == AMQP_RESPONSE_NORMAL, describe(reply));
  }

 private:
  rabbit_connection conn_;
  amqp_channel_t next_ = 1;
};

// The server closed `ch` with `code`, its text holding every fragment; answers close-ok.
void expect_channel_closed(client& c, amqp_channel_t ch, const std::optional<server_close>& closed, int code,
                           std::initializer_list<std::string_view> fragments) {
  REQUIRE_MESSAGE(closed, "expected a channel exception ", code);
  CHECK_FALSE(closed->connection);
  CHECK_MESSAGE(closed->code == code, closed->text);
  for (auto fragment : fragments) {
    CHECK_MESSAGE(closed->text.find(fragment) != std::string::npos, "'", closed->text, "' lacks '", fragment,
                  "'");
  }
  send_channel_close_ok(c.get(), ch);
}

// The last synchronous call on `ch` was refused with a channel exception.
void refused(client& c, amqp_channel_t ch, int code, std::initializer_list<std::string_view> fragments = {}) {
  expect_channel_closed(c, ch, close_of(amqp_get_rpc_reply(c.get())), code, fragments);
}

// Opens a channel, makes one synchronous call on it (`call(channel)`), and expects the call
// refused with a channel exception.
template <class Call>
void expect_refused(client& c, Call call, int code, std::initializer_list<std::string_view> fragments = {}) {
  const amqp_channel_t ch = c.open();
  call(ch);
  refused(c, ch, code, fragments);
}

// The first method the server sends on `ch`: it must be `id` (anything else, e.g. the -ok of
// a nowait method, fails the test).
amqp_method_t expect_next(client& c, amqp_channel_t ch, amqp_method_number_t id) {
  auto m = next_method(c.get(), ch, 15s);
  REQUIRE_MESSAGE(m, "no answer on channel ", ch);
  if (auto closed = close_of(*m)) FAIL("the server closed: ", closed->code, " ", closed->text);
  REQUIRE_MESSAGE(m->id == id, "expected method 0x", std::hex, id, ", got 0x", m->id);
  return *m;
}

// The first method on `ch` is a channel.close with `code`.
void expect_next_closed(client& c, amqp_channel_t ch, int code) {
  auto m = next_method(c.get(), ch, 15s);
  REQUIRE_MESSAGE(m, "no answer on channel ", ch);
  expect_channel_closed(c, ch, close_of(*m), code, {});
}

void declare_exchange(client& c, amqp_channel_t ch, const char* name, const char* kind, bool durable = false,
                      bool auto_delete = false) {
  amqp_exchange_declare(c.get(), ch, b(name), b(kind), 0, durable, auto_delete, 0, amqp_empty_table);
  c.ok();
}

amqp_queue_declare_ok_t declare_queue(client& c, amqp_channel_t ch, const char* name, bool durable = false,
                                      bool exclusive = false, bool auto_delete = false) {
  auto* ok = amqp_queue_declare(c.get(), ch, b(name), 0, durable, exclusive, auto_delete, amqp_empty_table);
  c.ok();
  return *ok;
}

void bind(client& c, amqp_channel_t ch, const char* queue, const char* exchange, const char* key) {
  amqp_queue_bind(c.get(), ch, b(queue), b(exchange), b(key), amqp_empty_table);
  c.ok();
}

void unbind(client& c, amqp_channel_t ch, const char* queue, const char* exchange, const char* key) {
  amqp_queue_unbind(c.get(), ch, b(queue), b(exchange), b(key), amqp_empty_table);
  c.ok();
}

// A publish on a confirming channel, answered by the server's ack (a basic.return first
// would fail: every publish here is meant to be routed).
void publish_confirmed(client& c, amqp_channel_t ch, const char* exchange, const char* key,
                       bool mandatory = false) {
  REQUIRE(amqp_basic_publish(c.get(), ch, b(exchange), b(key), mandatory, 0, nullptr, b("m")) ==
          AMQP_STATUS_OK);
  expect_next(c, ch, AMQP_BASIC_ACK_METHOD);
}

// A publish to `exchange` on a fresh confirming channel: true when refused with 404 (this
// replica's mirror no longer has the exchange), false when acked.
bool publish_refused(client& c, const char* exchange) {
  const auto ch = c.open_confirming();
  REQUIRE(amqp_basic_publish(c.get(), ch, b(exchange), b("k"), 0, 0, nullptr, b("m")) == AMQP_STATUS_OK);
  auto m = next_method(c.get(), ch, 15s);
  REQUIRE_MESSAGE(m, "no answer to a publish");
  if (m->id == AMQP_BASIC_ACK_METHOD) {
    amqp_channel_close(c.get(), ch, AMQP_REPLY_SUCCESS);
    return false;
  }
  expect_channel_closed(c, ch, close_of(*m), 404, {exchange});
  return true;
}

// Passive declares on a fresh channel: true = declare-ok, false = 404 (anything else fails).
bool passive_exists(client& c, bool queue, const char* name) {
  const amqp_channel_t ch = c.open();
  if (queue) {
    amqp_queue_declare(c.get(), ch, b(name), 1, 0, 0, 0, amqp_empty_table);
  } else {
    amqp_exchange_declare(c.get(), ch, b(name), b("direct"), 1, 0, 0, 0, amqp_empty_table);
  }
  const auto reply = amqp_get_rpc_reply(c.get());
  if (reply.reply_type == AMQP_RESPONSE_NORMAL) {
    amqp_channel_close(c.get(), ch, AMQP_REPLY_SUCCESS);
    return true;
  }
  expect_channel_closed(c, ch, close_of(reply), 404, {name});
  return false;
}
bool queue_exists(client& c, const char* name) { return passive_exists(c, true, name); }
bool exchange_exists(client& c, const char* name) { return passive_exists(c, false, name); }

// For what the server does after its answer (a queue deleted once its last consumer or its
// owning connection went): polls, bounded, never as the assertion itself.
template <class Predicate>
bool eventually(Predicate predicate) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return predicate();
}

std::string consume(client& c, amqp_channel_t ch, const char* queue) {
  auto* ok = amqp_basic_consume(c.get(), ch, b(queue), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
  c.ok();
  return to_string(ok->consumer_tag);
}

void cancel(client& c, amqp_channel_t ch, const std::string& tag) {
  amqp_basic_cancel(c.get(), ch, bytes_of(tag));
  c.ok();
}

bool is_subject_word(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                    ch == '_' || ch == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

TEST_CASE(
    "passive declares of absent names are 404, dotted names are refused naming them, the connection "
    "survives") {
  cloud_process cloud;
  client c(cloud.amqp_port());
  expect_refused(c,
                 [&](amqp_channel_t ch) {
                   amqp_queue_declare(c.get(), ch, b("absent-q"), 1, 0, 0, 0, amqp_empty_table);
                 },
                 404, {"no queue 'absent-q' in vhost '/'"});
  expect_refused(c,
                 [&](amqp_channel_t ch) {
                   amqp_exchange_declare(c.get(), ch, b("absent-x"), b("direct"), 1, 0, 0, 0,
                                         amqp_empty_table);
                 },
                 404, {"no exchange 'absent-x' in vhost '/'"});
  expect_refused(c,
                 [&](amqp_channel_t ch) {
                   amqp_queue_declare(c.get(), ch, b("orders.eu"), 0, 0, 0, 0, amqp_empty_table);
                 },
                 406, {"orders.eu"});
  expect_refused(c,
                 [&](amqp_channel_t ch) {
                   amqp_exchange_declare(c.get(), ch, b("a.b"), b("topic"), 0, 0, 0, 0, amqp_empty_table);
                 },
                 406, {"a.b"});
  // The same connection goes on declaring.
  CHECK(to_string(declare_queue(c, c.open(), "present-q").queue) == "present-q");
}

TEST_CASE("under CLOUD_AMQP_NAMES=escaped a name of octets that are not UTF-8 is refused naming the rule") {
  cloud_process cloud(std::map<std::string, std::string>{{"CLOUD_AMQP_NAMES", "escaped"}});
  client c(cloud.amqp_port());
  for (const char* name : {"caf\xe9", "\xff\xfe", "a\xed\xa0\x80"}) {  // Latin-1, no UTF-8 lead, a surrogate
    CAPTURE(name);
    expect_refused(c, [&](amqp_channel_t ch) { amqp_queue_declare(c.get(), ch, b(name), 0, 0, 0, 0, amqp_empty_table); },
                   406, {"not UTF-8", "a name is UTF-8 text"});
    expect_refused(c,
                   [&](amqp_channel_t ch) {
                     amqp_exchange_declare(c.get(), ch, b(name), b("direct"), 0, 0, 0, 0, amqp_empty_table);
                   },
                   406, {"not UTF-8"});
  }
  // What pika cannot send either: a name of every other octet, the NUL and the escape among them.
  std::string every;
  for (int octet = 1; octet < 0x80; ++octet) every += static_cast<char>(octet);
  every += std::string("\0=", 2);
  const amqp_channel_t ch = c.open();
  amqp_queue_declare(c.get(), ch, amqp_bytes_t{every.size(), every.data()}, 0, 0, 0, 1, amqp_empty_table);
  c.ok();
  amqp_basic_publish(c.get(), ch, amqp_empty_bytes, amqp_bytes_t{every.size(), every.data()}, 0, 0, nullptr, b("all"));
  auto* counted = amqp_queue_declare(c.get(), ch, amqp_bytes_t{every.size(), every.data()}, 1, 0, 0, 0, amqp_empty_table);
  c.ok();
  CHECK(counted->message_count == 1);
}

TEST_CASE("an exclusive queue is 405 from another connection and goes with its own") {
  cloud_process cloud;
  client owner(cloud.amqp_port());
  client other(cloud.amqp_port());
  const auto mine = owner.open();
  declare_queue(owner, mine, "excl-q", false, true);

  expect_refused(other,
                 [&](amqp_channel_t ch) {
                   amqp_queue_declare(other.get(), ch, b("excl-q"), 0, 0, 1, 0, amqp_empty_table);
                 },
                 405, {"excl-q"});
  expect_refused(other,
                 [&](amqp_channel_t ch) {
                   amqp_queue_bind(other.get(), ch, b("excl-q"), b("amq.direct"), b("k"), amqp_empty_table);
                 },
                 405, {"excl-q"});
  expect_refused(other,
                 [&](amqp_channel_t ch) {
                   amqp_basic_consume(other.get(), ch, b("excl-q"), amqp_empty_bytes, 0, 0, 0,
                                      amqp_empty_table);
                 },
                 405, {"excl-q"});
  expect_refused(other, [&](amqp_channel_t ch) { amqp_queue_purge(other.get(), ch, b("excl-q")); }, 405,
                 {"excl-q"});
  expect_refused(other, [&](amqp_channel_t ch) { amqp_queue_delete(other.get(), ch, b("excl-q"), 0, 0); },
                 405, {"excl-q"});

  bind(owner, mine, "excl-q", "amq.direct", "k");  // the owner uses it freely
  REQUIRE(amqp_connection_close(owner.get(), AMQP_REPLY_SUCCESS).reply_type == AMQP_RESPONSE_NORMAL);
  CHECK(eventually([&] { return !queue_exists(other, "excl-q"); }));
}

TEST_CASE(
    "declare-ok counts messages and consumers, server-named queues, auto-delete after the last consumer") {
  cloud_process cloud;
  client c(cloud.amqp_port());
  const auto ch = c.open_confirming();

  const auto named = declare_queue(c, ch, "");
  const std::string name = to_string(named.queue);
  CHECK(name.rfind("amq-gen-", 0) == 0);
  CHECK_MESSAGE(is_subject_word(name), name);
  CHECK(named.message_count == 0);
  CHECK(named.consumer_count == 0);
  CHECK(queue_exists(c, name.c_str()));

  declare_queue(c, ch, "count-q");
  publish_confirmed(c, ch, "", "count-q", true);
  publish_confirmed(c, ch, "", "count-q", true);
  const auto consumers = c.open();
  const auto first = consume(c, consumers, name.c_str());
  const auto second = consume(c, consumers, name.c_str());
  CHECK(declare_queue(c, ch, "count-q").message_count == 2);
  auto* passive = amqp_queue_declare(c.get(), ch, bytes_of(name), 1, 0, 0, 0, amqp_empty_table);
  c.ok();
  CHECK(passive->consumer_count == 2);

  const auto gone = c.open();
  declare_queue(c, gone, "auto-q", false, false, true);
  const auto a = consume(c, gone, "auto-q");
  const auto z = consume(c, gone, "auto-q");
  cancel(c, gone, a);
  CHECK(queue_exists(c, "auto-q"));  // one consumer left
  cancel(c, gone, z);
  CHECK(eventually([&] { return !queue_exists(c, "auto-q"); }));
  cancel(c, consumers, first);
  cancel(c, consumers, second);
}

TEST_CASE(
    "redeclare with other flags is 406, delete honours if-unused and if-empty, purge answers the count") {
  cloud_process cloud;
  client c(cloud.amqp_port());
  auto ch = c.open_confirming();
  declare_queue(c, ch, "flags-q", true);
  amqp_queue_declare(c.get(), ch, b("flags-q"), 0, 0, 0, 0, amqp_empty_table);
  refused(c, ch, 406, {"durable", "received 'false' but current is 'true'"});
  ch = c.open();
  declare_exchange(c, ch, "flags-x", "direct");
  amqp_exchange_declare(c.get(), ch, b("flags-x"), b("topic"), 0, 0, 0, 0, amqp_empty_table);
  refused(c, ch, 406, {"received 'topic' but current is 'direct'"});

  ch = c.open_confirming();
  declare_queue(c, ch, "del-q");
  const auto consuming = c.open();
  consume(c, consuming, "del-q");
  amqp_queue_delete(c.get(), ch, b("del-q"), 1, 0);
  refused(c, ch, 406, {"in use"});

  ch = c.open_confirming();
  declare_queue(c, ch, "full-q");
  publish_confirmed(c, ch, "", "full-q");
  amqp_queue_delete(c.get(), ch, b("full-q"), 0, 1);
  refused(c, ch, 406, {"not empty"});
  ch = c.open_confirming();
  auto* deleted = amqp_queue_delete(c.get(), ch, b("full-q"), 0, 0);
  c.ok();
  CHECK(deleted->message_count == 1);
  deleted = amqp_queue_delete(c.get(), ch, b("never-declared-q"), 0, 0);
  c.ok();
  CHECK(deleted->message_count == 0);

  declare_exchange(c, ch, "purge-x", "topic");
  declare_queue(c, ch, "purge-q");
  bind(c, ch, "purge-q", "purge-x", "a.#");
  for (const char* key : {"a", "a.b", "a.b.c"}) publish_confirmed(c, ch, "purge-x", key, true);
  auto* purged = amqp_queue_purge(c.get(), ch, b("purge-q"));
  c.ok();
  CHECK(purged->message_count == 3);
  CHECK(declare_queue(c, ch, "purge-q").message_count == 0);

  declare_exchange(c, ch, "used-x", "fanout");
  declare_queue(c, ch, "used-q");
  bind(c, ch, "used-q", "used-x", "");
  amqp_exchange_delete(c.get(), ch, b("used-x"), 1);
  refused(c, ch, 406, {"in use"});
  ch = c.open();
  unbind(c, ch, "used-q", "used-x", "");
  amqp_exchange_delete(c.get(), ch, b("used-x"), 1);
  c.ok();
  amqp_exchange_delete(c.get(), ch, b("used-x"), 0);  // absent: RabbitMQ answers delete-ok
  c.ok();
}

TEST_CASE(
    "refusals name the remedy and the connection survives: 540 kinds, bindings, exchange.bind, 403 amq.") {
  cloud_process cloud;
  client c(cloud.amqp_port());
  expect_refused(c,
                 [&](amqp_channel_t ch) {
                   amqp_exchange_declare(c.get(), ch, b("hx"), b("headers"), 0, 0, 0, 0, amqp_empty_table);
                 },
                 540, {"headers", "no subject"});

  declare_exchange(c, c.open(), "src-x", "fanout");
  expect_refused(c,
                 [&](amqp_channel_t ch) {
                   amqp_exchange_bind(c.get(), ch, b("src-x"), b("amq.topic"), b("k"), amqp_empty_table);
                 },
                 540, {"bind the queue to each exchange"});
  expect_refused(c,
                 [&](amqp_channel_t ch) {
                   amqp_exchange_unbind(c.get(), ch, b("src-x"), b("amq.topic"), b("k"), amqp_empty_table);
                 },
                 540, {"bind the queue to each exchange"});

  // A binding key the exchange's kind cannot carry on the bus is refused, naming the key.
  declare_queue(c, c.open(), "keys-q");
  expect_refused(c,
                 [&](amqp_channel_t ch) {
                   amqp_queue_bind(c.get(), ch, b("keys-q"), b("amq.topic"), b("a.#.b"), amqp_empty_table);
                 },
                 540, {"'a.#.b'", "last"});
  expect_refused(c,
                 [&](amqp_channel_t ch) {
                   amqp_queue_bind(c.get(), ch, b("keys-q"), b("amq.topic"), b("a.b*"), amqp_empty_table);
                 },
                 540, {"'a.b*'", "partial wildcard"});
  expect_refused(c,
                 [&](amqp_channel_t ch) {
                   amqp_queue_bind(c.get(), ch, b("keys-q"), b("amq.direct"), b("k.*"), amqp_empty_table);
                 },
                 540, {"'k.*'", "topic exchange"});

  expect_refused(c,
                 [&](amqp_channel_t ch) {
                   amqp_exchange_declare(c.get(), ch, b("amq.custom"), b("direct"), 0, 0, 0, 0,
                                         amqp_empty_table);
                 },
                 403, {"amq."});
  for (const char* name : {"amq.direct", "amq.fanout", "amq.topic"}) CHECK(exchange_exists(c, name));
  expect_refused(c, [&](amqp_channel_t ch) { amqp_exchange_delete(c.get(), ch, b("amq.topic"), 0); }, 403,
                 {"amq.topic"});

  declare_exchange(c, c.open(), "after-540-x", "fanout");
}

TEST_CASE("every nowait flag: no -ok frame is sent, and the effect is there for the next method") {
  cloud_process cloud;
  client c(cloud.amqp_port());
  auto ch = c.open_confirming();
  declare_queue(c, ch, "probe-q");

  // exchange.declare nowait; a queue.bind to it is the probe (404 had it not happened).
  amqp_exchange_declare_t xd{};
  xd.exchange = b("nw-x");
  xd.type = b("direct");
  xd.nowait = 1;
  xd.arguments = amqp_empty_table;
  REQUIRE(amqp_send_method(c.get(), ch, AMQP_EXCHANGE_DECLARE_METHOD, &xd) == AMQP_STATUS_OK);
  amqp_queue_bind_t probe_bind{};
  probe_bind.queue = b("probe-q");
  probe_bind.exchange = b("nw-x");
  probe_bind.routing_key = b("probe");
  probe_bind.arguments = amqp_empty_table;
  REQUIRE(amqp_send_method(c.get(), ch, AMQP_QUEUE_BIND_METHOD, &probe_bind) == AMQP_STATUS_OK);
  expect_next(c, ch, AMQP_QUEUE_BIND_OK_METHOD);

  // queue.declare nowait; a purge of it is the probe.
  amqp_queue_declare_t qd{};
  qd.queue = b("nw-q");
  qd.nowait = 1;
  qd.arguments = amqp_empty_table;
  REQUIRE(amqp_send_method(c.get(), ch, AMQP_QUEUE_DECLARE_METHOD, &qd) == AMQP_STATUS_OK);
  amqp_queue_purge_t purge{};
  purge.queue = b("nw-q");
  REQUIRE(amqp_send_method(c.get(), ch, AMQP_QUEUE_PURGE_METHOD, &purge) == AMQP_STATUS_OK);
  expect_next(c, ch, AMQP_QUEUE_PURGE_OK_METHOD);

  // queue.bind nowait; a mandatory publish is the probe: acked without a basic.return.
  amqp_queue_bind_t qb{};
  qb.queue = b("nw-q");
  qb.exchange = b("nw-x");
  qb.routing_key = b("k");
  qb.nowait = 1;
  qb.arguments = amqp_empty_table;
  REQUIRE(amqp_send_method(c.get(), ch, AMQP_QUEUE_BIND_METHOD, &qb) == AMQP_STATUS_OK);
  publish_confirmed(c, ch, "nw-x", "k", true);

  // queue.purge nowait; a passive declare is the probe and counts nothing left.
  purge.nowait = 1;
  REQUIRE(amqp_send_method(c.get(), ch, AMQP_QUEUE_PURGE_METHOD, &purge) == AMQP_STATUS_OK);
  amqp_queue_declare_t passive{};
  passive.queue = b("nw-q");
  passive.passive = 1;
  passive.arguments = amqp_empty_table;
  REQUIRE(amqp_send_method(c.get(), ch, AMQP_QUEUE_DECLARE_METHOD, &passive) == AMQP_STATUS_OK);
  auto declared = expect_next(c, ch, AMQP_QUEUE_DECLARE_OK_METHOD);
  CHECK(static_cast<amqp_queue_declare_ok_t*>(declared.decoded)->message_count == 0);

  // queue.delete nowait; a passive declare is the probe: 404.
  amqp_queue_delete_t qdel{};
  qdel.queue = b("nw-q");
  qdel.nowait = 1;
  REQUIRE(amqp_send_method(c.get(), ch, AMQP_QUEUE_DELETE_METHOD, &qdel) == AMQP_STATUS_OK);
  REQUIRE(amqp_send_method(c.get(), ch, AMQP_QUEUE_DECLARE_METHOD, &passive) == AMQP_STATUS_OK);
  expect_next_closed(c, ch, 404);

  // exchange.delete nowait; a passive declare is the probe: 404.
  ch = c.open();
  amqp_exchange_delete_t xdel{};
  xdel.exchange = b("nw-x");
  xdel.nowait = 1;
  REQUIRE(amqp_send_method(c.get(), ch, AMQP_EXCHANGE_DELETE_METHOD, &xdel) == AMQP_STATUS_OK);
  amqp_exchange_declare_t xpassive{};
  xpassive.exchange = b("nw-x");
  xpassive.type = b("direct");
  xpassive.passive = 1;
  xpassive.arguments = amqp_empty_table;
  REQUIRE(amqp_send_method(c.get(), ch, AMQP_EXCHANGE_DECLARE_METHOD, &xpassive) == AMQP_STATUS_OK);
  expect_next_closed(c, ch, 404);

  // A nowait method that is refused still closes the channel (the refusal is the answer).
  ch = c.open();
  xd.exchange = b("nw-h");
  xd.type = b("headers");
  REQUIRE(amqp_send_method(c.get(), ch, AMQP_EXCHANGE_DECLARE_METHOD, &xd) == AMQP_STATUS_OK);
  expect_next_closed(c, ch, 540);
}

TEST_CASE(
    "an auto-delete exchange goes with its last binding, by unbind or by the queue's deletion, and only "
    "then") {
  cloud_process cloud;
  client c(cloud.amqp_port());
  const auto ch = c.open();
  declare_exchange(c, ch, "ad-x", "direct", false, true);
  declare_queue(c, ch, "ad-q1");
  declare_queue(c, ch, "ad-q2");
  // Never bound: it stays, whatever happens around it (an unbind that removes nothing too).
  unbind(c, ch, "ad-q1", "ad-x", "none");
  CHECK(exchange_exists(c, "ad-x"));

  bind(c, ch, "ad-q1", "ad-x", "k1");
  bind(c, ch, "ad-q2", "ad-x", "k2");
  bind(c, ch, "ad-q2", "ad-x", "k3");
  unbind(c, ch, "ad-q1", "ad-x", "k1");
  unbind(c, ch, "ad-q2", "ad-x", "k2");
  CHECK(exchange_exists(c, "ad-x"));  // k3 is left
  unbind(c, ch, "ad-q2", "ad-x", "k3");
  CHECK_FALSE(exchange_exists(c, "ad-x"));

  // The queue's deletion removes its bindings: the exchange goes with the last of them.
  declare_exchange(c, ch, "ad-x", "topic", false, true);  // the name is free again
  bind(c, ch, "ad-q1", "ad-x", "a.#");
  amqp_queue_delete(c.get(), ch, b("ad-q1"), 0, 0);
  c.ok();
  CHECK_FALSE(exchange_exists(c, "ad-x"));

  // An exchange that is not auto-delete stays when its last binding goes.
  declare_exchange(c, ch, "keep-x", "direct");
  bind(c, ch, "ad-q2", "keep-x", "k");
  unbind(c, ch, "ad-q2", "keep-x", "k");
  CHECK(exchange_exists(c, "keep-x"));
}

TEST_CASE("two replicas on one bus: declarations, if-unused, auto-delete and deletions are shared at once") {
  cloud_process a;
  cloud_process b_cloud({{"CLOUD_PUBSUB_URL", a.pubsub_url()}});
  client ca(a.amqp_port());
  client cb(b_cloud.amqp_port());
  const auto cha = ca.open();
  const auto chb = cb.open();

  declare_exchange(ca, cha, "rep-x", "topic", true);
  declare_queue(ca, cha, "rep-q", true);
  bind(ca, cha, "rep-q", "rep-x", "orders.*");
  CHECK(exchange_exists(cb, "rep-x"));
  CHECK(queue_exists(cb, "rep-q"));

  // A binding made through B makes the exchange "used" for an if-unused delete through A.
  declare_exchange(ca, cha, "used-x", "direct");
  bind(cb, chb, "rep-q", "used-x", "k");
  auto del = ca.open();
  amqp_exchange_delete(ca.get(), del, b("used-x"), 1);
  refused(ca, del, 406, {"in use"});
  unbind(cb, chb, "rep-q", "used-x", "k");
  del = ca.open();
  amqp_exchange_delete(ca.get(), del, b("used-x"), 1);
  ca.ok();
  CHECK_FALSE(exchange_exists(cb, "used-x"));

  // An auto-delete exchange declared through A goes when its last binding, made and removed
  // through B, goes.
  declare_exchange(ca, cha, "rep-ad-x", "fanout", false, true);
  bind(cb, chb, "rep-q", "rep-ad-x", "");
  unbind(cb, chb, "rep-q", "rep-ad-x", "");
  CHECK_FALSE(exchange_exists(ca, "rep-ad-x"));

  // Delete markers are applied per kind: deleting exchange "twin" leaves queue "twin" in
  // B's mirror too. Once B's mirror has the exchange's deletion (a publish to it is 404), a
  // mandatory publish to the queue through B is still routed (acked, not returned).
  declare_exchange(ca, cha, "twin", "direct");
  declare_queue(ca, cha, "twin");
  amqp_exchange_delete(ca.get(), cha, b("twin"), 0);
  ca.ok();
  CHECK(eventually([&] { return publish_refused(cb, "twin"); }));
  publish_confirmed(cb, cb.open_confirming(), "", "twin", true);
  CHECK(queue_exists(cb, "twin"));

  // Deletions through A are seen through B.
  amqp_queue_delete(ca.get(), cha, b("rep-q"), 0, 0);
  ca.ok();
  CHECK_FALSE(queue_exists(cb, "rep-q"));
  amqp_exchange_delete(ca.get(), cha, b("rep-x"), 0);
  ca.ok();
  CHECK_FALSE(exchange_exists(cb, "rep-x"));
}
