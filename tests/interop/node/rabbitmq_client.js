// rabbitmq-client (npm), written as its documentation shows it: one Connection (which
// reconnects by itself), a Publisher with confirms, Consumers with qos, the Connection's
// management methods, and an acquired Channel only for basic.get (contract: ../README.md).
'use strict';

const assert = require('node:assert/strict');
const { rabbitmqClient } = require('../../node');
const { URL, Report, once, restartServer, headersOf, bodies, Window } = require('./_interop');

const { Connection, ConsumerStatus } = rabbitmqClient;
const report = new Report('rabbitmq_client');
report.library('rabbitmq-client');
const EXCHANGE = report.name('topic');

// Retries (reconnects) quickly: the reconnect scenario's server is back within seconds.
const rabbit = new Connection({ url: URL, retryLow: 100, retryHigh: 1000 });
rabbit.on('error', (err) => console.error(`connection error: ${err.message}`));
rabbit.on('connection', () => console.error('connection (re)established'));

async function freshQueue(suffix, routingKey, args) {
  const queue = report.name(suffix);
  await rabbit.queueDeclare({ queue, durable: true, arguments: args });
  await rabbit.queuePurge({ queue });
  if (routingKey) await rabbit.queueBind({ queue, exchange: EXCHANGE, routingKey });
  return queue;
}

// A Consumer (of a durable queue: it declares its queue) whose handler(msg, seen) decides each
// message's status; resolves with the messages once `count` arrived (and the consumer closed).
// A failed assertion in the handler fails it.
function consumeUntil(props, count, handler, args) {
  return new Promise((resolve, reject) => {
    const seen = [];
    const sub = rabbit.createConsumer({ ...props, queueOptions: { durable: true, arguments: args } }, (msg) => {
      seen.push(msg);
      let status;
      try {
        status = handler(msg, seen);
      } catch (err) {
        sub.close().then(() => reject(err));
        return ConsumerStatus.DROP;
      }
      if (seen.length === count) Promise.resolve(status).then(() => sub.close()).then(() => resolve(seen));
      return status;
    });
    sub.on('error', (err) => console.error(`consumer error: ${err.message}`));
  });
}

// The envelope of the i-th message of publish_confirm (a string body is sent as text/plain).
function envelopeOf(i, routingKey) {
  return { exchange: EXCHANGE, routingKey, durable: true, messageId: `m${i}`, headers: headersOf(i) };
}

async function declare() {
  await rabbit.exchangeDeclare({ exchange: EXCHANGE, type: 'topic', durable: true });
  const queue = await freshQueue('declare', 'orders.*');
  await rabbit.exchangeDeclare({ exchange: EXCHANGE, passive: true });
  assert.equal((await rabbit.queueDeclare({ queue, passive: true })).messageCount, 0, 'messages in the new queue');
  const pub = rabbit.createPublisher({ confirm: true });
  await pub.send({ exchange: EXCHANGE, routingKey: 'orders.new', mandatory: true }, 'declared');
  await pub.close();
  const m = await rabbit.basicGet({ queue, noAck: true });
  assert.deepEqual([m?.body, m?.exchange, m?.routingKey], ['declared', EXCHANGE, 'orders.new'], 'routed message');
}

async function publishConfirm() {
  const queue = await freshQueue('confirm', 'confirm.*');
  const sent = bodies('confirm', 20);
  const pub = rabbit.createPublisher({ confirm: true });
  // send() resolves when the server acked the message (and rejects on a nack).
  await Promise.all(sent.map((body, i) => pub.send(envelopeOf(i, 'confirm.item'), body)));
  await pub.close();
  const seen = await consumeUntil({ queue, qos: { prefetchCount: 10 } }, sent.length, () => ConsumerStatus.ACK);
  assert.deepEqual(seen.map((m) => m.body), sent, 'bodies in order, each once');
  seen.forEach((m, i) => {
    assert.deepEqual([m.contentType, m.messageId, m.headers, m.durable],
      ['text/plain', `m${i}`, headersOf(i), true], `properties of message ${i}`);
  });
}

// The handler holds each message until the window is full, then releases them all (each
// handler's end acks its message): a server that ignored prefetch would deliver one more
// first. No `concurrency` limit, so every delivery reaches the handler at once.
async function consumePrefetchAck() {
  const prefetch = 5;
  const sent = bodies('prefetch', 30);
  const queue = await freshQueue('prefetch');
  const pub = rabbit.createPublisher({ confirm: true });
  await Promise.all(sent.map((body) => pub.send(queue, body)));
  await pub.close();
  const window = new Window(prefetch);
  let held = [];
  const seen = await consumeUntil({ queue, qos: { prefetchCount: prefetch } }, sent.length, (msg, all) => {
    const release = new Promise((resolve) => held.push(resolve));
    if (window.add() || all.length === sent.length) {
      window.acked();
      for (const resolve of held) resolve(ConsumerStatus.ACK);
      held = [];
    }
    return release;
  });
  assert.deepEqual(seen.map((m) => m.body), sent, 'bodies in order, each once');
  assert.equal(window.most, prefetch, 'largest number of unacked deliveries');
  assert.ok(!seen.some((m) => m.redelivered), 'a first delivery is marked redelivered');
  assert.equal((await rabbit.queueDeclare({ queue, passive: true })).messageCount, 0, 'messages left');
}

async function nackRequeue() {
  // A quorum queue: x-delivery-count is a quorum queue's (RabbitMQ's classic queues never add it).
  const quorum = { 'x-queue-type': 'quorum' };
  const queue = await freshQueue('nack', null, quorum);
  const pub = rabbit.createPublisher({ confirm: true });
  await pub.send(queue, 'again');
  await pub.close();
  const seen = await consumeUntil({ queue, qos: { prefetchCount: 1 } }, 2,
    (msg, all) => (all.length === 1 ? ConsumerStatus.REQUEUE : ConsumerStatus.ACK), quorum);
  assert.deepEqual(seen.map((m) => [m.redelivered, m.body]), [[false, 'again'], [true, 'again']],
    '(redelivered, body) of the delivery and its redelivery');
  assert.equal(seen[1].headers?.['x-delivery-count'], 1, 'x-delivery-count of the redelivery');
}

// send() resolving is the ack. rabbitmq-client emits 'basic.return' on a later turn of the event
// loop (setImmediate), so the ack may be seen first although the server sent the return first.
async function mandatoryReturn() {
  const pub = rabbit.createPublisher({ confirm: true });
  const returned = once(pub, 'basic.return');
  await pub.send({ exchange: EXCHANGE, routingKey: 'nobody.listens', mandatory: true, messageId: 'm7', headers: headersOf(7) }, 'lost');
  const r = await returned;
  await pub.close();
  assert.deepEqual([r.replyCode, r.replyText, r.exchange, r.routingKey, r.body],
    [312, 'NO_ROUTE', EXCHANGE, 'nobody.listens', 'lost'], 'basic.return');
  assert.deepEqual([r.messageId, r.headers], ['m7', headersOf(7)], 'properties of the return');
}

async function basicGet() {
  const queue = await freshQueue('get');
  const ch = await rabbit.acquire();
  try {
    assert.equal(await ch.basicGet({ queue, noAck: true }), undefined, 'get on an empty queue');
    const pub = rabbit.createPublisher({ confirm: true });
    for (const body of ['g1', 'g2']) await pub.send(queue, body);
    await pub.close();
    const first = await ch.basicGet({ queue, noAck: false });
    assert.deepEqual([first?.body, first?.messageCount, first?.redelivered], ['g1', 1, false], 'first get');
    ch.basicAck({ deliveryTag: first.deliveryTag });
    const second = await ch.basicGet({ queue, noAck: true });
    assert.deepEqual([second?.body, second?.messageCount], ['g2', 0], 'second get');
    assert.equal(await ch.basicGet({ queue, noAck: true }), undefined, 'get after draining');
  } finally {
    await ch.close();
  }
}

// The Connection reconnects by itself; the Publisher and a Consumer created afterwards just
// work on the new connection.
async function reconnect() {
  const queue = report.name('reconnect');
  await rabbit.queueDeclare({ queue, durable: true });
  const pub = rabbit.createPublisher({ confirm: true, queues: [{ queue, durable: true }] });
  await pub.send({ routingKey: queue, durable: true }, 'before');
  const reconnected = once(rabbit, 'connection');
  await restartServer();
  await reconnected;
  const got = [];
  let arrived;
  const sub = rabbit.createConsumer({ queue, queueOptions: { durable: true } }, (msg) => {
    got.push(msg.body);
    arrived();
  });
  sub.on('error', (err) => console.error(`consumer error: ${err.message}`));
  await new Promise((resolve) => { arrived = resolve; });
  assert.deepEqual(got, ['before'], 'message published before the restart');
  const next = new Promise((resolve) => { arrived = resolve; });
  await pub.send({ routingKey: queue, durable: true }, 'after');
  await next;
  assert.deepEqual(got, ['before', 'after'], 'message published after the restart');
  await pub.close();
  await sub.close();
}

async function main() {
  for (const [scenario, fn] of [
    ['declare', declare], ['publish_confirm', publishConfirm], ['consume_prefetch_ack', consumePrefetchAck],
    ['nack_requeue', nackRequeue], ['mandatory_return', mandatoryReturn], ['basic_get', basicGet],
    ['reconnect', reconnect],
  ]) {
    await report.run(scenario, fn);
  }
  await rabbit.close();
  report.exit();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
