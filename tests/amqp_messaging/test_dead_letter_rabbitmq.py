"""Dead-lettering, expiry, length limits and single active consumer side by side with a real RabbitMQ 3.10 (the Debian package): each scenario runs,
through pika, once on the adaptor and once on a private RabbitMQ, and reduces what it observed to a
plain summary (dicts and lists of strings and ints, `time` values dropped once checked to be
datetimes, the run's unique word in names written W); the two summaries must be equal.

The one addition on our side: the `x-last-death-*` headers RabbitMQ writes since 3.13 (3.10 has
none), checked against the newest `x-death` entry and then left out of the comparison.
"""
import datetime
import time
import unittest

import pika
import pika.exceptions

import cloudtest
import dying_consumer
import rabbitmq
import side_by_side

CLOUD = None
RABBITMQ = None
QUIET = 3.0  # seconds without a delivery after which a message is taken not to come back


def setUpModule():
    global CLOUD, RABBITMQ
    CLOUD = unittest.enterModuleContext(cloudtest.Cloud())
    RABBITMQ = unittest.enterModuleContext(rabbitmq.RabbitMQ())


class Session(side_by_side.Session):
    """A connection to one broker, a confirming channel and a word making this run's names unique."""

    def collect(self, queue, auto_ack=True):
        """A consumer of `queue`; returns the list its deliveries (method, properties, body) go to."""
        got = []
        self.ch.basic_consume(queue, lambda c, m, p, b: got.append((m, p, b)), auto_ack=auto_ack)
        return got

    def wait(self, got, n, timeout=15):
        """Until `got` holds n deliveries or `timeout` passes; returns whether it does."""
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.05)
        return len(got) >= n

    def pause(self, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.05)

    def get(self, queue, timeout=15):
        """The next message of `queue` (unacked), waiting for it; None if none came."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            method, props, body = self.ch.basic_get(queue, auto_ack=False)
            if method is not None:
                return method, props, body
            time.sleep(0.05)
        return None

    def publish(self, queue, body, **props):
        self.ch.basic_publish("", queue, body, pika.BasicProperties(**props))


def plain(value, word):
    """A summary's value made comparable across brokers: `time` entries checked and dropped, bytes
    decoded, integers plain, the run's word replaced by W."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "time" and isinstance(v, datetime.datetime):
                continue
            out[k] = plain(v, word) if k != "time" else f"not a datetime: {v!r}"
        return out
    if isinstance(value, (list, tuple)):
        return [plain(v, word) for v in value]
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if isinstance(value, str):
        return value.replace(word, "W")
    if isinstance(value, datetime.datetime):
        return "datetime"
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)  # pika's `long` for a long-long
    return value


def run(scenario, port):
    session = Session(port)
    try:
        return plain(scenario(session), session.word)
    finally:
        session.close()


MESSAGE = dict(content_type="application/json", correlation_id="c-1", expiration="60000", headers={"app": "kept"})
ROUTE = ("queue", "reason", "count", "routing-keys", "exchange")


def dead_letter_queue(s):
    """A topic dead-letter exchange whose queue takes every one-word key, and its consumer's list."""
    dlx, dlq = s.name("dlx"), s.name("dlq")
    s.ch.exchange_declare(dlx, exchange_type="topic")
    s.ch.queue_declare(dlq)
    s.ch.queue_bind(dlq, dlx, "*")
    return dlx, s.collect(dlq)


def rejected(s):
    q = s.name("work")
    dlx, dead = dead_letter_queue(s)
    s.ch.queue_declare(q, arguments={"x-dead-letter-exchange": dlx})
    s.publish(q, b"poison", **MESSAGE)
    got = s.get(q)
    if got is None:
        return "nothing to reject"
    s.ch.basic_reject(got[0].delivery_tag, requeue=False)
    s.wait(dead, 1)
    s.pause(0.5)  # a second copy would show
    return [{"exchange": m.exchange, "routing_key": m.routing_key, "redelivered": m.redelivered, "body": b,
             "properties": {"content_type": p.content_type, "correlation_id": p.correlation_id,
                            "expiration": p.expiration},
             "headers": p.headers} for m, p, b in dead]


def retried_twice(s):
    a, b = s.name("retry-a"), s.name("retry-b")
    s.ch.queue_declare(a, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": b})
    s.ch.queue_declare(b, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": a,
                                     "x-message-ttl": 300})
    got = s.collect(a, auto_ack=False)
    s.publish(a, b"job", **MESSAGE)
    for n in (1, 2):
        if not s.wait(got, n):
            return f"arrivals on A: {len(got)}"
        s.ch.basic_reject(got[n - 1][0].delivery_tag, requeue=False)
    if not s.wait(got, 3):
        return f"arrivals on A: {len(got)}"
    s.ch.basic_ack(got[2][0].delivery_tag)
    headers = got[2][1].headers or {}
    deaths = {k: v for k, v in headers.items() if k.startswith("x-first-death-") or k.startswith("x-last-death-")}
    deaths["x-death"] = [{k: d[k] for k in ROUTE if k in d} for d in headers.get("x-death", [])]
    return deaths


def delivery_limit(give_back):
    """A quorum queue with x-delivery-limit 2 whose one message `give_back(channel, method)` returns at
    every delivery: the x-delivery-count values seen (None: absent), until it stops coming back, and
    the x-death reasons of what reached the dead-letter queue."""
    def scenario(s):
        q = s.name("quorum")
        dlx, dead = dead_letter_queue(s)
        s.ch.queue_declare(q, durable=True, arguments={
            "x-queue-type": "quorum", "x-delivery-limit": 2, "x-dead-letter-exchange": dlx})
        got = []  # (channel, method, properties) of every delivery, from whichever consumer

        def consume():
            channel = s.conn.channel()
            channel.basic_consume(q, lambda c, m, p, b: got.append((c, m, p)), auto_ack=False)

        consume()
        s.publish(q, b"again")
        counts = []
        while len(counts) < 10 and s.wait(got, len(counts) + 1, QUIET):
            channel, method, props = got[len(counts)]
            counts.append((props.headers or {}).get("x-delivery-count"))
            give_back(channel, method)
            if channel.is_closed:
                consume()
        s.wait(dead, 1, 5)
        return {"x-delivery-count": counts,
                "dead-lettered": [[d.get("reason") for d in (p.headers or {}).get("x-death", [])]
                                  for _, p, _ in dead]}
    return scenario


def by_nack(channel, method):
    channel.basic_nack(method.delivery_tag, requeue=True)


def by_reject(channel, method):
    channel.basic_reject(method.delivery_tag, requeue=True)


def by_closing_the_channel(channel, method):
    channel.close()


def self_cycle(s):
    q = s.name("loop")
    s.ch.queue_declare(q, arguments={"x-message-ttl": 100, "x-dead-letter-exchange": "",
                                     "x-dead-letter-routing-key": q})
    s.publish(q, b"loop")
    s.pause(2)
    count = s.ch.queue_declare(q, passive=True).method.message_count
    method, _, body = s.ch.basic_get(q, auto_ack=True)
    return {"message_count": count, "basic_get": None if method is None else body}


def per_message_expiration(s):
    q = s.name("short")
    dlx, dead = dead_letter_queue(s)
    s.ch.queue_declare(q, arguments={"x-dead-letter-exchange": dlx})
    s.publish(q, b"short-lived", expiration="100")
    s.pause(3)
    return [{"headers": p.headers, "expiration": p.expiration,
             "original-expiration": [d.get("original-expiration") for d in (p.headers or {}).get("x-death", [])]}
            for _, p, _ in dead]


def unused_queue_expires(s):
    """Is each queue there 0.5 s after its declaration or its last use, and its expiry and 5.5 s
    more after that look? One stays idle; one is used by a basic.get, one by a passive declare,
    every 0.4 s for twice its expiry; all three at once. An expiry of 3 s leaves a look meant to
    come before it 2.5 s of room on a loaded machine."""
    expires_ms = 3000
    queues = {use: s.name("expiring-" + use.replace(".", "-")) for use in ("idle", "basic.get", "passive")}

    def look(q):
        ch = s.conn.channel()
        try:
            ch.queue_declare(q, passive=True)
        except pika.exceptions.ChannelClosedByBroker as e:
            return e.reply_code
        ch.close()
        return "there"

    for q in queues.values():
        s.ch.queue_declare(q, arguments={"x-expires": expires_ms})
    s.pause(0.5)
    seen = {"idle": [look(queues["idle"])]}
    deadline = time.monotonic() + 2 * expires_ms / 1000
    while time.monotonic() < deadline:
        s.ch.basic_get(queues["basic.get"], auto_ack=True)
        look(queues["passive"])
        s.pause(0.4)
    s.pause(0.5)
    for use in ("basic.get", "passive"):
        seen[use] = [look(queues[use])]
    s.pause(expires_ms / 1000 + 5.5)
    for use, q in queues.items():
        seen[use].append(look(q))
    return seen


def confirmed(s, queue, body, exchange=""):
    """'ack' or 'nack': what the broker answered the confirming publish."""
    try:
        s.ch.basic_publish(exchange, queue, body)
        return "ack"
    except pika.exceptions.NackError:
        return "nack"


def drain(s, queue):
    bodies = []
    while True:
        method, _, body = s.ch.basic_get(queue, auto_ack=True)
        if method is None:
            return bodies
        bodies.append(body)


def length_limited(overflow):
    """A queue of x-max-length 2 (and `overflow`, None: the default) with a dead-letter exchange:
    what five confirming publishes were answered, its count, what was dead-lettered (body and the
    x-death entry's queue, reason and count) and what it holds."""
    def scenario(s):
        q = s.name("limited")
        dlx, dead = dead_letter_queue(s)
        arguments = {"x-max-length": 2, "x-dead-letter-exchange": dlx}
        if overflow:
            arguments["x-overflow"] = overflow
        s.ch.queue_declare(q, arguments=arguments)
        answers = [confirmed(s, q, f"m{i}".encode()) for i in range(5)]
        count = s.ch.queue_declare(q, passive=True).method.message_count
        s.pause(1)
        return {"answers": answers, "message_count": count, "held": drain(s, q),
                "dead-lettered": [[b] + [[d.get(k) for k in ("queue", "reason", "count")]
                                         for d in (p.headers or {}).get("x-death", [])] for _, p, b in dead]}
    return scenario


def refused_beside_another_queue(s):
    """A fanout to a full reject-publish queue and to one without a limit: who holds the message."""
    fan, full, other = s.name("fan"), s.name("full"), s.name("other")
    s.ch.exchange_declare(fan, exchange_type="fanout")
    s.ch.queue_declare(full, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    s.ch.queue_declare(other)
    for q in (full, other):
        s.ch.queue_bind(q, fan)
    answers = [confirmed(s, "k", body, exchange=fan) for body in (b"first", b"second")]
    return {"answers": answers, "full": drain(s, full), "other": drain(s, other)}


def single_active_consumer(queue_type):
    """Two consumers of a single-active-consumer queue, the first (a process of its own) holding
    its prefetch of 2: who receives four messages, and who once the first one's connection ends.
    (A 3.10 quorum queue hands the dead consumer's messages back behind the others; the issue asks
    for RabbitMQ's classic order, the requeued first, and so does every queue here.)"""
    def scenario(s):
        q = s.name("single")
        s.ch.queue_declare(q, durable=True, arguments={"x-single-active-consumer": True, "x-queue-type": queue_type})
        first = dying_consumer.DyingConsumer(s.port, q, prefetch=2)
        try:
            second = s.conn.channel()
            got = []
            second.basic_consume(q, lambda c, m, p, b: (got.append([b, m.redelivered]), c.basic_ack(m.delivery_tag)))
            for i in range(4):
                s.publish(q, f"m{i}".encode())
            first.wait_for(2)
            s.pause(0.5)
            seen = {"before": {"first": list(first.got), "second": list(got)}}
            first.kill()
            s.wait(got, 4)
            s.pause(0.5)
            seen["after"] = got
            return seen
        finally:
            first.kill()
    return scenario


def cancelled_single_active_consumer(s):
    """A quorum single-active-consumer queue whose active consumer, holding two of four messages, is
    cancelled: what the next one receives at once, and once the cancelled one's channel closes."""
    q = s.name("handover")
    s.ch.queue_declare(q, durable=True, arguments={"x-single-active-consumer": True, "x-queue-type": "quorum"})
    first, second = s.conn.channel(), s.conn.channel()
    first.basic_qos(prefetch_count=2)
    held, got = [], []
    tag = first.basic_consume(q, lambda c, m, p, b: held.append(b))
    second.basic_consume(q, lambda c, m, p, b: (got.append([b, m.redelivered]), c.basic_ack(m.delivery_tag)))
    for i in range(4):
        s.publish(q, f"m{i}".encode())
    s.wait(held, 2)
    first.basic_cancel(tag)
    s.wait(got, 2)
    s.pause(0.5)
    seen = {"held": list(held), "after cancel": list(got)}
    first.close()
    s.wait(got, 4)
    s.pause(0.5)
    seen["after close"] = got[len(seen["after cancel"]):]
    return seen


class SameAsRabbitMQ(unittest.TestCase):
    maxDiff = None

    def without_last_death(self, value):
        """`value` with every headers table's x-last-death-* taken out, once they are found to
        name the newest x-death entry's queue, reason and exchange."""
        if isinstance(value, list):
            return [self.without_last_death(v) for v in value]
        if not isinstance(value, dict):
            return value
        value = {k: self.without_last_death(v) for k, v in value.items()}
        if "x-death" in value:
            newest = value["x-death"][0]
            self.assertEqual({k: value.pop(f"x-last-death-{k}", None) for k in ("queue", "reason", "exchange")},
                             {k: newest[k] for k in ("queue", "reason", "exchange")}, "x-last-death-*")
        return value

    def same(self, scenario):
        ours, theirs = side_by_side.on_both(lambda port: run(scenario, port), CLOUD.amqp_port, RABBITMQ.amqp_port)
        self.assertEqual(self.without_last_death(ours), theirs, "first: ours; second: RabbitMQ 3.10's")

    def test_a_rejected_message(self):
        self.same(rejected)

    def test_b_a_message_retried_twice_through_a_waiting_queue(self):
        self.same(retried_twice)

    def test_c_delivery_limit_by_nack(self):
        self.same(delivery_limit(by_nack))

    def test_d_delivery_limit_by_reject(self):
        self.same(delivery_limit(by_reject))

    def test_e_delivery_limit_by_closing_the_channel(self):
        self.same(delivery_limit(by_closing_the_channel))

    def test_f_a_queue_dead_lettering_to_itself_by_ttl(self):
        self.same(self_cycle)

    def test_g_per_message_expiration(self):
        self.same(per_message_expiration)

    def test_h_an_unused_queue_expires(self):
        self.same(unused_queue_expires)

    def test_i_a_length_limit_dropping_the_head(self):
        self.same(length_limited(None))

    def test_j_a_length_limit_rejecting_publishes(self):
        self.same(length_limited("reject-publish"))

    def test_k_a_length_limit_rejecting_publishes_to_the_dead_letter_exchange(self):
        self.same(length_limited("reject-publish-dlx"))

    def test_l_a_refused_publish_reaches_the_other_queues(self):
        self.same(refused_beside_another_queue)

    def test_m_a_single_active_consumer_classic(self):
        self.same(single_active_consumer("classic"))

    def test_n_a_cancelled_single_active_consumer_quorum(self):
        self.same(cancelled_single_active_consumer)


if __name__ == "__main__":
    unittest.main()
