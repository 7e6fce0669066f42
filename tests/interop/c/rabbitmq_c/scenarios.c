/* Client `rabbitmq_c` of the interop matrix (tests/interop/README.md): rabbitmq-c 0.11, the C
 * library (Debian librabbitmq-dev), used as its examples do (amqp_consume_message for deliveries,
 * amqp_simple_wait_frame for the other frames a confirm-mode channel receives), against
 * AMQP_URL. One RESULT line per scenario; exits 1 iff one failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

/* Declares a durable exchange and a durable queue bound to it with `key`, on channel 1. */
static void bound_queue(amqp_connection_state_t c, const char *exchange, const char *kind, const char *queue,
                        const char *key) {
  amqp_exchange_declare(c, 1, amqp_cstring_bytes(exchange), amqp_cstring_bytes(kind), 0, 1, 0, 0, amqp_empty_table);
  rpc_ok(c, "exchange.declare");
  declare_queue(c, 1, queue);
  amqp_queue_bind(c, 1, amqp_cstring_bytes(queue), amqp_cstring_bytes(exchange), amqp_cstring_bytes(key),
                  amqp_empty_table);
  rpc_ok(c, "queue.bind");
}

/* A durable topic exchange and a queue bound with a wildcard key; passive declares find them;
 * a matching publish arrives and the one published between it and a sentinel does not; a passive
 * declare of a missing queue closes its channel with 404 and the connection goes on. */
static void declare(void) {
  char exchange[NAME_MAX_LEN], queue[NAME_MAX_LEN], missing[NAME_MAX_LEN];
  named(exchange, "x");
  named(queue, "q");
  named(missing, "missing");
  amqp_connection_state_t c = open_connection();
  bound_queue(c, exchange, "topic", queue, "stock.*.eu");
  amqp_exchange_declare(c, 1, amqp_cstring_bytes(exchange), amqp_cstring_bytes("topic"), 1, 1, 0, 0, amqp_empty_table);
  rpc_ok(c, "passive exchange.declare");
  amqp_queue_declare(c, 1, amqp_cstring_bytes(queue), 1, 1, 0, 0, amqp_empty_table);
  rpc_ok(c, "passive queue.declare");

  const char *keys[] = {"stock.sap.eu", "stock.sap.us", "stock.ibm.eu"};
  for (int i = 0; i < 3; i++) publish(c, 1, exchange, keys[i], 0, NULL, keys[i]);
  consume(c, 1, queue);
  amqp_envelope_t env;
  next_delivery(c, &env);
  int routed = bytes_equal(env.message.body, "stock.sap.eu") && bytes_equal(env.exchange, exchange) &&
               bytes_equal(env.routing_key, "stock.sap.eu");
  amqp_destroy_envelope(&env);
  CHECK(routed, "the first delivery is not stock.sap.eu from %s", exchange);
  ack(c, 1, expect_delivery(c, "stock.ibm.eu", 0), 1);

  open_channel(c, 2);
  amqp_queue_declare(c, 2, amqp_cstring_bytes(missing), 1, 1, 0, 0, amqp_empty_table);
  int code = rpc_server_code(c, 2);
  CHECK(code == 404, "passive declare of a missing queue: expected channel.close 404, got %d", code);
  open_channel(c, 3);
  amqp_queue_declare(c, 3, amqp_cstring_bytes(queue), 1, 1, 0, 0, amqp_empty_table);
  rpc_ok(c, "passive queue.declare on a new channel after the 404");
}

/* The properties every publish_confirm message carries. */
static amqp_basic_properties_t rich_properties(int i, amqp_table_entry_t headers[2], char id[32]) {
  snprintf(id, 32, "id-%d", i);
  headers[0].key = amqp_cstring_bytes("seq");
  headers[0].value.kind = AMQP_FIELD_KIND_I32;
  headers[0].value.value.i32 = i;
  headers[1].key = amqp_cstring_bytes("origin");
  headers[1].value.kind = AMQP_FIELD_KIND_UTF8;
  headers[1].value.value.bytes = amqp_cstring_bytes(CLIENT);
  amqp_basic_properties_t p = {0};
  p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
             AMQP_BASIC_HEADERS_FLAG;
  p.content_type = amqp_cstring_bytes("application/json");
  p.delivery_mode = 2;
  p.message_id = amqp_cstring_bytes(id);
  p.headers.num_entries = 2;
  p.headers.entries = headers;
  return p;
}

static void check_rich_properties(const amqp_basic_properties_t *p, int i) {
  char id[32];
  snprintf(id, sizeof id, "id-%d", i);
  amqp_flags_t flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG |
              AMQP_BASIC_HEADERS_FLAG;
  CHECK((p->_flags & flags) == flags && bytes_equal(p->content_type, "application/json") && p->delivery_mode == 2 &&
            bytes_equal(p->message_id, id),
        "message %d: properties lost (flags 0x%x)", i, p->_flags);
  const amqp_table_t *h = &p->headers;
  CHECK(h->num_entries == 2 && bytes_equal(h->entries[0].key, "seq") && h->entries[0].value.kind == AMQP_FIELD_KIND_I32 &&
            h->entries[0].value.value.i32 == i && bytes_equal(h->entries[1].value.value.bytes, CLIENT),
        "message %d: headers changed (%d entries)", i, h->num_entries);
}

/* confirm.select, ten persistent messages with properties, a basic.ack covering each; consumed
 * with their properties intact. */
static void publish_confirm(void) {
  char queue[NAME_MAX_LEN], body[32], id[32];
  named(queue, "q");
  amqp_connection_state_t c = open_connection();
  declare_queue(c, 1, queue);
  amqp_confirm_select(c, 1);
  rpc_ok(c, "confirm.select");
  amqp_table_entry_t headers[2];
  for (int i = 1; i <= 10; i++) {
    amqp_basic_properties_t p = rich_properties(i, headers, id);
    snprintf(body, sizeof body, "{\"n\":%d}", i);
    publish(c, 1, "", queue, 0, &p, body);
    wait_confirm(c, 1, (uint64_t)i);
  }
  consume(c, 1, queue);
  for (int i = 1; i <= 10; i++) {
    amqp_envelope_t env;
    next_delivery(c, &env);
    snprintf(body, sizeof body, "{\"n\":%d}", i);
    int same = bytes_equal(env.message.body, body);
    amqp_basic_properties_t props = env.message.properties;
    uint64_t tag = env.delivery_tag;
    if (same) check_rich_properties(&props, i); /* (fails before the envelope is freed: scenario ends) */
    amqp_destroy_envelope(&env);
    CHECK(same, "message %d: wrong body", i);
    ack(c, 1, tag, 0);
  }
}

/* basic.qos 3: holding three unacked, the consumer gets no fourth (basic.get on another channel
 * finds m4 still queued); acking in batches with multiple, the rest arrive once each, in order. */
static void consume_prefetch_ack(void) {
  char queue[NAME_MAX_LEN], body[16];
  named(queue, "q");
  amqp_connection_state_t c = open_connection();
  declare_queue(c, 1, queue);
  const char *bodies[] = {"m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9", "m10"};
  publish_all(queue, bodies, 10);
  amqp_basic_qos(c, 1, 0, 3, 0);
  rpc_ok(c, "basic.qos");
  consume(c, 1, queue);
  uint64_t last = 0;
  for (int i = 1; i <= 3; i++) last = expect_delivery(c, bodies[i - 1], 0);

  open_channel(c, 2);
  amqp_rpc_reply_t r = amqp_basic_get(c, 2, amqp_cstring_bytes(queue), 1);
  rpc_ok(c, "basic.get");
  CHECK(r.reply.id == AMQP_BASIC_GET_OK_METHOD, "with prefetch 3 and m1..m3 unacked, basic.get found the queue empty");
  amqp_message_t msg;
  CHECK(amqp_read_message(c, 2, &msg, 0).reply_type == AMQP_RESPONSE_NORMAL, "reading the basic.get message");
  int fourth = bytes_equal(msg.body, "m4");
  amqp_destroy_message(&msg);
  CHECK(fourth, "with prefetch 3 and m1..m3 unacked, basic.get should find m4");

  ack(c, 1, last, 1);
  for (int i = 5; i <= 10; i++) {
    snprintf(body, sizeof body, "m%d", i);
    last = expect_delivery(c, body, 0);
    if (i % 3 == 1 || i == 10) ack(c, 1, last, 1); /* batches m5-m7, m8-m10 */
  }
}

/* basic.nack and basic.reject with requeue bring the message back redelivered; reject without
 * requeue drops it (the sentinel published after it arrives instead). */
static void nack_requeue(void) {
  char queue[NAME_MAX_LEN];
  named(queue, "q");
  amqp_connection_state_t c = open_connection();
  declare_queue(c, 1, queue);
  amqp_basic_qos(c, 1, 0, 1, 0);
  rpc_ok(c, "basic.qos");
  consume(c, 1, queue);
  const char *bodies[] = {"nack-me", "reject-me", "drop-me", "sentinel"};

  publish_all(queue, &bodies[0], 1);
  CHECK(amqp_basic_nack(c, 1, expect_delivery(c, "nack-me", 0), 0, 1) == 0, "basic.nack");
  ack(c, 1, expect_delivery(c, "nack-me", 1), 0);
  publish_all(queue, &bodies[1], 1);
  CHECK(amqp_basic_reject(c, 1, expect_delivery(c, "reject-me", 0), 1) == 0, "basic.reject");
  ack(c, 1, expect_delivery(c, "reject-me", 1), 0);
  publish_all(queue, &bodies[2], 1);
  CHECK(amqp_basic_reject(c, 1, expect_delivery(c, "drop-me", 0), 0) == 0, "basic.reject");
  publish_all(queue, &bodies[3], 1);
  ack(c, 1, expect_delivery(c, "sentinel", 0), 0);
}

/* The next method frame of channel 1 (a confirm-mode channel without consumers). */
static amqp_method_number_t next_method(amqp_connection_state_t c, amqp_frame_t *frame) {
  struct timeval limit = {WAIT_SECONDS, 0};
  do {
    int status = amqp_simple_wait_frame_noblock(c, frame, &limit);
    CHECK(status == AMQP_STATUS_OK, "waiting for basic.return or basic.ack: %s", amqp_error_string2(status));
  } while (frame->frame_type != AMQP_FRAME_METHOD || frame->channel != 1);
  return frame->payload.method.id;
}

/* Under confirms, an unroutable mandatory publish comes back as basic.return 312 NO_ROUTE with
 * its body and properties, then its basic.ack; a routable one is acked, not returned. */
static void mandatory_return(void) {
  char exchange[NAME_MAX_LEN], queue[NAME_MAX_LEN];
  named(exchange, "x");
  named(queue, "q");
  amqp_connection_state_t c = open_connection();
  bound_queue(c, exchange, "direct", queue, "bound");
  amqp_confirm_select(c, 1);
  rpc_ok(c, "confirm.select");

  amqp_basic_properties_t p = {._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG,
                               .content_type = amqp_cstring_bytes("text/plain"),
                               .message_id = amqp_cstring_bytes("lost-1")};
  publish(c, 1, exchange, "nowhere", 1, &p, "lost");
  amqp_frame_t frame;
  CHECK(next_method(c, &frame) == AMQP_BASIC_RETURN_METHOD, "expected basic.return before the ack, got method 0x%08X",
        frame.payload.method.id);
  amqp_basic_return_t *ret = frame.payload.method.decoded;
  CHECK(ret->reply_code == 312 && bytes_equal(ret->reply_text, "NO_ROUTE") && bytes_equal(ret->exchange, exchange) &&
            bytes_equal(ret->routing_key, "nowhere"),
        "return: %u %.*s", ret->reply_code, (int)ret->reply_text.len, (char *)ret->reply_text.bytes);
  amqp_message_t msg;
  CHECK(amqp_read_message(c, 1, &msg, 0).reply_type == AMQP_RESPONSE_NORMAL, "reading the returned message");
  int intact = bytes_equal(msg.body, "lost") && bytes_equal(msg.properties.content_type, "text/plain") &&
               bytes_equal(msg.properties.message_id, "lost-1");
  amqp_destroy_message(&msg);
  CHECK(intact, "the returned message lost its body or properties");
  wait_confirm(c, 1, 1);

  publish(c, 1, exchange, "bound", 1, NULL, "kept");
  CHECK(next_method(c, &frame) == AMQP_BASIC_ACK_METHOD, "a routable mandatory publish: expected basic.ack, got 0x%08X",
        frame.payload.method.id);
  consume(c, 1, queue);
  ack(c, 1, expect_delivery(c, "kept", 0), 0);
}

/* basic.get: get-empty on a new queue; after two publishes, with manual ack the first and
 * message-count 1, with no-ack the second and message-count 0; then get-empty. */
static uint32_t get_one(amqp_connection_state_t c, const char *queue, int no_ack, const char *body) {
  amqp_rpc_reply_t r = amqp_basic_get(c, 1, amqp_cstring_bytes(queue), no_ack);
  rpc_ok(c, "basic.get");
  CHECK(r.reply.id == AMQP_BASIC_GET_OK_METHOD, "basic.get: get-empty, expected %s", body);
  amqp_basic_get_ok_t ok = *(amqp_basic_get_ok_t *)r.reply.decoded;
  amqp_message_t msg;
  CHECK(amqp_read_message(c, 1, &msg, 0).reply_type == AMQP_RESPONSE_NORMAL, "reading the basic.get message");
  int same = bytes_equal(msg.body, body);
  amqp_destroy_message(&msg);
  CHECK(same && !ok.redelivered, "basic.get: expected %s, not redelivered", body);
  if (!no_ack) ack(c, 1, ok.delivery_tag, 0);
  return ok.message_count;
}

static void expect_get_empty(amqp_connection_state_t c, const char *queue, const char *when) {
  amqp_rpc_reply_t r = amqp_basic_get(c, 1, amqp_cstring_bytes(queue), 1);
  rpc_ok(c, "basic.get");
  CHECK(r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD, "basic.get %s: expected get-empty", when);
}

static void basic_get(void) {
  char queue[NAME_MAX_LEN];
  named(queue, "q");
  amqp_connection_state_t c = open_connection();
  declare_queue(c, 1, queue);
  expect_get_empty(c, queue, "on a new queue");
  const char *bodies[] = {"g1", "g2"};
  publish_all(queue, bodies, 2);
  uint32_t count = get_one(c, queue, 0, "g1");
  CHECK(count == 1, "first basic.get-ok message-count %u, expected 1", count);
  count = get_one(c, queue, 1, "g2");
  CHECK(count == 0, "second basic.get-ok message-count %u, expected 0", count);
  expect_get_empty(c, queue, "after both were taken");
}

/* A confirmed persistent message survives a server restart. rabbitmq-c does not reconnect: the
 * next read finds the server's connection.close 320, and the program connects again, as its
 * examples would; `before` is then consumed, and `after` published and consumed. */
static void reconnect(void) {
  const char *queue = CLIENT "-reconnect";
  amqp_connection_state_t c = open_connection();
  declare_queue(c, 1, queue);
  const char *before = "before", *after = "after";
  publish_all(queue, &before, 1);
  const char *restart = getenv("CLOUD_RESTART_CMD");
  CHECK(restart != NULL, "CLOUD_RESTART_CMD is not set: run through tests/interop/matrix.py");
  CHECK(system(restart) == 0, "CLOUD_RESTART_CMD failed");

  amqp_frame_t frame;
  struct timeval limit = {WAIT_SECONDS, 0};
  int status = amqp_simple_wait_frame_noblock(c, &frame, &limit);
  CHECK(status == AMQP_STATUS_OK && frame.frame_type == AMQP_FRAME_METHOD &&
            frame.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD,
        "after the restart, expected the server's connection.close, got status %s", amqp_error_string2(status));
  amqp_connection_close_t *close = frame.payload.method.decoded;
  CHECK(close->reply_code == 320, "connection.close %u, expected 320 CONNECTION_FORCED", close->reply_code);

  c = reopen_connection();
  consume(c, 1, queue);
  ack(c, 1, expect_delivery(c, "before", 0), 0);
  publish_all(queue, &after, 1);
  ack(c, 1, expect_delivery(c, "after", 0), 0);
}

int main(void) {
  static const struct {
    const char *name;
    void (*run)(void);
  } scenarios[] = {
      {"declare", declare},
      {"publish_confirm", publish_confirm},
      {"consume_prefetch_ack", consume_prefetch_ack},
      {"nack_requeue", nack_requeue},
      {"mandatory_return", mandatory_return},
      {"basic_get", basic_get},
      {"reconnect", reconnect}, /* restarts the server: last */
  };
  printf("LIBRARY %s rabbitmq-c %s (Debian)\n", CLIENT, amqp_version());
  int failed = 0;
  for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
    failed |= !run_scenario(scenarios[i].name, scenarios[i].run);
  return failed;
}
