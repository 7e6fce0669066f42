"""Losing a bus node: `cloud` on a 3-node cluster with three replicas; the node leading the
stream is killed while a stock client (pika) publishes with confirms, and while it consumes.
What RabbitMQ's quorum queues promise is the bar: no confirmed message lost while a majority of
the nodes lives, every one delivered at least once, and the client never reconnects."""
import os
import sys
import time
import unittest
import uuid

import pika

import cloudtest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "amqp_messaging"))
from test_confirms_durability import params, publish_with_confirms  # noqa: E402


class Failover(unittest.TestCase):
    def setUp(self):
        self.cluster = self.enterContext(cloudtest.NatsCluster(3))
        self.cloud = self.enterContext(cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": self.cluster.url}))
        self.queue = f"failover-{uuid.uuid4().hex[:8]}"
        with pika.BlockingConnection(params(self.cloud)) as conn:
            conn.channel().queue_declare(self.queue, durable=True)

    def kill_stream_leader(self):
        leader = self.cluster.leader_of("AMQP")
        self.assertIsNotNone(leader, self.cluster.logs())
        self.cluster.kill(leader)
        return leader

    def consume_all(self, ch, wanted, received, timeout=60):
        """Consumes on `ch` (acking) until every body in `wanted` was received at least once."""
        for method, _props, body in ch.consume(self.queue, inactivity_timeout=timeout):
            self.assertIsNotNone(method, f"the consumer stalled with {len(wanted - received)} missing:\n"
                                         f"{self.cloud.log}\n{self.cluster.logs()}")
            received.add(body.decode())
            ch.basic_ack(method.delivery_tag)
            if wanted <= received:
                return

    def test_replicas_default_to_three_on_a_three_node_cluster(self):
        self.assertIn("stream AMQP and bucket amqp keep 3 replica(s), and so does each queue", self.cloud.log)
        self.assertEqual(self.cluster.api("STREAM.INFO.AMQP")["config"]["num_replicas"], 3)
        self.assertEqual(self.cluster.api("STREAM.INFO.KV_amqp")["config"]["num_replicas"], 3)
        consumer = self.cluster.api(f"CONSUMER.INFO.AMQP.{self.queue}")
        self.assertEqual(len(consumer["cluster"]["replicas"]), 2, consumer)  # and the leader

    def test_the_stream_leader_killed_mid_publish_loses_nothing_confirmed(self):
        killed = []

        def kill_at_the_200th_confirm(acked):
            # The other 2,800 publishes are written by then, most of them on their way.
            if acked >= 200 and not killed:
                killed.append(self.kill_stream_leader())
        acked, nacked, errors = publish_with_confirms(self.cloud, self.queue, 3000, timeout=180,
                                                      on_confirm=kill_at_the_200th_confirm)
        self.assertEqual(len(killed), 1, "the stream leader was never killed")
        self.assertEqual(errors, [])
        self.assertEqual(len(acked) + len(nacked), 3000, "a publish was neither confirmed nor refused")
        confirmed = {str(s - 1) for s in acked}
        with pika.BlockingConnection(params(self.cloud)) as conn:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=200)
            self.consume_all(ch, confirmed, set())

    def test_the_stream_leader_killed_mid_consume_loses_nothing_and_the_consumer_goes_on(self):
        acked, nacked, errors = publish_with_confirms(self.cloud, self.queue, 2000)
        self.assertEqual((errors, nacked), ([], set()))
        confirmed = {str(s - 1) for s in acked}
        received = set()
        conn = pika.BlockingConnection(params(self.cloud))
        self.addCleanup(lambda: conn.is_open and conn.close())
        ch = conn.channel()
        ch.basic_qos(prefetch_count=100)
        for method, _props, body in ch.consume(self.queue, inactivity_timeout=60):
            self.assertIsNotNone(method, "the consumer stalled before the kill")
            received.add(body.decode())
            ch.basic_ack(method.delivery_tag)
            if len(received) == 500:
                break
        self.kill_stream_leader()
        self.consume_all(ch, confirmed, received)
        self.assertTrue(conn.is_open)


if __name__ == "__main__":
    unittest.main(verbosity=2)
