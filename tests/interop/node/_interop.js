// What every Node client program of the interop matrix shares: the RESULT protocol of
// tests/interop/README.md, names, deadlines, the restart request, the expected messages.
// Not a client itself (the leading underscore keeps the driver from running it).
'use strict';

const assert = require('node:assert/strict');
const { exec } = require('node:child_process');
const { promisify } = require('node:util');

const URL = process.env.AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672/';
// A deadline for waiting on an event, not an assertion about time: generous for sanitized servers.
const WAIT_MS = Number(process.env.INTEROP_WAIT || 60) * 1000;

// Runs scenarios one after the other and prints one RESULT line for each.
class Report {
  constructor(defaultClient, extras = []) {
    this.client = process.env.INTEROP_CLIENT || defaultClient;
    this.failed = false;
    if (extras.length) console.log(`SCENARIOS ${this.client} ${extras.join(' ')}`);
  }

  // The LIBRARY line: the release of npm package `name` this program loaded.
  library(name) {
    console.log(`LIBRARY ${this.client} ${name} ${require('../../node').versionOf(name)} (npm)`);
  }

  // An exchange or queue name of this client's own.
  name(suffix) {
    return `${this.client}-${suffix}`;
  }

  result(scenario, verdict, reason = '') {
    this.failed ||= verdict === 'fail';
    console.log(`RESULT ${this.client} ${scenario} ${verdict} ${String(reason).split(/\s+/).join(' ')}`.trimEnd());
  }

  // fn() resolving is a pass (a resolved string is its note); a rejection, or no answer before
  // the deadline, is a fail. (No Node scenario meets a refusal of HIP-1326's "What is not
  // implemented": no `refused` verdict here.)
  async run(scenario, fn) {
    console.error(`--- ${scenario}`);
    try {
      const note = await withDeadline(fn(), `scenario ${scenario}`);
      this.result(scenario, 'pass', note || '');
    } catch (err) {
      console.error(err);
      this.result(scenario, 'fail', `${err.name}: ${err.message}`);
    }
  }

  // Exits at once: a connection a failed scenario left behind must not keep the program alive.
  exit() {
    process.exit(this.failed ? 1 : 0);
  }
}

function withDeadline(promise, what, ms = WAIT_MS) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms / 1000}s waiting for ${what}`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

// Resolves after one event of `emitter` named `event`, with its first argument.
function once(emitter, event) {
  return new Promise((resolve) => emitter.once(event, resolve));
}

// Asks the driver to restart the server (same store, same port); calls back when it accepts.
// Asynchronous, so that the client's event loop goes on and notices the closed connection.
function restartServerCallback(callback) {
  const command = process.env.CLOUD_RESTART_CMD;
  if (!command) return callback(new Error('CLOUD_RESTART_CMD is not set: run this program through tests/interop/matrix.py'));
  exec(command, (err, stdout, stderr) => callback(err ? new Error(`server restart failed: ${stdout}${stderr}`) : null));
}
const restartServer = promisify(restartServerCallback);

// The headers table each published message carries: a nested table must round-trip.
function headersOf(i) {
  return { n: i, origin: 'interop', nested: { k: 'v', list: [1, 2] } };
}

function bodies(prefix, count) {
  return Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
}

// amqplib publish options of the i-th message of publish_confirm.
function propertiesOf(i) {
  return { persistent: true, contentType: 'text/plain', messageId: `m${i}`, headers: headersOf(i) };
}

// amqplib messages against the bodies sent with propertiesOf(i): order, bodies and properties.
function expectRoundTrip(messages, sent) {
  assert.deepEqual(messages.map((m) => m.content.toString()), sent, 'bodies in order, each once');
  messages.forEach((m, i) => {
    const { contentType, messageId, headers, deliveryMode } = m.properties;
    assert.deepEqual({ contentType, messageId, headers, deliveryMode },
      { contentType: 'text/plain', messageId: `m${i}`, headers: headersOf(i), deliveryMode: 2 },
      `properties of message ${i}`);
  });
}

// An amqplib basic.return of the mandatory_return scenario.
function expectReturn(returned, exchange) {
  assert.equal(returned.length, 1, 'returned messages');
  const [r] = returned;
  assert.deepEqual(
    [r.fields.replyCode, r.fields.replyText, r.fields.exchange, r.fields.routingKey, r.content.toString()],
    [312, 'NO_ROUTE', exchange, 'nobody.listens', 'lost'], 'basic.return');
  assert.deepEqual([r.properties.messageId, r.properties.headers], ['m7', headersOf(7)], 'properties of the return');
}

// For a prefetch-bounded consumer: how many deliveries it holds unacked, and the most it ever held.
class Window {
  constructor(limit) {
    this.limit = limit;
    this.held = 0;
    this.most = 0;
  }

  // A delivery arrived; true when the window is full (time to ack).
  add() {
    this.held += 1;
    this.most = Math.max(this.most, this.held);
    assert.ok(this.held <= this.limit, `${this.held} unacked deliveries with prefetch ${this.limit}`);
    return this.held === this.limit;
  }

  acked() {
    this.held = 0;
  }
}

module.exports = {
  URL, WAIT_MS, Report, withDeadline, once, restartServer, restartServerCallback, headersOf, bodies, propertiesOf,
  expectRoundTrip, expectReturn, Window,
};
