"""RabbitMQ's queue semantics around cancel, close and requeue, through pika and, where
the order of frames on the wire is the point, a raw socket speaking pika's frame codec.

- After basic.cancel, channel close or connection close, every message the consumer had not had
  settled is at once visible to basic.get, to a passive declare's message_count and to the
  queue's other consumers; nothing arrives on a channel after its cancel-ok.
- Requeued messages (nack/reject with requeue, basic.recover, close) come back at once, ahead of
  messages never delivered, redelivered=true, in the order they were requeued; what one method
  requeues (nack multiple, recover, a channel's close) in queue order. A requeue never waits for an
  earlier delivery the client still holds.
- No requeued message waits for the ack wait, and none is delivered twice.

"At once" is checked without sleeping: the first passive declare or basic.get after the
client's own action must see it. Runs on the pinned nats-server and, as its .floor twin, on
the floor.
"""
import socket
import threading
import time
import unittest
import uuid

import pika
import pika.exceptions
import pika.frame
import pika.spec

import cloudtest

CLOUD = None


def setUpModule():
    global CLOUD
    CLOUD = unittest.enterModuleContext(cloudtest.Cloud())


def params():
    return pika.ConnectionParameters(host="127.0.0.1", port=CLOUD.amqp_port, heartbeat=0,
                                     blocked_connection_timeout=30)


def publish(ch, queue, bodies):
    for body in bodies:
        ch.basic_publish("", queue, body.encode(), pika.BasicProperties(delivery_mode=2))


def take(conn, ch, queue, count, prefetch, timeout=10.0):
    """Starts a consumer with `prefetch` and waits for `count` deliveries; returns (tag, [method, body])."""
    ch.basic_qos(prefetch_count=prefetch)
    got = []
    tag = ch.basic_consume(queue, lambda c, m, p, b: got.append((m, b.decode())))
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    return tag, got


def drain_by_get(ch, queue, limit=100):
    """basic.get until get-empty: [(body, redelivered)], acking each."""
    out = []
    for _ in range(limit):
        method, _props, body = ch.basic_get(queue)
        if method is None:
            return out
        out.append((body.decode(), method.redelivered))
        ch.basic_ack(method.delivery_tag)
    raise AssertionError(f"more than {limit} messages in {queue}")


def count(ch, queue):
    return ch.queue_declare(queue, passive=True).method.message_count


class Base(unittest.TestCase):
    def setUp(self):
        self.conn = pika.BlockingConnection(params())
        self.ch = self.conn.channel()
        self.q = f"sem-{uuid.uuid4().hex[:10]}"
        self.ch.queue_declare(self.q, durable=True)
        self.ch.confirm_delivery()  # every publish below is stored before the test goes on

    def tearDown(self):
        try:
            self.conn.close()
        except Exception:
            pass

    def other(self):
        conn = pika.BlockingConnection(params())
        self.addCleanup(lambda: conn.is_open and conn.close())
        return conn, conn.channel()


class AfterCancel(Base):
    def test_messages_the_client_requeues_after_cancel_are_counted_and_got_at_once(self):
        publish(self.ch, self.q, [f"m{i}" for i in range(1, 6)])
        cch = self.conn.channel()
        tag, got = take(self.conn, cch, self.q, 5, prefetch=10)
        self.assertEqual([b for _, b in got], ["m1", "m2", "m3", "m4", "m5"])
        cch.basic_cancel(tag)
        cch.basic_nack(delivery_tag=0, multiple=True, requeue=True)
        self.assertEqual(count(self.ch, self.q), 5)
        self.assertEqual(drain_by_get(self.ch, self.q), [(f"m{i}", True) for i in range(1, 6)])

    def test_get_ok_counts_what_remains_requeued_ones_included(self):
        publish(self.ch, self.q, ["a", "b", "c"])
        cch = self.conn.channel()
        tag, got = take(self.conn, cch, self.q, 2, prefetch=2)
        cch.basic_cancel(tag)
        cch.basic_nack(delivery_tag=0, multiple=True, requeue=True)  # a and b: requeued
        remaining = []
        for _ in range(3):
            method, _props, _body = self.ch.basic_get(self.q, auto_ack=True)
            remaining.append(method.message_count)
        self.assertEqual(remaining, [2, 1, 0])

    def test_a_cancelled_consumer_holds_nothing_published_after_its_cancel(self):
        publish(self.ch, self.q, ["a1", "a2", "a3"])
        cch = self.conn.channel()
        tag, got = take(self.conn, cch, self.q, 3, prefetch=10)
        for method, _ in got:
            cch.basic_ack(method.delivery_tag)
        cch.basic_cancel(tag)
        publish(self.ch, self.q, ["b1", "b2", "b3"])
        self.assertEqual(count(self.ch, self.q), 3)
        self.assertEqual(drain_by_get(self.ch, self.q), [("b1", False), ("b2", False), ("b3", False)])

    def test_unsettled_deliveries_stay_with_the_channel_after_cancel_and_can_be_acked(self):
        publish(self.ch, self.q, ["k1", "k2"])
        cch = self.conn.channel()
        tag, got = take(self.conn, cch, self.q, 2, prefetch=10)
        cch.basic_cancel(tag)
        self.assertEqual(count(self.ch, self.q), 0)  # still the client's, as in RabbitMQ
        for method, _ in got:
            cch.basic_ack(method.delivery_tag)
        self.assertEqual(count(self.ch, self.q), 0)
        self.assertEqual(drain_by_get(self.ch, self.q), [])


class AfterClose(Base):
    def assert_back_in_order(self, held, never):
        """`held` were delivered and not settled, `never` were never delivered: another
        connection sees them all at once, in queue order, the held ones redelivered."""
        _, och = self.other()
        self.assertEqual(count(och, self.q), len(held) + len(never))
        self.assertEqual(drain_by_get(och, self.q), [(b, True) for b in held] + [(b, False) for b in never])

    def test_channel_close_requeues_at_once_in_order_ahead_of_the_rest(self):
        publish(self.ch, self.q, [f"m{i}" for i in range(1, 9)])
        cch = self.conn.channel()
        _, got = take(self.conn, cch, self.q, 5, prefetch=5)
        self.assertEqual([b for _, b in got], ["m1", "m2", "m3", "m4", "m5"])
        cch.close()
        self.assert_back_in_order(["m1", "m2", "m3", "m4", "m5"], ["m6", "m7", "m8"])

    def test_channel_close_with_credit_left_requeues_in_order(self):
        # Prefetch 8 and five messages: the consumer still has three asked for on the bus when
        # its channel closes. Requeued while those requests lived, m1..m3 would go to them and
        # come back behind m4 and m5.
        publish(self.ch, self.q, [f"m{i}" for i in range(1, 6)])
        for _ in range(5):
            cch = self.conn.channel()
            _, got = take(self.conn, cch, self.q, 5, prefetch=8)
            self.assertEqual([b for _, b in got], [f"m{i}" for i in range(1, 6)])
            cch.close()
            self.assertEqual(count(self.ch, self.q), 5)
            peek = self.conn.channel()
            peek.basic_qos(prefetch_count=5)
            seen = []
            tag = peek.basic_consume(self.q, lambda c, m, p, b: seen.append(b.decode()))
            deadline = time.monotonic() + 5
            while len(seen) < 5 and time.monotonic() < deadline:
                self.conn.process_data_events(time_limit=0.05)
            self.assertEqual(seen, [f"m{i}" for i in range(1, 6)])
            peek.close()  # requeues them again, for the next round

    def test_connection_close_requeues_at_once_in_order_ahead_of_the_rest(self):
        publish(self.ch, self.q, [f"m{i}" for i in range(1, 7)])
        conn, cch = self.other()
        _, got = take(conn, cch, self.q, 4, prefetch=4)
        self.assertEqual([b for _, b in got], ["m1", "m2", "m3", "m4"])
        conn.close()
        self.assert_back_in_order(["m1", "m2", "m3", "m4"], ["m5", "m6"])

    def test_another_consumer_gets_what_a_closed_channel_held_at_once_in_order(self):
        publish(self.ch, self.q, ["m1", "m2", "m3"])
        cch = self.conn.channel()
        _, got = take(self.conn, cch, self.q, 3, prefetch=3)
        conn2, ch2 = self.other()
        ch2.basic_qos(prefetch_count=10)
        seen = []
        ch2.basic_consume(self.q, lambda c, m, p, b: seen.append((b.decode(), m.redelivered)), auto_ack=True)
        conn2.process_data_events(time_limit=0.2)
        self.assertEqual(seen, [])  # all three are the first channel's
        cch.close()
        publish(self.ch, self.q, ["m4"])
        deadline = time.monotonic() + 5
        while len(seen) < 4 and time.monotonic() < deadline:
            conn2.process_data_events(time_limit=0.05)
        self.assertEqual(seen, [("m1", True), ("m2", True), ("m3", True), ("m4", False)])


class AutoDeleteAndDeclareAgain(Base):
    """amqp091-go's reconnect example: an auto-delete queue's last consumer goes (cancel, or its
    channel's close), and the queue is declared again at once, on the same connection or another,
    and consumed. The declaration meets the deletion on its way to the bus: it ends with a queue
    that exists, never with a declare-ok the deletion then undoes (consume 404)."""

    def cycle(self, conn, q, end):
        ch = conn.channel()
        ch.queue_declare(q, auto_delete=True)
        tag = ch.basic_consume(q, lambda *a: None, auto_ack=True)
        end(ch, tag)
        again = conn.channel()
        again.queue_declare(q, auto_delete=True)
        again.basic_consume(q, lambda *a: None, auto_ack=True)  # 404 if the deletion came after
        again.close()

    def test_declared_again_after_the_last_consumer_is_cancelled(self):
        q = self.q + "-ad"
        for _ in range(30):
            self.cycle(self.conn, q, lambda ch, tag: ch.basic_cancel(tag))

    def test_declared_again_after_the_last_consumers_channel_closes(self):
        q = self.q + "-ad"
        for _ in range(30):
            self.cycle(self.conn, q, lambda ch, tag: ch.close())

    def test_declared_again_from_another_connection(self):
        q = self.q + "-ad"
        conn2, _ = self.other()
        for _ in range(30):
            ch = self.conn.channel()
            ch.queue_declare(q, auto_delete=True)
            tag = ch.basic_consume(q, lambda *a: None, auto_ack=True)
            ch.basic_cancel(tag)
            again = conn2.channel()
            again.queue_declare(q, auto_delete=True)
            again.basic_consume(q, lambda *a: None, auto_ack=True)
            again.close()
            ch.close()


class Requeue(Base):
    def test_nack_multiple_requeues_in_queue_order_ahead_of_never_delivered(self):
        publish(self.ch, self.q, [f"m{i}" for i in range(1, 8)])
        cch = self.conn.channel()
        cch.basic_qos(prefetch_count=4)
        seen = []

        def on_message(c, method, props, body):
            seen.append((body.decode(), method.redelivered))
            if len(seen) == 4:  # the first four, unsettled: all back to the queue
                c.basic_nack(delivery_tag=method.delivery_tag, multiple=True, requeue=True)
            elif len(seen) > 4:
                c.basic_ack(method.delivery_tag)

        cch.basic_consume(self.q, on_message)
        deadline = time.monotonic() + 10
        while len(seen) < 11 and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.05)
        self.assertEqual(seen, [(f"m{i}", False) for i in range(1, 5)] + [(f"m{i}", True) for i in range(1, 5)] +
                         [(f"m{i}", False) for i in range(5, 8)])

    def test_requeues_come_back_first_in_the_order_they_were_requeued(self):
        """Nacks of m3, m2 and m1, one by one and in that order, give them back in that order,
        ahead of m4, which was never delivered. (A RabbitMQ classic queue gives m1, m2, m3, m4; a
        3.10 quorum queue m4 first, then m3, m2, m1.)"""
        publish(self.ch, self.q, ["m1", "m2", "m3", "m4"])
        gch = self.conn.channel()
        tags = [gch.basic_get(self.q)[0].delivery_tag for _ in range(3)]
        for tag in reversed(tags):
            gch.basic_nack(tag, requeue=True)
        self.assertEqual(drain_by_get(self.ch, self.q),
                         [("m3", True), ("m2", True), ("m1", True), ("m4", False)])

    def test_rejects_then_the_channels_close_requeue_in_the_order_requeued(self):
        """A cancelled consumer's channel: m2 and m3 are rejected one by one, then the close
        requeues m1, which the client still held. They come back in the order requeued, m2, m3,
        m1: the rejects did not wait for m1. (RabbitMQ 3.10 gives m1, m2, m3, classic and quorum
        queue alike.)"""
        publish(self.ch, self.q, ["m1", "m2", "m3"])
        cch = self.conn.channel()
        tag, got = take(self.conn, cch, self.q, 3, prefetch=3)
        self.assertEqual([b for _, b in got], ["m1", "m2", "m3"])
        cch.basic_cancel(tag)  # nothing requeued goes back to this consumer
        cch.basic_reject(got[1][0].delivery_tag, requeue=True)
        cch.basic_reject(got[2][0].delivery_tag, requeue=True)
        cch.close()
        self.assertEqual(drain_by_get(self.ch, self.q), [("m2", True), ("m3", True), ("m1", True)])

    def test_recover_requeues_in_queue_order(self):
        publish(self.ch, self.q, [f"r{i}" for i in range(1, 5)])
        cch = self.conn.channel()
        tag, got = take(self.conn, cch, self.q, 4, prefetch=10)
        cch.basic_cancel(tag)
        cch.basic_recover(requeue=True)
        self.assertEqual(count(self.ch, self.q), 4)
        self.assertEqual(drain_by_get(self.ch, self.q), [(f"r{i}", True) for i in range(1, 5)])

    def test_reject_requeue_comes_back_before_the_rest_every_time(self):
        publish(self.ch, self.q, [f"m{i}" for i in range(1, 4)])
        for round_ in range(20):
            method, _props, body = self.ch.basic_get(self.q)
            self.assertEqual(body, b"m1", f"round {round_}")
            self.assertEqual(method.redelivered, round_ > 0)
            self.ch.basic_reject(method.delivery_tag, requeue=True)
        self.assertEqual(drain_by_get(self.ch, self.q), [("m1", True), ("m2", False), ("m3", False)])


class RequeueWhileAnEarlierOneIsHeld(Base):
    """pika's acceptance tests TestBasicReject and TestBasicNack: m1 and m2 got on one channel, m1
    left unacknowledged, m2 requeued. As in a RabbitMQ classic queue (what pika's suite declares),
    m2 is the very next message read, by a get or a consumer, ahead of m3 published before the
    requeue: nothing waits for m1 to be settled."""

    @staticmethod
    def reject(ch, tag):
        ch.basic_reject(tag, requeue=True)

    @staticmethod
    def nack(ch, tag):
        ch.basic_nack(tag, multiple=False, requeue=True)

    def hold_m1_and_requeue_m2(self, requeue, bodies):
        """Publishes `bodies` (m1, m2, ...), gets m1 and m2 on self.ch and requeues m2 there;
        m1's delivery tag."""
        publish(self.ch, self.q, bodies)
        m1, _, body1 = self.ch.basic_get(self.q)
        m2, _, body2 = self.ch.basic_get(self.q)
        self.assertEqual((body1, body2), (b"m1", b"m2"))
        requeue(self.ch, m2.delivery_tag)
        return m1.delivery_tag

    def next_get(self, what):
        method, _props, body = self.ch.basic_get(self.q)
        self.assertIsNotNone(method, f"{what}: get-empty")
        return body.decode(), method.redelivered, method.delivery_tag

    def check_the_next_get_is_m2(self, requeue):
        for round_ in range(5):
            m1 = self.hold_m1_and_requeue_m2(requeue, ["m1", "m2"])
            self.assertEqual(count(self.ch, self.q), 1, f"round {round_}")
            body, redelivered, m2 = self.next_get(f"round {round_}, the get right after the requeue")
            self.assertEqual((body, redelivered), ("m2", True), f"round {round_}")
            self.ch.basic_ack(m1)
            self.ch.basic_ack(m2)
            self.assertEqual(count(self.ch, self.q), 0, f"round {round_}")

    def check_m3_does_not_overtake_m2(self, requeue):
        self.hold_m1_and_requeue_m2(requeue, ["m1", "m2", "m3"])
        self.assertEqual(count(self.ch, self.q), 2)
        self.assertEqual(self.next_get("the get right after the requeue")[:2], ("m2", True))
        self.assertEqual(self.next_get("the get after m2")[:2], ("m3", False))
        self.assertEqual(self.ch.basic_get(self.q), (None, None, None))

    def check_a_consumer_gets_m2_first(self, requeue):
        self.hold_m1_and_requeue_m2(requeue, ["m1", "m2", "m3"])
        cch = self.conn.channel()
        _, got = take(self.conn, cch, self.q, 2, prefetch=2)
        self.assertEqual([(b, m.redelivered) for m, b in got], [("m2", True), ("m3", False)])
        self.assertEqual(count(self.ch, self.q), 0)  # m1 is still self.ch's

    def test_after_a_reject_the_next_get_is_the_requeued_one(self):
        self.check_the_next_get_is_m2(self.reject)

    def test_after_a_nack_the_next_get_is_the_requeued_one(self):
        self.check_the_next_get_is_m2(self.nack)

    def test_after_a_reject_a_message_queued_behind_does_not_overtake_the_requeued_one(self):
        self.check_m3_does_not_overtake_m2(self.reject)

    def test_after_a_nack_a_message_queued_behind_does_not_overtake_the_requeued_one(self):
        self.check_m3_does_not_overtake_m2(self.nack)

    def test_after_a_reject_a_consumer_with_prefetch_2_gets_the_requeued_one_first(self):
        self.check_a_consumer_gets_m2_first(self.reject)

    def test_after_a_nack_a_consumer_with_prefetch_2_gets_the_requeued_one_first(self):
        self.check_a_consumer_gets_m2_first(self.nack)


class CountsFollowTheChannel(Base):
    def test_a_get_right_after_a_publish_on_the_channel_gets_it_every_time(self):
        # nats-server acknowledges a stored publish before the queue's consumer has counted it;
        # the get that follows must still find the message.
        ch = self.conn.channel()
        for i in range(300):
            ch.basic_publish("", self.q, f"p{i}".encode())
            method, _props, body = ch.basic_get(self.q, auto_ack=True)
            self.assertEqual(body, f"p{i}".encode(), f"round {i}")
        self.assertEqual(ch.basic_get(self.q), (None, None, None))

    def test_a_declare_or_purge_after_publishes_on_the_channel_counts_them(self):
        ch = self.conn.channel()  # no confirms: the publishes are still on their way
        for _ in range(3):
            for _ in range(50):
                ch.basic_publish("", self.q, b"x")
            self.assertEqual(ch.queue_declare(self.q, passive=True).method.message_count, 50)
            self.assertEqual(ch.queue_purge(self.q).method.message_count, 50)
            self.assertEqual(count(ch, self.q), 0)


def frames(sock):
    """Decoded frames from a socket, as a generator (pika's codec)."""
    buffered = b""
    while True:
        used, frame = pika.frame.decode_frame(buffered)
        if frame is not None:
            buffered = buffered[used:]
            yield frame
            continue
        chunk = sock.recv(65536)
        if not chunk:
            return
        buffered += chunk


class NothingAfterCancelOk(Base):
    def test_no_delivery_follows_cancel_ok_while_messages_keep_coming(self):
        # A raw socket: the question is the order of frames on the wire.
        sock = socket.create_connection(("127.0.0.1", CLOUD.amqp_port), timeout=10)
        self.addCleanup(sock.close)
        sock.sendall(b"AMQP\x00\x00\x09\x01")
        incoming = frames(sock)

        def expect(cls):
            for frame in incoming:
                if isinstance(frame, pika.frame.Method) and isinstance(frame.method, cls):
                    return frame.method
            raise AssertionError(f"the connection ended before {cls.NAME}")

        def send(channel, method):
            sock.sendall(pika.frame.Method(channel, method).marshal())

        expect(pika.spec.Connection.Start)
        send(0, pika.spec.Connection.StartOk(client_properties={}, mechanism="PLAIN",
                                             response="\0guest\0guest", locale="en_US"))
        tune = expect(pika.spec.Connection.Tune)
        send(0, pika.spec.Connection.TuneOk(channel_max=tune.channel_max, frame_max=tune.frame_max, heartbeat=0))
        send(0, pika.spec.Connection.Open(virtual_host="/"))
        expect(pika.spec.Connection.OpenOk)
        send(1, pika.spec.Channel.Open())
        expect(pika.spec.Channel.OpenOk)

        stop = threading.Event()

        def publisher():
            with pika.BlockingConnection(params()) as conn:
                ch = conn.channel()
                i = 0
                while not stop.is_set():
                    ch.basic_publish("", self.q, f"p{i}".encode())
                    i += 1
                    if i % 50 == 0:
                        conn.process_data_events(time_limit=0)
        feeder = threading.Thread(target=publisher, daemon=True)
        feeder.start()
        self.addCleanup(lambda: (stop.set(), feeder.join(10)))

        for round_ in range(10):
            tag = f"c{round_}"
            send(1, pika.spec.Basic.Qos(prefetch_count=50))
            expect(pika.spec.Basic.QosOk)
            send(1, pika.spec.Basic.Consume(queue=self.q, consumer_tag=tag, no_ack=True))
            expect(pika.spec.Basic.ConsumeOk)
            for frame in incoming:  # wait for deliveries to be flowing
                if isinstance(frame, pika.frame.Method) and isinstance(frame.method, pika.spec.Basic.Deliver):
                    break
            send(1, pika.spec.Basic.Cancel(consumer_tag=tag))
            cancelled = False
            for frame in incoming:
                if not isinstance(frame, pika.frame.Method):
                    continue
                if isinstance(frame.method, pika.spec.Basic.CancelOk):
                    cancelled = True
                    break
                if isinstance(frame.method, pika.spec.Basic.Deliver):
                    self.assertEqual(frame.method.consumer_tag, tag)
            self.assertTrue(cancelled)
            # A synchronous round trip after cancel-ok: anything the consumer still had would
            # be on the wire before its answer.
            send(1, pika.spec.Basic.Qos(prefetch_count=50))
            for frame in incoming:
                if isinstance(frame, pika.frame.Method):
                    self.assertNotIsInstance(frame.method, pika.spec.Basic.Deliver,
                                             f"a delivery for {tag} after its cancel-ok")
                    if isinstance(frame.method, pika.spec.Basic.QosOk):
                        break


if __name__ == "__main__":
    unittest.main(verbosity=2)
