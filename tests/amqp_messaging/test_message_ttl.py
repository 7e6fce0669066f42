"""Per-message TTL, RabbitMQ's `expiration` property (issue 17, item 2), through pika: a message
that waited in its queue longer than its expiration is never delivered, to a consumer or to
basic.get; an expiration that is not a count of milliseconds is refused with 406, as RabbitMQ
refuses it. Runs on the pinned nats-server and, as its .floor twin, on the floor.
"""
import time
import unittest
import uuid

import pika
import pika.exceptions

import cloudtest

CLOUD = None


def setUpModule():
    global CLOUD
    CLOUD = unittest.enterModuleContext(cloudtest.Cloud())


class MessageTtl(unittest.TestCase):
    def setUp(self):
        self.conn = pika.BlockingConnection(pika.ConnectionParameters(
            host="127.0.0.1", port=CLOUD.amqp_port, heartbeat=0, blocked_connection_timeout=30))
        self.ch = self.conn.channel()
        self.ch.confirm_delivery()
        self.q = "ttl-" + uuid.uuid4().hex[:8]
        self.ch.queue_declare(queue=self.q)

    def tearDown(self):
        if self.conn.is_open:
            self.conn.close()

    def publish(self, body, expiration=None):
        self.ch.basic_publish(exchange="", routing_key=self.q, body=body,
                              properties=pika.BasicProperties(expiration=expiration))

    def get_all(self):
        got = []
        while True:
            method, props, body = self.ch.basic_get(queue=self.q, auto_ack=True)
            if method is None:
                return got
            got.append((body.decode(), props.expiration))

    def test_an_expired_message_is_never_fetched_and_a_live_one_keeps_its_expiration(self):
        self.publish("short", expiration="50")
        self.publish("long", expiration="60000")
        self.publish("none")
        time.sleep(0.3)
        self.assertEqual(self.get_all(), [("long", "60000"), ("none", None)])

    def test_a_consumer_never_receives_an_expired_message(self):
        for i in range(5):
            self.publish(f"expired-{i}", expiration="20")
        time.sleep(0.2)
        self.publish("live", expiration="60000")
        got = []
        self.ch.basic_consume(self.q, lambda c, m, p, b: got.append(b.decode()), auto_ack=True)
        # What arrives next is the next live message, nothing expired before it.
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.05)
        self.publish("after")
        while len(got) < 2 and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.05)
        self.assertEqual(got, ["live", "after"])

    def test_a_requeued_message_expires_too(self):
        self.publish("m", expiration="300")
        method, _, _ = self.ch.basic_get(queue=self.q, auto_ack=False)
        self.assertIsNotNone(method)
        time.sleep(0.5)
        self.ch.basic_nack(method.delivery_tag, requeue=True)
        self.assertEqual(self.get_all(), [])

    def test_an_expiration_that_is_not_milliseconds_is_406_as_in_rabbitmq(self):
        for bad in ("abc", "-1", "1.5", "+5", " 5", ""):
            with self.subTest(expiration=bad):
                ch = self.conn.channel()
                with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as refused:
                    ch.basic_publish(exchange="", routing_key=self.q, body="x",
                                     properties=pika.BasicProperties(expiration=bad))
                    ch.queue_declare(queue=self.q, passive=True)  # the refusal arrives first
                self.assertEqual(refused.exception.reply_code, 406)
                self.assertIn(f"invalid expiration '{bad}'", refused.exception.reply_text)
        self.assertTrue(self.conn.is_open)
        self.assertEqual(self.get_all(), [])


if __name__ == "__main__":
    unittest.main()
