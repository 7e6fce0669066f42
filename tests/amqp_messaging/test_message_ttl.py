"""Message TTL, through pika: RabbitMQ's `expiration` property and the queue
argument x-message-ttl. A message that waited in its queue longer than the lower of the two is
never delivered, to a consumer or to basic.get; a value that is not a count of milliseconds is
refused with 406, and so is a re-declaration with another x-message-ttl, as RabbitMQ answers.
Runs on the pinned nats-server and, as its .floor twin, on the floor.
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


class TtlCase(unittest.TestCase):
    """A connection with a confirming channel, and a queue name of the test's own."""

    def setUp(self):
        self.conn = pika.BlockingConnection(pika.ConnectionParameters(
            host="127.0.0.1", port=CLOUD.amqp_port, heartbeat=0, blocked_connection_timeout=30))
        self.ch = self.conn.channel()
        self.ch.confirm_delivery()
        self.q = "ttl-" + uuid.uuid4().hex[:8]

    def tearDown(self):
        if self.conn.is_open:
            self.conn.close()


class MessageTtl(TtlCase):
    def setUp(self):
        super().setUp()
        self.ch.queue_declare(queue=self.q)

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
        self.publish("m", expiration="1500")
        method, _, _ = self.ch.basic_get(queue=self.q, auto_ack=False)
        self.assertIsNotNone(method)
        time.sleep(2)
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


class QueueTtl(TtlCase):
    def get_all(self):
        got = []
        while True:
            method, _, body = self.ch.basic_get(queue=self.q, auto_ack=True)
            if method is None:
                return got
            got.append(body.decode())

    def test_the_lower_of_the_queue_ttl_and_the_expiration_applies(self):
        # Margins wide enough for a loaded machine: 2 s against 20 ms.
        self.ch.queue_declare(queue=self.q, arguments={"x-message-ttl": 2000})
        self.ch.basic_publish("", self.q, "plain")
        self.ch.basic_publish("", self.q, "longer", pika.BasicProperties(expiration="60000"))
        self.ch.basic_publish("", self.q, "shorter", pika.BasicProperties(expiration="20"))
        time.sleep(0.3)
        self.assertEqual(self.get_all(), ["plain", "longer"])  # "shorter" went at 20 ms
        self.ch.basic_publish("", self.q, "plain")
        self.ch.basic_publish("", self.q, "longer", pika.BasicProperties(expiration="60000"))
        time.sleep(2.5)
        self.assertEqual(self.get_all(), [])  # the queue's 2 s applied to both
        self.assertEqual(self.ch.queue_declare(queue=self.q, arguments={"x-message-ttl": 2000}).method.queue, self.q)

    def test_an_invalid_or_other_x_message_ttl_is_406_as_in_rabbitmq(self):
        for bad, why in (("abc", "not an integer"), (-1, "negative")):
            with self.subTest(value=bad):
                ch = self.conn.channel()
                with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as refused:
                    ch.queue_declare(queue=self.q, arguments={"x-message-ttl": bad})
                self.assertEqual(refused.exception.reply_code, 406)
                self.assertIn(f"invalid arg 'x-message-ttl' for queue '{self.q}'", refused.exception.reply_text)
                self.assertIn(why, refused.exception.reply_text)
        self.ch.queue_declare(queue=self.q, arguments={"x-message-ttl": 1000})
        for other, shown in (({"x-message-ttl": 2000}, "received '2000' but current is '1000'"),
                             ({}, "received 'none' but current is '1000'")):
            with self.subTest(arguments=other):
                ch = self.conn.channel()
                with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as refused:
                    ch.queue_declare(queue=self.q, arguments=other)
                self.assertEqual(refused.exception.reply_code, 406)
                self.assertIn("inequivalent arg 'x-message-ttl'", refused.exception.reply_text)
                self.assertIn(shown, refused.exception.reply_text)


if __name__ == "__main__":
    unittest.main()
