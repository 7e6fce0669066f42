"""RabbitMQ's direct reply-to, through pika, as RabbitMQ's RPC tutorial uses it: the
requester consumes the pseudo-queue amq.rabbitmq.reply-to with no-ack and publishes its request
with reply_to = amq.rabbitmq.reply-to; the server replies through the default exchange to the
reply_to it received. Nothing is stored; a reply to a requester that is gone is dropped, or
returned 312 when mandatory. Also across two `cloud` replicas on one bus.
"""
import time
import unittest
import uuid

import pika
import pika.exceptions

import cloudtest

REPLY_TO = "amq.rabbitmq.reply-to"


def connect(cloud):
    return pika.BlockingConnection(pika.ConnectionParameters(host="127.0.0.1", port=cloud.amqp_port, heartbeat=0,
                                                             blocked_connection_timeout=30))


def wait_for(conn, predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    return predicate()


class Rpc:
    """A requester (its own connection) and a server (another), on the clouds given."""

    def __init__(self, test, requester_cloud, server_cloud):
        self.requester = connect(requester_cloud)
        self.server = connect(server_cloud)
        test.addCleanup(lambda: self.requester.is_open and self.requester.close())
        test.addCleanup(lambda: self.server.is_open and self.server.close())
        self.rch = self.requester.channel()
        self.sch = self.server.channel()
        self.queue = f"rpc-{uuid.uuid4().hex[:8]}"
        self.sch.queue_declare(self.queue)
        self.replies = []
        self.tag = self.rch.basic_consume(REPLY_TO, lambda c, m, p, b: self.replies.append((m, p, b)), auto_ack=True)

    def request(self, body, correlation_id):
        self.rch.basic_publish("", self.queue, body,
                               pika.BasicProperties(reply_to=REPLY_TO, correlation_id=correlation_id))

    def serve_one(self, test):
        """Takes one request and answers it; returns the reply_to it carried."""
        method = None
        deadline = time.monotonic() + 10
        while method is None and time.monotonic() < deadline:
            method, props, body = self.sch.basic_get(self.queue, auto_ack=True)
        test.assertIsNotNone(method, "no request arrived")
        self.sch.basic_publish("", props.reply_to, b"re: " + body,
                               pika.BasicProperties(correlation_id=props.correlation_id))
        return props.reply_to


class OneCloud(cloudtest.OneCloudTest):
    def test_a_request_gets_its_reply_through_the_address_it_was_given(self):
        rpc = Rpc(self, self.cloud, self.cloud)
        addresses = set()
        for i in range(20):
            rpc.request(f"q{i}".encode(), f"c{i}")
            addresses.add(rpc.serve_one(self))
            self.assertTrue(wait_for(rpc.requester, lambda: len(rpc.replies) == i + 1), f"reply {i}")
            method, props, body = rpc.replies[-1]
            self.assertEqual(body, f"re: q{i}".encode())
            self.assertEqual(props.correlation_id, f"c{i}")
            self.assertEqual(method.exchange, "")
            self.assertEqual(method.routing_key, next(iter(addresses)))
            self.assertFalse(method.redelivered)
            self.assertEqual(method.consumer_tag, rpc.tag)
        self.assertEqual(len(addresses), 1)  # one address per channel
        (address,) = addresses
        self.assertTrue(address.startswith(REPLY_TO + "."), address)

    def test_the_pseudo_queue_can_be_declared_passively_and_holds_nothing(self):
        conn = connect(self.cloud)
        self.addCleanup(conn.close)
        ok = conn.channel().queue_declare(REPLY_TO, passive=True)
        self.assertEqual((ok.method.queue, ok.method.message_count, ok.method.consumer_count), (REPLY_TO, 0, 0))

    def test_reply_to_without_the_reply_consumer_is_406(self):
        conn = connect(self.cloud)
        self.addCleanup(lambda: conn.is_open and conn.close())
        ch = conn.channel()
        q = ch.queue_declare(f"rpc-{uuid.uuid4().hex[:8]}").method.queue
        ch.basic_publish("", q, b"x", pika.BasicProperties(reply_to=REPLY_TO))
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as caught:
            ch.queue_declare(q, passive=True)
        self.assertEqual(caught.exception.reply_code, 406)
        self.assertIn("fast reply consumer does not exist", caught.exception.reply_text)
        self.assertEqual(conn.channel().queue_declare(q, passive=True).method.message_count, 0)

    def test_the_reply_consumer_must_be_no_ack_and_alone_on_its_channel(self):
        conn = connect(self.cloud)
        self.addCleanup(lambda: conn.is_open and conn.close())
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as caught:
            conn.channel().basic_consume(REPLY_TO, lambda *a: None, auto_ack=False)
        self.assertEqual(caught.exception.reply_code, 406)
        self.assertIn("reply consumer cannot acknowledge", caught.exception.reply_text)
        ch = conn.channel()
        ch.basic_consume(REPLY_TO, lambda *a: None, auto_ack=True)
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as caught:
            ch.basic_consume(REPLY_TO, lambda *a: None, auto_ack=True)
        self.assertEqual(caught.exception.reply_code, 406)
        self.assertIn("reply consumer already set", caught.exception.reply_text)

    def test_a_reply_to_a_requester_that_is_gone_is_dropped_or_returned_when_mandatory(self):
        rpc = Rpc(self, self.cloud, self.cloud)
        rpc.request(b"q", "c")
        method, props, _ = (None, None, None)
        deadline = time.monotonic() + 10
        while method is None and time.monotonic() < deadline:
            method, props, _ = rpc.sch.basic_get(rpc.queue, auto_ack=True)
        self.assertIsNotNone(method)
        rpc.rch.basic_cancel(rpc.tag)  # the requester stops listening
        rpc.sch.confirm_delivery()
        rpc.sch.basic_publish("", props.reply_to, b"nobody hears this")  # dropped, still confirmed
        with self.assertRaises(pika.exceptions.UnroutableError) as caught:
            rpc.sch.basic_publish("", props.reply_to, b"returned", mandatory=True)
        self.assertEqual([m.body for m in caught.exception.messages], [b"returned"])
        with self.assertRaises(pika.exceptions.UnroutableError):
            rpc.sch.basic_publish("", REPLY_TO + ".no-such-requester", b"x", mandatory=True)
        rpc.requester.process_data_events(time_limit=0.3)
        self.assertEqual(rpc.replies, [])
        self.assertTrue(rpc.sch.is_open)


class TwoReplicas(unittest.TestCase):
    """The requester on one `cloud`, the server on another, both on one nats-server."""

    @classmethod
    def setUpClass(cls):
        cls.bus = cloudtest.NatsServer()
        cls.bus.__enter__()
        cls.clouds = [cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": cls.bus.url}) for _ in range(2)]
        for cloud in cls.clouds:
            cloud.__enter__()

    @classmethod
    def tearDownClass(cls):
        for cloud in cls.clouds:
            cloud.__exit__(None, None, None)
        cls.bus.__exit__(None, None, None)

    def test_a_reply_crosses_replicas(self):
        rpc = Rpc(self, self.clouds[0], self.clouds[1])
        for i in range(5):
            rpc.request(f"q{i}".encode(), f"c{i}")
            rpc.serve_one(self)
            self.assertTrue(wait_for(rpc.requester, lambda: len(rpc.replies) == i + 1), f"reply {i}")
            self.assertEqual(rpc.replies[-1][2], f"re: q{i}".encode())


if __name__ == "__main__":
    unittest.main(verbosity=2)
