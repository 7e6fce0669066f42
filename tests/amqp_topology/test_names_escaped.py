"""Every name a RabbitMQ client uses: under CLOUD_AMQP_NAMES=escaped any UTF-8 name of up
to 255 octets names an exchange or a queue, spelled injectively on the bus; the standard exchanges
are RabbitMQ's; switching modes never reinterprets a declaration. python3-pika against the real
`cloud` on a nats-server of the test's own, read back through the JetStream API.
"""
import base64
import unittest

import cloudtest
from pikatest import ConfirmedChannel, connect, refused

ESCAPED = {"CLOUD_AMQP_NAMES": "escaped"}


def get_all(ch, queue):
    """Every (routing key, body) the queue holds, acked, in order."""
    got = []
    while True:
        method, _, body = ch.basic_get(queue)
        if method is None:
            return got
        got.append((method.routing_key, body))
        ch.basic_ack(method.delivery_tag)


class Escaped(ConfirmedChannel, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.bus = cloudtest.NatsServer().__enter__()
        cls.cloud = cloudtest.Cloud(env=dict(ESCAPED, CLOUD_PUBSUB_URL=cls.bus.url)).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cloud.__exit__(None, None, None)
        cls.bus.__exit__(None, None, None)

    def fresh_queue(self, name, **kwargs):
        self.ch.queue_delete(name)
        self.ch.queue_declare(name, **kwargs)
        return name

    def test_the_primers_dotted_names_declare_bind_route_and_dead_letter(self):
        ch = self.ch
        ch.exchange_declare("orders", exchange_type="topic", durable=True)
        ch.exchange_declare("orders.dlx", exchange_type="fanout", durable=True)
        parked = self.fresh_queue("orders.dlx.parked", durable=True)
        ch.queue_bind(parked, "orders.dlx")
        shipping = self.fresh_queue("shipping.eu", durable=True, arguments={"x-dead-letter-exchange": "orders.dlx"})
        ch.queue_bind(shipping, "orders", routing_key="order.paid")
        ch.basic_publish("orders", "order.paid", b"poison")
        method, _, body = ch.basic_get(shipping)
        self.assertEqual((method.exchange, method.routing_key, body), ("orders", "order.paid", b"poison"))
        ch.basic_nack(method.delivery_tag, requeue=False)
        got = None
        for _ in range(200):
            got = ch.basic_get(parked, auto_ack=True)
            if got[0] is not None:
                break
            self.conn.sleep(0.05)
        method, props, body = got
        self.assertEqual(body, b"poison")
        self.assertEqual(props.headers["x-death"][0]["queue"], shipping)
        ch.exchange_declare("orders.dlx", passive=True)
        ch.queue_declare(shipping, passive=True)

    def test_an_exchange_and_key_that_share_a_dotted_spelling_stay_apart(self):
        # Exchange 'a' with key 'b.c' and exchange 'a.b' with key 'c': the reason HIP-1326's
        # "Exchanges, queues and bindings become subjects" refuses dots, and what an injective
        # spelling keeps apart.
        ch = self.ch
        ch.exchange_declare("a", exchange_type="topic")
        ch.exchange_declare("a.b", exchange_type="topic")
        first = self.fresh_queue("via-a")
        second = self.fresh_queue("via-a.b")
        ch.queue_bind(first, "a", routing_key="b.c")
        ch.queue_bind(second, "a.b", routing_key="c")
        ch.queue_bind(first, "a", routing_key="#")  # even the widest binding on 'a' sees nothing of 'a.b'
        ch.basic_publish("a", "b.c", b"to a")
        ch.basic_publish("a.b", "c", b"to a.b")
        self.assertEqual(get_all(ch, first), [("b.c", b"to a")])
        self.assertEqual(get_all(ch, second), [("c", b"to a.b")])

    def test_the_default_exchange_reaches_every_queue_name_and_only_it(self):
        ch = self.ch
        names = ["a.b", "a=2Eb", "a b", "caf\u00e9.\u00fcber", "celery@host.celery.pidbox", "_", "*.#", "a/b\\c"]
        for name in names:
            self.fresh_queue(name)
        for name in names:
            ch.basic_publish("", name, name.encode())
        for name in names:
            self.assertEqual(get_all(ch, name), [(name, name.encode())], name)

    def test_a_user_exchange_named_like_a_standard_ones_spelling_is_its_own(self):
        ch = self.ch
        ch.exchange_declare("amq-topic", exchange_type="topic")
        ch.exchange_declare("_", exchange_type="direct")
        standard, user, underscore = self.fresh_queue("q-standard"), self.fresh_queue("q-user"), self.fresh_queue("q-_")
        ch.queue_bind(standard, "amq.topic", routing_key="k")
        ch.queue_bind(user, "amq-topic", routing_key="k")
        ch.queue_bind(underscore, "_", routing_key="q-standard")
        ch.basic_publish("amq.topic", "k", b"standard")
        ch.basic_publish("amq-topic", "k", b"user")
        ch.basic_publish("_", "q-standard", b"underscore")  # not the default exchange
        self.assertEqual(get_all(ch, standard), [("k", b"standard")])
        self.assertEqual(get_all(ch, user), [("k", b"user")])
        self.assertEqual(get_all(ch, underscore), [("q-standard", b"underscore")])

    def test_server_named_queues_are_amq_gen_and_usable_but_not_declarable_by_name(self):
        ch = self.ch
        name = ch.queue_declare("", exclusive=True).method.queue
        self.assertTrue(name.startswith("amq.gen-") and len(name) == 30, name)
        ch.queue_bind(name, "amq.direct", routing_key="gen")
        ch.basic_publish("amq.direct", "gen", b"via amq.direct")
        ch.basic_publish("", name, b"via the default exchange")
        self.assertEqual([b for _, b in get_all(ch, name)], [b"via amq.direct", b"via the default exchange"])
        self.assertEqual(ch.queue_declare(name, passive=True).method.queue, name)
        ch.queue_purge(name)
        refused(self, lambda: ch.queue_declare(name, exclusive=True), 403, "reserved prefix 'amq.*'")
        ch = self.conn.channel()
        refused(self, lambda: ch.exchange_declare("amq.custom", exchange_type="direct"), 403, "reserved prefix 'amq.*'")
        ch = self.conn.channel()
        ch.queue_delete(name)

    def test_the_headers_exchanges_answer_as_a_headers_declare_does_and_the_connection_survives(self):
        for name in ("amq.headers", "amq.match"):
            ch = self.conn.channel()
            refused(self, lambda: ch.exchange_declare(name, passive=True), 540, "headers exchange",
                    "bind by routing key")
            ch = self.conn.channel()
            ch.queue_declare("headers-q")
            refused(self, lambda: ch.queue_bind("headers-q", name), 540, "headers exchange")
            ch = self.conn.channel()
            ch.basic_publish(name, "k", b"x")
            refused(self, lambda: ch.queue_declare("after-publish", passive=True), 540, name)
        ch = self.conn.channel()
        for name in ("amq.direct", "amq.fanout", "amq.topic"):
            ch.exchange_declare(name, passive=True)

    def test_a_name_of_255_octets_is_a_queue_and_its_subject_is_its_spelling(self):
        ch = self.ch
        long_name = "\u00e9" * 127 + "."  # 255 octets: spelled in 765 characters, its consumer named by a hash
        self.assertEqual(len(long_name.encode()), 255)
        self.fresh_queue(long_name)
        ch.exchange_declare("events.eu", exchange_type="direct")
        ch.queue_bind(long_name, "events.eu", routing_key="k")
        ch.basic_publish("events.eu", "k", b"long")
        # The queue's copy names the escaped subject it was published to (README, "Names").
        last = self.bus.api("STREAM.INFO.AMQP")["state"]["last_seq"]
        stored = self.bus.api("STREAM.MSG.GET.AMQP", {"seq": last})["message"]
        self.assertEqual(base64.b64decode(stored["data"]), b"long")
        self.assertIn(b"Amqp-Routed-As: amqp.events=2Eeu.k", base64.b64decode(stored["hdrs"]))
        self.assertEqual(get_all(ch, long_name), [("k", b"long")])
        consumers = self.bus.api("CONSUMER.NAMES.AMQP")["consumers"]
        hashed = [c for c in consumers if "=Z" in c]
        self.assertEqual(len(hashed), 1, consumers)
        self.assertLessEqual(len(hashed[0]), 255)
        ch.queue_delete(long_name)


class SwitchingModes(unittest.TestCase):
    """A store declared under one mode is read the same under the other."""

    def test_declarations_keep_their_meaning_across_a_switch(self):
        with cloudtest.NatsServer() as bus:
            cloud = cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": bus.url})
            with cloud:
                conn = connect(cloud)
                ch = conn.channel()
                ch.confirm_delivery()
                ch.queue_declare("plain-q", durable=True)
                ch.basic_publish("", "plain-q", b"under hip")
                conn.close()
            with cloudtest.Cloud(env=dict(ESCAPED, CLOUD_PUBSUB_URL=bus.url)) as escaped:
                conn = connect(escaped)
                ch = conn.channel()
                ch.confirm_delivery()
                self.assertEqual(ch.queue_declare("plain-q", passive=True).method.message_count, 1)
                ch.queue_declare("dotted.q", durable=True)
                ch.basic_publish("", "dotted.q", b"under escaped")
                ch.basic_publish("", "plain-q", b"again")
                self.assertEqual(get_all(ch, "plain-q"), [("plain-q", b"under hip"), ("plain-q", b"again")])
                conn.close()
            with cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": bus.url}) as hip:
                conn = connect(hip)
                ch = conn.channel()
                text = refused(self, lambda: ch.queue_declare("dotted.q", passive=True), 406, "CLOUD_AMQP_NAMES=escaped")
                self.assertIn("'dotted.q' holds '.'", text)
                conn.close()
            stored = bus.api("STREAM.MSG.GET.AMQP", {"last_by_subj": "amqp._.dotted=2Eq"})
            self.assertEqual(base64.b64decode(stored["message"]["data"]), b"under escaped")
            with cloudtest.Cloud(env=dict(ESCAPED, CLOUD_PUBSUB_URL=bus.url)) as again:
                conn = connect(again)
                ch = conn.channel()
                self.assertEqual(get_all(ch, "dotted.q"), [("dotted.q", b"under escaped")])
                conn.close()


if __name__ == "__main__":
    unittest.main()
