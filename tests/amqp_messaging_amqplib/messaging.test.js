// AMQP messaging over JetStream (HIP-1326: "A message keeps its properties and stays readable",
// "Acknowledgement, and what bounds a consumer", "What is not implemented, and how it says so",
// "What IS implemented, and is commonly assumed not to be") through amqplib, the Node client, in
// its promise API. One real `cloud` serves the whole file (AMQP_URL, given by
// run_node_tests.py); every test names its own exchanges and queues.
'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { test } = require('node:test');
const { amqplib, amqplibDefs: defs } = require('../node');
const { name, connect, channel, open, queue, consume, bodies, assertConnectionUsable } = require('./support');
const { redeliveredAfter, closeChannel, killConnection, nackRequeue, assertRedelivered } = require('./redelivery');

// The deadline of every test: a delivery or confirm that never comes fails the test here.
const T = { timeout: 60_000 };

// ---- publish and consume -------------------------------------------------------------------

// A new exchange of `type` and a new queue bound to it with each of `keys`.
async function boundQueue(ch, type, ...keys) {
  const x = name('x');
  await ch.assertExchange(x, type);
  const q = await queue(ch);
  for (const key of keys) await ch.bindQueue(q, x, key);
  return { x, q };
}

test('properties and a nested headers table round-trip exactly', T, async (t) => {
  const { ch } = await open(t);
  const { x, q } = await boundQueue(ch, 'direct', 'orders.eu.created');
  // Every field-table type amqplib can write, pika's float/long/unsigned gaps included.
  const headers = {
    text: 'żółw', yes: true, byte: -5, short: -300, int: 70_000, long: 2 ** 40 + 1,
    negLong: -(2 ** 40), int64: { '!': 'int64', value: Number.MAX_SAFE_INTEGER },
    float: { '!': 'float', value: 0.1 }, double: Math.PI,
    uint8: { '!': 'uint8', value: 200 }, uint16: { '!': 'uint16', value: 60_000 },
    uint32: { '!': 'uint32', value: 4_000_000_000 },
    decimal: { '!': 'decimal', value: { places: 2, digits: 12_345 } },
    stamp: { '!': 'timestamp', value: 1_700_000_000 }, nothing: null,
    bytes: Buffer.from([0, 1, 2, 255]), list: [1, 'two', [3], { four: 4 }],
    nested: { level1: { level2: { deep: 'yes', n: 42, list: [true, null] } } },
  };
  const props = {
    contentType: 'application/json', contentEncoding: 'utf-8', priority: 7,
    correlationId: 'corr-1', replyTo: 'reply-to-me', expiration: '600000', messageId: 'm-1',
    timestamp: 1_700_000_001, type: 'order.created', userId: 'guest', appId: 'amqplib-test',
  };
  const inbox = await consume(ch, q, { noAck: true });
  ch.publish(x, 'orders.eu.created', Buffer.from('{"id":1}'), { ...props, headers, persistent: true });
  const m = await inbox.next();

  assert.equal(m.content.toString(), '{"id":1}');
  assert.deepEqual(
    { exchange: m.fields.exchange, routingKey: m.fields.routingKey, redelivered: m.fields.redelivered },
    { exchange: x, routingKey: 'orders.eu.created', redelivered: false });
  for (const [key, value] of Object.entries(props)) assert.equal(m.properties[key], value, key);
  assert.equal(m.properties.deliveryMode, 2);
  // amqplib decodes numbers of every width to a JS number; the rest keeps its tag.
  assert.deepEqual(m.properties.headers, {
    ...headers, int64: Number.MAX_SAFE_INTEGER, float: Math.fround(0.1),
    uint8: 200, uint16: 60_000, uint32: 4_000_000_000,
  });
});

test('a 1 MiB body round-trips', T, async (t) => {
  const { ch } = await open(t);
  const q = await queue(ch);
  const body = crypto.randomBytes(1 << 20);
  const inbox = await consume(ch, q, { noAck: true });
  ch.sendToQueue(q, body);
  const m = await inbox.next();
  assert.equal(m.content.length, body.length);
  assert.ok(m.content.equals(body), 'the body came back altered');
});

test('a # binding catches a publish with an empty routing key', T, async (t) => {
  const { ch } = await open(t);
  const { x, q } = await boundQueue(ch, 'topic', '#');
  const inbox = await consume(ch, q, { noAck: true });
  ch.publish(x, '', Buffer.from('empty key'));
  ch.publish(x, 'a.b.c', Buffer.from('three words'));
  const got = await inbox.take(2);
  assert.deepEqual(got.map((m) => [m.fields.routingKey, m.content.toString()]),
    [['', 'empty key'], ['a.b.c', 'three words']]);
});

// A message matching two bindings of one queue is one delivery; a later message that matches
// only one binding marks the end (per-queue order), so no wait is needed to see "no duplicate".
test('a message matching two bindings of one queue is delivered once', T, async (t) => {
  const { ch } = await open(t);
  const { x, q } = await boundQueue(ch, 'topic', 'a.*', '*.b');
  const inbox = await consume(ch, q, { noAck: true });
  ch.publish(x, 'a.b', Buffer.from('both'));
  ch.publish(x, 'a.end', Buffer.from('marker'));
  assert.deepEqual(bodies(await inbox.take(2)), ['both', 'marker']);
});

test('per-queue order holds across two bindings', T, async (t) => {
  const { ch } = await open(t);
  const { x, q } = await boundQueue(ch, 'topic', 'left.*', 'right.*');
  const sent = Array.from({ length: 200 }, (_, i) => String(i));
  for (const body of sent) ch.publish(x, `${Number(body) % 2 ? 'right' : 'left'}.${body}`, Buffer.from(body));
  const inbox = await consume(ch, q, { noAck: true });
  assert.deepEqual(bodies(await inbox.take(sent.length)), sent);
});

// ---- flow control --------------------------------------------------------------------------

// Two consumers with prefetch 1 each hold their first message until both hold one: the second
// can only have got its message because the first was at its bound, so the work is split.
test('competing consumers split the work with no duplicate', T, async (t) => {
  const { ch } = await open(t, { confirm: true });
  const q = await queue(ch);
  const sent = Array.from({ length: 100 }, (_, i) => `w${i}`);
  for (const body of sent) ch.sendToQueue(q, Buffer.from(body));
  await ch.waitForConfirms();

  const seen = [];
  const held = new Map();
  let finish;
  const finished = new Promise((resolve) => { finish = resolve; });
  const onMessage = (worker, wch) => (m) => {
    seen.push([worker, m.content.toString()]);
    if (held.size < 2) {
      held.set(worker, [wch, m]);
      if (held.size === 2) for (const [hch, hm] of held.values()) hch.ack(hm);
    } else {
      wch.ack(m);
    }
    if (seen.length === sent.length) finish();
  };
  for (const worker of ['a', 'b']) {
    const wch = await channel(await connect(t));
    await wch.prefetch(1);
    await wch.consume(q, onMessage(worker, wch));
  }
  await finished;
  const got = seen.map(([, body]) => body);
  assert.equal(new Set(got).size, got.length, 'a message was delivered twice');
  assert.deepEqual([...got].sort(), [...sent].sort());
  assert.deepEqual([...held.keys()].sort(), ['a', 'b']);
});

// The consumer acks only when it holds N, and then a moment later (so that a delivery beyond
// the bound would be counted first): what it holds reaches N and never more.
for (const global of [false, true]) {
  test(`prefetch ${global ? '(global, per channel)' : '(per consumer)'} is never exceeded`, T, async (t) => {
    const N = 3;
    const { ch } = await open(t);
    const q = await queue(ch);
    const sent = Array.from({ length: 30 }, (_, i) => `p${i}`);
    for (const body of sent) ch.sendToQueue(q, Buffer.from(body));
    await ch.prefetch(N, global);

    const outstanding = [];
    const got = [];
    let maxHeld = 0;
    let finish;
    const finished = new Promise((resolve) => { finish = resolve; });
    await ch.consume(q, (m) => {
      got.push(m.content.toString());
      outstanding.push(m);
      maxHeld = Math.max(maxHeld, outstanding.length);
      if (got.length === sent.length) {
        ch.ack(m, true);
        finish();
      } else if (outstanding.length === N) {
        setTimeout(() => ch.ack(outstanding.shift()), 10);
      }
    });
    await finished;
    assert.equal(maxHeld, N, `held ${maxHeld} unacked messages with prefetch ${N}`);
    assert.deepEqual(got, sent);
  });
}

// ---- settlement ----------------------------------------------------------------------------

test('an unacked message comes back redelivered after its channel closes', T, async (t) => {
  assertRedelivered(await redeliveredAfter(t, closeChannel), 'unacked');
});

test('an unacked message comes back redelivered after its connection dies', T, async (t) => {
  assertRedelivered(await redeliveredAfter(t, killConnection), 'unacked');
});

test('nack with requeue after a cancel redelivers the message elsewhere', T, async (t) => {
  assertRedelivered(await redeliveredAfter(t, nackRequeue), 'unacked');
});

test('nack with requeue redelivers to the same consumer, counted once (a quorum queue counts)', T, async (t) => {
  const { ch } = await open(t);
  const q = await queue(ch, 'q', { 'x-queue-type': 'quorum' });
  ch.sendToQueue(q, Buffer.from('again'));
  const inbox = await consume(ch, q);
  ch.nack(await inbox.next(), false, true);
  const second = await inbox.next();
  assert.equal(second.content.toString(), 'again');
  assert.equal(second.fields.redelivered, true);
  assert.equal(second.properties.headers['x-delivery-count'], 1);
  ch.ack(second);
});

// A new queue holding `sent`, and a consumer (manual acks) that received them all.
async function delivered(t, sent) {
  const { ch } = await open(t);
  const q = await queue(ch);
  for (const body of sent) ch.sendToQueue(q, Buffer.from(body));
  const inbox = await consume(ch, q);
  const got = await inbox.take(sent.length);
  assert.deepEqual(bodies(got), sent);
  return { ch, q, inbox, got };
}

test('reject without requeue drops the message', T, async (t) => {
  const { ch, q, inbox, got: [drop, keep] } = await delivered(t, ['drop me', 'keep me']);
  ch.reject(drop, false);
  ch.ack(keep);
  await ch.cancel(inbox.tag);
  // Methods are answered in order: the get below is processed after the reject and the ack.
  assert.equal(await ch.get(q), false);
  assert.equal((await ch.checkQueue(q)).messageCount, 0);
});

test('recover redelivers everything outstanding', T, async (t) => {
  const { ch, inbox, got: first } = await delivered(t, ['1', '2']);
  assert.deepEqual(first.map((m) => m.fields.redelivered), [false, false]);
  await ch.recover();
  const again = await inbox.take(2);
  assert.deepEqual(bodies(again).sort(), ['1', '2']);
  assert.deepEqual(again.map((m) => m.fields.redelivered), [true, true]);
  for (const m of again) ch.ack(m);
});

// ---- publishing ----------------------------------------------------------------------------

// RabbitMQ sends basic.return before the basic.ack of the same publish; a return is not a nack.
test('an unroutable mandatory publish is returned (312) and still confirmed', T, async (t) => {
  const { ch } = await open(t, { confirm: true });
  const x = name('x');
  await ch.assertExchange(x, 'direct');
  const events = [];
  const returned = [];
  ch.on('return', (m) => { returned.push(m); events.push('return'); });
  const confirm = (err) => events.push(err ? 'nack' : 'ack');
  ch.publish(x, 'nobody', Buffer.from('back to you'),
    { mandatory: true, messageId: 'r1', headers: { h: 1 } }, confirm);
  await ch.waitForConfirms();
  assert.deepEqual(events, ['return', 'ack']);
  const [r] = returned;
  assert.deepEqual(
    [r.fields.replyCode, r.fields.replyText, r.fields.exchange, r.fields.routingKey],
    [312, 'NO_ROUTE', x, 'nobody']);
  assert.equal(r.content.toString(), 'back to you');
  assert.equal(r.properties.messageId, 'r1');
  assert.deepEqual(r.properties.headers, { h: 1 });

  // Routable, the same mandatory publish is simply confirmed and stored.
  const q = await queue(ch);
  await ch.bindQueue(q, x, 'somebody');
  ch.publish(x, 'somebody', Buffer.from('kept'), { mandatory: true }, confirm);
  await ch.waitForConfirms();
  assert.deepEqual(events, ['return', 'ack', 'ack']);
  assert.equal((await ch.get(q, { noAck: true })).content.toString(), 'kept');
});

test('10,000 pipelined publishes are all confirmed', T, async (t) => {
  const { ch } = await open(t, { confirm: true });
  const q = await queue(ch);
  const count = 10_000;
  let acked = 0;
  const nacked = [];
  for (let i = 0; i < count; i++) {
    ch.sendToQueue(q, Buffer.from(`c${i}`), { persistent: true },
      (err) => (err ? nacked.push(i) : acked++));
  }
  await ch.waitForConfirms();
  assert.deepEqual(nacked, []);
  assert.equal(acked, count);
  assert.equal((await ch.checkQueue(q)).messageCount, count);
  await ch.deleteQueue(q);
});

test('basic.get answers get-ok with the message count, and get-empty', T, async (t) => {
  const { conn, ch } = await open(t);
  const q = await queue(ch);
  assert.equal(await ch.get(q), false);
  ch.sendToQueue(q, Buffer.from('g1'));
  ch.sendToQueue(q, Buffer.from('g2'));
  const first = await ch.get(q, { noAck: false });
  assert.equal(first.content.toString(), 'g1');
  assert.equal(first.fields.messageCount, 1);
  assert.equal(first.fields.redelivered, false);
  ch.ack(first);
  const second = await ch.get(q, { noAck: true });
  assert.equal(second.content.toString(), 'g2');
  assert.equal(second.fields.messageCount, 0);
  assert.equal(await ch.get(q), false);
  // Nothing was left outstanding to come back when the channel closes.
  await ch.close();
  assert.equal(await (await channel(conn)).get(q), false);
});

test('queue.delete sends its consumer basic.cancel', T, async (t) => {
  const { conn, ch } = await open(t);
  const q = await queue(ch);
  const inbox = await consume(ch, q);
  await (await channel(conn)).deleteQueue(q);
  assert.equal(await inbox.next(), null, 'amqplib reports a server cancel as a null message');
  // The consumer's channel goes on.
  assert.equal((await ch.checkQueue(await queue(ch))).messageCount, 0);
});

// ---- errors and refusals -------------------------------------------------------------------

test('an unknown delivery tag is a 406 channel error; the connection survives', T, async (t) => {
  const { conn, ch } = await open(t);
  ch.ack({ fields: { deliveryTag: 99 } });
  const err = await ch.closedBy;
  assert.equal(err.code, 406);
  assert.match(err.message, /unknown delivery tag 99/);
  await assertConnectionUsable(conn);
});

// amqplib never sets `immediate`; its low-level sendMessage takes the method fields as given.
test('immediate is refused with 540 naming mandatory; the connection survives', T, async (t) => {
  const { conn, ch } = await open(t);
  const q = await queue(ch);
  ch.sendMessage({ exchange: '', routingKey: q, mandatory: false, immediate: true, ticket: 0 }, {},
    Buffer.from('now or never'));
  const err = await ch.closedBy;
  assert.equal(err.code, 540);
  assert.deepEqual([err.classId, err.methodId], [60, 40]); // basic.publish
  assert.match(err.message, /publish with mandatory/);
  await assertConnectionUsable(conn);
});

// amqplib's prefetch() always sends prefetch-size 0; its rpc() sends the fields as given.
test('prefetch-size other than 0 is refused with 540 and the remedy', T, async (t) => {
  const { conn, ch } = await open(t);
  const qos = ch.rpc(defs.BasicQos, { prefetchSize: 65_536, prefetchCount: 0, global: false }, defs.BasicQosOk);
  const err = await qos.then(() => null, (e) => e);
  assert.ok(err, 'basic.qos with a prefetch-size was accepted');
  assert.equal(err.code, 540);
  assert.match(err.message, /bound the channel by message count/);
  await assertConnectionUsable(conn);
});

// RabbitMQ's extension for refreshing a token: answered update-secret-ok, the connection goes on.
test('connection.update-secret is answered and the connection stays usable', T, async (t) => {
  const { conn } = await open(t);
  await conn.updateSecret(Buffer.from('a refreshed token'), 'token refresh');
  await conn.updateSecret(Buffer.from('and again'), 'token refresh');
  await assertConnectionUsable(conn);
});

// amqplib writes connection.close ahead of publishes still in its buffer; the server answers
// close-ok and drains what follows instead of resetting the connection, so the close completes.
test('a close with publishes pipelined behind it completes', T, async (t) => {
  for (let round = 0; round < 10; round += 1) {
    const conn = await amqplib.connect(process.env.AMQP_URL);
    const ch = await conn.createChannel();
    const q = await queue(ch);
    const closed = new Promise((resolve) => conn.once('close', resolve));
    const errors = [];
    conn.on('error', (err) => errors.push(err.message));
    for (let i = 0; i < 10; i += 1) ch.sendToQueue(q, Buffer.from(`late-${i}`));
    await conn.close();
    await closed;
    assert.deepEqual(errors, [], `round ${round}`);
  }
});
