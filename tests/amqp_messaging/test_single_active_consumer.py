"""Single active consumer, through pika: a queue declared with
x-single-active-consumer gives its messages to one consumer at a time, across `cloud` replicas (the
claim is the bus's pinned consumer group). When the active consumer is
cancelled, the next one takes over at once (what the cancelled one holds stays its channel's);
when its connection ends, the next one takes over with the messages it held requeued first; a
replica that dies loses the queue once its pin times out. Runs on the pinned nats-server and, as
its .floor twin, on the floor.
"""
import signal
import time
import unittest
import uuid

import pika
import pika.exceptions

import cloudtest
import dying_consumer

SAC = {"x-single-active-consumer": True}
# The bus's pin timeout (bus::pin_timeout), and room for a loaded machine on top.
PIN_TIMEOUT = 15
TAKEOVER = 10


def connect(port):
    return pika.BlockingConnection(pika.ConnectionParameters(host="127.0.0.1", port=port, heartbeat=0))


class Consumer:
    """A consumer on its own connection, collecting (routing key, body, redelivered) and acking
    each at once unless told to hold them."""

    def __init__(self, port, queue, prefetch=0, ack=True):
        self.conn = connect(port)
        self.ch = self.conn.channel()
        if prefetch:
            self.ch.basic_qos(prefetch_count=prefetch)
        self.got, self.held, self.ack = [], [], ack
        self.tag = self.ch.basic_consume(queue, self._on)

    def _on(self, ch, method, props, body):
        self.got.append((body.decode(), method.redelivered))
        if self.ack:
            ch.basic_ack(method.delivery_tag)
        else:
            self.held.append(method.delivery_tag)

    def pump(self, seconds=0.05):
        self.conn.process_data_events(time_limit=seconds)

    def bodies(self):
        return [b for b, _ in self.got]

    def close(self):
        if self.conn.is_open:
            self.conn.close()


def pump_until(consumers, predicate, timeout):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        for c in consumers:
            c.pump(0.02)
    return predicate()


def pump_for(consumers, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for c in consumers:
            c.pump(0.02)


class Case(unittest.TestCase):
    """One `cloud` of its own per class (TwoReplicas starts its own two)."""

    @classmethod
    def setUpClass(cls):
        cls.cloud = cls.enterClassContext(cloudtest.Cloud())

    def setUp(self):
        self.queue = f"sac-{uuid.uuid4().hex[:8]}"
        self.conn = connect(self.port())
        self.ch = self.conn.channel()
        self.ch.confirm_delivery()
        self.opened = []

    def tearDown(self):
        for c in self.opened:
            c.close()
        if self.conn.is_open:
            self.conn.close()

    def port(self):
        return self.cloud.amqp_port

    def consumer(self, port=None, **kw):
        c = Consumer(port or self.port(), self.queue, **kw)
        self.opened.append(c)
        return c

    def publish(self, *bodies):
        for body in bodies:
            self.ch.basic_publish("", self.queue, body.encode())


class OneReplica(Case):
    def test_only_the_first_consumer_receives(self):
        self.ch.queue_declare(self.queue, arguments=SAC)
        first, second = self.consumer(), self.consumer()
        self.publish(*[f"m{i}" for i in range(20)])
        self.assertTrue(pump_until([first, second], lambda: len(first.got) == 20, 15), first.got)
        pump_for([first, second], 0.5)
        self.assertEqual(first.bodies(), [f"m{i}" for i in range(20)])
        self.assertEqual(second.got, [])

    def test_the_next_consumer_takes_over_when_the_active_one_cancels(self):
        self.ch.queue_declare(self.queue, arguments=SAC)
        first, second = self.consumer(), self.consumer()
        self.publish("before")
        self.assertTrue(pump_until([first, second], lambda: first.got, 15))
        first.ch.basic_cancel(first.tag)
        self.publish("after-1", "after-2")
        self.assertTrue(pump_until([first, second], lambda: len(second.got) == 2, TAKEOVER), second.got)
        self.assertEqual(first.bodies(), ["before"])
        self.assertEqual(second.bodies(), ["after-1", "after-2"])

    def test_consumers_take_over_in_the_order_they_registered(self):
        self.ch.queue_declare(self.queue, arguments=SAC)
        consumers = [self.consumer() for _ in range(4)]
        for turn, active in enumerate(consumers):
            self.publish(f"turn-{turn}")
            self.assertTrue(pump_until(consumers, lambda: active.got, TAKEOVER), f"turn {turn}")
            pump_for(consumers, 0.2)
            self.assertEqual([c.bodies() for c in consumers],
                             [[f"turn-{i}"] if i == turn else [] for i in range(4)], f"turn {turn}")
            active.ch.basic_cancel(active.tag)
            active.got.clear()

    def test_when_the_active_consumers_connection_ends_its_messages_go_to_the_next_one_first(self):
        self.ch.queue_declare(self.queue, arguments=SAC)
        first = dying_consumer.DyingConsumer(self.port(), self.queue, prefetch=3)
        self.addCleanup(first.kill)
        second = self.consumer()
        self.publish(*[f"m{i}" for i in range(6)])
        self.assertTrue(first.wait_for(3), first.got)
        pump_for([second], 0.5)
        self.assertEqual(second.got, [], "the waiting consumer received while the active one held its prefetch")
        first.kill()
        self.assertTrue(pump_until([second], lambda: len(second.got) == 6, TAKEOVER), second.got)
        self.assertEqual(second.got, [("m0", True), ("m1", True), ("m2", True),
                                      ("m3", False), ("m4", False), ("m5", False)])

    def test_a_cancelled_consumer_keeps_what_it_holds_and_the_next_one_takes_the_rest(self):
        # As RabbitMQ's quorum queues do: the cancel hands the queue over at once; what the
        # cancelled consumer holds stays its channel's until settled or requeued.
        self.ch.queue_declare(self.queue, arguments=SAC)
        first = self.consumer(prefetch=2, ack=False)
        second = self.consumer()
        self.publish("m0", "m1", "m2", "m3")
        self.assertTrue(pump_until([first, second], lambda: len(first.got) == 2, 15), first.got)
        first.ch.basic_cancel(first.tag)
        self.assertTrue(pump_until([first, second], lambda: len(second.got) == 2, TAKEOVER), second.got)
        self.assertEqual(second.got, [("m2", False), ("m3", False)])
        first.ch.close()  # requeues what it held: to the active consumer
        self.assertTrue(pump_until([second], lambda: len(second.got) == 4, TAKEOVER), second.got)
        self.assertEqual(second.got[2:], [("m0", True), ("m1", True)])

    def test_an_active_consumer_keeps_the_queue_while_it_holds_its_prefetch(self):
        # Nothing asked for for longer than the pin timeout: the pin is renewed all the same.
        self.ch.queue_declare(self.queue, arguments=SAC)
        first = self.consumer(prefetch=1, ack=False)
        second = self.consumer()
        self.publish("held", "next")
        self.assertTrue(pump_until([first, second], lambda: first.got, 15))
        pump_for([first, second], PIN_TIMEOUT + 5)
        self.assertEqual(second.got, [], "the queue went to the waiting consumer while the active one held a message")
        first.ch.basic_ack(first.held.pop())
        self.assertTrue(pump_until([first, second], lambda: len(first.got) == 2, 15), first.got)
        self.assertEqual(first.bodies(), ["held", "next"])
        self.assertEqual(second.got, [])

    def test_basic_get_is_refused_as_quorum_queues_refuse_it(self):
        self.ch.queue_declare(self.queue, arguments=SAC)
        self.publish("consumed")
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as raised:
            self.ch.basic_get(self.queue, auto_ack=True)
        self.assertEqual(raised.exception.reply_code, 405)
        self.assertIn("single active consumer", raised.exception.reply_text)
        # Nothing kept the queue: a consumer receives at once, not after the pin timeout.
        later = self.consumer()
        self.assertTrue(pump_until([later], lambda: later.got, TAKEOVER), later.got)
        self.assertEqual(later.bodies(), ["consumed"])

    def test_dropping_the_head_leaves_the_queue_to_its_consumers(self):
        # x-max-length takes heads off with pulls of its own, which the bus pins: given back at once.
        self.ch.queue_declare(self.queue, arguments={**SAC, "x-max-length": 1})
        self.publish("m0", "m1", "m2")
        self.assertEqual(self.ch.queue_declare(self.queue, passive=True).method.message_count, 1)
        later = self.consumer()
        self.assertTrue(pump_until([later], lambda: later.got, TAKEOVER), later.got)
        self.assertEqual(later.bodies(), ["m2"])

    def test_the_argument_is_a_boolean_kept_with_the_queue(self):
        self.ch.queue_declare(self.queue, arguments=SAC)
        self.ch.queue_declare(self.queue, arguments=SAC)  # equivalent
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as raised:
            self.ch.queue_declare(self.queue)
        self.assertEqual(raised.exception.reply_code, 406)
        self.assertIn("x-single-active-consumer", raised.exception.reply_text)
        ch = self.conn.channel()
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as raised:
            ch.queue_declare(f"{self.queue}-bad", arguments={"x-single-active-consumer": 1})
        self.assertEqual(raised.exception.reply_code, 406)
        self.assertIn("not a boolean", raised.exception.reply_text)
        ch = self.conn.channel()
        ch.queue_declare(f"{self.queue}-off", arguments={"x-single-active-consumer": False})
        first, second = (Consumer(self.port(), f"{self.queue}-off") for _ in range(2))
        self.opened += [first, second]
        for i in range(10):
            ch.basic_publish("", f"{self.queue}-off", f"m{i}".encode())
        self.assertTrue(pump_until([first, second], lambda: len(first.got) + len(second.got) == 10, 15))
        self.assertTrue(first.got and second.got, "false means every consumer receives")


class TwoReplicas(Case):
    """Two `cloud` processes on one bus: the claim is the bus's, not a process's."""

    @classmethod
    def setUpClass(cls):
        cls.bus = cls.enterClassContext(cloudtest.NatsServer())
        # The shortest ack wait: what a killed replica held is back well before its pin times out.
        cls.env = {"CLOUD_PUBSUB_URL": cls.bus.url, "CLOUD_AMQP_ACK_WAIT": "6"}
        cls.clouds = [cls.enterClassContext(cloudtest.Cloud(env=cls.env)) for _ in range(2)]
        cls.cloud = cls.clouds[0]

    def test_one_consumer_across_replicas_and_the_other_replica_takes_over(self):
        self.ch.queue_declare(self.queue, arguments=SAC)
        first = dying_consumer.DyingConsumer(self.clouds[0].amqp_port, self.queue, prefetch=2)
        self.addCleanup(first.kill)
        second = self.consumer(self.clouds[1].amqp_port)
        self.publish("m0", "m1", "m2")
        self.assertTrue(first.wait_for(2), first.got)
        pump_for([second], 0.5)
        self.assertEqual(second.got, [])
        first.kill()
        self.assertTrue(pump_until([second], lambda: len(second.got) == 3, TAKEOVER), second.got)
        self.assertEqual(second.got, [("m0", True), ("m1", True), ("m2", False)])

    def test_a_replica_that_dies_loses_the_queue_once_its_pin_times_out(self):
        doomed = cloudtest.Cloud(env=self.env)
        with doomed:
            self.ch.queue_declare(self.queue, durable=True, arguments=SAC)
            first = self.consumer(doomed.amqp_port, ack=False)
            second = self.consumer(self.clouds[1].amqp_port)
            self.publish("m0")
            self.assertTrue(pump_until([first, second], lambda: first.got, 15), first.got)
            doomed.stop(signal.SIGKILL)
            self.opened.remove(first)
            self.publish("m1")
            # What the dead replica held comes first: its ack wait ran out before the pin did.
            self.assertTrue(pump_until([second], lambda: len(second.got) == 2, PIN_TIMEOUT + TAKEOVER), second.got)
            self.assertEqual(second.got, [("m0", True), ("m1", False)])


if __name__ == "__main__":
    unittest.main()
