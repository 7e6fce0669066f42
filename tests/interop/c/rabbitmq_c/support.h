/* What the rabbitmq_c interop program's scenarios share: connections to AMQP_URL, failing a
 * scenario, and the waits rabbitmq-c's synchronous API needs (each bounded by WAIT_SECONDS). */
#ifndef INTEROP_RABBITMQ_C_SUPPORT_H
#define INTEROP_RABBITMQ_C_SUPPORT_H

#include <amqp.h>
#include <stdint.h>

#define CLIENT "rabbitmq_c"
/* A deadline for waiting on an event (a delivery, a confirm, an RPC reply), not an assertion
 * about time: generous, because a sanitized server is slow. */
#define WAIT_SECONDS 30
#define NAME_MAX_LEN 128

/* Fails the running scenario with a printf-style reason (longjmps back to run_scenario). */
void fail(const char *format, ...) __attribute__((noreturn, format(printf, 1, 2)));
#define CHECK(cond, ...)  \
  do {                    \
    if (!(cond)) fail(__VA_ARGS__); \
  } while (0)

/* Runs one scenario and prints its RESULT line; returns 1 if it passed. */
int run_scenario(const char *name, void (*scenario)(void));
const char *scenario_name(void);

/* An exchange or queue name of the running scenario: one subject word beginning with CLIENT. */
void named(char out[NAME_MAX_LEN], const char *suffix);

/* A connection to AMQP_URL with channel 1 open, closed when the scenario ends. */
amqp_connection_state_t open_connection(void);
/* Like open_connection, but retries until the server accepts (after a restart). */
amqp_connection_state_t reopen_connection(void);
void open_channel(amqp_connection_state_t c, amqp_channel_t ch);
/* Checks the reply of the last RPC was normal; `what` names it in the failure. */
void rpc_ok(amqp_connection_state_t c, const char *what);
/* The reply code of the last RPC's server exception (channel or connection close), or 0. */
int rpc_server_code(amqp_connection_state_t c, amqp_channel_t ch);

void declare_queue(amqp_connection_state_t c, amqp_channel_t ch, const char *queue);
void publish(amqp_connection_state_t c, amqp_channel_t ch, const char *exchange, const char *key,
             int mandatory, const amqp_basic_properties_t *props, const char *body);
/* Waits for the basic.ack that confirms publish number `tag` of a confirm-mode channel. */
void wait_confirm(amqp_connection_state_t c, amqp_channel_t ch, uint64_t tag);
/* Publishes persistent messages to a queue on a connection of their own, each confirmed. */
void publish_all(const char *queue, const char *const *bodies, int count);
void consume(amqp_connection_state_t c, amqp_channel_t ch, const char *queue);

/* The next delivery of the connection's consumers (the caller destroys the envelope). */
void next_delivery(amqp_connection_state_t c, amqp_envelope_t *env);
/* The next delivery, checked for its body and redelivered flag; returns its delivery tag. */
uint64_t expect_delivery(amqp_connection_state_t c, const char *body, int redelivered);
int bytes_equal(amqp_bytes_t bytes, const char *text);
void ack(amqp_connection_state_t c, amqp_channel_t ch, uint64_t tag, int multiple);

#endif
