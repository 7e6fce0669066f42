// amqplib's callback API (amqplib/callback_api), written as amqplib's documentation shows it:
// error-first callbacks, nested (contract: ../README.md).
'use strict';

const assert = require('node:assert/strict');
const { amqplibCallback: amqp } = require('../../node');
const {
  URL, Report, restartServerCallback, bodies, propertiesOf, expectRoundTrip, expectReturn, Window,
} = require('./_interop');

const report = new Report('amqplib_callback');
report.library('amqplib');
const EXCHANGE = report.name('topic');

// An error-first callback that hands its results to `fn`, and any error (or a failed assertion
// inside `fn`) to `done`: callbacks run on amqplib's stack, where a throw would be lost.
function step(done, fn) {
  return (err, ...results) => {
    if (err) return done(err);
    try {
      fn(...results);
    } catch (e) {
      done(e);
    }
  };
}

function freshQueue(ch, suffix, key, callback, args) {
  ch.assertQueue(report.name(suffix), { durable: true, arguments: args }, step(callback, ({ queue }) => {
    ch.purgeQueue(queue, step(callback, () => {
      if (!key) return callback(null, queue);
      ch.bindQueue(queue, EXCHANGE, key, {}, step(callback, () => callback(null, queue)));
    }));
  }));
}

// basic.get until a message is there (a confirmed publish is stored; a get may still race it).
function getOne(ch, queue, options, callback) {
  ch.get(queue, options, step(callback, (msg) => {
    if (msg) return callback(null, msg);
    setTimeout(() => getOne(ch, queue, options, callback), 20);
  }));
}

// A manual-ack consumer until `count` deliveries; onMessage(ch, msg, seen) settles each.
function consume(ch, queue, count, onMessage, callback) {
  const seen = [];
  let finished = false;
  const finish = (err) => {
    if (finished) return;
    finished = true;
    if (err) return callback(err);
    ch.cancel(seen[0].fields.consumerTag, step(callback, () => callback(null, seen)));
  };
  ch.consume(queue, (msg) => {
    if (finished) return;
    seen.push(msg);
    try {
      onMessage(ch, msg, seen);
    } catch (e) {
      return finish(e);
    }
    if (seen.length === count) finish(null);
  }, {}, (err) => err && finish(err));
}

function declare(conn, done) {
  conn.createConfirmChannel(step(done, (ch) => {
    ch.assertExchange(EXCHANGE, 'topic', { durable: true }, step(done, () => {
      freshQueue(ch, 'declare', 'orders.*', step(done, (queue) => {
        ch.checkExchange(EXCHANGE, step(done, () => {
          ch.checkQueue(queue, step(done, (ok) => {
            assert.equal(ok.messageCount, 0, 'messages in the new queue');
            ch.publish(EXCHANGE, 'orders.new', Buffer.from('declared'), { mandatory: true });
            ch.waitForConfirms(step(done, () => {
              getOne(ch, queue, { noAck: true }, step(done, (m) => {
                assert.deepEqual([m.content.toString(), m.fields.exchange, m.fields.routingKey],
                  ['declared', EXCHANGE, 'orders.new'], 'routed message');
                ch.close(done);
              }));
            }));
          }));
        }));
      }));
    }));
  }));
}

function publishConfirm(conn, done) {
  conn.createConfirmChannel(step(done, (ch) => {
    freshQueue(ch, 'confirm', 'confirm.*', step(done, (queue) => {
      const sent = bodies('confirm', 20);
      const acks = [];
      sent.forEach((body, i) => {
        ch.publish(EXCHANGE, 'confirm.item', Buffer.from(body), propertiesOf(i), (err) => acks.push(err ? `nack ${i}` : 'ack'));
      });
      ch.waitForConfirms(step(done, () => {
        assert.deepEqual(acks, sent.map(() => 'ack'), 'a confirm for each publish');
        consume(ch, queue, sent.length, (c, m) => c.ack(m), step(done, (seen) => {
          expectRoundTrip(seen, sent);
          ch.close(done);
        }));
      }));
    }));
  }));
}

function consumePrefetchAck(conn, done) {
  const prefetch = 5;
  const sent = bodies('prefetch', 30);
  conn.createConfirmChannel(step(done, (ch) => {
    freshQueue(ch, 'prefetch', null, step(done, (queue) => {
      for (const body of sent) ch.sendToQueue(queue, Buffer.from(body));
      ch.waitForConfirms(step(done, () => {
        ch.prefetch(prefetch, false, step(done, () => {
          // Acks only when the window is full (one multiple ack): a server that ignored
          // prefetch would deliver one more before that ack.
          const window = new Window(prefetch);
          consume(ch, queue, sent.length, (c, m, all) => {
            if (window.add() || all.length === sent.length) {
              c.ack(m, true);
              window.acked();
            }
          }, step(done, (seen) => {
            assert.deepEqual(seen.map((m) => m.content.toString()), sent, 'bodies in order, each once');
            assert.equal(window.most, prefetch, 'largest number of unacked deliveries');
            assert.ok(!seen.some((m) => m.fields.redelivered), 'a first delivery is marked redelivered');
            ch.checkQueue(queue, step(done, (ok) => {
              assert.equal(ok.messageCount, 0, 'messages left');
              ch.close(done);
            }));
          }));
        }));
      }));
    }));
  }));
}

function nackRequeue(conn, done) {
  conn.createConfirmChannel(step(done, (ch) => {
    // A quorum queue: x-delivery-count is a quorum queue's (RabbitMQ's classic queues never add it).
    freshQueue(ch, 'nack', null, step(done, (queue) => {
      ch.sendToQueue(queue, Buffer.from('again'));
      ch.waitForConfirms(step(done, () => {
        const settle = (c, m, all) => (all.length === 1 ? c.nack(m, false, true) : c.ack(m));
        consume(ch, queue, 2, settle, step(done, (seen) => {
          assert.deepEqual(seen.map((m) => [m.fields.redelivered, m.content.toString()]),
            [[false, 'again'], [true, 'again']], '(redelivered, body) of the delivery and its redelivery');
          assert.equal(seen[1].properties.headers['x-delivery-count'], 1, 'x-delivery-count of the redelivery');
          ch.close(done);
        }));
      }));
    }), { 'x-queue-type': 'quorum' });
  }));
}

function mandatoryReturn(conn, done) {
  conn.createConfirmChannel(step(done, (ch) => {
    const events = [];
    const returned = [];
    ch.on('return', (msg) => { returned.push(msg); events.push('return'); });
    ch.publish(EXCHANGE, 'nobody.listens', Buffer.from('lost'), { ...propertiesOf(7), mandatory: true },
      (err) => events.push(err ? 'nack' : 'ack'));
    ch.waitForConfirms(step(done, () => {
      // As from RabbitMQ: the return, then the ack (a return is not a failure to publish).
      assert.deepEqual(events, ['return', 'ack'], 'events of an unroutable mandatory publish');
      expectReturn(returned, EXCHANGE);
      ch.close(done);
    }));
  }));
}

function basicGet(conn, done) {
  conn.createConfirmChannel(step(done, (ch) => {
    freshQueue(ch, 'get', null, step(done, (queue) => {
      ch.get(queue, { noAck: true }, step(done, (empty) => {
        assert.equal(empty, false, 'get on an empty queue');
        for (const body of ['g1', 'g2']) ch.sendToQueue(queue, Buffer.from(body));
        ch.waitForConfirms(step(done, () => {
          getOne(ch, queue, { noAck: false }, step(done, (first) => {
            assert.deepEqual([first.content.toString(), first.fields.messageCount, first.fields.redelivered],
              ['g1', 1, false], 'first get');
            ch.ack(first);
            getOne(ch, queue, { noAck: true }, step(done, (second) => {
              assert.deepEqual([second.content.toString(), second.fields.messageCount], ['g2', 0], 'second get');
              ch.get(queue, { noAck: true }, step(done, (none) => {
                assert.equal(none, false, 'get after draining');
                ch.close(done);
              }));
            }));
          }));
        }));
      }));
    }));
  }));
}

// amqplib's own recovery (connect's `recovery` option): `setup` runs after every (re)connect
// and hands the scenario a fresh confirm channel with the queue declared.
function reconnect(done) {
  const queue = report.name('reconnect');
  const phases = [beforeRestart, afterRestart];
  let conn = null;

  function beforeRestart(ch) {
    ch.sendToQueue(queue, Buffer.from('before'), { persistent: true });
    ch.waitForConfirms(step(done, () => {
      conn.once('disconnect', (err) => console.error(`disconnected by the restart: ${err?.message}`));
      restartServerCallback((err) => err && done(err));
    }));
  }

  function afterRestart(ch) {
    getOne(ch, queue, { noAck: true }, step(done, (before) => {
      assert.equal(before.content.toString(), 'before', 'message published before the restart');
      ch.sendToQueue(queue, Buffer.from('after'), { persistent: true });
      ch.waitForConfirms(step(done, () => {
        getOne(ch, queue, { noAck: true }, step(done, (after) => {
          assert.equal(after.content.toString(), 'after', 'message published after the restart');
          conn.close(done);
        }));
      }));
    }));
  }

  // With recovery, connect returns the connection handle at once (the callback waits for the
  // first connection), so listeners go on before anything happens.
  conn = amqp.connect(URL, {
    recovery: {
      initialDelay: 100,
      maxDelay: 1000,
      setup(model, setupDone) {
        model.createConfirmChannel((err, ch) => {
          if (err) return setupDone(err);
          ch.assertQueue(queue, { durable: true }, (err2) => {
            setupDone(err2);
            const phase = phases.shift();
            if (err2) return;
            if (!phase) return done(new Error('setup ran more than once per restart'));
            step(done, phase)(null, ch);
          });
        });
      },
    },
  }, (err) => err && done(err));
  conn.on('error', (e) => console.error(`connection error: ${e.message}`));
}

// The scenarios, one after the other, on one connection (opened again when a failed one lost it).
function main() {
  const scenarios = [
    ['declare', declare], ['publish_confirm', publishConfirm], ['consume_prefetch_ack', consumePrefetchAck],
    ['nack_requeue', nackRequeue], ['mandatory_return', mandatoryReturn], ['basic_get', basicGet],
  ];
  let conn = null;

  function withConnection(callback) {
    if (conn) return callback(null, conn);
    amqp.connect(URL, (err, c) => {
      if (err) return callback(err);
      c.on('error', (e) => console.error(`connection error: ${e.message}`));
      c.on('close', () => { if (conn === c) conn = null; });
      conn = c;
      callback(null, c);
    });
  }

  function next() {
    const item = scenarios.shift();
    if (!item) {
      const finish = () => report.run('reconnect', () => new Promise((resolve, reject) => {
        reconnect((err) => (err ? reject(err) : resolve()));
      })).then(() => report.exit());
      return conn ? conn.close(finish) : finish();
    }
    const [scenario, fn] = item;
    report.run(scenario, () => new Promise((resolve, reject) => {
      withConnection((err, c) => (err ? reject(err) : fn(c, (e) => (e ? reject(e) : resolve()))));
    })).then(next);
  }
  next();
}

main();
