// amqplib's promise API with a ConfirmChannel, written as amqplib's documentation shows it
// (contract: ../README.md).
'use strict';

const assert = require('node:assert/strict');
const { amqplib } = require('../../node');
const {
  URL, Report, once, restartServer, bodies, propertiesOf, expectRoundTrip, expectReturn, Window,
} = require('./_interop');

const report = new Report('amqplib_promise');
report.library('amqplib');
const EXCHANGE = report.name('topic');

async function freshQueue(ch, suffix, key, args) {
  const { queue } = await ch.assertQueue(report.name(suffix), { durable: true, arguments: args });
  await ch.purgeQueue(queue);
  if (key) await ch.bindQueue(queue, EXCHANGE, key);
  return queue;
}

// basic.get until a message is there (a confirmed publish is stored; a get may still race it).
async function getOne(ch, queue, options = { noAck: true }) {
  for (;;) {
    const m = await ch.get(queue, options);
    if (m) return m;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

// A manual-ack consumer until `count` deliveries; onMessage(ch, msg, seen) settles each.
async function consume(ch, queue, count, onMessage) {
  const seen = [];
  let done;
  const finished = new Promise((resolve) => { done = resolve; });
  const { consumerTag } = await ch.consume(queue, (msg) => {
    seen.push(msg);
    onMessage(ch, msg, seen);
    if (seen.length === count) done();
  });
  await finished;
  await ch.cancel(consumerTag);
  return seen;
}

async function declare(conn) {
  const ch = await conn.createConfirmChannel();
  await ch.assertExchange(EXCHANGE, 'topic', { durable: true });
  const queue = await freshQueue(ch, 'declare', 'orders.*');
  await ch.checkExchange(EXCHANGE);
  assert.equal((await ch.checkQueue(queue)).messageCount, 0, 'messages in the new queue');
  ch.publish(EXCHANGE, 'orders.new', Buffer.from('declared'), { mandatory: true });
  await ch.waitForConfirms();
  const m = await getOne(ch, queue);
  assert.deepEqual([m.content.toString(), m.fields.exchange, m.fields.routingKey],
    ['declared', EXCHANGE, 'orders.new'], 'routed message');
  await ch.close();
}

async function publishConfirm(conn) {
  const ch = await conn.createConfirmChannel();
  const queue = await freshQueue(ch, 'confirm', 'confirm.*');
  const sent = bodies('confirm', 20);
  const acks = [];
  sent.forEach((body, i) => {
    ch.publish(EXCHANGE, 'confirm.item', Buffer.from(body), propertiesOf(i), (err) => acks.push(err ? `nack ${i}` : 'ack'));
  });
  await ch.waitForConfirms();
  assert.deepEqual(acks, sent.map(() => 'ack'), 'a confirm for each publish');
  expectRoundTrip(await consume(ch, queue, sent.length, (c, m) => c.ack(m)), sent);
  await ch.close();
}

async function consumePrefetchAck(conn) {
  const prefetch = 5;
  const sent = bodies('prefetch', 30);
  const ch = await conn.createConfirmChannel();
  const queue = await freshQueue(ch, 'prefetch');
  for (const body of sent) ch.sendToQueue(queue, Buffer.from(body));
  await ch.waitForConfirms();
  await ch.prefetch(prefetch);
  // Acks only when the window is full (one multiple ack): a server that ignored prefetch would
  // deliver one more before that ack.
  const window = new Window(prefetch);
  const seen = await consume(ch, queue, sent.length, (c, m, all) => {
    if (window.add() || all.length === sent.length) {
      c.ack(m, true);
      window.acked();
    }
  });
  assert.deepEqual(seen.map((m) => m.content.toString()), sent, 'bodies in order, each once');
  assert.equal(window.most, prefetch, 'largest number of unacked deliveries');
  assert.ok(!seen.some((m) => m.fields.redelivered), 'a first delivery is marked redelivered');
  assert.equal((await ch.checkQueue(queue)).messageCount, 0, 'messages left');
  await ch.close();
}

async function nackRequeue(conn) {
  const ch = await conn.createConfirmChannel();
  // A quorum queue: x-delivery-count is a quorum queue's (RabbitMQ's classic queues never add it).
  const queue = await freshQueue(ch, 'nack', null, { 'x-queue-type': 'quorum' });
  ch.sendToQueue(queue, Buffer.from('again'));
  await ch.waitForConfirms();
  const seen = await consume(ch, queue, 2, (c, m, all) => (all.length === 1 ? c.nack(m, false, true) : c.ack(m)));
  assert.deepEqual(seen.map((m) => [m.fields.redelivered, m.content.toString()]),
    [[false, 'again'], [true, 'again']], '(redelivered, body) of the delivery and its redelivery');
  assert.equal(seen[1].properties.headers['x-delivery-count'], 1, 'x-delivery-count of the redelivery');
  await ch.close();
}

async function mandatoryReturn(conn) {
  const ch = await conn.createConfirmChannel();
  const events = [];
  const returned = [];
  ch.on('return', (msg) => { returned.push(msg); events.push('return'); });
  ch.publish(EXCHANGE, 'nobody.listens', Buffer.from('lost'), { ...propertiesOf(7), mandatory: true },
    (err) => events.push(err ? 'nack' : 'ack'));
  await ch.waitForConfirms();
  // As from RabbitMQ: the return, then the ack (a return is not a failure to publish).
  assert.deepEqual(events, ['return', 'ack'], 'events of an unroutable mandatory publish');
  expectReturn(returned, EXCHANGE);
  await ch.close();
}

async function basicGet(conn) {
  const ch = await conn.createConfirmChannel();
  const queue = await freshQueue(ch, 'get');
  assert.equal(await ch.get(queue, { noAck: true }), false, 'get on an empty queue');
  for (const body of ['g1', 'g2']) ch.sendToQueue(queue, Buffer.from(body));
  await ch.waitForConfirms();
  const first = await getOne(ch, queue, { noAck: false });
  assert.deepEqual([first.content.toString(), first.fields.messageCount, first.fields.redelivered],
    ['g1', 1, false], 'first get');
  ch.ack(first);
  const second = await getOne(ch, queue);
  assert.deepEqual([second.content.toString(), second.fields.messageCount], ['g2', 0], 'second get');
  assert.equal(await ch.get(queue, { noAck: true }), false, 'get after draining');
  await ch.close();
}

// amqplib's own recovery (connect's `recovery` option): `setup` runs after every (re)connect
// and hands this scenario a fresh confirm channel with the queue declared.
async function reconnect() {
  const queue = report.name('reconnect');
  const channels = [];
  let ready;
  let next = new Promise((resolve) => { ready = resolve; });
  const conn = await amqplib.connect(URL, {
    recovery: {
      initialDelay: 100,
      maxDelay: 1000,
      async setup(model) {
        const ch = await model.createConfirmChannel();
        await ch.assertQueue(queue, { durable: true });
        channels.push(ch);
        ready(ch);
      },
    },
  });
  conn.on('error', (err) => console.error(`connection error: ${err.message}`));
  let ch = await next;
  next = new Promise((resolve) => { ready = resolve; });
  ch.sendToQueue(queue, Buffer.from('before'), { persistent: true });
  await ch.waitForConfirms();
  const disconnected = once(conn, 'disconnect');
  await restartServer();
  console.error(`disconnected by the restart: ${(await disconnected)?.message}`);
  ch = await next;
  assert.equal(channels.length, 2, 'setup runs once per connection');
  assert.equal((await getOne(ch, queue)).content.toString(), 'before', 'message published before the restart');
  ch.sendToQueue(queue, Buffer.from('after'), { persistent: true });
  await ch.waitForConfirms();
  assert.equal((await getOne(ch, queue)).content.toString(), 'after', 'message published after the restart');
  await conn.close();
}

// The shared connection of the first six scenarios, opened again when a failed one lost it.
let shared = null;
async function connection() {
  if (!shared) {
    const conn = await amqplib.connect(URL);
    conn.on('error', (err) => console.error(`connection error: ${err.message}`));
    conn.on('close', () => { if (shared === conn) shared = null; });
    shared = conn;
  }
  return shared;
}

async function main() {
  for (const [scenario, fn] of [
    ['declare', declare], ['publish_confirm', publishConfirm], ['consume_prefetch_ack', consumePrefetchAck],
    ['nack_requeue', nackRequeue], ['mandatory_return', mandatoryReturn], ['basic_get', basicGet],
  ]) {
    await report.run(scenario, async () => fn(await connection()));
  }
  if (shared) await shared.close();
  await report.run('reconnect', reconnect);
  report.exit();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
