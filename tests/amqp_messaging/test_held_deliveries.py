"""What a consumer holds unacknowledged stays its own however long it holds it, and what a `cloud`
process held when it died goes back to the queue after the ack wait (CLOUD_AMQP_ACK_WAIT), as
RabbitMQ requeues what a lost connection held; a process booting with another ack wait gives it
to the queues already declared. Two `cloud` processes on one bus of the test's own, with the
shortest ack wait, through pika. Runs on the pinned nats-server and, as its .floor twin, on the
floor.
"""
import signal
import time
import unittest
import uuid

import pika

import cloudtest

ACK_WAIT = 6  # seconds: CLOUD_AMQP_ACK_WAIT's least
# Room for a loaded machine on top of the ack wait.
RETURN_WITHIN = ACK_WAIT + 10


def connect(cloud):
    return pika.BlockingConnection(pika.ConnectionParameters(host="127.0.0.1", port=cloud.amqp_port, heartbeat=0))


class Holder:
    """A consumer on its own connection that keeps every delivery unacknowledged."""

    def __init__(self, cloud, queue, prefetch):
        self.conn = connect(cloud)
        self.ch = self.conn.channel()
        self.ch.basic_qos(prefetch_count=prefetch)
        self.got = []  # (body, redelivered, delivery tag)
        self.ch.basic_consume(queue, lambda _ch, m, _p, body: self.got.append((body.decode(), m.redelivered, m.delivery_tag)))

    def pump(self, seconds):
        if self.conn.is_open:
            self.conn.process_data_events(time_limit=seconds)

    def bodies(self):
        return sorted(b for b, _, _ in self.got)

    def close(self):
        try:
            if self.conn.is_open:
                self.conn.close()
        except pika.exceptions.AMQPError:
            pass  # its cloud was killed under it


def pump_while(holders, seconds, until=lambda: False):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not until():
        for h in holders:
            h.pump(0.02)
    return until()


class HeldDeliveries(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        bus = cls.enterClassContext(cloudtest.NatsServer())
        env = {"CLOUD_PUBSUB_URL": bus.url, "CLOUD_AMQP_ACK_WAIT": str(ACK_WAIT)}
        cls.keeper = cls.enterClassContext(cloudtest.Cloud(env=env))
        cls.bus = bus
        cls.env = env

    def setUp(self):
        self.queue = f"held-{uuid.uuid4().hex[:8]}"
        self.conn = connect(self.keeper)
        self.addCleanup(self.conn.close)
        self.ch = self.conn.channel()
        self.ch.queue_declare(self.queue, durable=True)

    def holder(self, cloud, prefetch=3):
        h = Holder(cloud, self.queue, prefetch)
        self.addCleanup(h.close)
        return h

    def publish(self, *bodies):
        for body in bodies:
            self.ch.basic_publish("", self.queue, body.encode(), pika.BasicProperties(delivery_mode=2))

    def test_a_delivery_held_for_several_ack_waits_is_never_given_to_another_consumer(self):
        first = self.holder(self.keeper)
        second = self.holder(self.keeper)
        self.publish("m0", "m1", "m2")
        self.assertTrue(pump_while([first, second], 10, lambda: len(first.got) + len(second.got) == 3))
        pump_while([first, second], 3 * ACK_WAIT)
        self.assertEqual(sorted(first.bodies() + second.bodies()), ["m0", "m1", "m2"])
        self.assertFalse(any(redelivered for h in (first, second) for _, redelivered, _ in h.got))
        for h in (first, second):
            for _, _, tag in h.got:
                h.ch.basic_ack(tag)
        self.assertEqual(self.ch.queue_declare(self.queue, passive=True).method.message_count, 0)

    def test_what_a_killed_process_held_goes_to_a_consumer_of_another_after_the_ack_wait(self):
        doomed = cloudtest.Cloud(env=self.env)
        with doomed:
            victim = self.holder(doomed)
            self.publish("m0", "m1", "m2")
            self.assertTrue(pump_while([victim], 10, lambda: len(victim.got) == 3), victim.got)
            heir = self.holder(self.keeper)
            pump_while([victim, heir], 1)
            self.assertEqual(heir.got, [])
            doomed.stop(signal.SIGKILL)
        returned = pump_while([heir], RETURN_WITHIN, lambda: len(heir.got) == 3)
        self.assertTrue(returned, f"the heir has {heir.bodies()} of the three the killed process held")
        self.assertEqual(heir.bodies(), ["m0", "m1", "m2"])
        self.assertTrue(all(redelivered for _, redelivered, _ in heir.got), heir.got)
        for _, _, tag in heir.got:
            heir.ch.basic_ack(tag)
        self.assertEqual(self.ch.queue_declare(self.queue, passive=True).method.message_count, 0)

    def test_a_queue_declared_under_another_ack_wait_gets_this_one_after_boot(self):
        def ack_wait_of(queue):
            return self.bus.api(f"CONSUMER.INFO.AMQP.{queue}")["config"]["ack_wait"] // 1_000_000_000

        self.ch.basic_get(self.queue)  # read once: it has a bus consumer
        self.assertEqual(ack_wait_of(self.queue), ACK_WAIT)
        # Converged in the background once the process serves (a fleet's upgrade may have more
        # queues than the startup window has room for).
        with cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": self.bus.url, "CLOUD_AMQP_ACK_WAIT": "45"}) as other:
            self.assertTrue(cloudtest.wait_until(lambda: ack_wait_of(self.queue) == 45, 15), ack_wait_of(self.queue))
            self.assertNotIn("keeps its previous consumer settings", other.log)
        with cloudtest.Cloud(env=self.env):
            self.assertTrue(cloudtest.wait_until(lambda: ack_wait_of(self.queue) == ACK_WAIT, 15))


if __name__ == "__main__":
    unittest.main()
