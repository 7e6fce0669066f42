// An unsettled message given up three ways, and what its redelivery must look like. Shared by
// messaging.test.js (the redelivery itself) and redelivery_count.test.js (its exact count).
'use strict';

const assert = require('node:assert/strict');
const { connect, channel, open, queue, consume } = require('./support');

// The first delivery of a message, held unacked on its own connection; `lose(holder, first,
// consumerTag)` gives it up; the redelivery is then consumed (and acked) on another connection.
// The queue is declared with `args` (e.g. {'x-queue-type': 'quorum'}).
async function redeliveredAfter(t, lose, args = undefined) {
  const { ch } = await open(t);
  const q = await queue(ch, 'q', args);
  ch.sendToQueue(q, Buffer.from('unacked'));
  const holder = await channel(await connect(t));
  const held = await consume(holder, q);
  const first = await held.next();
  assert.equal(first.fields.redelivered, false);
  assert.equal((first.properties.headers || {})['x-delivery-count'], undefined,
    'a first delivery carries no x-delivery-count');
  await lose(holder, first, held.tag);
  const again = await (await consume(ch, q)).next();
  ch.ack(again);
  return again;
}

const closeChannel = (holder) => holder.close();

// No connection.close: the socket just goes away, as when a client process dies. The error
// tells amqplib (which listens for socket errors, not 'close') to stop its heartbeats.
function killConnection(holder) {
  const socket = holder.connection.stream;
  const gone = new Promise((resolve) => socket.once('close', resolve));
  socket.destroy(new Error('the test killed this socket'));
  return gone;
}

// Cancelled first, so that the redelivery cannot go back to the same consumer; the delivery
// stays the channel's to settle (RabbitMQ).
async function nackRequeue(holder, first, consumerTag) {
  await holder.cancel(consumerTag);
  holder.nack(first, false, true);
}

// A classic queue's redelivery: flagged, and without x-delivery-count (RabbitMQ adds it only for
// quorum queues).
function assertRedelivered(m, body) {
  assert.equal(m.content.toString(), body);
  assert.equal(m.fields.redelivered, true);
  assert.equal(m.properties.headers?.['x-delivery-count'], undefined,
    `a classic queue's redelivery carries no x-delivery-count (headers: ${JSON.stringify(m.properties.headers)})`);
}

module.exports = { redeliveredAfter, closeChannel, killConnection, nackRequeue, assertRedelivered };
