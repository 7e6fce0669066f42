"""Topology through a stock client (HIP-1326: "Where it sits", "Exchanges, queues and bindings
become subjects, consumers and filters", "What is not implemented, and how it says so", "Two
facts a single process cannot answer for the fleet"): python3-pika against the real `cloud`
(embedded nats-server, or an existing one for replicas and restarts).

Run by ctest (cloud_python_test): /usr/bin/python3 with tests/support on PYTHONPATH.
"""
import os
import signal
import threading
import time
import unittest
import uuid

import pika.exceptions

import cloudtest
from pikatest import connect, refused


def eventually(predicate, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def exists(conn, declare_passive):
    """declare_passive(channel) on a fresh channel: True = declare-ok, False = 404."""
    ch = conn.channel()
    try:
        declare_passive(ch)
        ch.close()
        return True
    except pika.exceptions.ChannelClosedByBroker as e:
        if e.reply_code != 404:
            raise
        return False


def queue_exists(conn, name):
    return exists(conn, lambda ch: ch.queue_declare(queue=name, passive=True))


def exchange_exists(conn, name):
    return exists(conn, lambda ch: ch.exchange_declare(exchange=name, passive=True))


class OneCloud(cloudtest.OneCloudTest):
    def setUp(self):
        self.conn = connect(self.cloud)
        self.ch = self.conn.channel()

    def tearDown(self):
        if self.conn.is_open:
            self.conn.close()

    def test_passive_declare_of_a_missing_queue_is_404_and_the_connection_survives(self):
        refused(self, lambda: self.ch.queue_declare(queue="absent-q", passive=True), 404,
                "no queue 'absent-q' in vhost '/'")
        refused(self, lambda: self.conn.channel().exchange_declare(exchange="absent-x", passive=True),
                404, "no exchange 'absent-x' in vhost '/'")
        self.assertTrue(self.conn.is_open)
        ch = self.conn.channel()
        self.assertEqual(ch.queue_declare(queue="present-q").method.queue, "present-q")

    def test_a_dotted_name_is_refused_naming_it(self):
        refused(self, lambda: self.ch.queue_declare(queue="orders.eu"), 406, "orders.eu")
        refused(self, lambda: self.conn.channel().exchange_declare(exchange="a.b", exchange_type="topic"),
                406, "a.b")

    def test_exclusive_queue_is_locked_for_other_connections(self):
        self.ch.queue_declare(queue="excl-q", exclusive=True)
        other = connect(self.cloud)
        try:
            refused(self, lambda: other.channel().queue_declare(queue="excl-q", exclusive=True), 405, "excl-q")
            refused(self, lambda: other.channel().queue_bind(queue="excl-q", exchange="amq.direct", routing_key="k"),
                    405, "excl-q")
            refused(self, lambda: other.channel().basic_consume(queue="excl-q", on_message_callback=lambda *a: None),
                    405, "excl-q")
            refused(self, lambda: other.channel().queue_purge(queue="excl-q"), 405, "excl-q")
            refused(self, lambda: other.channel().queue_delete(queue="excl-q"), 405, "excl-q")
            # The owner still uses it freely; when the owner goes, the queue goes.
            self.ch.queue_bind(queue="excl-q", exchange="amq.direct", routing_key="k")
            self.conn.close()
            self.assertTrue(eventually(lambda: not queue_exists(other, "excl-q")))
        finally:
            other.close()

    def test_auto_delete_queue_goes_with_its_last_consumer(self):
        self.ch.queue_declare(queue="auto-q", auto_delete=True)
        first = self.ch.basic_consume(queue="auto-q", on_message_callback=lambda *a: None)
        second = self.ch.basic_consume(queue="auto-q", on_message_callback=lambda *a: None)
        self.ch.basic_cancel(first)
        self.assertTrue(queue_exists(self.conn, "auto-q"))  # one consumer left
        self.ch.basic_cancel(second)
        self.assertTrue(eventually(lambda: not queue_exists(self.conn, "auto-q")))

    def test_redeclare_with_other_flags_is_406_naming_both(self):
        self.ch.queue_declare(queue="flags-q", durable=True)
        refused(self, lambda: self.ch.queue_declare(queue="flags-q", durable=False), 406,
                "durable", "received 'false' but current is 'true'")
        ch = self.conn.channel()
        ch.exchange_declare(exchange="flags-x", exchange_type="direct")
        refused(self, lambda: ch.exchange_declare(exchange="flags-x", exchange_type="topic"), 406,
                "received 'topic' but current is 'direct'")

    def test_queue_delete_if_unused_and_if_empty(self):
        self.ch.queue_declare(queue="del-q")
        tag = self.ch.basic_consume(queue="del-q", on_message_callback=lambda *a: None)
        refused(self, lambda: self.ch.queue_delete(queue="del-q", if_unused=True), 406, "in use")
        ch = self.conn.channel()
        ch.confirm_delivery()
        ch.queue_declare(queue="full-q")
        ch.basic_publish(exchange="", routing_key="full-q", body=b"one")
        refused(self, lambda: ch.queue_delete(queue="full-q", if_empty=True), 406, "not empty")
        ch = self.conn.channel()
        self.assertEqual(ch.queue_delete(queue="full-q").method.message_count, 1)
        self.assertEqual(ch.queue_delete(queue="never-declared-q").method.message_count, 0)
        del tag

    def test_an_exchange_type_nobody_defines_is_503_on_the_connection_as_in_rabbitmq(self):
        for kind in ("ZZwwInvalid", "x-consistent-hash", "Topic"):
            conn = connect(self.cloud)
            with self.assertRaises(pika.exceptions.ConnectionClosedByBroker) as caught:
                conn.channel().exchange_declare(exchange="odd-x", exchange_type=kind)
            self.assertEqual(caught.exception.reply_code, 503)
            self.assertEqual(caught.exception.reply_text,
                             f"COMMAND_INVALID - unknown exchange type '{kind}'; declare it with type direct, "
                             "fanout or topic")

    def test_purge_answers_the_count(self):
        self.ch.confirm_delivery()
        self.ch.exchange_declare(exchange="purge-x", exchange_type="topic")
        self.ch.queue_declare(queue="purge-q")
        self.ch.queue_bind(queue="purge-q", exchange="purge-x", routing_key="a.#")
        # The queue's consumer filters exactly its binding: "b.x" is not counted.
        for key in ("a", "a.b", "a.b.c", "b.x"):
            self.ch.basic_publish(exchange="purge-x", routing_key=key, body=b"m")
        self.assertEqual(self.ch.queue_purge(queue="purge-q").method.message_count, 3)
        self.assertEqual(self.ch.queue_declare(queue="purge-q", passive=True).method.message_count, 0)

    def test_queue_arguments_that_change_delivery_are_540_and_hints_are_accepted(self):
        # Dead-lettering, the delivery limit, length limits and a single active consumer are honoured
        # (tests/amqp_messaging/test_dead_letter.py, test_length_limit.py, test_single_active_consumer.py).
        for argument, value, remedy in (("x-max-length-bytes", 1024, "not their bytes"),
                                        ("x-max-priority", 5, "priority"),
                                        ("x-max-age", "1h", "stream queue")):
            ch = self.conn.channel()
            refused(self, lambda: ch.queue_declare(queue="args-q", arguments={argument: value}), 540,
                    argument, remedy)
        ch = self.conn.channel()
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as caught:
            ch.queue_declare(queue="args-q", passive=True)
        self.assertEqual(caught.exception.reply_code, 404, "a refused declare created nothing")
        # A channel exception's text is "<NAME> - <sentence>", the prefix written once.
        self.assertEqual(caught.exception.reply_text,
                         "NOT_FOUND - no queue 'args-q' in vhost '/'")
        ch = self.conn.channel()
        refused(self, lambda: ch.queue_declare(queue="args-q", arguments={"x-queue-type": "lazy"}), 406,
                "PRECONDITION_FAILED - invalid arg 'x-queue-type' for queue 'args-q' in vhost '/'")
        ch = self.conn.channel()
        # Durable: RabbitMQ refuses a non-durable quorum queue (tests/amqp_messaging/test_quorum_rabbitmq.py).
        ok = ch.queue_declare(queue="args-hints-q", durable=True,
                              arguments={"x-queue-type": "quorum", "x-expires": 60000,
                                         "x-single-active-consumer": False})
        self.assertEqual(ok.method.queue, "args-hints-q")

    def test_headers_exchange_is_540_with_the_remedy_and_a_new_channel_works(self):
        refused(self, lambda: self.ch.exchange_declare(exchange="hx", exchange_type="headers"), 540,
                "no subject")
        ch = self.conn.channel()
        ch.queue_declare(queue="after-540")
        refused(self, lambda: ch.queue_bind(queue="after-540", exchange="amq.topic", routing_key="a.#.b"),
                540, "last")
        ch = self.conn.channel()
        ch.exchange_declare(exchange="after-540-x", exchange_type="fanout")

    def test_reserved_amq_names_are_403_and_standard_exchanges_exist(self):
        refused(self, lambda: self.ch.exchange_declare(exchange="amq.custom", exchange_type="direct"), 403,
                "amq.")
        ch = self.conn.channel()
        for name in ("amq.direct", "amq.fanout", "amq.topic"):
            ch.exchange_declare(exchange=name, passive=True)
        refused(self, lambda: ch.exchange_delete(exchange="amq.topic"), 403, "amq.topic")

    def test_exchange_delete_honours_if_unused(self):
        self.ch.exchange_declare(exchange="used-x", exchange_type="fanout")
        self.ch.queue_declare(queue="used-q")
        self.ch.queue_bind(queue="used-q", exchange="used-x")
        refused(self, lambda: self.ch.exchange_delete(exchange="used-x", if_unused=True), 406, "in use")
        ch = self.conn.channel()
        ch.queue_unbind(queue="used-q", exchange="used-x")
        ch.exchange_delete(exchange="used-x", if_unused=True)
        ch.exchange_delete(exchange="used-x")  # absent: RabbitMQ answers delete-ok

    def test_auto_delete_exchange_goes_with_its_last_binding_and_only_then(self):
        # Celery/kombu declare auto_delete exchanges; RabbitMQ deletes one when its last
        # binding goes (unbind, or the bound queue's deletion), never for having had none.
        self.ch.exchange_declare(exchange="ad-x", exchange_type="direct", auto_delete=True)
        self.ch.queue_declare(queue="ad-q1")
        self.ch.queue_declare(queue="ad-q2")
        self.ch.queue_unbind(queue="ad-q1", exchange="ad-x", routing_key="none")
        self.assertTrue(exchange_exists(self.conn, "ad-x"))
        self.ch.queue_bind(queue="ad-q1", exchange="ad-x", routing_key="k1")
        self.ch.queue_bind(queue="ad-q2", exchange="ad-x", routing_key="k2")
        self.ch.queue_unbind(queue="ad-q1", exchange="ad-x", routing_key="k1")
        self.assertTrue(exchange_exists(self.conn, "ad-x"))
        self.ch.queue_unbind(queue="ad-q2", exchange="ad-x", routing_key="k2")
        self.assertFalse(exchange_exists(self.conn, "ad-x"))
        self.ch.exchange_declare(exchange="ad-x", exchange_type="fanout", auto_delete=True)
        self.ch.queue_bind(queue="ad-q1", exchange="ad-x")
        self.ch.queue_delete(queue="ad-q1")
        self.assertFalse(exchange_exists(self.conn, "ad-x"))

    def test_transactions_and_flow_are_refused_with_remedies(self):
        refused(self, lambda: self.ch.tx_select(), 540, "confirm.select")
        refused(self, lambda: self.conn.channel().flow(False), 540, "basic.qos")
        self.assertTrue(self.conn.channel().flow(True))


class Replicas(unittest.TestCase):
    """Two `cloud` processes on one bus: the second dials the first's nats-server."""

    @classmethod
    def setUpClass(cls):
        cls.a = cloudtest.Cloud()
        cls.a.__enter__()
        assert cls.a.pubsub_url, cls.a.log
        cls.b = cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": cls.a.pubsub_url})
        cls.b.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.b.__exit__(None, None, None)
        cls.a.__exit__(None, None, None)

    def test_declarations_on_a_are_visible_on_b_at_once(self):
        ca, cb = connect(self.a), connect(self.b)
        try:
            cha = ca.channel()
            cha.exchange_declare(exchange="rep-x", exchange_type="topic", durable=True)
            cha.queue_declare(queue="rep-q", durable=True)
            cha.queue_bind(queue="rep-q", exchange="rep-x", routing_key="orders.*")
            chb = cb.channel()
            chb.exchange_declare(exchange="rep-x", passive=True)
            chb.queue_declare(queue="rep-q", passive=True)
            # A message published through B reaches the binding declared on A.
            chb.confirm_delivery()
            chb.basic_publish(exchange="rep-x", routing_key="orders.eu", body=b"from-b", mandatory=True)
            method, _, body = cha.basic_get(queue="rep-q", auto_ack=True)
            for _ in range(50):
                if method is not None:
                    break
                time.sleep(0.1)
                method, _, body = cha.basic_get(queue="rep-q", auto_ack=True)
            self.assertEqual(body, b"from-b")
            # A delete on A is seen on B.
            cha.queue_delete(queue="rep-q")
            self.assertFalse(queue_exists(cb, "rep-q"))
        finally:
            ca.close()
            cb.close()

    def test_a_queue_declared_on_a_is_routable_from_b_right_after_its_declare_ok(self):
        """A mandatory publish through B, sent the moment A answered declare-ok: B's mirror may
        not have heard of the queue yet, and the bucket decides, as RabbitMQ's cluster routes to
        a queue any node declared. Before, B returned some of them 312 NO_ROUTE and stored
        nothing (the soak saw it for a minute on a bus without quorum)."""
        ca, cb = connect(self.a), connect(self.b)
        try:
            cha, chb = ca.channel(), cb.channel()
            chb.confirm_delivery()
            returned = []
            names = [f"rep-mand-{uuid.uuid4().hex[:8]}" for _ in range(60)]
            for name in names:
                cha.queue_declare(queue=name, auto_delete=False)
                try:
                    chb.basic_publish(exchange="", routing_key=name, body=name.encode(), mandatory=True)
                except pika.exceptions.UnroutableError:
                    returned.append(name)
            self.assertEqual(returned, [], "returned unroutable right after the queue's declare-ok on A")
            for name in names:
                method, _, body = cha.basic_get(queue=name, auto_ack=True)
                self.assertEqual(body, name.encode(), name)
                cha.queue_delete(queue=name)
        finally:
            ca.close()
            cb.close()

    def test_exchange_use_and_auto_delete_count_bindings_made_through_the_other_replica(self):
        ca, cb = connect(self.a), connect(self.b)
        try:
            cha, chb = ca.channel(), cb.channel()
            cha.exchange_declare(exchange="rep-used-x", exchange_type="direct")
            cha.exchange_declare(exchange="rep-ad-x", exchange_type="fanout", auto_delete=True)
            cha.queue_declare(queue="rep-used-q")
            chb.queue_bind(queue="rep-used-q", exchange="rep-used-x", routing_key="k")
            refused(self, lambda: ca.channel().exchange_delete(exchange="rep-used-x", if_unused=True),
                    406, "in use")
            chb.queue_unbind(queue="rep-used-q", exchange="rep-used-x", routing_key="k")
            ca.channel().exchange_delete(exchange="rep-used-x", if_unused=True)
            self.assertFalse(exchange_exists(cb, "rep-used-x"))
            chb.queue_bind(queue="rep-used-q", exchange="rep-ad-x")
            chb.queue_unbind(queue="rep-used-q", exchange="rep-ad-x")
            self.assertFalse(exchange_exists(ca, "rep-ad-x"))
        finally:
            ca.close()
            cb.close()

    def test_concurrent_binds_from_both_replicas_all_survive(self):
        setup = connect(self.a)
        ch = setup.channel()
        ch.exchange_declare(exchange="race-x", exchange_type="direct")
        ch.queue_declare(queue="race-q")
        errors = []

        def bind_all(cloud, prefix):
            try:
                conn = connect(cloud)
                c = conn.channel()
                for i in range(8):
                    c.queue_bind(queue="race-q", exchange="race-x", routing_key=f"{prefix}{i}")
                conn.close()
            except Exception as e:  # reported below, with the thread that failed
                errors.append(f"{prefix}: {e!r}")

        threads = [threading.Thread(target=bind_all, args=(self.a, "a")),
                   threading.Thread(target=bind_all, args=(self.b, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(errors, [])
        # Every binding routes: publish one message per key through B and count on A.
        conn_b = connect(self.b)
        chb = conn_b.channel()
        # A passive declare reads the bucket, so B's mirror holds A's binds before B's
        # mandatory publishes are judged routable against it.
        chb.queue_declare(queue="race-q", passive=True)
        chb.confirm_delivery()
        keys = [f"a{i}" for i in range(8)] + [f"b{i}" for i in range(8)]
        for key in keys:
            chb.basic_publish(exchange="race-x", routing_key=key, body=key.encode(), mandatory=True)
        received = set()
        deadline = time.monotonic() + 30
        while len(received) < len(keys) and time.monotonic() < deadline:
            method, _, body = ch.basic_get(queue="race-q", auto_ack=True)
            if method is None:
                time.sleep(0.05)
            else:
                received.add(body.decode())
        self.assertEqual(received, set(keys))
        conn_b.close()
        setup.close()


class Restart(unittest.TestCase):
    def test_durable_topology_survives_a_restart_and_transient_does_not(self):
        with cloudtest.NatsServer() as nats:
            env = {"CLOUD_PUBSUB_URL": nats.url}
            with cloudtest.Cloud(env=env) as first:
                conn = connect(first)
                ch = conn.channel()
                ch.exchange_declare(exchange="keep-x", exchange_type="topic", durable=True)
                ch.exchange_declare(exchange="drop-x", exchange_type="topic", durable=False)
                ch.queue_declare(queue="keep-q", durable=True)
                ch.queue_declare(queue="drop-q", durable=False)
                ch.queue_bind(queue="keep-q", exchange="keep-x", routing_key="k.#")
                conn.close()
            with cloudtest.Cloud(env=env) as second:
                conn = connect(second)
                ch = conn.channel()
                ch.exchange_declare(exchange="keep-x", passive=True)
                ch.queue_declare(queue="keep-q", passive=True)
                refused(self, lambda: conn.channel().exchange_declare(exchange="drop-x", passive=True), 404)
                self.assertFalse(queue_exists(conn, "drop-q"))
                # The binding survived: a publish to it is routable.
                ch.confirm_delivery()
                ch.basic_publish(exchange="keep-x", routing_key="k", body=b"x", mandatory=True)
                self.assertEqual(ch.queue_declare(queue="keep-q", passive=True).method.message_count, 1)
                conn.close()


class BusRestart(unittest.TestCase):
    """The embedded bus of replica A dies and pubsub restarts it; replica B dials it."""

    def test_both_replicas_carry_on_and_b_hears_of_a_delete_made_on_a(self):
        with cloudtest.Cloud() as a, cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": a.pubsub_url}) as b:
            setup = connect(a)
            setup.channel().queue_declare(queue="restart-q", durable=True)
            setup.close()
            cb = connect(b)
            chb = cb.channel()
            cancelled = []
            chb.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
            tag = chb.basic_consume(queue="restart-q", on_message_callback=lambda *args: None)

            [pid] = a.nats_children()
            os.kill(pid, signal.SIGKILL)

            def back(cloud):
                def answers():
                    conn = connect(cloud)
                    try:
                        conn.channel().queue_declare(queue="restart-q", passive=True)
                        return True
                    except pika.exceptions.AMQPError:
                        return False  # the bus not reached yet: 541 for this channel
                    finally:
                        if conn.is_open:
                            conn.close()
                return answers
            restarted = lambda: a.nats_children() not in ([], [pid])
            self.assertTrue(cloudtest.wait_until(restarted, 30), a.log)
            self.assertTrue(cloudtest.wait_until(back(a), 60), a.log)
            self.assertTrue(cloudtest.wait_until(back(b), 60), b.log)

            # B's mirror follows the bucket again: a delete on A cancels B's consumer.
            ca = connect(a)
            ca.channel().queue_delete(queue="restart-q")
            deadline = time.monotonic() + 30
            while not cancelled and time.monotonic() < deadline:
                cb.process_data_events(time_limit=0.1)
            self.assertEqual(cancelled, [tag], b.log)
            ca.close()
            cb.close()

if __name__ == "__main__":
    unittest.main(verbosity=2)
