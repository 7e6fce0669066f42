"""A store written by the release before #55's step 3 converts at boot (docs/STORAGE.md,
"Upgrade"): that release stored one message per publish on `amqp.<exchange>.<key>` and gave each
queue's consumer its bindings' filters besides its own subject. The test writes such a store on a
bus of its own (stream and bucket made by this release's `cloud`, then the bucket entries,
consumer filters and messages as the previous release left them, on raw JetStream), boots `cloud`
on it with another ack wait (so the boot converges the consumers) and reads through pika: every
queue gets each of its messages once, in stream order, with its exchange, routing key and
properties; what is published after the boot reaches the queues too; a queue's consumer is
narrowed to its own subject once what its old filters held is acked, and not before. A delayed
message that release stored as a schedule targeting its exchange's subject is delivered when due,
after the queue it goes to has been narrowed. Runs on the pinned nats-server and, as its .floor
twin, on the floor.
"""
import base64
import datetime
import time
import unittest

import pika

import cloudtest
import natsraw

NO_PROPERTIES = base64.b64encode(b"\x00\x00").decode()  # "AAA=": an empty property flags word
TEXT_PLAIN = base64.b64encode(b"\x80\x00" + bytes([10]) + b"text/plain").decode()  # content-type only

# queue → (its bindings as the previous release wrote them, its consumer's filters then)
QUEUES = {
    "q": ([{"exchange": "t", "key": "a.*"}, {"exchange": "f", "key": ""}],
          ["amqp._.q", "amqp.t.a.*", "amqp.f.>", "amqp.f"]),
    "p": ([{"exchange": "t", "key": "#"}], ["amqp._.p", "amqp.t.>", "amqp.t"]),
    "r": ([{"exchange": "d", "key": "later"}], ["amqp._.r", "amqp.d.later"]),
}
# A schedule of delayed-message exchange d, as that release stored it: its target the subject the
# publish named; due this many seconds after it is written.
DUE_IN = 8
# In stream order: subject, body, Amqp-Props.
OLD_MESSAGES = [
    ("amqp.t.a.b", "x1", NO_PROPERTIES),
    ("amqp._.q", "d1", NO_PROPERTIES),
    ("amqp.t.b.c", "x2", TEXT_PLAIN),
    ("amqp.f", "f1", NO_PROPERTIES),
    ("amqp._.p", "d2", NO_PROPERTIES),
    ("amqp.t.a.b", "x3", NO_PROPERTIES),
]
# What each queue holds of them: body, exchange, routing key.
EXPECTED = {
    "q": [("x1", "t", "a.b"), ("d1", "", "q"), ("f1", "f", ""), ("x3", "t", "a.b")],
    "p": [("x1", "t", "a.b"), ("x2", "t", "b.c"), ("d2", "", "p"), ("x3", "t", "a.b")],
}


def write_previous_release_store(bus):
    raw = natsraw.NatsRaw(bus.port)
    try:
        stored = raw.publish("$KV.amqp.x.t", '{"kind":"topic","durable":true}')
        assert "error" not in stored, stored
        stored = raw.publish("$KV.amqp.x.f", '{"kind":"fanout","durable":true}')
        assert "error" not in stored, stored
        stored = raw.publish("$KV.amqp.x.d", '{"kind":"direct","durable":true,"delayed":true}')
        assert "error" not in stored, stored
        for queue, (bindings, filters) in QUEUES.items():
            value = '{"durable":true,"bindings":[%s]}' % ",".join(
                '{"exchange":"%s","key":"%s"}' % (b["exchange"], b["key"]) for b in bindings)
            stored = raw.publish(f"$KV.amqp.q.{queue}", value)
            assert "error" not in stored, stored
            # The consumer this release made for the queue, with the previous release's filters.
            config = raw.api(f"CONSUMER.INFO.AMQP.{queue}")["config"]
            config["filter_subjects"] = filters
            config.pop("filter_subject", None)
            made = raw.api(f"CONSUMER.DURABLE.CREATE.AMQP.{queue}", {"stream_name": "AMQP", "config": config})
            assert "error" not in made, made
            assert sorted(made["config"]["filter_subjects"]) == sorted(filters), made
        for subject, body, props in OLD_MESSAGES:
            stored = raw.publish(subject, body, {"Amqp-Props": props})
            assert "error" not in stored and stored.get("stream") == "AMQP", stored
        due = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=DUE_IN)
        stored = raw.publish("amqp.~delayed.d.old1", "later1", {
            "Nats-Schedule": "@at " + due.strftime("%Y-%m-%dT%H:%M:%SZ"), "Nats-Schedule-Target": "amqp.d.later",
            "Amqp-Props": NO_PROPERTIES})
        assert "error" not in stored and stored.get("stream") == "AMQP", stored
    finally:
        raw.close()


def consumer_config(bus, queue):
    return bus.api(f"CONSUMER.INFO.AMQP.{queue}")["config"]


def filters(bus, queue):
    return sorted(consumer_config(bus, queue)["filter_subjects"])


class Reader:
    """A consumer that keeps its deliveries unacked until ack_all: (body, exchange, key, content type)."""

    def __init__(self, cloud, queue):
        self.conn = pika.BlockingConnection(pika.ConnectionParameters(host="127.0.0.1", port=cloud.amqp_port))
        self.ch = self.conn.channel()
        self.ch.basic_qos(prefetch_count=100)
        self.got, self.tags = [], []

        def on_message(_ch, method, props, body):
            self.got.append((body.decode(), method.exchange, method.routing_key, props.content_type))
            self.tags.append(method.delivery_tag)

        self.ch.basic_consume(queue, on_message)

    def pump_until(self, n, timeout=15):
        deadline = time.monotonic() + timeout
        while len(self.got) < n and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.05)
        self.conn.process_data_events(time_limit=0.3)  # nothing more comes
        return [g[:3] for g in self.got]

    def ack_all(self):
        self.ch.basic_ack(self.tags[-1], multiple=True)
        self.conn.process_data_events(time_limit=0.1)

    def close(self):
        self.conn.close()


class StorageUpgrade(unittest.TestCase):
    def test_a_store_of_the_previous_release_keeps_every_message_and_binding_and_is_narrowed_once_read(self):
        with cloudtest.NatsServer() as bus:
            env = {"CLOUD_PUBSUB_URL": bus.url}
            with cloudtest.Cloud(env=env) as cloud:  # stream AMQP, bucket amqp, the queues' consumers
                conn = pika.BlockingConnection(pika.ConnectionParameters(host="127.0.0.1", port=cloud.amqp_port))
                for queue in QUEUES:
                    ch = conn.channel()
                    ch.queue_declare(queue, durable=True)
                    ch.basic_get(queue)  # read once: it has a consumer, as that release gave every queue
                conn.close()
            write_previous_release_store(bus)

            with cloudtest.Cloud(env={**env, "CLOUD_AMQP_ACK_WAIT": "20"}) as cloud:
                for queue in QUEUES:
                    self.assertIn(f"queue '{queue}' keeps the filters of the previous release", cloud.log)
                self.assertIn("1 delayed messages a previous release stored now become due", cloud.log)
                # Converged at boot (the ack wait), its filters kept.
                self.assertTrue(cloudtest.wait_until(
                    lambda: consumer_config(bus, "q")["ack_wait"] == 20 * 10**9, 15), consumer_config(bus, "q"))
                self.assertEqual(filters(bus, "q"), sorted(QUEUES["q"][1]))

                conn = pika.BlockingConnection(pika.ConnectionParameters(host="127.0.0.1", port=cloud.amqp_port))
                ch = conn.channel()
                ch.confirm_delivery()
                # A client's own declarations, as at every start: they change nothing.
                ch.exchange_declare("t", "topic", durable=True)
                for queue in EXPECTED:
                    ok = ch.queue_declare(queue, durable=True)
                    self.assertEqual(ok.method.message_count, len(EXPECTED[queue]), queue)
                self.assertEqual(filters(bus, "q"), sorted(QUEUES["q"][1]))

                q = Reader(cloud, "q")
                self.assertEqual(q.pump_until(4), EXPECTED["q"])
                self.assertEqual(q.got[0][3], None)
                ch.basic_publish("t", "a.c", b"new1")  # after the boot: routed to q and p
                self.assertEqual(q.pump_until(5)[4:], [("new1", "t", "a.c")])
                # Held unacked, the old messages keep the consumer's filters.
                time.sleep(2.5)
                self.assertEqual(filters(bus, "q"), sorted(QUEUES["q"][1]))
                q.ack_all()
                self.assertTrue(cloudtest.wait_until(lambda: filters(bus, "q") == ["amqp._.q"], 60),
                                f"{filters(bus, 'q')}\n{cloud.log}")
                # Confirmed by the next look, which then forgets the old filters.
                self.assertTrue(cloudtest.wait_until(lambda: "queue 'q' reads only its own subject now" in cloud.log, 15),
                                cloud.log)
                # p shares x1 and x3 with q and has read nothing: its filters stay.
                self.assertEqual(filters(bus, "p"), sorted(QUEUES["p"][1]))
                ch.basic_publish("t", "a.d", b"new2")
                self.assertEqual(q.pump_until(6)[5:], [("new2", "t", "a.d")])
                q.ack_all()
                q.close()

                p = Reader(cloud, "p")
                self.assertEqual(p.pump_until(6), EXPECTED["p"] + [("new1", "t", "a.c"), ("new2", "t", "a.d")])
                self.assertEqual(p.got[1][3], "text/plain")
                p.ack_all()
                self.assertTrue(cloudtest.wait_until(lambda: filters(bus, "p") == ["amqp._.p"], 60),
                                f"{filters(bus, 'p')}\n{cloud.log}")
                p.close()

                # r held nothing on its old filters: narrowed before its delayed message was due.
                self.assertTrue(cloudtest.wait_until(lambda: filters(bus, "r") == ["amqp._.r"], 60), cloud.log)
                r = Reader(cloud, "r")
                self.assertEqual(r.pump_until(1, timeout=DUE_IN + 30), [("later1", "d", "later")])
                r.ack_all()
                r.close()
                conn.close()

            # A boot on the converted store finds nothing to keep.
            with cloudtest.Cloud(env=env) as cloud:
                self.assertNotIn("keeps the filters of the previous release", cloud.log)


if __name__ == "__main__":
    unittest.main()
