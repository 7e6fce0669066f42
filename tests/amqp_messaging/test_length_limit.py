"""Queue length limits, through pika: x-max-length with x-overflow drop-head (the
default: the oldest ready messages leave, dead-lettered as `maxlen`), reject-publish (the publish
is nacked and the queue keeps what it has) and reject-publish-dlx (nacked and dead-lettered).
Only ready messages count, as in RabbitMQ. x-max-length-bytes stays refused, naming the remedy.
Runs on the pinned nats-server and, as its .floor twin, on the floor.
"""
import time
import unittest

import pika
import pika.exceptions

import cloudtest
import deadletter_case


def setUpModule():
    LengthLimit.cloud = unittest.enterModuleContext(cloudtest.Cloud())


class LengthLimit(deadletter_case.DeadLetterCase):
    """The dead-lettering fixture, with confirms answered as True (ack) or False (nack)."""

    def confirmed(self, body, exchange="", key=None):
        """True when confirmed, False when nacked."""
        try:
            self.ch.basic_publish(exchange, key or self.q, body)
            return True
        except pika.exceptions.NackError:
            return False

    def drain(self, queue=None):
        bodies = []
        while True:
            method, _, body = self.ch.basic_get(queue or self.q, auto_ack=True)
            if method is None:
                return bodies
            bodies.append(body.decode())

    def test_drop_head_keeps_the_newest_and_dead_letters_the_oldest_as_maxlen(self):
        self.declare(x_max_length=3)
        for i in range(5):
            self.assertTrue(self.confirmed(f"m{i}"))
        # Decided at each publish: the count is the limit as soon as the publish is confirmed.
        self.assertEqual(self.count(), 3)
        dead = self.wait_dead(2)
        self.assertEqual([b.decode() for _, _, b in dead], ["m0", "m1"])
        death = dead[0][1].headers["x-death"][0]
        self.assertEqual((death["reason"], death["queue"], death["count"]), ("maxlen", self.q, 1))
        self.assertEqual(dead[0][1].headers["x-first-death-reason"], "maxlen")
        self.assertEqual(self.drain(), ["m2", "m3", "m4"])

    def test_only_ready_messages_count(self):
        self.declare(x_max_length=2)
        for i in range(2):
            self.assertTrue(self.confirmed(f"m{i}"))
        held = self.conn.channel()
        held.basic_qos(prefetch_count=2)
        got = []
        held.basic_consume(self.q, lambda c, m, p, b: got.append(m.delivery_tag))
        deadline = time.monotonic() + 10
        while len(got) < 2 and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.05)
        self.assertEqual(len(got), 2)
        # Two unacknowledged, then two ready: nothing leaves.
        for i in range(2, 4):
            self.assertTrue(self.confirmed(f"m{i}"))
        self.assertEqual(self.count(), 2)
        self.conn.process_data_events(time_limit=0.3)
        self.assertEqual(self.dead, [])
        held.basic_cancel(held.consumer_tags[0])
        held.basic_ack(got[-1], multiple=True)
        self.assertEqual(self.drain(), ["m2", "m3"])

    def test_max_length_zero_dead_letters_every_message(self):
        self.declare(x_max_length=0)
        self.assertTrue(self.confirmed("gone"))
        self.assertEqual(self.count(), 0)
        self.assertEqual([b for _, _, b in self.wait_dead(1)], [b"gone"])

    def test_reject_publish_nacks_and_keeps_what_the_queue_has(self):
        self.declare(x_max_length=2, x_overflow="reject-publish")
        self.assertEqual([self.confirmed(f"m{i}") for i in range(4)], [True, True, False, False])
        self.assertEqual(self.count(), 2)
        self.conn.process_data_events(time_limit=0.3)
        self.assertEqual(self.dead, [], "reject-publish does not dead-letter")
        self.assertEqual(self.drain(), ["m0", "m1"])
        # Room again: taken.
        self.assertTrue(self.confirmed("m4"))
        self.assertEqual(self.drain(), ["m4"])

    def test_reject_publish_dlx_nacks_and_dead_letters_the_refused_message(self):
        self.declare(x_max_length=1, x_overflow="reject-publish-dlx")
        self.assertEqual([self.confirmed("kept"), self.confirmed("refused")], [True, False])
        _, props, body = self.wait_dead(1)[0]
        self.assertEqual(body, b"refused")
        death = props.headers["x-death"][0]
        self.assertEqual((death["reason"], death["queue"]), ("maxlen", self.q))
        self.assertEqual(self.drain(), ["kept"])

    def test_a_refused_publish_still_reaches_the_other_queues_of_its_route(self):
        fanout = f"{self.q}-fan"
        other = f"{self.q}-other"
        self.ch.exchange_declare(fanout, exchange_type="fanout")
        self.declare(x_max_length=1, x_overflow="reject-publish")
        self.ch.queue_declare(other)
        newest = f"{self.q}-newest"
        self.declare(newest, x_max_length=1)
        for q in (self.q, other, newest):
            self.ch.queue_bind(q, fanout)
        self.assertTrue(self.confirmed("first", exchange=fanout, key="k"))
        self.assertFalse(self.confirmed("second", exchange=fanout, key="k"))
        self.assertEqual(self.drain(), ["first"])
        self.assertEqual(self.drain(other), ["first", "second"])
        # A drop-head queue beside the full one is trimmed by that publish too.
        self.assertEqual(self.drain(newest), ["second"])
        self.assertEqual([(b, p.headers["x-death"][0]["queue"]) for _, p, b in self.wait_dead(1)], [(b"first", newest)])

    def test_without_confirms_a_refused_publish_is_dropped(self):
        self.declare(x_max_length=1, x_overflow="reject-publish")
        ch = self.conn.channel()
        for i in range(3):
            ch.basic_publish("", self.q, f"m{i}".encode())
        self.assertEqual(ch.queue_declare(self.q, passive=True).method.message_count, 1)
        self.assertEqual(self.drain(), ["m0"])

    def test_arguments_are_checked_and_kept_with_the_queue(self):
        self.declare(x_max_length=5, x_overflow="drop-head")
        self.declare(x_max_length=5, x_overflow="drop-head")  # equivalent
        for queue, arguments, code, words in (
                (self.q, dict(x_max_length=6, x_overflow="drop-head"), 406, "inequivalent arg 'x-max-length'"),
                (self.q, dict(x_max_length=5), 406, "inequivalent arg 'x-overflow'"),
                (f"{self.q}-a", dict(x_max_length=-1), 406, "negative"),
                (f"{self.q}-b", dict(x_max_length="5"), 406, "not an integer"),
                (f"{self.q}-c", dict(x_overflow="drop-tail"), 406, "reject-publish-dlx"),
                (f"{self.q}-d", dict(x_max_length_bytes=1024), 540, "x-max-length (a count)")):
            self.ch = self.conn.channel()
            with self.subTest(arguments=arguments):
                with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as raised:
                    self.declare(queue, **arguments)
                self.assertEqual(raised.exception.reply_code, code)
                self.assertIn(words, raised.exception.reply_text)

    def test_cc_to_a_length_limited_queue_is_refused_naming_the_remedy_and_nothing_is_stored(self):
        self.declare(x_max_length=5)
        other = f"{self.q}-cc"
        self.ch.queue_declare(other)
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as raised:
            self.ch.basic_publish("", other, b"m", pika.BasicProperties(headers={"CC": [self.q]}))
        self.assertEqual(raised.exception.reply_code, 540)
        self.assertIn("CC and BCC headers", raised.exception.reply_text)
        self.assertIn("publish once per routing key", raised.exception.reply_text)
        self.ch = self.conn.channel()  # the connection lives on
        self.assertEqual(self.count(), 0)
        self.assertEqual(self.ch.queue_declare(other, passive=True).method.message_count, 0)


if __name__ == "__main__":
    unittest.main()
