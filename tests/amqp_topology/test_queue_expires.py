"""x-expires, through pika: a queue nothing uses (no consumer on any replica, no
basic.get, no declaration, passive ones included, as RabbitMQ counts them) for that many milliseconds is deleted, with its consumer on the bus
and its messages, as RabbitMQ deletes it; a consumer on another `cloud` replica keeps it. Runs on
the pinned nats-server and, as its .floor twin, on the floor.
"""
import base64
import time
import unittest
import urllib.error
import urllib.request
import uuid

import pika
import pika.exceptions

import cloudtest

A = B = None
API_PORT = None
# Timing is what these tests observe, on a machine that may be loaded (sanitizers, parallel tests):
# a look meant to come before the expiry comes 0.5 s after a use, 2.5 s inside an expiry of 3 s;
# a queue must go no sooner than its expiry after its last use, and within ROOM more.
EXPIRES_MS = 3000
ROOM = 5.5


def setUpModule():
    global A, B, API_PORT
    API_PORT = cloudtest.free_port()
    A = unittest.enterModuleContext(cloudtest.Cloud(env={"CLOUD_AMQP_MANAGEMENT_PORT": str(API_PORT)}))
    B = unittest.enterModuleContext(cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": A.pubsub_url}))


def listed(queue):
    """Whether the management API lists the queue: looking there is no use of it, as in RabbitMQ."""
    request = urllib.request.Request(f"http://127.0.0.1:{API_PORT}/api/queues/%2F/{queue}")
    request.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    try:
        with urllib.request.urlopen(request, timeout=10):
            return True
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return False
        raise


def connect(cloud):
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=cloud.amqp_port, heartbeat=0, blocked_connection_timeout=30))


class Expires(unittest.TestCase):
    def setUp(self):
        self.conn = connect(A)
        self.ch = self.conn.channel()
        self.q = "expiring-" + uuid.uuid4().hex[:8]

    def tearDown(self):
        if self.conn.is_open:
            self.conn.close()

    def exists(self, conn=None):
        ch = (conn or self.conn).channel()
        try:
            ch.queue_declare(self.q, passive=True)
        except pika.exceptions.ChannelClosedByBroker as e:
            self.assertEqual(e.reply_code, 404)
            return False
        ch.close()
        return True

    def assert_gone_at_expiry(self, used_at, queue=None):
        """The queue goes once unused for its expiry after `used_at` (taken just before its last
        use), not sooner, and within ROOM more; watched where watching is no use of it."""
        queue = queue or self.q
        while listed(queue):
            self.assertLess(time.monotonic(), used_at + EXPIRES_MS / 1000 + ROOM,
                            f"queue {queue} is still there {EXPIRES_MS / 1000 + ROOM} s after its last use")
            time.sleep(0.1)
        self.assertGreaterEqual(time.monotonic() - used_at, EXPIRES_MS / 1000 - 0.25,
                                f"queue {queue} went before its expiry")

    def test_an_unused_queue_goes_after_its_expiry_with_its_messages(self):
        self.ch.queue_declare(self.q, arguments={"x-expires": EXPIRES_MS})
        self.ch.confirm_delivery()
        self.ch.basic_publish("", self.q, b"left behind")
        time.sleep(0.5)
        used_at = time.monotonic()
        self.assertTrue(self.exists(), "the queue went before its expiry")
        self.assert_gone_at_expiry(used_at)
        self.ch.queue_declare(self.q)  # a new queue of that name starts empty
        self.assertEqual(self.ch.queue_declare(self.q, passive=True).method.message_count, 0)
        self.ch.queue_delete(self.q)

    def test_a_consumer_on_another_replica_keeps_it_and_its_end_starts_the_clock(self):
        self.ch.queue_declare(self.q, arguments={"x-expires": EXPIRES_MS})
        other = connect(B)
        try:
            ch = other.channel()
            tag = ch.basic_consume(self.q, lambda *a: None, auto_ack=True)
            deadline = time.monotonic() + 2 * EXPIRES_MS / 1000
            while time.monotonic() < deadline:
                other.process_data_events(time_limit=0.1)
            self.assertTrue(self.exists(), "a consumed queue expired")
            ch.basic_cancel(tag)
            time.sleep(0.5)
            used_at = time.monotonic()
            self.assertTrue(self.exists(other), "the queue went at once when its consumer ended")
            self.assert_gone_at_expiry(used_at)
        finally:
            other.close()

    def test_a_consumer_on_another_replica_holding_all_its_prefetch_keeps_it(self):
        """A consumer with nothing left to ask for has no pull waiting on the bus, so the other
        replica cannot see it: its own replica keeps the queue's use stamp current."""
        self.ch.queue_declare(self.q, arguments={"x-expires": EXPIRES_MS})
        self.ch.confirm_delivery()
        self.ch.basic_publish("", self.q, b"held")
        other = connect(B)
        try:
            ch = other.channel()
            ch.basic_qos(prefetch_count=1)
            held = []
            ch.basic_consume(self.q, lambda c, m, p, b: held.append(m.delivery_tag))
            deadline = time.monotonic() + 2 * EXPIRES_MS / 1000 + ROOM
            while time.monotonic() < deadline:
                other.process_data_events(time_limit=0.1)
            self.assertEqual(len(held), 1)
            self.assertTrue(self.exists(), "a queue whose consumer holds a delivery expired")
            ch.basic_ack(held[0])
        finally:
            other.close()

    def test_a_declaration_or_a_get_counts_as_use(self):
        # One queue per kind of use, each used every 0.4 s for twice its expiry, all at once: only
        # these uses can have kept them.
        uses = {"declare": lambda q: self.ch.queue_declare(q, arguments={"x-expires": EXPIRES_MS}),
                "basic.get": lambda q: self.ch.basic_get(q, auto_ack=True),
                "passive declare": lambda q: self.ch.queue_declare(q, passive=True)}
        queues = {kind: f"{self.q}-{i}" for i, kind in enumerate(uses)}
        for q in queues.values():
            self.ch.queue_declare(q, arguments={"x-expires": EXPIRES_MS})
        deadline = time.monotonic() + 2 * EXPIRES_MS / 1000
        while time.monotonic() < deadline:
            for kind, use in uses.items():
                use(queues[kind])
            time.sleep(0.4)
        used_at = time.monotonic()
        for kind, q in queues.items():
            self.q = q
            self.assertTrue(self.exists(), f"the queue expired though a {kind} used it every 0.4 s")
        for q in queues.values():
            self.assert_gone_at_expiry(used_at, q)

    def test_a_message_requeued_to_nobody_does_not_keep_it(self):
        """A basic.get whose message went back (rejected with requeue, or its channel closed):
        nothing holds it, so the queue goes at its expiry, as in RabbitMQ. The bus counts such a
        message unacknowledged until it is delivered again, which in an unused queue is never:
        taken for a delivery someone holds, it kept the queue for good (the soak saw a queue
        outlive its x-expires by minutes after its client lost a channel mid-cycle)."""
        self.ch.queue_declare(self.q, arguments={"x-expires": EXPIRES_MS})
        self.ch.confirm_delivery()
        for body in (b"requeued", b"closed over"):
            self.ch.basic_publish("", self.q, body)
        method, _, _ = self.ch.basic_get(self.q, auto_ack=False)
        self.ch.basic_reject(method.delivery_tag, requeue=True)
        other = self.conn.channel()
        used_at = time.monotonic()
        other.basic_get(self.q, auto_ack=False)
        other.close()
        self.assert_gone_at_expiry(used_at)

    def test_an_invalid_or_other_x_expires_is_406_as_in_rabbitmq(self):
        for bad, why in (("soon", "not an integer"), (-1, "negative"), (0, "zero")):
            with self.subTest(value=bad):
                ch = self.conn.channel()
                with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as refused:
                    ch.queue_declare(self.q, arguments={"x-expires": bad})
                self.assertEqual(refused.exception.reply_code, 406)
                self.assertIn(f"invalid arg 'x-expires' for queue '{self.q}'", refused.exception.reply_text)
                self.assertIn(why, refused.exception.reply_text)
        self.ch.queue_declare(self.q, arguments={"x-expires": 60000})
        ch = self.conn.channel()
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as refused:
            ch.queue_declare(self.q, arguments={"x-expires": 30000})
        self.assertEqual(refused.exception.reply_code, 406)
        self.assertIn("inequivalent arg 'x-expires'", refused.exception.reply_text)
        self.assertIn("received '30000' but current is '60000'", refused.exception.reply_text)
        self.ch.queue_delete(self.q)


if __name__ == "__main__":
    unittest.main()
