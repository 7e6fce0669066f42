"""Delayed messages, through pika, as RabbitMQ's rabbitmq_delayed_message_exchange plugin
behaves: an exchange of type x-delayed-message routes as its x-delayed-type says, a message whose
x-delay header is N > 0 milliseconds N ms after its publish, by the bindings in force then, and is
delivered with x-delay set to -N. The stream keeps each as a message schedule, so it survives a
SIGKILL of `cloud` (and, being replicated, a bus node's loss: tests/amqp_cluster). Refusals carry
the plugin's texts where it has one. Runs on the pinned nats-server and, as its .floor twin, on
the floor.
"""
import decimal
import signal
import time
import unittest
import uuid

import pika
import pika.exceptions

import cloudtest

CLOUD = None
DELAYED = "x-delayed-message"
# How late a delayed message may arrive on a loaded test machine: the server's scheduler looks at
# most every 250 ms, and a sanitized build on two busy cores adds to that.
LATE = 10


def setUpModule():
    global CLOUD
    CLOUD = unittest.enterModuleContext(cloudtest.Cloud())


def connect(cloud):
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=cloud.amqp_port, heartbeat=0, blocked_connection_timeout=30))


def delayed(ms):
    return pika.BasicProperties(headers={"x-delay": ms})


class DelayedCase(unittest.TestCase):
    """A confirming channel, a delayed exchange of the test's own (direct unless told) and a
    queue bound to it by key "k"."""
    kind = "direct"

    def setUp(self):
        self.conn = connect(CLOUD)
        self.ch = self.conn.channel()
        self.ch.confirm_delivery()
        suffix = uuid.uuid4().hex[:8]
        self.x, self.q = "delayed-" + suffix, "delayed-q-" + suffix
        self.ch.exchange_declare(self.x, DELAYED, arguments={"x-delayed-type": self.kind})
        self.ch.queue_declare(self.q)
        self.ch.queue_bind(self.q, self.x, routing_key="k")

    def tearDown(self):
        if self.conn.is_open:
            self.conn.close()

    def get(self, queue=None):
        method, props, body = self.ch.basic_get(queue or self.q, auto_ack=True)
        return None if method is None else (method, props, body.decode())

    def wait_for(self, queue=None, timeout=LATE):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.get(queue)
            if got is not None:
                return got
            time.sleep(0.02)
        self.fail(f"nothing arrived in {queue or self.q} within {timeout} s\n{CLOUD.log}")

    def channel_error(self, action):
        """Runs `action` on a fresh channel and returns the channel error it causes."""
        ch = self.conn.channel()
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as caught:
            action(ch)
        return caught.exception.reply_code, caught.exception.reply_text


class Delay(DelayedCase):
    def test_a_delayed_message_arrives_after_its_delay_with_x_delay_negated(self):
        started = time.monotonic()
        self.ch.basic_publish(self.x, "k", "later", delayed(1500))  # confirmed: the schedule is stored
        self.assertIsNone(self.get(), "routed before its delay")
        method, props, body = self.wait_for()
        waited = time.monotonic() - started
        self.assertEqual(body, "later")
        self.assertEqual((method.exchange, method.routing_key), (self.x, "k"))
        self.assertEqual(props.headers["x-delay"], -1500)
        self.assertGreaterEqual(waited, 1.5)

    def test_a_shorter_delay_published_later_arrives_first(self):
        self.ch.basic_publish(self.x, "k", "long", delayed(2500))
        self.ch.basic_publish(self.x, "k", "short", delayed(800))
        self.assertEqual(self.wait_for()[2], "short")
        self.assertEqual(self.wait_for()[2], "long")

    def test_no_delay_zero_or_a_negative_one_is_routed_at_once(self):
        self.ch.basic_publish(self.x, "k", "plain")
        self.ch.basic_publish(self.x, "k", "zero", delayed(0))
        self.ch.basic_publish(self.x, "k", "negative", delayed(-5))
        got = [self.get() for _ in range(3)]
        self.assertEqual([g[2] for g in got if g], ["plain", "zero", "negative"])
        self.assertEqual(got[2][1].headers["x-delay"], -5)

    def test_the_plugin_s_other_types_of_x_delay_are_read_as_it_reads_them(self):
        self.ch.basic_publish(self.x, "k", "text", delayed("600"))
        self.ch.basic_publish(self.x, "k", "decimal", delayed(decimal.Decimal("700.9")))
        self.assertIsNone(self.get())
        first, second = self.wait_for(), self.wait_for()
        self.assertEqual([(first[2], first[1].headers["x-delay"]), (second[2], second[1].headers["x-delay"])],
                         [("text", -600), ("decimal", -700)])

    def test_the_bindings_in_force_when_the_delay_ends_route_it(self):
        early, late = self.q + "-bound-later", self.q + "-unbound-later"
        self.ch.queue_declare(early)
        self.ch.queue_declare(late)
        self.ch.queue_bind(late, self.x, routing_key="k")
        self.ch.basic_publish(self.x, "k", "m", delayed(1500))
        self.ch.queue_bind(early, self.x, routing_key="k")
        self.ch.queue_unbind(late, self.x, routing_key="k")
        self.assertEqual(self.wait_for(early)[2], "m")
        self.assertEqual(self.wait_for()[2], "m")
        time.sleep(0.5)
        self.assertIsNone(self.get(late))

    def test_mandatory_returns_it_at_once_as_the_plugin_does_and_it_is_still_delivered(self):
        returned = []
        plain = self.conn.channel()  # pika's confirming channel raises on a return instead
        plain.add_on_return_callback(lambda ch, method, props, body: returned.append((method.reply_code, body)))
        plain.basic_publish(self.x, "k", "m", delayed(800), mandatory=True)
        deadline = time.monotonic() + LATE
        while not returned and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.05)
        self.assertEqual(returned, [(312, b"m")])
        self.assertEqual(self.wait_for()[2], "m")

    def test_deleting_the_exchange_drops_what_waits_in_it(self):
        self.ch.basic_publish(self.x, "k", "dropped", delayed(1000))
        self.ch.exchange_delete(self.x)
        self.ch.exchange_declare(self.x, DELAYED, arguments={"x-delayed-type": "direct"})
        self.ch.queue_bind(self.q, self.x, routing_key="k")
        self.ch.basic_publish(self.x, "k", "kept", delayed(1200))
        self.assertEqual(self.wait_for()[2], "kept")
        time.sleep(0.3)
        self.assertIsNone(self.get())

    def test_a_queue_ttl_counts_from_the_message_s_arrival(self):
        ttl_q = self.q + "-ttl"
        self.ch.queue_declare(ttl_q, arguments={"x-message-ttl": 1000})
        self.ch.queue_bind(ttl_q, self.x, routing_key="k")
        self.ch.basic_publish(self.x, "k", "m", delayed(1500))
        self.assertEqual(self.wait_for(ttl_q, timeout=LATE)[2], "m")


class TopicDelay(DelayedCase):
    kind = "topic"

    def test_a_topic_delayed_exchange_routes_by_pattern(self):
        wild = self.q + "-wild"
        self.ch.queue_declare(wild)
        self.ch.queue_bind(wild, self.x, routing_key="a.#")
        self.ch.basic_publish(self.x, "a.b.c", "m", delayed(600))
        self.assertEqual(self.wait_for(wild)[2], "m")
        self.assertIsNone(self.get())


class Refusals(DelayedCase):
    def test_an_x_delayed_message_exchange_without_x_delayed_type_is_the_plugin_s_406(self):
        code, text = self.channel_error(lambda ch: ch.exchange_declare("no-type-" + self.x, DELAYED))
        self.assertEqual((code, text),
                         (406, "PRECONDITION_FAILED - Invalid argument, 'x-delayed-type' must bean existing "
                               "exchnage type"))

    def test_an_unknown_x_delayed_type_is_503_and_headers_540(self):
        # RabbitMQ's answer to an unknown type is a connection error.
        with self.assertRaises(pika.exceptions.ConnectionClosedByBroker) as caught:
            self.conn.channel().exchange_declare("odd-" + self.x, DELAYED, arguments={"x-delayed-type": "odd"})
        self.assertEqual(caught.exception.reply_code, 503)
        self.assertIn("unknown exchange type 'odd'", caught.exception.reply_text)
        self.conn = connect(CLOUD)
        code, _ = self.channel_error(lambda ch: ch.exchange_declare(
            "headers-" + self.x, DELAYED, arguments={"x-delayed-type": "headers"}))
        self.assertEqual(code, 540)

    def test_a_redeclaration_with_another_type_or_x_delayed_type_is_inequivalent(self):
        code, text = self.channel_error(lambda ch: ch.exchange_declare(self.x, "direct"))
        self.assertEqual((code, text), (406, f"PRECONDITION_FAILED - inequivalent arg 'type' for exchange '{self.x}' "
                                             "in vhost '/': received 'direct' but current is 'x-delayed-message'"))
        code, text = self.channel_error(lambda ch: ch.exchange_declare(
            self.x, DELAYED, arguments={"x-delayed-type": "topic"}))
        self.assertEqual(code, 406)
        self.assertIn("inequivalent arg 'x-delayed-type'", text)
        self.ch.exchange_declare(self.x, DELAYED, arguments={"x-delayed-type": "direct"})  # the same: fine

    def test_an_x_delay_that_is_no_number_or_too_long_is_refused_406(self):
        for bad in ("soon", 2 ** 32):
            code, text = self.channel_error(lambda ch: (ch.confirm_delivery(),
                                                        ch.basic_publish(self.x, "k", "m", delayed(bad))))
            self.assertEqual(code, 406, text)
            self.assertIn("invalid x-delay header", text)

    def test_cc_on_a_delayed_publish_is_refused_540(self):
        props = pika.BasicProperties(headers={"x-delay": 500, "CC": ["other"]})
        code, _ = self.channel_error(lambda ch: (ch.confirm_delivery(), ch.basic_publish(self.x, "k", "m", props)))
        self.assertEqual(code, 540)

    def test_alternate_exchange_is_refused_540(self):
        code, text = self.channel_error(lambda ch: ch.exchange_declare(
            "ae-" + self.x, "direct", arguments={"alternate-exchange": "other"}))
        self.assertEqual(code, 540, text)


class SurvivesRestart(unittest.TestCase):
    """A cloud of its own, killed with delayed messages waiting."""

    def test_delayed_messages_survive_a_sigkill_of_cloud(self):
        with cloudtest.Cloud() as cloud:
            x, q = "restart-x", "restart-q"
            with connect(cloud) as conn:
                ch = conn.channel()
                ch.confirm_delivery()
                ch.exchange_declare(x, DELAYED, durable=True, arguments={"x-delayed-type": "fanout"})
                ch.queue_declare(q, durable=True)
                ch.queue_bind(q, x)
                for i in range(20):
                    ch.basic_publish(x, "", f"m{i}", delayed(2000))
            cloud.restart(signal.SIGKILL)
            got = set()
            deadline = time.monotonic() + 2 + LATE
            with connect(cloud) as conn:
                ch = conn.channel()
                while len(got) < 20 and time.monotonic() < deadline:
                    method, _props, body = ch.basic_get(q, auto_ack=True)
                    if method is None:
                        time.sleep(0.05)
                        continue
                    got.add(body.decode())
            self.assertEqual(got, {f"m{i}" for i in range(20)}, cloud.log)


if __name__ == "__main__":
    unittest.main()
