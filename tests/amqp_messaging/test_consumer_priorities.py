"""Consumer priorities (basic.consume's x-priority), through pika: a queue delivers to its highest
priority consumers that have prefetch room, to lower ones only while every higher one is full or
gone, and in turn among equals. The priorities the bus can serve (0 to 9) are taken, others are 540
naming the range; on a single-active-consumer queue only 0 is. A queue whose consumer was made
before consumer priorities (no priority group) still delivers and answers basic.get, and is given
the group at the next boot. Runs on the pinned nats-server and, as its .floor twin, on the floor;
test_consumer_priorities_rabbitmq.py runs the same scenarios on RabbitMQ 3.10 and compares.
"""
import time
import unittest
import uuid

import pika
import pika.exceptions

import cloudtest
import natsraw
import side_by_side


class Session(side_by_side.Session):
    """A connection to one broker, a confirming channel, and consumers on channels of their own.
    `listening(queue, n)` waits until the broker is ready to hand `n` consumers' worth of requests
    for `queue` out in the order it ranks them (a no-op where consuming is synchronous)."""

    def __init__(self, port, listening=None):
        super().__init__(port)
        self.listening = listening or (lambda queue, n: True)

    def holder(self, queue, prefetch, priority=None):
        """A consumer that keeps its deliveries unacked: (channel, the bodies it got, their tags)."""
        ch = self.conn.channel()
        ch.basic_qos(prefetch_count=prefetch)
        bodies, tags = [], []

        def on_message(_ch, method, _props, body):
            bodies.append(body.decode())
            tags.append(method.delivery_tag)

        arguments = {} if priority is None else {"x-priority": priority}
        ch.basic_consume(queue, on_message, arguments=arguments)
        return ch, bodies, tags

    def publish(self, queue, *bodies):
        for body in bodies:
            self.ch.basic_publish("", queue, body.encode())

    def pump_until(self, predicate, timeout=15):
        deadline = time.monotonic() + timeout
        while not predicate() and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.05)
        return predicate()

    def pump_for(self, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.05)


# ---- scenarios, each run on the adaptor and (test_consumer_priorities_rabbitmq.py) on RabbitMQ ----

def higher_first(s):
    """A priority-5 consumer with prefetch 3 and a default-priority one with prefetch 10, the lower
    one consuming first: who gets eight messages; then the higher one acks one and a ninth comes."""
    q = s.name("prio")
    s.ch.queue_declare(q)
    low_ch, low, _ = s.holder(q, prefetch=10)
    high_ch, high, high_tags = s.holder(q, prefetch=3, priority=5)
    s.listening(q, 2)
    s.publish(q, *[f"m{i}" for i in range(8)])
    s.pump_until(lambda: len(high) + len(low) >= 8)
    s.pump_for(0.3)  # a ninth delivery would show
    seen = {"high": list(high), "low": list(low)}
    high_ch.basic_ack(high_tags[0])
    # A round trip on the acking channel: the ack is applied before the next publish.
    high_ch.queue_declare(q, passive=True)
    s.listening(q, 2)
    s.publish(q, "m8")
    s.pump_until(lambda: len(high) + len(low) >= 9)
    s.pump_for(0.3)
    seen["after one ack"] = {"high": high[3:], "low": low[len(seen["low"]):]}
    return seen


def equals_in_turn(s):
    """Two priority-3 consumers with room and one priority-1 one: who gets six messages."""
    q = s.name("even")
    s.ch.queue_declare(q)
    _, first, _ = s.holder(q, prefetch=10, priority=3)
    _, second, _ = s.holder(q, prefetch=10, priority=3)
    _, lower, _ = s.holder(q, prefetch=10, priority=1)
    s.listening(q, 3)
    s.publish(q, *[f"m{i}" for i in range(6)])
    s.pump_until(lambda: len(first) + len(second) + len(lower) >= 6)
    s.pump_for(0.3)
    return {"first": first, "second": second, "lower": lower}


def lower_while_higher_gone(s):
    """A priority-9 consumer is cancelled: the priority-0 one gets what comes next."""
    q = s.name("gone")
    s.ch.queue_declare(q)
    high_ch, high, _ = s.holder(q, prefetch=10, priority=9)
    _, low, _ = s.holder(q, prefetch=10, priority=0)
    s.listening(q, 2)
    s.publish(q, "before")
    s.pump_until(lambda: high)
    high_ch.basic_cancel(high_ch.consumer_tags[0])
    s.publish(q, "after")
    s.pump_until(lambda: low)
    s.pump_for(0.3)
    return {"high": high, "low": low}


SCENARIOS = {"higher_first": higher_first, "equals_in_turn": equals_in_turn,
             "lower_while_higher_gone": lower_while_higher_gone}

EXPECTED = {
    "higher_first": {"high": ["m0", "m1", "m2"], "low": ["m3", "m4", "m5", "m6", "m7"],
                     "after one ack": {"high": ["m8"], "low": []}},
    "equals_in_turn": {"first": ["m0", "m2", "m4"], "second": ["m1", "m3", "m5"], "lower": []},
    "lower_while_higher_gone": {"high": ["before"], "low": ["after"]},
}


def bus_listening(cloud):
    """The adaptor's `listening`: until the bus lists `n` waiting pull requests of the queue."""
    def listening(queue, n):
        raw = natsraw.NatsRaw(cloud.nats_port)
        try:
            waiting = lambda: raw.api(f"CONSUMER.INFO.AMQP.{queue}").get("num_waiting", 0) >= n
            if not cloudtest.wait_until(waiting, 15):
                raise AssertionError(f"queue {queue}: fewer than {n} consumers' pull requests on the bus")
        finally:
            raw.close()
    return listening


def run_on(port, scenario, listening=None):
    session = Session(port, listening)
    try:
        return scenario(session)
    finally:
        session.close()


class Priorities(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls.cloud = cls.enterClassContext(cloudtest.Cloud())

    def run_scenario(self, name):
        self.assertEqual(run_on(self.cloud.amqp_port, SCENARIOS[name], bus_listening(self.cloud)), EXPECTED[name])

    def test_the_higher_priority_gets_all_while_it_has_room_the_lower_one_the_rest(self):
        self.run_scenario("higher_first")

    def test_equal_priorities_share_in_turn_ahead_of_a_lower_one(self):
        self.run_scenario("equals_in_turn")

    def test_the_lower_priority_gets_what_comes_once_the_higher_one_is_gone(self):
        self.run_scenario("lower_while_higher_gone")


class Refusals(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cloud = cls.enterClassContext(cloudtest.Cloud())

    def setUp(self):
        self.conn = pika.BlockingConnection(pika.ConnectionParameters(host="127.0.0.1", port=self.cloud.amqp_port))
        self.queue = f"refusals-{uuid.uuid4().hex[:8]}"
        self.conn.channel().queue_declare(self.queue)

    def tearDown(self):
        if self.conn.is_open:
            self.conn.close()

    def refusal(self, priority, queue=None):
        ch = self.conn.channel()
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as caught:
            ch.basic_consume(queue or self.queue, lambda *a: None, arguments={"x-priority": priority})
        self.assertTrue(self.conn.is_open)  # a channel exception: the connection stays
        return caught.exception.reply_code, caught.exception.reply_text

    def test_a_priority_outside_0_to_9_is_540_naming_the_range(self):
        for priority in (10, -1, 2**31 - 1):
            code, text = self.refusal(priority)
            self.assertEqual(code, 540, text)
            self.assertIn(f"'x-priority' {priority} is not implemented", text)
            self.assertIn("0 (the default) to 9", text)

    def test_a_priority_of_the_wrong_type_is_406_invalid_arg(self):
        code, text = self.refusal("5")
        self.assertEqual(code, 406, text)
        self.assertIn(f"invalid arg 'x-priority' for queue '{self.queue}'", text)

    def test_every_priority_from_0_to_9_is_taken(self):
        ch = self.conn.channel()
        for priority in range(10):
            ch.basic_cancel(ch.basic_consume(self.queue, lambda *a: None, arguments={"x-priority": priority}))

    def test_a_single_active_consumer_queue_takes_priority_0_and_refuses_others(self):
        sac = f"sac-{uuid.uuid4().hex[:8]}"
        self.conn.channel().queue_declare(sac, arguments={"x-single-active-consumer": True})
        ch = self.conn.channel()
        ch.basic_cancel(ch.basic_consume(sac, lambda *a: None, arguments={"x-priority": 0}))
        code, text = self.refusal(4, sac)
        self.assertEqual(code, 540, text)
        self.assertIn(f"single-active-consumer queue '{sac}'", text)
        self.assertIn("leave x-priority unset", text)


class Upgrade(unittest.TestCase):
    """A store from before consumer priorities: the queue's consumer has no priority group (as the
    bus test fixture makes it, its group taken away with an in-place update)."""

    def test_a_queue_made_before_priorities_delivers_and_is_converged_at_the_next_boot(self):
        with cloudtest.Cloud() as cloud:
            queue = f"old-{uuid.uuid4().hex[:8]}"
            conn = pika.BlockingConnection(pika.ConnectionParameters(host="127.0.0.1", port=cloud.amqp_port))
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare(queue, durable=True)
            ch.basic_get(queue)  # read once: it has a bus consumer

            def policy():
                raw = natsraw.NatsRaw(cloud.nats_port)
                try:
                    return raw.api(f"CONSUMER.INFO.AMQP.{queue}")["config"].get("priority_policy", "none")
                finally:
                    raw.close()

            self.assertEqual(policy(), "prioritized")
            raw = natsraw.NatsRaw(cloud.nats_port)
            try:
                config = raw.api(f"CONSUMER.INFO.AMQP.{queue}")["config"]
                for key in ("priority_policy", "priority_groups", "metadata"):
                    config.pop(key, None)
                made = raw.api(f"CONSUMER.DURABLE.CREATE.AMQP.{queue}", {"stream_name": "AMQP", "config": config})
                self.assertNotIn("error", made)
            finally:
                raw.close()
            self.assertEqual(policy(), "none")

            # Unconverged: basic.get and a consumer (of any priority) are served.
            for body in ("got", "consumed", "kept"):
                ch.basic_publish("", queue, body.encode())
            method, _, body = ch.basic_get(queue, auto_ack=True)
            self.assertEqual(body, b"got")
            consumer = conn.channel()
            consumer.basic_qos(prefetch_count=1)
            bodies = []
            consumer.basic_consume(queue, lambda _c, _m, _p, b: bodies.append(b.decode()), arguments={"x-priority": 7})
            deadline = time.monotonic() + 15
            while not bodies and time.monotonic() < deadline:
                conn.process_data_events(time_limit=0.05)
            self.assertEqual(bodies, ["consumed"])
            conn.close()

            cloud.restart()
            self.assertTrue(cloudtest.wait_until(lambda: policy() == "prioritized", 15), policy())
            self.assertNotIn("keeps its previous consumer settings", cloud.log)
            # What it held is still there, the requeued first, and priorities hold from now on.
            self.assertEqual(
                run_on(cloud.amqp_port, lambda s: after_upgrade(s, queue), bus_listening(cloud)),
                {"kept": ["consumed", "kept"], "high": ["new"], "low": []})


def after_upgrade(s, queue):
    kept = []
    for _ in range(2):
        method, _, body = s.ch.basic_get(queue, auto_ack=True)
        kept.append(body.decode() if method else None)
    _, low, _ = s.holder(queue, prefetch=10, priority=0)
    _, high, _ = s.holder(queue, prefetch=10, priority=2)
    s.listening(queue, 2)
    s.publish(queue, "new")
    s.pump_until(lambda: high or low)
    s.pump_for(0.3)
    return {"kept": kept, "high": high, "low": low}


if __name__ == "__main__":
    unittest.main()
