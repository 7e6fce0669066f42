#include "support.h"

#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* -- the running scenario ------------------------------------------------------------------- */

#define MAX_CONNECTIONS 8

static jmp_buf failed;
static char reason[1024];
static const char *current;
static amqp_connection_state_t connections[MAX_CONNECTIONS];
static int connection_count;

void fail(const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(reason, sizeof reason, format, args);
  va_end(args);
  longjmp(failed, 1);
}

const char *scenario_name(void) { return current; }

/* Destroys every connection the scenario opened. A failed scenario may have left one mid-frame,
 * so they are not closed politely: the server requeues what they held either way. */
static void drop_connections(void) {
  for (int i = 0; i < connection_count; i++) amqp_destroy_connection(connections[i]);
  connection_count = 0;
}

/* 1 if the scenario returned, 0 if it failed (fail() jumps back here). */
static int attempt(void (*scenario)(void)) {
  if (setjmp(failed) != 0) return 0;
  scenario();
  return 1;
}

int run_scenario(const char *name, void (*scenario)(void)) {
  current = name;
  reason[0] = '\0';
  int passed = attempt(scenario);
  drop_connections();
  if (passed) {
    printf("RESULT %s %s pass\n", CLIENT, name);
  } else {
    for (char *p = reason; *p; p++)
      if (*p == '\n' || *p == '\r') *p = ' ';
    printf("RESULT %s %s fail %s\n", CLIENT, name, reason);
  }
  fflush(stdout);
  return passed;
}

void named(char out[NAME_MAX_LEN], const char *suffix) {
  snprintf(out, NAME_MAX_LEN, "%s-%s-%s", CLIENT, current, suffix);
}

/* -- connections and RPCs -------------------------------------------------------------------- */

static struct timeval wait_limit(void) {
  struct timeval tv = {WAIT_SECONDS, 0};
  return tv;
}

static const char *describe_reply(amqp_rpc_reply_t r, char *out, size_t size) {
  if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
    snprintf(out, size, "library error: %s", amqp_error_string2(r.library_error));
  } else if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
    amqp_channel_close_t *m = r.reply.decoded;
    snprintf(out, size, "channel.close %u %.*s", m->reply_code, (int)m->reply_text.len, (char *)m->reply_text.bytes);
  } else if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
    amqp_connection_close_t *m = r.reply.decoded;
    snprintf(out, size, "connection.close %u %.*s", m->reply_code, (int)m->reply_text.len, (char *)m->reply_text.bytes);
  } else {
    snprintf(out, size, "reply type %d, method 0x%08X", r.reply_type, r.reply.id);
  }
  return out;
}

void rpc_ok(amqp_connection_state_t c, const char *what) {
  amqp_rpc_reply_t r = amqp_get_rpc_reply(c);
  char text[512];
  CHECK(r.reply_type == AMQP_RESPONSE_NORMAL, "%s: %s", what, describe_reply(r, text, sizeof text));
}

int rpc_server_code(amqp_connection_state_t c, amqp_channel_t ch) {
  amqp_rpc_reply_t r = amqp_get_rpc_reply(c);
  if (r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION || r.reply.id != AMQP_CHANNEL_CLOSE_METHOD) return 0;
  /* The server closed the channel: answer close-ok, as rabbitmq-c leaves that to the caller. */
  amqp_channel_close_ok_t close_ok = {0};
  amqp_send_method(c, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &close_ok);
  return ((amqp_channel_close_t *)r.reply.decoded)->reply_code;
}

/* Connects and logs in; returns NULL (and why) when the server does not accept. */
static amqp_connection_state_t try_connect(char *why, size_t size) {
  struct amqp_connection_info info;
  const char *url = getenv("AMQP_URL");
  char *copy = strdup(url ? url : "amqp://guest:guest@127.0.0.1:5672/");
  CHECK(amqp_parse_url(copy, &info) == AMQP_STATUS_OK, "cannot parse AMQP_URL %s", url);
  amqp_connection_state_t c = amqp_new_connection();
  amqp_socket_t *socket = info.ssl ? amqp_ssl_socket_new(c) : amqp_tcp_socket_new(c);
  /* amqps: rabbitmq-c reads no certificate store; the CA is given (AMQP_CA_FILE). */
  const char *ca = getenv("AMQP_CA_FILE");
  if (info.ssl && ca != NULL) CHECK(amqp_ssl_socket_set_cacert(socket, ca) == AMQP_STATUS_OK, "CA file %s", ca);
  struct timeval limit = wait_limit();
  int status = amqp_socket_open_noblock(socket, info.host, info.port, &limit);
  amqp_rpc_reply_t login = {0};
  if (status == AMQP_STATUS_OK) {
    amqp_set_rpc_timeout(c, &limit);
    login = amqp_login(c, info.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user, info.password);
  }
  free(copy);
  if (status != AMQP_STATUS_OK || login.reply_type != AMQP_RESPONSE_NORMAL) {
    snprintf(why, size, "%s", status != AMQP_STATUS_OK ? amqp_error_string2(status) : "login failed");
    amqp_destroy_connection(c);
    return NULL;
  }
  CHECK(connection_count < MAX_CONNECTIONS, "too many connections in one scenario");
  connections[connection_count++] = c;
  open_channel(c, 1);
  return c;
}

amqp_connection_state_t open_connection(void) {
  char why[256];
  amqp_connection_state_t c = try_connect(why, sizeof why);
  CHECK(c != NULL, "connecting to AMQP_URL: %s", why);
  return c;
}

amqp_connection_state_t reopen_connection(void) {
  char why[256];
  time_t deadline = time(NULL) + WAIT_SECONDS;
  for (useconds_t delay = 50000;; delay = delay < 1000000 ? 2 * delay : delay) {
    amqp_connection_state_t c = try_connect(why, sizeof why);
    if (c) return c;
    CHECK(time(NULL) < deadline, "could not reconnect within %ds: %s", WAIT_SECONDS, why);
    usleep(delay); /* a retry's backoff, not an assertion */
  }
}

void open_channel(amqp_connection_state_t c, amqp_channel_t ch) {
  amqp_channel_open(c, ch);
  rpc_ok(c, "channel.open");
}

/* -- topology, publishing, consuming ----------------------------------------------------------- */

void declare_queue(amqp_connection_state_t c, amqp_channel_t ch, const char *queue) {
  amqp_queue_declare_ok_t *ok = amqp_queue_declare(c, ch, amqp_cstring_bytes(queue), 0, 1, 0, 0, amqp_empty_table);
  rpc_ok(c, "queue.declare");
  CHECK(bytes_equal(ok->queue, queue), "queue.declare-ok names %.*s, declared %s", (int)ok->queue.len,
        (char *)ok->queue.bytes, queue);
}

void publish(amqp_connection_state_t c, amqp_channel_t ch, const char *exchange, const char *key,
             int mandatory, const amqp_basic_properties_t *props, const char *body) {
  int status = amqp_basic_publish(c, ch, amqp_cstring_bytes(exchange), amqp_cstring_bytes(key), mandatory, 0,
                                  props, amqp_cstring_bytes(body));
  CHECK(status == AMQP_STATUS_OK, "basic.publish %s: %s", body, amqp_error_string2(status));
}

static void wait_frame(amqp_connection_state_t c, amqp_frame_t *frame, const char *what) {
  struct timeval limit = wait_limit();
  int status = amqp_simple_wait_frame_noblock(c, frame, &limit);
  CHECK(status == AMQP_STATUS_OK, "waiting for %s: %s", what, amqp_error_string2(status));
}

void wait_confirm(amqp_connection_state_t c, amqp_channel_t ch, uint64_t tag) {
  for (;;) {
    amqp_frame_t frame;
    wait_frame(c, &frame, "a publisher confirm");
    if (frame.frame_type != AMQP_FRAME_METHOD || frame.channel != ch) continue;
    CHECK(frame.payload.method.id != AMQP_BASIC_NACK_METHOD, "basic.nack for publish %llu", (unsigned long long)tag);
    CHECK(frame.payload.method.id == AMQP_BASIC_ACK_METHOD, "expected basic.ack %llu, got method 0x%08X",
          (unsigned long long)tag, frame.payload.method.id);
    amqp_basic_ack_t *a = frame.payload.method.decoded;
    if (a->delivery_tag == tag || (a->multiple && a->delivery_tag > tag)) return;
    CHECK(a->delivery_tag < tag, "basic.ack %llu while waiting for %llu", (unsigned long long)a->delivery_tag,
          (unsigned long long)tag);
  }
}

void publish_all(const char *queue, const char *const *bodies, int count) {
  amqp_connection_state_t c = open_connection();
  amqp_confirm_select(c, 1);
  rpc_ok(c, "confirm.select");
  amqp_basic_properties_t props = {._flags = AMQP_BASIC_DELIVERY_MODE_FLAG, .delivery_mode = 2};
  for (int i = 0; i < count; i++) publish(c, 1, "", queue, 0, &props, bodies[i]);
  wait_confirm(c, 1, (uint64_t)count);
}

void consume(amqp_connection_state_t c, amqp_channel_t ch, const char *queue) {
  amqp_basic_consume(c, ch, amqp_cstring_bytes(queue), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
  rpc_ok(c, "basic.consume");
}

void next_delivery(amqp_connection_state_t c, amqp_envelope_t *env) {
  struct timeval limit = wait_limit();
  amqp_maybe_release_buffers(c);
  amqp_rpc_reply_t r = amqp_consume_message(c, env, &limit, 0);
  if (r.reply_type == AMQP_RESPONSE_NORMAL) return;
  if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
    amqp_frame_t frame;
    wait_frame(c, &frame, "the frame that is not a delivery");
    fail("waiting for a delivery: got frame type %d method 0x%08X on channel %d", frame.frame_type,
         frame.frame_type == AMQP_FRAME_METHOD ? frame.payload.method.id : 0, frame.channel);
  }
  char text[512];
  fail("waiting for a delivery: %s", describe_reply(r, text, sizeof text));
}

int bytes_equal(amqp_bytes_t bytes, const char *text) {
  return bytes.len == strlen(text) && memcmp(bytes.bytes, text, bytes.len) == 0;
}

uint64_t expect_delivery(amqp_connection_state_t c, const char *body, int redelivered) {
  amqp_envelope_t env;
  next_delivery(c, &env);
  int matches = bytes_equal(env.message.body, body) && !env.redelivered == !redelivered;
  char got[256];
  snprintf(got, sizeof got, "%.*s", (int)env.message.body.len, (char *)env.message.body.bytes);
  int got_redelivered = env.redelivered;
  uint64_t tag = env.delivery_tag;
  amqp_destroy_envelope(&env);
  CHECK(matches, "expected \"%s\" redelivered=%d, got \"%s\" redelivered=%d", body, redelivered, got, got_redelivered);
  return tag;
}

void ack(amqp_connection_state_t c, amqp_channel_t ch, uint64_t tag, int multiple) {
  CHECK(amqp_basic_ack(c, ch, tag, multiple) == AMQP_STATUS_OK, "basic.ack %llu", (unsigned long long)tag);
}
