"""A consumer whose prefetch of large messages is more than nats-server lets one connection have
unsent (max_pending, 64 MiB by default) gets them all at once, none redelivered, and the bus never
takes the adaptor's connection for a slow consumer (which would close it and every other
consumer's deliveries with it): on a bus of the test's own whose log is read, and, with eight
such consumers at once, on the embedded bus. Through pika; runs on the pinned nats-server and,
as its .floor twin, on the floor.
"""
import time
import unittest
import uuid

import pika

import cloudtest

BODY = b"x" * 1_000_000  # with its headers, within nats-server's default max_payload (1 MiB)
COUNT = 190  # 190 MB: three times the default max_pending


class LargeMessages(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.bus = cls.enterClassContext(cloudtest.NatsServer())
        cls.cloud = cls.enterClassContext(cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": cls.bus.url}))

    def setUp(self):
        self.queue = f"large-{uuid.uuid4().hex[:8]}"
        self.conn = pika.BlockingConnection(
            pika.ConnectionParameters(host="127.0.0.1", port=self.cloud.amqp_port, heartbeat=0))
        self.addCleanup(self.conn.close)
        self.ch = self.conn.channel()
        self.ch.queue_declare(self.queue, durable=True)
        self.ch.confirm_delivery()
        for _ in range(COUNT):
            self.ch.basic_publish("", self.queue, BODY, pika.BasicProperties(delivery_mode=2))

    def consume(self, auto_ack):
        got = []
        for method, _, body in self.ch.consume(self.queue, auto_ack=auto_ack, inactivity_timeout=60):
            self.assertIsNotNone(method, f"no delivery for 60 s after {len(got)} of {COUNT}")
            got.append((body == BODY, method.redelivered))
            if not auto_ack:
                self.ch.basic_ack(method.delivery_tag)
            if len(got) == COUNT:
                break
        self.ch.cancel()
        return got

    def assert_delivered_once_each(self, got):
        self.assertEqual(got, [(True, False)] * COUNT)
        self.assertNotIn("Slow Consumer", self.bus.log())
        self.assertEqual(self.ch.queue_declare(self.queue, passive=True).method.message_count, 0)

    def test_a_prefetch_of_190_megabytes_is_delivered_once_each(self):
        self.ch.basic_qos(prefetch_count=COUNT)
        self.assert_delivered_once_each(self.consume(auto_ack=False))

    def test_a_no_ack_consumer_of_190_megabytes_gets_each_once(self):
        self.assert_delivered_once_each(self.consume(auto_ack=True))


class ManyConsumersOnTheEmbeddedBus(unittest.TestCase):
    QUEUES = 8
    PER_QUEUE = 60  # 480 MB delivered, each consumer's 60 MB asked for at once

    def test_eight_consumers_of_large_messages_at_once_get_each_once(self):
        cloud = self.enterContext(cloudtest.Cloud())
        conn = pika.BlockingConnection(
            pika.ConnectionParameters(host="127.0.0.1", port=cloud.amqp_port, heartbeat=0))
        self.addCleanup(conn.close)
        ch = conn.channel()
        queues = [f"large-{uuid.uuid4().hex[:8]}" for _ in range(self.QUEUES)]
        ch.confirm_delivery()
        for q in queues:
            ch.queue_declare(q, durable=True)
            for _ in range(self.PER_QUEUE):
                ch.basic_publish("", q, BODY, pika.BasicProperties(delivery_mode=2))
        ch.basic_qos(prefetch_count=self.PER_QUEUE)
        got = []

        def on_message(_ch, method, _props, body):
            got.append((body == BODY, method.redelivered))
            ch.basic_ack(method.delivery_tag)

        for q in queues:
            ch.basic_consume(q, on_message)
        total = self.QUEUES * self.PER_QUEUE
        deadline = time.monotonic() + 60  # a stalled connection waits out the 30 s ack wait
        while len(got) < total and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.1)
        self.assertEqual(got, [(True, False)] * total)


if __name__ == "__main__":
    unittest.main()
