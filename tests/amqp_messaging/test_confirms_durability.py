"""Publisher confirms at volume, and nothing lost across a SIGKILL of the adaptor.

A real `cloud` per test (the durability test restarts it on the same store) and pika's
asynchronous connection, so publishes are pipelined: the client never waits for a confirm
before the next publish.
"""
import os
import signal
import socket
import time
import unittest
import uuid

import pika
import pika.frame
import pika.spec

import cloudtest


def params(cloud):
    return pika.ConnectionParameters(host="127.0.0.1", port=cloud.amqp_port, heartbeat=0,
                                     blocked_connection_timeout=60)


def durable_queue(cloud, prefix):
    """Declares a durable queue of a fresh name (one connection, closed again); returns the name."""
    queue = f"{prefix}-{uuid.uuid4().hex[:10]}"
    with pika.BlockingConnection(params(cloud)) as conn:
        conn.channel().queue_declare(queue, durable=True)
    return queue


def publish_with_confirms(cloud, queue, count, timeout=120.0, on_confirm=None):
    """Publishes `count` persistent messages "0".."count-1" to the default exchange without
    waiting in between; returns (acked sequence numbers, nacked ones, protocol errors).
    `on_confirm(acked)`, when given, runs after each confirm with the number acked so far."""
    unconfirmed = set(range(1, count + 1))
    acked, nacked, errors = set(), set(), []
    conn_box = {}

    def settle(frame):
        m = frame.method
        kind = acked if isinstance(m, pika.spec.Basic.Ack) else nacked
        if m.multiple:
            covered = {t for t in unconfirmed if t <= m.delivery_tag}
        else:
            if m.delivery_tag not in unconfirmed:
                errors.append(f"tag {m.delivery_tag} confirmed twice or never published")
            covered = {m.delivery_tag} & unconfirmed
        unconfirmed.difference_update(covered)
        kind.update(covered)
        if on_confirm:
            on_confirm(len(acked))
        if not unconfirmed:
            conn_box["conn"].close()

    def on_selected(_frame):
        ch = conn_box["ch"]
        props = pika.BasicProperties(delivery_mode=2)
        for i in range(count):
            ch.basic_publish("", queue, str(i).encode(), props)

    def on_channel(ch):
        conn_box["ch"] = ch
        # Closing the connection when every confirm arrived closes the channel too (200); only
        # a close by the server is an error.
        ch.add_on_close_callback(
            lambda c, reason: isinstance(reason, pika.exceptions.ChannelClosedByBroker)
            and (errors.append(f"channel closed by the server: {reason}"), conn_box["conn"].close()))
        ch.confirm_delivery(settle, callback=on_selected)

    def on_open(conn):
        conn.channel(on_open_callback=on_channel)

    conn = pika.SelectConnection(params(cloud), on_open_callback=on_open,
                                 on_open_error_callback=lambda c, e: errors.append(str(e)),
                                 on_close_callback=lambda c, r: c.ioloop.stop())
    conn_box["conn"] = conn
    conn.ioloop.call_later(timeout, lambda: (errors.append("timed out"), conn.close()))
    conn.ioloop.start()
    return acked, nacked, errors


class Confirms(unittest.TestCase):
    def setUp(self):
        self.cloud = self.enterContext(cloudtest.Cloud())

    def test_confirms_for_ten_thousand_pipelined_publishes_all_arrive(self):
        q = durable_queue(self.cloud, "q")
        acked, nacked, errors = publish_with_confirms(self.cloud, q, 10_000)
        self.assertEqual(errors, [])
        self.assertEqual(nacked, set())
        self.assertEqual(acked, set(range(1, 10_001)))
        with pika.BlockingConnection(params(self.cloud)) as conn:
            declared = conn.channel().queue_declare(q, passive=True)
            self.assertEqual(declared.method.message_count, 10_000)


class Durability(unittest.TestCase):
    def setUp(self):
        self.cloud = self.enterContext(cloudtest.Cloud())

    def test_nothing_confirmed_is_lost_and_nothing_acked_returns_across_a_sigkill(self):
        q = durable_queue(self.cloud, "durable")
        total = 10_000
        acked_seqs, nacked, errors = publish_with_confirms(self.cloud, q, total)
        self.assertEqual(errors, [])
        self.assertEqual(nacked, set())
        confirmed = {str(s - 1) for s in acked_seqs}  # sequence n carried body n-1
        self.assertEqual(len(confirmed), total)

        # Consume: ack the first 3000, hold the next 500 unacked, then kill the adaptor.
        acked_bodies = set()
        conn = pika.BlockingConnection(params(self.cloud))
        ch = conn.channel()
        ch.basic_qos(prefetch_count=500)
        held = []
        for method, _props, body in ch.consume(q, inactivity_timeout=30):
            self.assertIsNotNone(method, "the consumer stalled before the crash point")
            if len(acked_bodies) < 3000:
                ch.basic_ack(method.delivery_tag)
                acked_bodies.add(body.decode())
            else:
                held.append(body.decode())
                if len(held) == 500:
                    break
        # A synchronous round trip after the acks: the channel handled them (in order) and
        # handed them to the bus; give the bus a moment to take them before the kill.
        ch.basic_qos(prefetch_count=500)
        time.sleep(1.0)
        self.cloud.stop(signal.SIGKILL)  # no shutdown code runs in the adaptor
        try:
            conn.close()
        except Exception:
            pass

        self.cloud.restart()
        received = set()
        with pika.BlockingConnection(params(self.cloud)) as conn2:
            ch2 = conn2.channel()
            ch2.basic_qos(prefetch_count=1000)
            for method, _props, body in ch2.consume(q, inactivity_timeout=8):
                if method is None:
                    break
                received.add(body.decode())
                ch2.basic_ack(method.delivery_tag)
        self.assertEqual(received & acked_bodies, set(), "acked messages came back")
        missing = confirmed - acked_bodies - received
        self.assertEqual(missing, set(), f"{len(missing)} confirmed messages were lost")

    def test_the_embedded_bus_dying_loses_nothing_confirmed_and_keeps_the_client_connected(self):
        q = durable_queue(self.cloud, "bus-dies")
        total = 2000
        acked_seqs, nacked, errors = publish_with_confirms(self.cloud, q, total)
        self.assertEqual((errors, nacked), ([], set()))
        confirmed = {str(s - 1) for s in acked_seqs}

        conn = pika.BlockingConnection(params(self.cloud))
        ch = conn.channel()
        ch.basic_qos(prefetch_count=100)
        received = set()
        consuming = ch.consume(q, inactivity_timeout=60)
        for method, _props, body in consuming:
            self.assertIsNotNone(method, "the consumer stalled before the bus died")
            received.add(body.decode())
            ch.basic_ack(method.delivery_tag)
            if len(received) == 500:
                break

        [pid] = self.cloud.nats_children()
        os.kill(pid, signal.SIGKILL)

        def bus_back():
            children = self.cloud.nats_children()
            _, body = self.cloud.get("/v1/health")
            return children and children != [pid] and body["degraded"] == []
        self.assertTrue(cloudtest.wait_until(bus_back, 60), self.cloud.log)

        # The same consumer goes on: what was confirmed arrives (some twice, at least once).
        for method, _props, body in consuming:
            self.assertIsNotNone(method, f"the consumer stalled after the bus came back:\n{self.cloud.log}")
            received.add(body.decode())
            ch.basic_ack(method.delivery_tag)
            if confirmed <= received:
                break
        # And the same connection publishes with confirms again, to the same consumer.
        publisher = conn.channel()
        publisher.confirm_delivery()
        for i in range(50):
            publisher.basic_publish("", q, f"after-{i}".encode(), pika.BasicProperties(delivery_mode=2))
        after = {f"after-{i}" for i in range(50)}
        for method, _props, body in consuming:
            self.assertIsNotNone(method, "the consumer stalled on the publishes after the restart")
            received.add(body.decode())
            ch.basic_ack(method.delivery_tag)
            if after <= received:
                break
        self.assertTrue(conn.is_open)
        conn.close()


def raw_channel(port):
    """A connection with channel 1 open, as a plain socket speaking pika's frame codec: the
    test decides what is sent and sees how much of it the adaptor takes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"AMQP\x00\x00\x09\x01")
    buffered = b""

    def expect(method_class):
        nonlocal buffered
        while True:
            used, frame = pika.frame.decode_frame(buffered)
            if frame is not None:
                buffered = buffered[used:]
                if isinstance(frame, pika.frame.Method) and isinstance(frame.method, method_class):
                    return frame.method
                continue
            chunk = sock.recv(65536)
            if not chunk:
                raise AssertionError(f"the adaptor closed the connection before {method_class.NAME}")
            buffered += chunk

    expect(pika.spec.Connection.Start)
    sock.sendall(pika.frame.Method(0, pika.spec.Connection.StartOk(
        client_properties={}, mechanism="PLAIN", response="\0guest\0guest", locale="en_US")).marshal())
    tune = expect(pika.spec.Connection.Tune)
    sock.sendall(pika.frame.Method(0, pika.spec.Connection.TuneOk(
        channel_max=tune.channel_max, frame_max=tune.frame_max, heartbeat=0)).marshal())
    sock.sendall(pika.frame.Method(0, pika.spec.Connection.Open(virtual_host="/")).marshal())
    expect(pika.spec.Connection.OpenOk)
    sock.sendall(pika.frame.Method(1, pika.spec.Channel.Open()).marshal())
    expect(pika.spec.Channel.OpenOk)
    return sock


class FlowControl(unittest.TestCase):
    """RabbitMQ's flow control: while the bus does not answer, a publisher is held back (the
    adaptor stops reading its socket) instead of its publishes piling up in the adaptor."""

    def setUp(self):
        self.cloud = self.enterContext(cloudtest.Cloud())

    def test_a_publisher_is_held_back_while_the_bus_does_not_answer(self):
        q = durable_queue(self.cloud, "flow")
        bus = self.cloud.nats_children()
        self.assertTrue(bus, "no embedded nats-server found for this cloud")
        sock = raw_channel(self.cloud.amqp_port)
        body = b"x" * 100
        publish = (pika.frame.Method(1, pika.spec.Basic.Publish(exchange="", routing_key=q)).marshal()
                   + pika.frame.Header(1, len(body), pika.spec.BasicProperties(delivery_mode=2)).marshal()
                   + pika.frame.Body(1, body).marshal())
        burst = publish * 1000
        limit = 200 * 1024 * 1024  # what an adaptor without flow control would swallow in seconds
        taken = 0
        for pid in bus:
            cloudtest.sigstop(pid)
        try:
            # Publish as fast as the socket takes it, for at most 6 s (well inside the bus
            # client's 30 s publish timeout), until nothing more is taken for 1.5 s.
            sock.settimeout(1.5)
            view, offset = memoryview(burst), 0
            deadline = time.monotonic() + 6
            while taken < limit and time.monotonic() < deadline:
                try:
                    sent = sock.send(view[offset:])
                except socket.timeout:
                    break
                taken += sent
                offset = (offset + sent) % len(burst)
        finally:
            for pid in bus:
                os.kill(pid, signal.SIGCONT)
        # 8 MiB of publishes waiting for the bus (at ~360 bytes each, publish_cap), plus what
        # the kernel buffers on both sides of the two sockets.
        self.assertLess(taken, 48 * 1024 * 1024,
                        f"the adaptor took {taken} octets of publishes while the bus was stopped")
        self.assertGreater(taken, 1024 * 1024, "the adaptor took almost nothing: was it reading at all?")

        # The bus is back: what was held goes on, and the adaptor serves new work as before.
        sock.settimeout(None)
        sock.close()
        with pika.BlockingConnection(params(self.cloud)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.basic_publish("", q, b"after", pika.BasicProperties(delivery_mode=2))
            self.assertGreater(ch.queue_declare(q, passive=True).method.message_count, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
