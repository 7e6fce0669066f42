"""2,000 queues on one bus: each declared and bound, each consumed by a
consumer of its own, and all deleted, through pika; the bus holds no consumer of theirs until they
are read, one per queue once they are, and none after. Past nats-server's default of 1,000
consumers per stream: stream AMQP carries CLOUD_AMQP_MAX_QUEUES' limit. With 1,500 queues kept,
each read once, `cloud` stops on SIGTERM without killing nats-server, and finds them all again. Pinned server only (the floor's
twin would double the longest test of the suite and prove nothing more about the count).
"""
import unittest
import uuid

import pika

import cloudtest
import pikatest
from natsraw import NatsRaw

QUEUES = 2000


def consumers(cloud):
    """The names of stream AMQP's queue consumers (the adaptor's own, named '~…', left out)."""
    nats = NatsRaw(cloud.nats_port)
    names, offset = set(), 0
    try:
        while True:
            page = nats.api("CONSUMER.NAMES.AMQP", {"offset": offset})
            names.update(page.get("consumers") or [])
            offset += len(page.get("consumers") or [])
            if not page.get("consumers") or offset >= page["total"]:
                return {name for name in names if not name.startswith("~")}
    finally:
        nats.close()


class ManyQueues(cloudtest.OneCloudTest):
    def test_two_thousand_queues_each_consume_and_go(self):
        before = consumers(self.cloud)
        conn = pikatest.connect(self.cloud)
        ch = conn.channel()
        tag = uuid.uuid4().hex[:6]
        exchange = f"many-{tag}"
        ch.exchange_declare(exchange, "topic")
        names = [f"many-{tag}-{i:04d}" for i in range(QUEUES)]
        for i, name in enumerate(names):
            ch.queue_declare(name, durable=True)
            ch.queue_bind(name, exchange, routing_key=f"job.{i}.#")
        self.assertEqual(consumers(self.cloud) - before, set(), "an idle queue holds no bus consumer")

        ch.confirm_delivery()
        for i in range(QUEUES):
            ch.basic_publish(exchange, f"job.{i}.run", str(i).encode(),
                             pika.BasicProperties(delivery_mode=2))
        received = {}

        def on_message(channel, method, properties, body):
            received[method.consumer_tag] = body
            channel.basic_ack(method.delivery_tag)

        for name in names:
            ch.basic_consume(name, on_message, consumer_tag=name)
        self.assertTrue(cloudtest.wait_until(lambda: conn.process_data_events(0.2) or len(received) == QUEUES, 300),
                        f"{QUEUES - len(received)} queues delivered nothing")
        # Each queue got exactly the message its own binding routed.
        self.assertEqual(received, {name: str(i).encode() for i, name in enumerate(names)})
        self.assertEqual(len(consumers(self.cloud) - before), QUEUES)

        for name in names:
            ch.basic_cancel(name)
        for name in names:
            self.assertEqual(ch.queue_delete(name).method.message_count, 0)
        ch.exchange_delete(exchange)
        self.assertTrue(cloudtest.wait_until(lambda: not consumers(self.cloud) - before, 30),
                        f"the bus still holds {sorted(consumers(self.cloud) - before)}")
        for name in (names[0], names[-1]):
            pikatest.refused(self, lambda: conn.channel().queue_declare(name, passive=True), 404)
        conn.close()


class StopWithManyQueues(unittest.TestCase):
    def test_nats_server_stops_on_sigterm_with_fifteen_hundred_queues_and_keeps_them(self):
        # nats-server stops each JetStream consumer in turn (10 ms each): 10.4 s from 1,000 on.
        with cloudtest.Cloud() as cloud:
            conn = pikatest.connect(cloud)
            ch = conn.channel()
            names = [f"kept-{i:04d}" for i in range(1500)]
            for name in names:
                ch.queue_declare(name, durable=True)
                ch.basic_get(name, auto_ack=True)  # read once: it has a bus consumer
            ch.confirm_delivery()
            ch.basic_publish("", names[-1], b"kept", pika.BasicProperties(delivery_mode=2))
            conn.close()
            self.assertEqual(cloud.restart(), 0, cloud.previous_log)
            self.assertRegex(cloud.previous_log, r"nats-server \(pid \d+\) stopped")
            self.assertNotIn("killed it", cloud.previous_log)
            conn = pikatest.connect(cloud)
            ch = conn.channel()
            self.assertEqual(ch.queue_declare(names[0], passive=True).method.message_count, 0)
            self.assertEqual(ch.queue_declare(names[-1], passive=True).method.message_count, 1)
            conn.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
