// Helpers for the amqplib messaging tests: connections closed after each test, unique names,
// deliveries awaited one by one (a test's own timeout is the deadline, never a sleep).
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { amqplib } = require('../node');

const URL = process.env.AMQP_URL;
if (!URL) {
  throw new Error('AMQP_URL is not set: run these tests through run_node_tests.py (ctest)');
}

// One subject word (HIP-1326, "Exchanges, queues and bindings become subjects, consumers and
// filters"): letters, digits and dashes only.
function name(prefix) {
  return `amqplib-${prefix}-${crypto.randomBytes(5).toString('hex')}`;
}

// A connection closed when test `t` ends, whatever state the test left it in.
async function connect(t) {
  const conn = await amqplib.connect(URL);
  // Logged, not thrown: a test that breaks the connection observes it through `close`.
  conn.on('error', (err) => console.error(`amqplib connection error: ${err.message}`));
  const closed = new Promise((resolve) => conn.once('close', resolve));
  t.after(() => closeQuietly(conn, closed));
  return conn;
}

// Waits for amqplib's 'close' event rather than close()'s promise: amqplib writes
// connection.close ahead of channel frames still buffered (acks, say), the server closes after
// its close-ok, the late frames then fail with EPIPE, and that promise never settles.
async function closeQuietly(conn, closed) {
  if (conn.connection.stream.destroyed) return;
  conn.close().catch(() => {});
  await closed;
}

// A channel whose server-initiated close is a value to await (`ch.closedBy`), not a crash.
async function channel(conn, { confirm = false } = {}) {
  const ch = confirm ? await conn.createConfirmChannel() : await conn.createChannel();
  ch.closedBy = new Promise((resolve) => ch.on('error', resolve));
  return ch;
}

async function open(t, options) {
  const conn = await connect(t);
  return { conn, ch: await channel(conn, options) };
}

async function queue(ch, prefix = 'q', args = undefined) {
  const { queue: q } = await ch.assertQueue(name(prefix), { arguments: args });
  return q;
}

// Deliveries in arrival order, awaited one at a time.
class Inbox {
  constructor() {
    this.items = [];
    this.waiters = [];
  }

  push(message) {
    const waiter = this.waiters.shift();
    if (waiter) waiter(message);
    else this.items.push(message);
  }

  next() {
    if (this.items.length) return Promise.resolve(this.items.shift());
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  async take(n) {
    const out = [];
    while (out.length < n) out.push(await this.next());
    return out;
  }
}

// Starts a consumer; its deliveries (and the server's cancel, as null) go to the returned inbox.
async function consume(ch, q, options = {}) {
  const inbox = new Inbox();
  const { consumerTag } = await ch.consume(q, (m) => inbox.push(m), options);
  inbox.tag = consumerTag;
  return inbox;
}

function bodies(messages) {
  return messages.map((m) => m.content.toString());
}

// The connection still works after a channel exception: a new channel can declare and delete.
async function assertConnectionUsable(conn) {
  const ch = await channel(conn);
  const q = await queue(ch, 'alive');
  assert.equal((await ch.checkQueue(q)).queue, q);
  await ch.deleteQueue(q);
  await ch.close();
}

module.exports = { name, connect, channel, open, queue, consume, bodies, assertConnectionUsable };
