"""Stream queues (x-queue-type stream), through pika: a queue whose messages every consumer reads
from an x-stream-offset of its own, none taking them away; RabbitMQ 3.10's refusals with its codes
and texts; x-max-age and x-max-length-bytes retention; prefetch bounding what is in flight; a
restart of cloud (SIGKILL) with messages on their way losing none. The scenarios in SCENARIOS are
also run side by side with RabbitMQ 3.10 (test_stream_queues_rabbitmq.py), whose observations
must equal EXPECTED and ours. Runs on the pinned nats-server and, as its .floor twin, on the floor.
"""
import base64
import datetime
import json
import signal
import time
import unittest
import urllib.request
import uuid

import pika
import pika.exceptions

import cloudtest
import natsraw

CLOUD = None
API_PORT = None
STREAM = {"x-queue-type": "stream"}
SETTLE = 10  # seconds a condition may take


def setUpModule():
    global CLOUD, API_PORT
    API_PORT = cloudtest.free_port()
    CLOUD = unittest.enterModuleContext(cloudtest.Cloud(env={"CLOUD_AMQP_MANAGEMENT_PORT": str(API_PORT)}))


def api(path):
    request = urllib.request.Request(f"http://127.0.0.1:{API_PORT}{path}")
    request.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.loads(reply.read().decode())


def connect(port):
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=port, heartbeat=0, blocked_connection_timeout=30))


def name(prefix="s"):
    return prefix + "-" + uuid.uuid4().hex[:8]


def refusal(port, action):
    """(code, text, connection-level) of what `action(channel)` is refused with; None when not."""
    conn = connect(port)
    try:
        action(conn.channel())
        conn.close()  # a connection closed meanwhile (while processing events) raises here
        return None
    except pika.exceptions.ChannelClosedByBroker as e:
        return (e.reply_code, e.reply_text, False)
    except pika.exceptions.ConnectionClosedByBroker as e:
        return (e.reply_code, e.reply_text, True)
    finally:
        if conn.is_open:
            conn.close()


def declare(ch, q, **kw):
    args = dict(STREAM)
    args.update(kw.pop("arguments", {}))
    return ch.queue_declare(queue=q, durable=kw.pop("durable", True), arguments=args, **kw)


def publish(ch, q, bodies):
    ch.confirm_delivery()
    for b in bodies:
        ch.basic_publish(exchange="", routing_key=q, body=b.encode())


def read(conn, q, n, offset=None, prefetch=100, timeout=SETTLE):
    """The first `n` deliveries a new consumer at `offset` gets: (body, x-stream-offset, redelivered).
    pika rejects (requeue) what reaches a consumer it cancels, which a stream queue answers by
    closing the connection, so the consumer's credit ends at `n`: it acks only what leaves room for
    exactly `n`, and nothing more can be on its way when it is cancelled."""
    ch = conn.channel()
    prefetch = max(1, min(prefetch, n))
    ch.basic_qos(prefetch_count=prefetch)
    got, tags = [], []
    args = {} if offset is None else {"x-stream-offset": offset}

    def on(chn, m, p, b):
        got.append((b.decode(), (p.headers or {}).get("x-stream-offset"), m.redelivered))
        if len(got) <= n - prefetch:
            chn.basic_ack(m.delivery_tag)
        else:
            tags.append(m.delivery_tag)

    tag = ch.basic_consume(q, on, arguments=args)
    deadline = time.time() + timeout
    while len(got) < n and time.time() < deadline:
        conn.process_data_events(time_limit=0.05)
    ch.basic_cancel(tag)
    if tags:
        ch.basic_ack(tags[-1], multiple=True)
    ch.close()
    return got


def stored(conn, q, n):
    """Waits until a reader from the first sees `n` messages (the copy into the queue's stream
    follows the confirm)."""
    return read(conn, q, n, offset="first")


# ---- scenarios run on both brokers (test_stream_queues_rabbitmq.py) ---------------------------


def refusals(port):
    out = {}
    s = name()
    for label, action in [
        ("non-durable", lambda ch: declare(ch, "s1", durable=False)),
        ("exclusive", lambda ch: declare(ch, "s2", exclusive=True)),
        ("auto-delete", lambda ch: declare(ch, "s3", auto_delete=True)),
        ("server-named", lambda ch: declare(ch, "")),
        ("x-max-age bad", lambda ch: declare(ch, "sa", arguments={"x-max-age": "10X"})),
        ("x-max-age integer", lambda ch: declare(ch, "sb", arguments={"x-max-age": 10})),
        ("x-max-length-bytes string", lambda ch: declare(ch, "sd", arguments={"x-max-length-bytes": "x"})),
    ] + [("arg " + arg, (lambda a, v: lambda ch: declare(ch, "se", arguments={a: v}))(arg, value))
         for arg, value in [("x-max-length", 10), ("x-message-ttl", 10), ("x-dead-letter-exchange", "x"),
                            ("x-single-active-consumer", True), ("x-expires", 1000),
                            ("x-overflow", "reject-publish"), ("x-delivery-limit", 3), ("x-max-priority", 3)]]:
        out[label] = refusal(port, action)
    conn = connect(port)
    declare(conn.channel(), s)
    conn.close()
    for label, action in [
        ("redeclare classic", lambda ch: ch.queue_declare(s, durable=True)),
        ("redeclare quorum", lambda ch: ch.queue_declare(s, durable=True, arguments={"x-queue-type": "quorum"})),
        ("redeclare x-max-age", lambda ch: declare(ch, s, arguments={"x-max-age": "2h"})),
        ("get", lambda ch: ch.basic_get(s)),
        ("purge", lambda ch: ch.queue_purge(s)),
        ("consume without prefetch", lambda ch: ch.basic_consume(s, lambda *a: None)),
        ("consume with a global prefetch",
         lambda ch: (ch.basic_qos(prefetch_count=10, global_qos=True), ch.basic_consume(s, lambda *a: None))),
        ("consume no-ack", lambda ch: (ch.basic_qos(prefetch_count=10),
                                       ch.basic_consume(s, lambda *a: None, auto_ack=True))),
        ("consume x-priority", lambda ch: (ch.basic_qos(prefetch_count=10),
                                           ch.basic_consume(s, lambda *a: None, arguments={"x-priority": 3}))),
        ("consume exclusive", lambda ch: (ch.basic_qos(prefetch_count=10),
                                          ch.basic_consume(s, lambda *a: None, exclusive=True))),
    ]:
        out[label] = refusal(port, action)
    conn = connect(port)
    conn.channel().queue_delete(s)
    conn.close()
    # The texts name the queue: one of the test's own name is shown as "S".
    return {k: v if v is None else (v[0], v[1].replace(s, "S"), v[2]) for k, v in out.items()}


def offsets(port):
    """Ten messages, then a consumer per offset kind."""
    q = name()
    conn = connect(port)
    ch = conn.channel()
    declare(ch, q)
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) - datetime.timedelta(seconds=2)
    publish(ch, q, [f"m{i}" for i in range(10)])
    out = {"first": stored(conn, q, 10)}
    out["declare-ok count"] = declare(ch, q).method.message_count
    out["last"] = read(conn, q, 1, "last")
    out["offset 7"] = read(conn, q, 3, 7)
    out["offset -1"] = read(conn, q, 10, -1)
    out["interval 1h"] = read(conn, q, 10, "1h")
    out["timestamp"] = read(conn, q, 10, before)
    out["beyond the end, then one more"] = []
    out["next, then one more"] = []
    # A consumer at 20 (beyond the end) and one at "next" wait; a later message reaches "next",
    # the one beyond the end only at offset 20.
    waiting = conn.channel()
    waiting.basic_qos(prefetch_count=100)
    got = {"beyond": [], "next": []}
    waiting.basic_consume(q, lambda c, m, p, b: (got["beyond"].append(b.decode()), c.basic_ack(m.delivery_tag)),
                          arguments={"x-stream-offset": 20})
    waiting.basic_consume(q, lambda c, m, p, b: (got["next"].append(b.decode()), c.basic_ack(m.delivery_tag)),
                          arguments={"x-stream-offset": "next"})
    conn.process_data_events(time_limit=1.0)
    publish(conn.channel(), q, ["m10"])
    deadline = time.time() + SETTLE
    while not got["next"] and time.time() < deadline:
        conn.process_data_events(time_limit=0.05)
    conn.process_data_events(time_limit=0.3)
    out["beyond the end, then one more"] = list(got["beyond"])
    out["next, then one more"] = list(got["next"])
    out["bad offset"] = refusal(port, lambda c: (c.basic_qos(prefetch_count=10), c.basic_consume(
        q, lambda *a: None, arguments={"x-stream-offset": "bogus"})))
    if out["bad offset"] is not None:
        out["bad offset"] = out["bad offset"][0]  # RabbitMQ 3.10 crashes (541); we answer 406
    out["delete-ok count"] = ch.queue_delete(q).method.message_count
    conn.close()
    return out


def two_readers(port):
    """Two consumers read the same messages; an ack takes nothing away; a nack closes the connection."""
    q = name()
    conn = connect(port)
    ch = conn.channel()
    declare(ch, q)
    publish(ch, q, ["a", "b", "c"])
    stored(conn, q, 3)
    one = read(conn, q, 3, "first")
    two = read(conn, q, 3, "first")
    nacked = refusal(port, lambda c: (c.basic_qos(prefetch_count=10), c.basic_consume(
        q, lambda chn, m, p, b: chn.basic_nack(m.delivery_tag, requeue=True), arguments={"x-stream-offset": "first"}),
        c.connection.process_data_events(time_limit=SETTLE)))
    rejected = refusal(port, lambda c: (c.basic_qos(prefetch_count=10), c.basic_consume(
        q, lambda chn, m, p, b: chn.basic_reject(m.delivery_tag, requeue=False), arguments={"x-stream-offset": "first"}),
        c.connection.process_data_events(time_limit=SETTLE)))
    three = read(conn, q, 3, "first")
    ch.queue_delete(q)
    conn.close()
    return {"one": one, "two": two, "nack": nacked, "reject": rejected, "after": three}


def credit(port):
    """A prefetch of 2 without acks: two deliveries, and two more once they are acked."""
    q = name()
    conn = connect(port)
    ch = conn.channel()
    declare(ch, q)
    publish(ch, q, [f"m{i}" for i in range(6)])
    stored(conn, q, 6)
    c = conn.channel()
    c.basic_qos(prefetch_count=2)
    got = []
    c.basic_consume(q, lambda chn, m, p, b: got.append((m.delivery_tag, b.decode())),
                    arguments={"x-stream-offset": "first"})
    deadline = time.time() + SETTLE
    while len(got) < 2 and time.time() < deadline:
        conn.process_data_events(time_limit=0.05)
    conn.process_data_events(time_limit=0.5)
    first = [b for _, b in got]
    c.basic_ack(got[-1][0], multiple=True)
    deadline = time.time() + SETTLE
    while len(got) < 4 and time.time() < deadline:
        conn.process_data_events(time_limit=0.05)
    conn.process_data_events(time_limit=0.5)
    ch.queue_delete(q)
    conn.close()
    return {"before acks": first, "after acks": [b for _, b in got]}


def routed(port):
    """A stream queue bound to a topic exchange: deliveries show the publish's exchange and key."""
    q, x = name(), name("x")
    conn = connect(port)
    ch = conn.channel()
    declare(ch, q)
    ch.exchange_declare(x, "topic")
    ch.queue_bind(q, x, "a.*")
    ch.confirm_delivery()
    ch.basic_publish(x, "a.b", b"one", properties=pika.BasicProperties(headers={"h": "v"}, content_type="text/plain"))
    ch.basic_publish(x, "c.d", b"not bound")
    c = conn.channel()
    c.basic_qos(prefetch_count=10)
    got = []
    c.basic_consume(q, lambda chn, m, p, b: (got.append((m.exchange, m.routing_key, b.decode(), p.content_type,
                                                         (p.headers or {}).get("h"))), chn.basic_ack(m.delivery_tag)),
                    arguments={"x-stream-offset": "first"})
    deadline = time.time() + SETTLE
    while not got and time.time() < deadline:
        conn.process_data_events(time_limit=0.05)
    conn.process_data_events(time_limit=0.3)
    ch.queue_delete(q)
    ch.exchange_delete(x)
    conn.close()
    return [tuple(g[:2]) == (x, "a.b") and g[2:] == ("one", "text/plain", "v") for g in got]


SCENARIOS = {"refusals": refusals, "offsets": offsets, "two_readers": two_readers, "credit": credit,
             "routed": routed}


def run_on(port, scenario):
    return scenario(port)


def m(i, redelivered=False):
    return (f"m{i}", i, redelivered)


V = "in vhost '/'"
EXPECTED = {
    "refusals": {
        "non-durable": (406, f"PRECONDITION_FAILED - invalid property 'non-durable' for queue 's1' {V}", False),
        "exclusive": (406, f"PRECONDITION_FAILED - invalid property 'exclusive-owner' for queue 's2' {V}", False),
        "auto-delete": (406, f"PRECONDITION_FAILED - invalid property 'auto-delete' for queue 's3' {V}", False),
        "server-named": (406, "PRECONDITION_FAILED - Cannot declare a server-named queue for type rabbit_stream_queue",
                         False),
        "x-max-age bad": (406, f"PRECONDITION_FAILED - invalid arg 'x-max-age' for queue 'sa' {V}: invalid_max_age",
                          False),
        "x-max-age integer": (406, f"PRECONDITION_FAILED - invalid arg 'x-max-age' for queue 'sb' {V}: "
                                   "{unacceptable_type,signedint}", False),
        "x-max-length-bytes string": (406, f"PRECONDITION_FAILED - invalid arg 'x-max-length-bytes' for queue 'sd' "
                                           f"{V}: \"expected integer, got longstr\"", False),
        **{"arg " + a: (406, f"PRECONDITION_FAILED - invalid arg '{a}' for queue 'se' {V} of queue type "
                             "rabbit_stream_queue", False)
           for a in ["x-max-length", "x-message-ttl", "x-dead-letter-exchange", "x-single-active-consumer",
                     "x-expires", "x-overflow", "x-delivery-limit", "x-max-priority"]},
        "redeclare classic": (406, f"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'S' {V}: "
                                   "received none but current is the value 'stream' of type 'longstr'", False),
        "redeclare quorum": (406, f"PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'S' {V}: "
                                  "received 'quorum' but current is 'stream'", False),
        "redeclare x-max-age": (406, f"PRECONDITION_FAILED - inequivalent arg 'x-max-age' for queue 'S' {V}: "
                                     "received the value '2h' of type 'longstr' but current is none", False),
        "get": (540, f"NOT_IMPLEMENTED - basic.get not supported by stream queues queue 'S' {V}", True),
        "purge": (540, f"NOT_IMPLEMENTED - queue.purge not supported by stream queues queue 'S' {V}", True),
        "consume without prefetch": (406, f"PRECONDITION_FAILED - consumer prefetch count is not set for "
                                          f"'queue 'S' {V}'", False),
        "consume with a global prefetch": (406, f"PRECONDITION_FAILED - consumer prefetch count is not set for "
                                                f"'queue 'S' {V}'", False),
        "consume no-ack": (540, f"NOT_IMPLEMENTED - automatic acknowledgement not supported by stream queues queue "
                                f"'S' {V}", True),
        "consume x-priority": (406, f"PRECONDITION_FAILED - invalid arg 'x-priority' for queue 'S' {V} of queue "
                                    "type rabbit_stream_queue", False),
        "consume exclusive": None,
    },
    "offsets": {
        "first": [m(i) for i in range(10)],
        "declare-ok count": 0,
        "last": [m(9)],
        "offset 7": [m(7), m(8), m(9)],
        "offset -1": [m(i) for i in range(10)],
        "interval 1h": [m(i) for i in range(10)],
        "timestamp": [m(i) for i in range(10)],
        "beyond the end, then one more": [],
        "next, then one more": ["m10"],
        "bad offset": None,  # replaced per broker below
        "delete-ok count": 0,
    },
    "two_readers": {
        "one": [("a", 0, False), ("b", 1, False), ("c", 2, False)],
        "two": [("a", 0, False), ("b", 1, False), ("c", 2, False)],
        "nack": (540, "NOT_IMPLEMENTED - basic.nack and basic.reject not supported by stream queues queue 'Q' "
                      f"{V}", True),
        "reject": (540, "NOT_IMPLEMENTED - basic.nack and basic.reject not supported by stream queues queue 'Q' "
                        f"{V}", True),
        "after": [("a", 0, False), ("b", 1, False), ("c", 2, False)],
    },
    "credit": {"before acks": ["m0", "m1"], "after acks": ["m0", "m1", "m2", "m3"]},
    "routed": [True],
}


def normalized(name_, observed):
    """What both brokers must agree on: queue names in texts replaced, the bad offset's code kept apart
    (RabbitMQ 3.10 crashes the channel with 541 where the adaptor answers 406)."""
    if name_ == "offsets":
        observed = dict(observed)
        observed["bad offset"] = None
    if name_ == "two_readers":
        observed = dict(observed)
        for k in ("nack", "reject"):
            if observed[k]:
                code, text, conn_level = observed[k]
                start = text.find("queue '") + len("queue '")
                end = text.find("'", start)
                observed[k] = (code, text[:start] + "Q" + text[end:], conn_level)
    return observed


class Scenarios(unittest.TestCase):
    maxDiff = None

    def check(self, which):
        got = normalized(which, run_on(CLOUD.amqp_port, SCENARIOS[which]))
        self.assertEqual(got, EXPECTED[which])

    def test_refusals_with_rabbitmqs_codes_and_texts(self):
        self.check("refusals")

    def test_every_offset_kind(self):
        self.check("offsets")

    def test_a_bad_offset_is_406_naming_the_argument(self):
        port = CLOUD.amqp_port
        q = name()
        conn = connect(port)
        declare(conn.channel(), q)
        r = refusal(port, lambda c: (c.basic_qos(prefetch_count=10), c.basic_consume(
            q, lambda *a: None, arguments={"x-stream-offset": "bogus"})))
        conn.channel().queue_delete(q)
        conn.close()
        self.assertEqual(r[0], 406)
        self.assertIn(f"invalid arg 'x-stream-offset' for queue '{q}' in vhost '/'", r[1])

    def test_two_consumers_read_the_same_messages_and_nack_is_refused(self):
        self.check("two_readers")

    def test_prefetch_bounds_what_is_in_flight(self):
        self.check("credit")

    def test_a_delivery_shows_the_publishs_exchange_key_and_properties(self):
        self.check("routed")


class Retention(unittest.TestCase):
    def test_x_max_age_drops_old_messages(self):
        q = name()
        conn = connect(CLOUD.amqp_port)
        ch = conn.channel()
        declare(ch, q, arguments={"x-max-age": "2s"})
        publish(ch, q, ["old"])
        self.assertEqual([b for b, _, _ in stored(conn, q, 1)], ["old"])
        # JetStream removes what passed max_age: a reader from the first finds nothing old.
        self.assertTrue(cloudtest.wait_until(lambda: read(conn, q, 1, "first", timeout=0.3) == [], 15))
        publish(ch, q, ["new"])
        self.assertEqual(stored(conn, q, 1), [("new", 1, False)])
        ch.queue_delete(q)
        conn.close()

    def test_x_max_length_bytes_drops_the_oldest(self):
        q = name()
        conn = connect(CLOUD.amqp_port)
        ch = conn.channel()
        declare(ch, q, arguments={"x-max-length-bytes": 20000})
        publish(ch, q, ["x" * 1000 + str(i) for i in range(60)])
        # Fed whole once the last one read is offset 59.
        self.assertTrue(cloudtest.wait_until(lambda: read(conn, q, 1, "last")[0][1] == 59, SETTLE))
        kept = read(conn, q, 60, "first", timeout=1.5)
        self.assertLess(len(kept), 60)
        self.assertGreater(len(kept), 0)
        self.assertEqual(kept[-1][1], 59)
        self.assertEqual([o for _, o, _ in kept], list(range(60 - len(kept), 60)))
        ch.queue_delete(q)
        conn.close()


class Readers(unittest.TestCase):
    """Each consumer's reader on the queue's stream: gone with its consumer, and made again after
    the last delivery when the bus loses it."""

    def readers(self, raw, q):
        listed = raw.api("CONSUMER.LIST.AMQP_STREAM_" + q, {"offset": 0})
        return [c["name"] for c in listed.get("consumers") or []]

    def test_a_cancelled_consumer_leaves_no_reader_and_a_lost_reader_is_made_again_after_the_last_delivery(self):
        q = name()
        conn = connect(CLOUD.amqp_port)
        declare(conn.channel(), q)
        publish(conn.channel(), q, ["m0", "m1", "m2"])
        stored(conn, q, 3)
        raw = natsraw.NatsRaw(CLOUD.nats_port)
        try:
            self.assertTrue(cloudtest.wait_until(lambda: self.readers(raw, q) == [], SETTLE))
            ch = conn.channel()
            ch.basic_qos(prefetch_count=10)
            got = []
            ch.basic_consume(q, lambda c, m, p, b: (got.append((b.decode(), p.headers["x-stream-offset"])),
                                                    c.basic_ack(m.delivery_tag)),
                             arguments={"x-stream-offset": "first"})
            self.assertTrue(cloudtest.wait_until(lambda: (conn.process_data_events(0.05), len(got) == 3)[1], SETTLE))
            [reader] = self.readers(raw, q)
            raw.api(f"CONSUMER.DELETE.AMQP_STREAM_{q}.{reader}")
            publish(conn.channel(), q, ["m3", "m4"])
            self.assertTrue(cloudtest.wait_until(lambda: (conn.process_data_events(0.05), len(got) >= 5)[1], 20))
            conn.process_data_events(0.5)
            self.assertEqual(got, [(f"m{i}", i) for i in range(5)])
            self.assertEqual(len(self.readers(raw, q)), 1)
            self.assertNotEqual(self.readers(raw, q), [reader])
            ch.close()
            self.assertTrue(cloudtest.wait_until(lambda: self.readers(raw, q) == [], SETTLE))
        finally:
            raw.close()
        conn.channel().queue_delete(q)
        conn.close()


class Management(unittest.TestCase):
    def test_a_stream_queue_is_of_type_stream_and_counts_what_its_stream_holds(self):
        q = name()
        conn = connect(CLOUD.amqp_port)
        ch = conn.channel()
        declare(ch, q, arguments={"x-max-age": "7D"})
        publish(ch, q, ["a", "b", "c"])
        stored(conn, q, 3)
        one = api(f"/api/queues/%2F/{q}")
        self.assertEqual((one["type"], one["messages"], one["arguments"].get("x-max-age")), ("stream", 3, "7D"))
        listed = [e for e in api("/api/queues") if e["name"] == q]
        self.assertEqual([(e["type"], e["messages"]) for e in listed], [("stream", 3)])
        ch.queue_delete(q)
        conn.close()


class Restart(unittest.TestCase):
    def test_sigkill_with_messages_on_their_way_loses_none(self):
        q = name()
        conn = connect(CLOUD.amqp_port)
        ch = conn.channel()
        declare(ch, q)
        publish(ch, q, [f"m{i}" for i in range(2000)])
        conn.close()
        CLOUD.restart(signal.SIGKILL)
        conn = connect(CLOUD.amqp_port)
        got = read(conn, q, 2000, "first", prefetch=500, timeout=60)
        self.assertEqual([b for b, _, _ in got], [f"m{i}" for i in range(2000)])
        self.assertEqual([o for _, o, _ in got], list(range(2000)))
        conn.channel().queue_delete(q)
        conn.close()


class TwoReplicas(unittest.TestCase):
    """Two clouds on one bus: a stream queue declared on one is published to and read on both,
    and stores what the other is sent at once after the first one's process dies (a publish goes
    to the queue's stream itself, so no replica stands between them)."""

    @classmethod
    def setUpClass(cls):
        cls.bus = cls.enterClassContext(cloudtest.NatsServer())
        env = {"CLOUD_PUBSUB_URL": cls.bus.url}
        cls.clouds = [cls.enterClassContext(cloudtest.Cloud(env=env)) for _ in range(2)]

    def test_declared_on_one_published_on_the_other_read_on_both_and_stored_after_one_dies(self):
        a, b = self.clouds
        q = name()
        ca, cb = connect(a.amqp_port), connect(b.amqp_port)
        declare(ca.channel(), q)
        # The other replica learns of it through the bucket.
        self.assertTrue(cloudtest.wait_until(lambda: declare(cb.channel(), q).method.message_count == 0, SETTLE))
        publish(cb.channel(), q, ["m0", "m1"])
        self.assertEqual([x for x, _, _ in stored(ca, q, 2)], ["m0", "m1"])
        self.assertEqual([x for x, _, _ in stored(cb, q, 2)], ["m0", "m1"])
        ca.close()
        a.stop(signal.SIGKILL)
        publish(cb.channel(), q, ["m2", "m3"])
        got = read(cb, q, 4, "first")
        self.assertEqual([x for x, _, _ in got], ["m0", "m1", "m2", "m3"])
        cb.channel().queue_delete(q)
        cb.close()


if __name__ == "__main__":
    unittest.main()
