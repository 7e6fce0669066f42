// x-delivery-count on the first redelivery (specified as "JetStream's delivered count − 1, as a
// quorum queue does"): after exactly one earlier delivery, a RabbitMQ quorum queue says 1,
// however the message was given up; a classic queue's redelivery has none, as RabbitMQ's. A ctest of its own (run_node_tests.py, AMQPLIB_TESTS) so
// that a known defect here can be labelled without hiding the rest of messaging.test.js.
'use strict';

const assert = require('node:assert/strict');
const { test } = require('node:test');
const { redeliveredAfter, closeChannel, killConnection, nackRequeue } = require('./redelivery');

const T = { timeout: 60_000 };

for (const [how, lose] of [['its channel closes', closeChannel], ['its connection dies', killConnection],
  ['a nack requeues it', nackRequeue]]) {
  test(`x-delivery-count is 1 on the redelivery after ${how}`, T, async (t) => {
    const again = await redeliveredAfter(t, lose, { 'x-queue-type': 'quorum' });
    assert.equal(again.fields.redelivered, true);
    assert.equal(again.properties.headers['x-delivery-count'], 1,
      'one earlier delivery: JetStream delivered count 2, minus 1');
  });
}

test('a classic queue\'s redelivery carries no x-delivery-count', T, async (t) => {
  const again = await redeliveredAfter(t, nackRequeue);
  assert.equal(again.fields.redelivered, true);
  assert.equal((again.properties.headers || {})['x-delivery-count'], undefined);
});
