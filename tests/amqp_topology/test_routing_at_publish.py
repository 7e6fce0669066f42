"""What a queue holds is decided when a message is published: a later unbind,
exchange delete or auto-delete takes nothing away, and a later bind brings nothing earlier in.
python3-pika against the real `cloud`; each test uses names of its own on one shared cloud.

Run by ctest (cloud_python_test): /usr/bin/python3 with tests/support on PYTHONPATH.
"""
import base64
import json
import time
import unittest

import pika.exceptions

import cloudtest
from natsraw import NatsRaw
from pikatest import ConfirmedChannel


class RoutingAtPublish(ConfirmedChannel, cloudtest.OneCloudTest):
    def count(self, queue):
        return self.ch.queue_declare(queue=queue, passive=True).method.message_count

    def publish(self, exchange, key, body):
        self.ch.basic_publish(exchange=exchange, routing_key=key, body=body)

    def drain(self, queue):
        """Every message basic.get returns until get-empty, as (body, get-ok's message_count)."""
        got = []
        while True:
            method, _, body = self.ch.basic_get(queue=queue, auto_ack=True)
            if method is None:
                return got
            got.append((body.decode(), method.message_count))

    def queue(self, name, *bindings):
        self.ch.queue_declare(queue=name, auto_delete=False)
        for exchange, key in bindings:
            self.ch.queue_bind(queue=name, exchange=exchange, routing_key=key)

    def api(self, subject, body=None):
        """A JetStream API request straight to the bus."""
        raw = NatsRaw(self.cloud.nats_port)
        try:
            return raw.api(subject, body)
        finally:
            raw.close()

    def consumer_filters(self, queue):
        return sorted(self.api(f"CONSUMER.INFO.AMQP.{queue}")["config"]["filter_subjects"])

    def bucket_value(self, queue):
        reply = self.api("STREAM.MSG.GET.KV_amqp", {"last_by_subj": f"$KV.amqp.q.{queue}"})
        return json.loads(base64.b64decode(reply["message"]["data"]))

    def test_unbind_keeps_what_the_binding_routed(self):
        self.ch.exchange_declare(exchange="rp-unbind-x", exchange_type="direct")
        self.queue("rp-unbind-q", ("rp-unbind-x", "k"))
        self.publish("rp-unbind-x", "k", "through-x")
        self.publish("", "rp-unbind-q", "through-default")
        self.assertEqual(self.count("rp-unbind-q"), 2)
        self.ch.queue_unbind(queue="rp-unbind-q", exchange="rp-unbind-x", routing_key="k")
        self.assertEqual(self.count("rp-unbind-q"), 2)
        self.publish("rp-unbind-x", "k", "after-unbind")  # routed nowhere now
        self.assertEqual(self.count("rp-unbind-q"), 2)
        self.assertEqual(self.drain("rp-unbind-q"), [("through-x", 1), ("through-default", 0)])
        self.assertEqual(self.count("rp-unbind-q"), 0)

    def test_an_auto_delete_exchange_gone_with_its_last_binding_leaves_its_messages_queued(self):
        self.ch.exchange_declare(exchange="rp-auto-x", exchange_type="direct", auto_delete=True)
        self.queue("rp-auto-q", ("rp-auto-x", "k"))
        self.publish("rp-auto-x", "k", "one")
        self.publish("rp-auto-x", "k", "two")
        self.ch.queue_unbind(queue="rp-auto-q", exchange="rp-auto-x", routing_key="k")
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as gone:
            self.conn.channel().exchange_declare(exchange="rp-auto-x", passive=True)
        self.assertEqual(gone.exception.reply_code, 404)
        self.assertEqual(self.count("rp-auto-q"), 2)
        self.assertEqual(self.ch.queue_purge(queue="rp-auto-q").method.message_count, 2)
        self.assertEqual(self.count("rp-auto-q"), 0)

    def test_exchange_delete_leaves_what_it_routed_queued(self):
        self.ch.exchange_declare(exchange="rp-delete-x", exchange_type="topic")
        self.queue("rp-delete-q", ("rp-delete-x", "orders.#"))
        self.publish("rp-delete-x", "orders.eu.new", "routed")
        self.ch.exchange_delete(exchange="rp-delete-x")
        self.assertEqual(self.count("rp-delete-q"), 1)
        self.assertEqual(self.drain("rp-delete-q"), [("routed", 0)])

    def test_a_new_binding_brings_in_nothing_published_before_it(self):
        self.ch.exchange_declare(exchange="rp-bind-x", exchange_type="fanout")
        self.queue("rp-bind-held", ("rp-bind-x", ""))
        self.queue("rp-bind-late")
        for i in range(3):
            self.publish("rp-bind-x", "", f"early-{i}")
        self.ch.queue_bind(queue="rp-bind-late", exchange="rp-bind-x")
        self.assertEqual(self.count("rp-bind-late"), 0)
        self.assertEqual(self.drain("rp-bind-late"), [])
        self.publish("rp-bind-x", "", "late")
        self.assertEqual(self.count("rp-bind-late"), 1)
        self.assertEqual(self.count("rp-bind-held"), 4)
        self.assertEqual(self.drain("rp-bind-late"), [("late", 0)])

    def test_a_consumer_of_a_rebound_queue_gets_exactly_what_was_routed_to_it(self):
        self.ch.exchange_declare(exchange="rp-again-x", exchange_type="direct")
        self.queue("rp-again-other", ("rp-again-x", "k"))
        self.queue("rp-again-q", ("rp-again-x", "k"))
        self.publish("rp-again-x", "k", "bound-1")
        self.ch.queue_unbind(queue="rp-again-q", exchange="rp-again-x", routing_key="k")
        self.publish("rp-again-x", "k", "unbound")  # only rp-again-other holds it
        self.ch.queue_bind(queue="rp-again-q", exchange="rp-again-x", routing_key="k")
        self.publish("rp-again-x", "k", "bound-2")
        self.assertEqual(self.count("rp-again-q"), 2)
        self.assertEqual(self.count("rp-again-other"), 3)
        got = []
        consumer = self.ch.basic_consume(queue="rp-again-q",
                                         on_message_callback=lambda c, m, p, b: got.append(b.decode()))
        deadline = time.monotonic() + 15
        while len(got) < 2 and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.1)
        # What the consumer receives next is the next message routed to it, nothing between.
        self.publish("rp-again-x", "k", "bound-3")
        while len(got) < 3 and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.1)
        self.ch.basic_cancel(consumer)
        self.assertEqual(got, ["bound-1", "bound-2", "bound-3"])

    def stored_copy(self, queue):
        """The last message stored under the queue's own subject: (headers, body)."""
        message = self.api("STREAM.MSG.GET.AMQP", {"last_by_subj": f"amqp._.{queue}"})["message"]
        return base64.b64decode(message.get("hdrs", "")), base64.b64decode(message["data"])

    def test_a_binding_is_a_routing_entry_and_each_queue_reached_stores_its_own_copy(self):
        self.ch.exchange_declare(exchange="rp-copy-x", exchange_type="topic")
        self.queue("rp-copy-a", ("rp-copy-x", "a.#"))
        self.queue("rp-copy-b", ("rp-copy-x", "*.b"))
        # Nothing on the bus changes with a bind: the queue has no consumer until it is read, and
        # then one that reads its own subject.
        self.assertIn("error", self.api("CONSUMER.INFO.AMQP.rp-copy-a"))
        self.ch.basic_get("rp-copy-a")
        self.assertEqual(self.consumer_filters("rp-copy-a"), ["amqp._.rp-copy-a"])
        self.assertEqual(self.bucket_value("rp-copy-a")["bindings"], [{"exchange": "rp-copy-x", "key": "a.#"}])
        self.publish("rp-copy-x", "a.b", "both")
        for queue in ("rp-copy-a", "rp-copy-b"):
            headers, body = self.stored_copy(queue)
            self.assertEqual(body, b"both")
            self.assertIn(b"Amqp-Routed-As: amqp.rp-copy-x.a.b", headers)
        # An unbind leaves the copy where it is; each queue settles its own.
        self.ch.queue_unbind(queue="rp-copy-a", exchange="rp-copy-x", routing_key="a.#")
        self.assertNotIn("bindings", self.bucket_value("rp-copy-a"))
        self.assertEqual(self.drain("rp-copy-a"), [("both", 0)])
        self.assertEqual(self.drain("rp-copy-b"), [("both", 0)])

    def stored_on(self, queue):
        """How many messages the stream holds on the queue's own subject."""
        subject = f"amqp._.{queue}"
        state = self.api("STREAM.INFO.AMQP", {"subjects_filter": subject})["state"]
        return state.get("subjects", {}).get(subject, 0)

    def test_what_a_queue_settled_leaves_the_stream_and_the_other_queue_s_copies_stay(self):
        # Limits retention keeps a message until the adaptor removes it: once a second, each queue
        # that settled something is purged below its consumer's ack floor.
        self.ch.exchange_declare(exchange="rp-settle-x", exchange_type="fanout")
        self.queue("rp-settle-a", ("rp-settle-x", ""))
        self.queue("rp-settle-b", ("rp-settle-x", ""))
        for i in range(3):
            self.publish("rp-settle-x", "", f"m{i}")
        self.assertEqual(self.stored_on("rp-settle-a"), 3)
        self.assertEqual([body for body, _ in self.drain("rp-settle-a")], ["m0", "m1", "m2"])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and self.stored_on("rp-settle-a") != 0:
            time.sleep(0.1)
        self.assertEqual(self.stored_on("rp-settle-a"), 0)
        self.assertEqual(self.stored_on("rp-settle-b"), 3)
        self.assertEqual(self.count("rp-settle-b"), 3)

    def test_a_queue_declared_again_after_delete_starts_empty(self):
        self.ch.exchange_declare(exchange="rp-redeclare-x", exchange_type="direct")
        self.queue("rp-redeclare-other", ("rp-redeclare-x", "k"))
        self.queue("rp-redeclare-q", ("rp-redeclare-x", "k"))
        self.publish("rp-redeclare-x", "k", "before")
        self.ch.queue_delete(queue="rp-redeclare-q")
        self.queue("rp-redeclare-q", ("rp-redeclare-x", "k"))
        self.assertEqual(self.count("rp-redeclare-q"), 0)
        self.publish("rp-redeclare-x", "k", "after")
        self.assertEqual(self.drain("rp-redeclare-q"), [("after", 0)])
        self.assertEqual(self.count("rp-redeclare-other"), 2)

    def consumer_created(self, queue):
        return self.api(f"CONSUMER.INFO.AMQP.{queue}")["created"]

    def test_a_purge_of_a_queue_on_the_default_exchange_only_keeps_its_consumer(self):
        # Deleting a consumer and creating one of the same name at once races nats-server's last
        # state write of the old one; a queue with no other binding is emptied by subject alone.
        self.queue("rp-purge-own-q")
        self.ch.basic_get("rp-purge-own-q")  # read once: it has a consumer
        for i in range(3):
            self.publish("", "rp-purge-own-q", f"m{i}")
        created = self.consumer_created("rp-purge-own-q")
        self.assertEqual(self.ch.queue_purge(queue="rp-purge-own-q").method.message_count, 3)
        self.assertEqual(self.consumer_created("rp-purge-own-q"), created)
        self.assertEqual(self.count("rp-purge-own-q"), 0)
        self.publish("", "rp-purge-own-q", "after")
        self.assertEqual(self.drain("rp-purge-own-q"), [("after", 0)])

    def test_a_purge_of_a_bound_queue_drops_what_its_bindings_routed_and_leaves_the_rest(self):
        self.ch.exchange_declare(exchange="rp-purge-x", exchange_type="fanout")
        self.queue("rp-purge-bound-q", ("rp-purge-x", ""))
        self.queue("rp-purge-other-q", ("rp-purge-x", ""))
        self.publish("rp-purge-x", "", "shared")
        self.publish("", "rp-purge-bound-q", "own")
        self.assertEqual(self.ch.queue_purge(queue="rp-purge-bound-q").method.message_count, 2)
        self.assertEqual(self.count("rp-purge-bound-q"), 0)
        self.assertEqual(self.drain("rp-purge-other-q"), [("shared", 0)])
        self.publish("rp-purge-x", "", "after")
        self.assertEqual(self.drain("rp-purge-bound-q"), [("after", 0)])

    def test_a_purge_with_nothing_ready_leaves_the_unacked_delivery_to_its_channel(self):
        self.ch.exchange_declare(exchange="rp-purge-held-x", exchange_type="fanout")
        self.queue("rp-purge-held-q", ("rp-purge-held-x", ""))
        self.publish("rp-purge-held-x", "", "held")
        method, _props, body = self.ch.basic_get(queue="rp-purge-held-q")
        self.assertEqual(body, b"held")
        self.assertEqual(self.ch.queue_purge(queue="rp-purge-held-q").method.message_count, 0)
        self.ch.basic_reject(method.delivery_tag, requeue=True)
        self.assertEqual(self.drain("rp-purge-held-q"), [("held", 0)])


if __name__ == "__main__":
    unittest.main()
