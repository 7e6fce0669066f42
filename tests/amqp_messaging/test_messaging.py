"""AMQP messaging over JetStream (HIP-1326: "A message keeps its properties and stays readable",
"Acknowledgement, and what bounds a consumer", "What IS implemented, and is commonly assumed not
to be") with a stock client.

A real `cloud` (embedded nats-server) and pika, /usr/bin/python3. Every test names its own
exchanges and queues, so the tests of this file share one `cloud`.
"""
import decimal
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
import uuid

import pika
import pika.exceptions

import cloudtest

CLOUD = None


def setUpModule():
    global CLOUD
    CLOUD = unittest.enterModuleContext(cloudtest.Cloud())


def params(port=None):
    return pika.ConnectionParameters(host="127.0.0.1", port=port or CLOUD.amqp_port,
                                      heartbeat=0, blocked_connection_timeout=30,
                                      connection_attempts=3, retry_delay=0.5)


def name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def collect(conn, ch, queue, count, timeout=10.0, auto_ack=False, on_message=None):
    """Consumes until `count` deliveries arrived or `timeout` passed; returns them."""
    got = []

    def handle(channel, method, props, body):
        got.append((method, props, body))
        if on_message:
            on_message(channel, method, props, body)

    tag = ch.basic_consume(queue, handle, auto_ack=auto_ack)
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    return tag, got


def quiet(conn, seconds):
    """Processes events for a while (to catch deliveries that must NOT arrive)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)


class Base(unittest.TestCase):
    def setUp(self):
        self.conn = pika.BlockingConnection(params())
        self.ch = self.conn.channel()

    def tearDown(self):
        try:
            if self.conn.is_open:
                self.conn.close()
        except Exception:  # a test may have broken the connection on purpose
            pass

    def queue(self, durable=False, arguments=None):
        q = name("q")
        self.ch.queue_declare(q, durable=durable, arguments=arguments)
        return q


class Properties(Base):
    def test_properties_and_nested_headers_round_trip_exactly(self):
        q = self.queue()
        headers = {
            "int": 7, "neg": -1234567,  # pika 1.2 decodes a 64-bit "l" as unsigned: keep it 32-bit
            "text": "héllo", "decimal": decimal.Decimal("1.5"), "flag": True,
            "bytes": b"\x00\x01\xff".decode("latin-1"),
            "nested": {"deep": {"n": 2 ** 40, "s": "x"}, "list": [1, "a", {"k": "v"}]},
        }
        sent = pika.BasicProperties(
            content_type="application/json", content_encoding="utf-8", headers=headers,
            delivery_mode=2, priority=0, correlation_id="corr-1", reply_to="reply-q",
            expiration="600000", message_id="msg-1", timestamp=1700000000, type="kind",
            app_id="app-1")
        self.ch.basic_publish("", q, b'{"a":1}', sent)
        _, got = collect(self.conn, self.ch, q, 1)
        self.assertEqual(len(got), 1)
        method, props, body = got[0]
        self.assertEqual(body, b'{"a":1}')
        self.assertEqual(method.exchange, "")
        self.assertEqual(method.routing_key, q)
        self.assertFalse(method.redelivered)
        for field in ("content_type", "content_encoding", "headers", "delivery_mode", "priority",
                      "correlation_id", "reply_to", "expiration", "message_id", "timestamp",
                      "type", "app_id"):
            self.assertEqual(getattr(props, field), getattr(sent, field), field)

    def test_one_mib_body_round_trips(self):
        q = self.queue()
        body = os.urandom(1 << 20)
        self.ch.basic_publish("", q, body)
        _, got = collect(self.conn, self.ch, q, 1, timeout=20)
        self.assertEqual(len(got), 1)
        self.assertEqual(got[0][2], body)

    def test_empty_body_round_trips(self):
        q = self.queue()
        self.ch.basic_publish("", q, b"", pika.BasicProperties(message_id="empty"))
        _, got = collect(self.conn, self.ch, q, 1)
        self.assertEqual(len(got), 1)
        self.assertEqual(got[0][2], b"")
        self.assertEqual(got[0][1].message_id, "empty")


class Routing(Base):
    def test_hash_catches_a_publish_with_an_empty_key(self):
        x, q = name("x"), self.queue()
        self.ch.exchange_declare(x, "topic")
        self.ch.queue_bind(q, x, "#")
        self.ch.basic_publish(x, "", b"root")
        self.ch.basic_publish(x, "a.b", b"deep")
        _, got = collect(self.conn, self.ch, q, 2)
        self.assertEqual(sorted((m.routing_key, b) for m, _, b in got), [("", b"root"), ("a.b", b"deep")])
        self.assertTrue(all(m.exchange == x for m, _, _ in got))

    def test_a_message_matching_two_bindings_of_one_queue_is_delivered_once(self):
        x, q = name("x"), self.queue()
        self.ch.exchange_declare(x, "topic")
        self.ch.queue_bind(q, x, "a.*")
        self.ch.queue_bind(q, x, "*.b")
        self.ch.basic_publish(x, "a.b", b"once")
        _, got = collect(self.conn, self.ch, q, 1, auto_ack=True)
        quiet(self.conn, 1.0)
        self.assertEqual([b for _, _, b in got], [b"once"])

    def test_per_queue_order_holds_across_two_bindings(self):
        x, q = name("x"), self.queue()
        self.ch.exchange_declare(x, "direct")
        self.ch.queue_bind(q, x, "k1")
        self.ch.queue_bind(q, x, "k2")
        for i in range(200):
            self.ch.basic_publish(x, "k1" if i % 2 == 0 else "k2", str(i).encode())
        _, got = collect(self.conn, self.ch, q, 200, auto_ack=True, timeout=20)
        self.assertEqual([int(b) for _, _, b in got], list(range(200)))

    def test_a_message_for_another_binding_of_the_cover_is_not_delivered(self):
        # The queue's consumer filters exactly its bindings: a key beside them (k3 beside k1 and
        # k2, all under amqp.<x>.*) never reaches it.
        x, q = name("x"), self.queue()
        self.ch.exchange_declare(x, "direct")
        self.ch.queue_bind(q, x, "k1")
        self.ch.queue_bind(q, x, "k2")
        self.ch.basic_publish(x, "k3", b"not mine")
        self.ch.basic_publish(x, "k2", b"mine")
        _, got = collect(self.conn, self.ch, q, 1, auto_ack=True)
        quiet(self.conn, 1.0)
        self.assertEqual([b for _, _, b in got], [b"mine"])

    def test_a_plain_nats_subscriber_of_a_queue_s_subject_reads_the_body_and_where_it_was_published(self):
        # Each queue reached stores a copy under its own subject (docs/DESIGN.md, "Where a message
        # is stored"): a bus-native reader subscribes there.
        x, q = name("x"), self.queue()
        self.ch.exchange_declare(x, "direct")
        self.ch.queue_bind(q, x, "orders.new")
        sock = socket.create_connection(("127.0.0.1", CLOUD.nats_port), timeout=10)
        reader = sock.makefile("rb")
        self.assertTrue(reader.readline().startswith(b"INFO "))
        sock.sendall(b'CONNECT {"verbose":false,"headers":true,"protocol":1}\r\n'
                     b"SUB amqp._." + q.encode() + b" 1\r\nPING\r\n")
        line = reader.readline().strip()
        while line.startswith(b"INFO "):  # an asynchronous INFO update (protocol 1)
            line = reader.readline().strip()
        self.assertEqual(line, b"PONG")
        self.ch.basic_publish(x, "orders.new", b"plain body",
                              pika.BasicProperties(content_type="text/plain"))
        line = reader.readline().strip().split()
        # A protocol-1 client takes asynchronous INFO updates (current servers send one after CONNECT).
        while line and line[0] in (b"PING", b"+OK", b"INFO"):
            if line[0] == b"PING":
                sock.sendall(b"PONG\r\n")
            line = reader.readline().strip().split()
        self.assertEqual(line[0], b"HMSG", line)
        self.assertEqual(line[1], b"amqp._." + q.encode())
        header_len, total_len = int(line[-2]), int(line[-1])
        payload = reader.read(total_len + 2)[:total_len]
        headers, body = payload[:header_len], payload[header_len:]
        self.assertEqual(body, b"plain body")
        self.assertIn(b"Amqp-Props:", headers)
        self.assertIn(b"Amqp-Routed-As: amqp." + x.encode() + b".orders.new", headers)
        sock.close()


class Consumers(Base):
    def test_competing_consumers_split_the_work_without_duplicates(self):
        q = self.queue()
        seen = {0: [], 1: []}
        stop = threading.Event()

        def worker(i):
            conn = pika.BlockingConnection(params())
            ch = conn.channel()
            ch.basic_qos(prefetch_count=1)

            def handle(channel, method, props, body):
                seen[i].append(body)
                time.sleep(0.005)
                channel.basic_ack(method.delivery_tag)

            ch.basic_consume(q, handle)
            while not stop.is_set():
                conn.process_data_events(time_limit=0.05)
            conn.close()

        threads = [threading.Thread(target=worker, args=(i,)) for i in (0, 1)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        for i in range(100):
            self.ch.basic_publish("", q, str(i).encode())
        deadline = time.monotonic() + 20
        while len(seen[0]) + len(seen[1]) < 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join()
        everything = seen[0] + seen[1]
        self.assertEqual(sorted(int(b) for b in everything), list(range(100)))
        self.assertGreater(len(seen[0]), 0)
        self.assertGreater(len(seen[1]), 0)

    def test_prefetch_is_never_exceeded(self):
        q = self.queue()
        self.ch.basic_qos(prefetch_count=3)
        for i in range(20):
            self.ch.basic_publish("", q, str(i).encode())
        _, got = collect(self.conn, self.ch, q, 20, timeout=1.5)
        self.assertEqual(len(got), 3)
        self.ch.basic_ack(got[0][0].delivery_tag)
        quiet(self.conn, 1.0)
        self.assertEqual(len(got), 4)
        self.ch.basic_ack(got[-1][0].delivery_tag, multiple=True)
        quiet(self.conn, 1.0)
        self.assertEqual(len(got), 7)
        self.assertEqual([int(b) for _, _, b in got], list(range(7)))

    def test_global_prefetch_bounds_the_channel(self):
        q1, q2 = self.queue(), self.queue()
        self.ch.basic_qos(prefetch_count=2, global_qos=True)
        for i in range(5):
            self.ch.basic_publish("", q1, b"a")
            self.ch.basic_publish("", q2, b"b")
        got = []
        self.ch.basic_consume(q1, lambda c, m, p, b: got.append(m))
        self.ch.basic_consume(q2, lambda c, m, p, b: got.append(m))
        quiet(self.conn, 2.0)
        self.assertEqual(len(got), 2)

    def test_consume_on_a_missing_queue_is_404(self):
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as caught:
            self.ch.basic_consume(name("missing"), lambda *a: None)
        self.assertEqual(caught.exception.reply_code, 404)

    def test_exclusive_consumer_refuses_a_second_one(self):
        q = self.queue()
        self.ch.basic_consume(q, lambda *a: None, exclusive=True)
        other = self.conn.channel()
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as caught:
            other.basic_consume(q, lambda *a: None)
        self.assertEqual(caught.exception.reply_code, 403)

    def test_queue_delete_sends_the_consumer_basic_cancel(self):
        q = self.queue()
        cancelled = []
        self.ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
        tag = self.ch.basic_consume(q, lambda *a: None)
        other = self.conn.channel()
        other.queue_delete(q)
        quiet(self.conn, 2.0)
        self.assertEqual(cancelled, [tag])


class NoAckBound(Base):
    def test_a_no_ack_consumer_that_does_not_read_leaves_the_backlog_in_the_queue(self):
        # No prefetch bounds a no-ack consumer (HIP-1326, "Acknowledgement, and what bounds a
        # consumer"); the socket does. A client that stops reading must leave the messages in the
        # queue, not in the adaptor's memory: once its output is backlogged (4 MiB plus what the
        # kernel buffers) the consumer stops pulling.
        q = self.queue()
        self.ch.confirm_delivery()
        body = b"x" * (16 * 1024)
        total = 2000  # 32 MiB
        for _ in range(total):
            self.ch.basic_publish("", q, body)
        stalled = pika.BlockingConnection(params())
        try:
            stalled.channel().basic_consume(q, lambda *a: None, auto_ack=True)
            time.sleep(3.0)  # the client reads nothing from here on
            left = self.ch.queue_declare(q, passive=True).method.message_count
            self.assertGreater(left, total // 4, f"only {left} of {total} left: the adaptor pulled the backlog")
        finally:
            stalled.close() if stalled.is_open else None


class Settlement(Base):
    def one(self, q, **kw):
        _, got = collect(self.conn, self.ch, q, 1, **kw)
        self.assertEqual(len(got), 1)
        return got[0]

    def test_unacked_comes_back_redelivered_after_channel_close(self):
        q = self.queue(durable=True, arguments={"x-queue-type": "quorum"})  # x-delivery-count is a quorum queue's
        self.ch.basic_publish("", q, b"m")
        first = self.one(q)
        self.assertFalse(first[0].redelivered)
        self.ch.close()
        self.ch = self.conn.channel()
        again = self.one(q)
        self.assertEqual(again[2], b"m")
        self.assertTrue(again[0].redelivered)
        # Exactly 1, as a quorum queue says: the requeue may first bounce through the closing
        # consumer's still-open pull request, which JetStream counts and the adaptor does not.
        self.assertEqual(again[1].headers.get("x-delivery-count"), 1)

    def test_unacked_comes_back_after_the_client_dies(self):
        q = self.queue()
        self.ch.basic_publish("", q, b"survivor")
        script = (
            "import pika,sys,time\n"
            f"c=pika.BlockingConnection(pika.ConnectionParameters('127.0.0.1',{CLOUD.amqp_port},heartbeat=0))\n"
            "ch=c.channel()\n"
            f"m,p,b=next(ch.consume('{q}',inactivity_timeout=10))\n"
            "print(b.decode(),flush=True)\n"
            "time.sleep(60)\n")
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
        try:
            self.assertEqual(child.stdout.readline().strip(), b"survivor")
        finally:
            child.send_signal(signal.SIGKILL)  # the kernel closes its socket, no AMQP close
            child.wait()
        again = self.one(q, timeout=10)
        self.assertEqual(again[2], b"survivor")
        self.assertTrue(again[0].redelivered)

    def test_the_next_consumer_gets_the_queue_in_order_after_a_cancel(self):
        # The cancelled consumer's pull request, with room for two more, stays open on the
        # server, which hands the next messages to the oldest request: they go back, and must
        # still reach the next consumer before the ones published after them.
        q = self.queue()
        for body in (b"m1", b"m2", b"m3"):
            self.ch.basic_publish("", q, body)
        self.ch.basic_qos(prefetch_count=5)
        tag, got = collect(self.conn, self.ch, q, 3)
        self.assertEqual([b for _, _, b in got], [b"m1", b"m2", b"m3"])
        for method, _, _ in got:
            self.ch.basic_ack(method.delivery_tag)
        self.ch.basic_cancel(tag)
        second = self.conn.channel()
        later = []
        second.basic_consume(q, lambda c, m, p, b: later.append(b), auto_ack=True)
        quiet(self.conn, 0.2)  # the new consumer is in place before the publishes
        expected = [f"m{i}".encode() for i in range(4, 11)]
        for body in expected:
            self.ch.basic_publish("", q, body)
        deadline = time.monotonic() + 10
        while len(later) < len(expected) and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.05)
        self.assertEqual(later, expected)

    def test_nack_with_requeue_redelivers(self):
        q = self.queue()
        self.ch.basic_publish("", q, b"n")
        got = []
        self.ch.basic_consume(q, lambda c, m, p, b: got.append((m, b)))
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.05)
        self.ch.basic_nack(got[0][0].delivery_tag, requeue=True)
        while len(got) < 2 and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.05)
        self.assertEqual(len(got), 2)
        self.assertTrue(got[1][0].redelivered)
        self.assertEqual(got[1][1], b"n")

    def test_reject_without_requeue_drops(self):
        q = self.queue()
        self.ch.basic_publish("", q, b"drop me")
        self.ch.basic_publish("", q, b"keep me")
        got = []

        def handle(c, m, p, b):
            got.append(b)
            if b == b"drop me":
                c.basic_reject(m.delivery_tag, requeue=False)
            else:
                c.basic_ack(m.delivery_tag)

        self.ch.basic_consume(q, handle)
        quiet(self.conn, 2.0)
        self.assertEqual(got, [b"drop me", b"keep me"])

    def test_recover_requeues_everything_outstanding(self):
        q = self.queue()
        for b in (b"1", b"2"):
            self.ch.basic_publish("", q, b)
        tag, got = collect(self.conn, self.ch, q, 2)
        self.assertEqual(len(got), 2)
        self.ch.basic_cancel(tag)
        self.ch.basic_recover(requeue=True)
        _, again = collect(self.conn, self.ch, q, 2)
        self.assertEqual(sorted(b for _, _, b in again), [b"1", b"2"])
        self.assertTrue(all(m.redelivered for m, _, _ in again))

    def test_unknown_delivery_tag_is_406(self):
        self.ch.basic_ack(99)
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as caught:
            self.ch.queue_declare(name("q"))
        self.assertEqual(caught.exception.reply_code, 406)
        self.assertIn("unknown delivery tag 99", caught.exception.reply_text)

    def test_basic_get_both_ways(self):
        q = self.queue()
        self.assertEqual(self.ch.basic_get(q), (None, None, None))
        for b in (b"g1", b"g2"):
            self.ch.basic_publish("", q, b)
        method, _, body = self.ch.basic_get(q, auto_ack=False)
        self.assertEqual(body, b"g1")
        self.assertEqual(method.message_count, 1)
        self.ch.basic_ack(method.delivery_tag)
        method, _, body = self.ch.basic_get(q, auto_ack=True)
        self.assertEqual(body, b"g2")
        self.assertEqual(self.ch.basic_get(q), (None, None, None))
        self.ch.close()
        self.ch = self.conn.channel()
        self.assertEqual(self.ch.basic_get(q), (None, None, None))


class Publishing(Base):
    def test_mandatory_unroutable_is_returned_and_still_confirmed(self):
        x = name("x")
        self.ch.exchange_declare(x, "direct")
        self.ch.confirm_delivery()
        with self.assertRaises(pika.exceptions.UnroutableError) as caught:
            self.ch.basic_publish(x, "nobody", b"back to you",
                                  pika.BasicProperties(message_id="r1"), mandatory=True)
        returned = caught.exception.messages[0]
        self.assertEqual(returned.method.reply_code, 312)
        self.assertEqual(returned.method.reply_text, "NO_ROUTE")
        self.assertEqual(returned.body, b"back to you")
        self.assertEqual(returned.properties.message_id, "r1")
        # The channel goes on, and a routable mandatory publish is simply confirmed.
        q = self.queue()
        self.ch.queue_bind(q, x, "somebody")
        self.ch.basic_publish(x, "somebody", b"ok", mandatory=True)

    def test_publish_to_a_missing_exchange_is_404(self):
        self.ch.basic_publish(name("nox"), "k", b"x")
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as caught:
            self.ch.queue_declare(name("q"))
        self.assertEqual(caught.exception.reply_code, 404)

    def test_immediate_is_540_naming_the_remedy(self):
        # pika refuses to send immediate itself; speak the wire through the channel impl.
        self.ch._impl._send_method(pika.spec.Basic.Publish(exchange="", routing_key="k", immediate=True),
                                   (pika.BasicProperties(), b"x"))
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as caught:
            self.ch.queue_declare(name("q"))
        self.assertEqual(caught.exception.reply_code, 540)
        self.assertIn("mandatory", caught.exception.reply_text)

    def test_a_key_with_whitespace_routes_to_nothing_and_mandatory_returns_it(self):
        # RabbitMQ routes such a key like any other; no binding of a direct or topic exchange
        # (nor a queue name) can hold it here, so it reaches nothing: dropped, or returned.
        x = name("x")
        self.ch.exchange_declare(x, "topic")
        q = self.queue()
        self.ch.queue_bind(q, x, "#")  # even a catch-all: "#" is spelled as subjects
        self.ch.confirm_delivery()
        returned = []
        self.ch.add_on_return_callback(lambda ch, method, props, body: returned.append((method.reply_code, body)))
        self.ch.basic_publish(x, "order placed", b"plain")
        with self.assertRaises(pika.exceptions.UnroutableError):
            self.ch.basic_publish(x, "order\tplaced", b"mandatory", mandatory=True)
        self.ch.basic_publish("", "no such queue", b"default exchange")
        self.conn.process_data_events(time_limit=0.2)
        self.assertEqual(returned, [(312, b"mandatory")])
        self.assertTrue(self.ch.is_open)
        self.assertEqual(self.ch.queue_declare(q, passive=True).method.message_count, 0)

    def test_wildcard_publish_key_is_406(self):
        x = name("x")
        self.ch.exchange_declare(x, "topic")
        self.ch.basic_publish(x, "a.*", b"x")
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as caught:
            self.ch.queue_declare(name("q"))
        self.assertEqual(caught.exception.reply_code, 406)

    def test_recover_async_is_540(self):
        self.ch._impl._send_method(pika.spec.Basic.RecoverAsync(requeue=True))
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as caught:
            self.ch.queue_declare(name("q"))
        self.assertEqual(caught.exception.reply_code, 540)
        self.assertIn("basic.recover", caught.exception.reply_text)

    def test_prefetch_size_is_540(self):
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as caught:
            self.ch.basic_qos(prefetch_size=1024)
        self.assertEqual(caught.exception.reply_code, 540)
        self.assertIn("message count", caught.exception.reply_text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
