"""The fixture of the dead-lettering tests (tests/amqp_messaging/test_dead_letter.py and
test_length_limit.py): a test class per module sets `cloud` to that module's `cloud`."""
import time
import unittest
import uuid

import pika


class DeadLetterCase(unittest.TestCase):
    """A confirming channel to `cloud`; a dead-letter exchange with a queue `dlq` taking every
    one-word key, and a consumer of `dlq` collecting what arrives there (`self.dead`).

    `dlq` is read by a consumer that keeps up, and bound through a topic exchange with `*`: the
    floor server can skip part of a backlog that a queue bound several ways holds (README, "The
    floor's known defect"); these tests are about what arrives, not about reading a backlog.
    """
    cloud = None  # a cloudtest.Cloud, set by the module that uses it

    def setUp(self):
        self.conn = pika.BlockingConnection(pika.ConnectionParameters(
            host="127.0.0.1", port=self.cloud.amqp_port, heartbeat=0, blocked_connection_timeout=30))
        self.ch = self.conn.channel()
        self.ch.confirm_delivery()
        word = uuid.uuid4().hex[:8]
        self.q, self.dlx, self.dlq = f"work-{word}", f"dlx-{word}", f"dlq-{word}"
        self.ch.exchange_declare(self.dlx, exchange_type="topic")
        self.ch.queue_declare(self.dlq)
        self.ch.queue_bind(self.dlq, self.dlx, "*")
        self.dead = []
        self.ch.basic_consume(self.dlq, lambda c, m, p, b: self.dead.append((m, p, b)), auto_ack=True)

    def tearDown(self):
        if self.conn.is_open:
            self.conn.close()

    def declare(self, queue=None, **arguments):
        args = {"x-dead-letter-exchange": self.dlx}
        args.update({k.replace("_", "-"): v for k, v in arguments.items()})
        self.ch.queue_declare(queue or self.q, arguments={k: v for k, v in args.items() if v is not None})

    def publish(self, body, queue=None, **props):
        self.ch.basic_publish("", queue or self.q, body, pika.BasicProperties(**props))

    def wait_dead(self, n, timeout=15):
        """The first n dead letters that reached `dlq`, once they are there."""
        deadline = time.monotonic() + timeout
        while len(self.dead) < n and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.05)
        self.assertGreaterEqual(len(self.dead), n, f"dead letters in {self.dlq} within {timeout} s")
        return self.dead[:n]

    def wait_get(self, queue, timeout=15):
        """The next message of `queue` (bound by its name only), acked, waiting for it to arrive."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            method, props, body = self.ch.basic_get(queue, auto_ack=True)
            if method is not None:
                return method, props, body
            time.sleep(0.05)
        self.fail(f"nothing arrived in {queue} within {timeout} s")

    def count(self, queue=None):
        return self.ch.queue_declare(queue or self.q, passive=True).method.message_count

    def deaths(self, props):
        return props.headers["x-death"]
