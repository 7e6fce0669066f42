"""Losing a bus node: `cloud` on a 3-node cluster with three replicas; the node leading the
stream is killed while a stock client (pika) publishes with confirms, and while it consumes.
What RabbitMQ's quorum queues promise is the bar: no confirmed message lost while a majority of
the nodes lives, every one delivered at least once, and the client never reconnects."""
import os
import signal
import sys
import threading
import time
import unittest
import uuid

import pika
import pika.exceptions

import cloudtest
from natsraw import NatsRaw

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "amqp_messaging"))
from test_confirms_durability import params, publish_with_confirms  # noqa: E402


class Failover(unittest.TestCase):
    def setUp(self):
        self.cluster = self.enterContext(cloudtest.NatsCluster(3))
        self.cloud = self.enterContext(cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": self.cluster.url}))
        self.queue = f"failover-{uuid.uuid4().hex[:8]}"
        with pika.BlockingConnection(params(self.cloud)) as conn:
            conn.channel().queue_declare(self.queue, durable=True)

    def kill_stream_leader(self):
        leader = self.cluster.leader_of("AMQP")
        self.assertIsNotNone(leader, self.cluster.logs())
        self.cluster.kill(leader)
        return leader

    def consume_all(self, ch, wanted, received, bodies=None, timeout=60):
        """Consumes on `ch` (acking) until every body in `wanted` was received at least once;
        `bodies`, when given, gets each delivery's body."""
        for method, _props, body in ch.consume(self.queue, inactivity_timeout=timeout):
            self.assertIsNotNone(method, f"the consumer stalled with {len(wanted - received)} missing:\n"
                                         f"{self.cloud.log}\n{self.cluster.logs()}")
            received.add(body.decode())
            if bodies is not None:
                bodies.append(body.decode())
            ch.basic_ack(method.delivery_tag)
            if wanted <= received:
                return

    def test_replicas_default_to_three_on_a_three_node_cluster(self):
        self.assertIn("stream AMQP and bucket amqp keep 3 replica(s), and so does each queue", self.cloud.log)
        self.assertEqual(self.cluster.api("STREAM.INFO.AMQP")["config"]["num_replicas"], 3)
        self.assertEqual(self.cluster.api("STREAM.INFO.KV_amqp")["config"]["num_replicas"], 3)
        with pika.BlockingConnection(params(self.cloud)) as conn:
            conn.channel().basic_get(self.queue)  # its first read makes its consumer
        consumer = self.cluster.api(f"CONSUMER.INFO.AMQP.{self.queue}")
        self.assertEqual(len(consumer["cluster"]["replicas"]), 2, consumer)  # and the leader

    def test_the_stream_leader_killed_mid_publish_loses_nothing_confirmed(self):
        killed = []

        def kill_at_the_200th_confirm(acked):
            # The other 2,800 publishes are written by then, most of them on their way.
            if acked >= 200 and not killed:
                killed.append(self.kill_stream_leader())
        acked, nacked, errors = publish_with_confirms(self.cloud, self.queue, 3000, timeout=180,
                                                      on_confirm=kill_at_the_200th_confirm)
        self.assertEqual(len(killed), 1, "the stream leader was never killed")
        self.assertEqual(errors, [])
        # Each publish the dead leader left unanswered was sent again until the new one stored it.
        self.assertEqual(nacked, set(), f"nacked across the failover:\n{self.cloud.log}")
        self.assertEqual(len(acked), 3000)
        confirmed = {str(s - 1) for s in acked}
        # Stored once each: a retry of a publish the dead leader had stored is the same message.
        bodies = []
        with pika.BlockingConnection(params(self.cloud)) as conn:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=200)
            self.consume_all(ch, confirmed, set(), bodies)
            for method, _props, body in ch.consume(self.queue, inactivity_timeout=3):  # any more?
                if method is None:
                    break
                bodies.append(body.decode())
                ch.basic_ack(method.delivery_tag)
        self.assertEqual(len(bodies), len(confirmed), "a message was stored twice")

    def test_delayed_messages_waiting_when_the_stream_leader_dies_are_delivered_by_the_new_one(self):
        # The delayed-message plugin keeps them on one node; here each is a replicated schedule.
        exchange = f"delayed-{uuid.uuid4().hex[:8]}"
        with pika.BlockingConnection(params(self.cloud)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.exchange_declare(exchange, "x-delayed-message", durable=True, arguments={"x-delayed-type": "fanout"})
            ch.queue_bind(self.queue, exchange)
            for i in range(100):
                ch.basic_publish(exchange, "", str(i), pika.BasicProperties(headers={"x-delay": 3000}))
        self.kill_stream_leader()
        received = set()
        with pika.BlockingConnection(params(self.cloud)) as conn:
            self.consume_all(conn.channel(), {str(i) for i in range(100)}, received)

    def test_the_stream_leader_killed_mid_consume_loses_nothing_and_the_consumer_goes_on(self):
        acked, nacked, errors = publish_with_confirms(self.cloud, self.queue, 2000)
        self.assertEqual((errors, nacked), ([], set()))
        confirmed = {str(s - 1) for s in acked}
        received = set()
        conn = pika.BlockingConnection(params(self.cloud))
        self.addCleanup(lambda: conn.is_open and conn.close())
        ch = conn.channel()
        ch.basic_qos(prefetch_count=100)
        for method, _props, body in ch.consume(self.queue, inactivity_timeout=60):
            self.assertIsNotNone(method, "the consumer stalled before the kill")
            received.add(body.decode())
            ch.basic_ack(method.delivery_tag)
            if len(received) == 500:
                break
        self.kill_stream_leader()
        self.consume_all(ch, confirmed, received)
        self.assertTrue(conn.is_open)


class PublishAwaitingFollowers(unittest.TestCase):
    """`cloud` dials one node only, and that node leads stream AMQP: its publishes reach the leader
    alone, and the leader's followers can be stopped under them."""

    def setUp(self):
        self.cluster = self.enterContext(cloudtest.NatsCluster(3))
        self.node = self.cluster.nodes[0]
        self.cloud = self.enterContext(cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": f"nats://127.0.0.1:{self.node['port']}"}))
        for _ in range(20):  # a step-down hands leadership to a random other node
            leader = self.cluster.leader_of("AMQP")
            if leader == self.node["name"]:
                break
            if leader is not None:
                self.cluster.api("STREAM.LEADER.STEPDOWN.AMQP")
            time.sleep(1)
        self.assertEqual(self.cluster.leader_of("AMQP"), self.node["name"], self.cluster.logs())
        self.queue = f"awaiting-{uuid.uuid4().hex[:8]}"
        with pika.BlockingConnection(params(self.cloud)) as conn:
            conn.channel().queue_declare(self.queue, durable=True)

    def test_a_publish_sent_again_while_its_first_attempt_awaits_the_followers_is_confirmed(self):
        # Both followers stopped, the leader cannot commit: each attempt `cloud` sends again
        # (after 2 s unanswered) is answered "duplicate message id is in process" (nats-server
        # 2.12+) until they resume and the first attempt is stored.
        followers = [n for n in self.cluster.running() if n is not self.node]
        resumed = threading.Event()

        def resume_followers():
            resumed.set()
            for node in followers:
                os.kill(node["proc"].pid, signal.SIGCONT)
        resume = threading.Timer(5, resume_followers)
        self.addCleanup(lambda: (resume.cancel(), resume_followers()))
        with pika.BlockingConnection(params(self.cloud)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            for node in followers:
                cloudtest.sigstop(node["proc"].pid)
            resume.start()
            # Mandatory: a route missed would be returned (UnroutableError), not confirmed.
            ch.basic_publish("", self.queue, b"held", pika.BasicProperties(delivery_mode=2), mandatory=True)
            if not resumed.is_set():
                stream = self.cluster.api("STREAM.INFO.AMQP")
                self.fail(f"confirmed before the followers {[n['name'] for n in followers]} resumed; stream AMQP: "
                          f"{stream.get('config', {}).get('num_replicas')} replicas, {stream.get('cluster')}\n"
                          f"{self.cloud.log}")
        # Stored once: taken when the queue's consumer has a leader again, and nothing after it.
        got = []
        with pika.BlockingConnection(params(self.cloud)) as conn:
            channel = [conn.channel()]

            def take():
                try:
                    method, _props, body = channel[0].basic_get(self.queue, auto_ack=True)
                except pika.exceptions.ChannelClosedByBroker:  # a bus request timed out meanwhile
                    channel[0] = conn.channel()
                    return False
                if method is not None:
                    got.append(body)
                return bool(got)
            self.assertTrue(cloudtest.wait_until(take, 60, interval=0.5), self.cluster.logs())
            self.assertEqual(got, [b"held"])
            self.assertIsNone(channel[0].basic_get(self.queue, auto_ack=True)[0])


class MetaLayerWithoutLeader(unittest.TestCase):
    """`cloud` dials one node, and the other two stop (SIGSTOP): the meta layer loses its leader,
    and the node left answers every JetStream API request "temporarily unavailable" (10008) until
    they come back."""

    def setUp(self):
        self.cluster = self.enterContext(cloudtest.NatsCluster(3))
        self.node = self.cluster.nodes[0]
        self.cloud = self.enterContext(cloudtest.Cloud(env={
            "CLOUD_PUBSUB_URL": f"nats://127.0.0.1:{self.node['port']}", "CLOUD_AMQP_BUS_TIMEOUT": "30"}))
        self.known = f"known-{uuid.uuid4().hex[:8]}"
        with pika.BlockingConnection(params(self.cloud)) as conn:
            conn.channel().queue_declare(self.known, durable=True)

    def answers_unavailable(self):
        try:
            raw = NatsRaw(self.node["port"], self.node["host"], timeout=2)
            try:
                reply = raw.api(f"CONSUMER.INFO.AMQP.{self.known}")
            finally:
                raw.close()
        except OSError:
            return False
        return reply.get("error", {}).get("err_code") == 10008

    def test_a_declare_made_while_the_bus_answers_unavailable_waits_for_a_leader(self):
        others = [n["name"] for n in self.cluster.nodes[1:]]
        with pika.BlockingConnection(params(self.cloud)) as conn:
            for name in others:
                self.cluster.pause(name)
                self.addCleanup(self.cluster.resume, name)
            self.assertTrue(cloudtest.wait_until(self.answers_unavailable, 60, interval=0.5),
                            f"node {self.node['name']} never answered 10008:\n{self.cluster.logs()}")
            resume = threading.Timer(1.5, lambda: [self.cluster.resume(name) for name in others])
            self.addCleanup(resume.cancel)
            asked = time.monotonic()
            resume.start()
            # A declare makes sure of the queue's consumer, which the meta layer answers. Before,
            # its first 10008 closed the channel with 541 at once.
            conn.channel().queue_declare(self.known, durable=True)
            self.assertGreater(time.monotonic() - asked, 1.5, "declared while the meta layer had no leader")


class NodeStopsAnswering(unittest.TestCase):
    """The node `cloud` talks to hangs with its connections open (SIGSTOP: a stalled machine, or
    one cut off by the network): `cloud` must move to a live node, not wait for TCP to notice."""

    def setUp(self):
        self.cluster = self.enterContext(cloudtest.NatsCluster(3))
        self.cloud = self.enterContext(cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": self.cluster.url}))
        self.queue = f"hung-{uuid.uuid4().hex[:8]}"
        with pika.BlockingConnection(params(self.cloud)) as conn:
            conn.channel().queue_declare(self.queue, durable=True)

    def test_publishes_are_confirmed_again_soon_after_the_node_cloud_talks_to_hangs(self):
        ports = cloudtest.tcp_peer_ports(self.cloud.proc.pid)
        dialled = [n for n in self.cluster.nodes if n["port"] in ports]
        self.assertTrue(dialled, f"cloud talks to none of {self.cluster.url} ({ports})")
        hung = dialled[0]
        cloudtest.sigstop(hung["proc"].pid)
        self.addCleanup(os.kill, hung["proc"].pid, signal.SIGCONT)
        paused = time.monotonic()
        # The other two nodes are a majority: once `cloud` talks to one of them (and the streams
        # the hung node led have new leaders), a publish is confirmed. Before, every publish was
        # nacked after CLOUD_AMQP_PUBLISH_TIMEOUT (30 s) for minutes.
        outcomes = []

        def confirmed():
            try:
                with pika.BlockingConnection(params(self.cloud)) as conn:
                    ch = conn.channel()
                    ch.confirm_delivery()
                    ch.basic_publish("", self.queue, b"after", pika.BasicProperties(delivery_mode=2), mandatory=True)
                return True
            except (pika.exceptions.AMQPError, pika.exceptions.NackError) as e:
                outcomes.append(f"{time.monotonic() - paused:.1f} s: {e!r}")
                return False
        self.assertTrue(cloudtest.wait_until(confirmed, 25, interval=0.5) and time.monotonic() - paused < 25,
                        f"no publish confirmed within 25 s of {hung['name']} hanging: {outcomes}\n{self.cloud.log}")


class TwoReplicas(unittest.TestCase):
    """Two `cloud` processes on the cluster, each dialling every node."""

    def setUp(self):
        self.cluster = self.enterContext(cloudtest.NatsCluster(3))
        env = {"CLOUD_PUBSUB_URL": self.cluster.url}
        self.a = self.enterContext(cloudtest.Cloud(env=env))
        self.b = self.enterContext(cloudtest.Cloud(env=env))

    def test_a_node_killed_and_restarted_under_a_publisher_on_one_and_a_consumer_on_the_other(self):
        queue = f"two-{uuid.uuid4().hex[:8]}"
        with pika.BlockingConnection(params(self.a)) as conn:
            conn.channel().queue_declare(queue, durable=True)
        consumer = pika.BlockingConnection(params(self.b))
        self.addCleanup(lambda: consumer.is_open and consumer.close())
        ch = consumer.channel()
        ch.basic_qos(prefetch_count=50)
        consuming = ch.consume(queue, inactivity_timeout=60)
        received = set()

        def publish_and_receive(tag, count):
            acked, nacked, errors = publish_with_confirms(self.a, queue, count)
            self.assertEqual((errors, nacked), ([], set()))
            wanted = {f"{tag}{s - 1}" for s in acked}
            got = set()
            for method, _props, body in consuming:
                self.assertIsNotNone(method, f"B's consumer stalled:\n{self.b.log}\n{self.cluster.logs()}")
                got.add(tag + body.decode())
                ch.basic_ack(method.delivery_tag)
                if {f"{tag}{i}" for i in range(count)} <= got:
                    break
            received.update(got)
            self.assertEqual(wanted - got, set())

        publish_and_receive("before-", 300)
        victim = self.cluster.nodes[0]["name"]
        self.cluster.kill(victim)
        publish_and_receive("down-", 300)
        self.cluster.start(victim)
        self.cluster.wait_ready()
        publish_and_receive("back-", 300)
        self.assertTrue(consumer.is_open)

    def test_the_bucket_leader_killed_during_declares_loses_and_doubles_no_declaration(self):
        names = [f"decl-{i}-{uuid.uuid4().hex[:6]}" for i in range(30)]
        declared = []
        conn = pika.BlockingConnection(params(self.a))
        self.addCleanup(lambda: conn.is_open and conn.close())

        def answered(method, what):
            """method() once the bus answers it: a request the bus cannot answer in time fails its
            channel (541: retry on a new channel), as the error says to, for a minute after the kill
            (the bucket's or stream AMQP's leader being elected)."""
            refusals = []
            deadline = time.monotonic() + 60
            while True:
                try:
                    return method()
                except pika.exceptions.ChannelClosedByBroker as e:
                    self.assertEqual(e.reply_code, 541, e.reply_text)
                    refusals.append(e.reply_text)
                if time.monotonic() > deadline:
                    self.fail(f"{what} within a minute: {refusals}")
                time.sleep(0.5)

        for i, name in enumerate(names):
            if i == 10:
                self.cluster.kill(self.cluster.leader_of("KV_amqp"))
            answered(lambda: conn.channel().queue_declare(name, durable=True), f"queue {name} could not be declared")
            declared.append(name)
        self.assertEqual(declared, names)
        # Every declaration is in the bucket once, and B (whose mirror replays the bucket) has it; its
        # count asks stream AMQP, whose leader may have been on the node killed.
        keys = self.cluster.api("STREAM.INFO.KV_amqp", {"subjects_filter": "$KV.amqp.q.>"})["state"]["subjects"]
        for name in names:
            self.assertEqual(keys.get(f"$KV.amqp.q.{name}"), 1, name)
        with pika.BlockingConnection(params(self.b)) as other:
            for name in names:
                ok = answered(lambda: other.channel().queue_declare(name, passive=True), f"queue {name} was not counted")
                self.assertEqual(ok.method.message_count, 0)

    def test_concurrent_binds_from_both_replicas_on_a_replicated_bucket_all_survive(self):
        """Binds of one queue through both replicas at once: each is a revision-checked write of
        the queue's bucket entry, and the loser re-reads and writes again. A replicated stream
        refuses a write it finds another one in flight for with JetStream error 10164, not 10071;
        taken for a failure, it closed the channel with 541 (the soak saw it, no fault injected)."""
        queue = f"race-{uuid.uuid4().hex[:8]}"
        with pika.BlockingConnection(params(self.a)) as conn:
            ch = conn.channel()
            ch.exchange_declare("race-x", exchange_type="direct")
            ch.queue_declare(queue, durable=True)
        errors = []

        def bind_all(cloud, prefix):
            try:
                with pika.BlockingConnection(params(cloud)) as conn:
                    ch = conn.channel()
                    for i in range(20):
                        ch.queue_bind(queue, "race-x", routing_key=f"{prefix}{i}")
            except Exception as e:  # reported below, with the thread that failed
                errors.append(f"{prefix}: {e!r}")
        threads = [threading.Thread(target=bind_all, args=(c, p)) for c, p in ((self.a, "a"), (self.b, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        with pika.BlockingConnection(params(self.b)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            for key in [f"{p}{i}" for p in "ab" for i in range(20)]:
                ch.basic_publish("race-x", key, key.encode(), mandatory=True)  # UnroutableError if lost


class NodeDownDuringDeclare(unittest.TestCase):
    """#55, RELIABILITY finding 10: a node is down while a queue is declared and sent confirmed
    messages, through the default exchange and through a bound topic exchange; back and caught up,
    it is made leader of every stream (the queue has no consumer until it is read), and every
    message must still be delivered. On interest retention each replica decides alone that a message has no
    interest, so the node, applying the missed messages before it learns of the queue's consumer,
    keeps none of them, and as the consumer's leader passes over them."""

    ROUNDS = 3
    PER_ROUTE = 10

    def setUp(self):
        self.cluster = self.enterContext(cloudtest.NatsCluster(3))
        self.cloud = self.enterContext(cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": self.cluster.url}))

    def ask(self, subject, body=None):
        """A JetStream API answer, or {} while nobody answers: only a leader answers these, so a
        short wait per node keeps an election from costing seconds a request."""
        for node in self.cluster.running():
            try:
                raw = NatsRaw(node["port"], node["host"], timeout=1)
                try:
                    return raw.api(subject, body)
                finally:
                    raw.close()
            except OSError:
                continue
        return {}

    def wait_caught_up(self, subject):
        """Until the leader reports every other replica current: the node back has applied all it
        missed."""
        last = {}

        def current():
            last.clear()
            last.update(self.ask(subject))
            group = last.get("cluster", {})
            replicas = group.get("replicas", [])
            return (group.get("leader") is not None and len(replicas) == len(self.cluster.nodes) - 1
                    and all(r.get("current") and not r.get("offline") for r in replicas))
        self.assertTrue(cloudtest.wait_until(current, 60, interval=0.1),
                        f"{subject}: a replica never caught up: {last.get('cluster')}\n{self.cluster.logs()}")

    def lead(self, node, info_subject, stepdown_subject):
        """Steps the leader down, naming `node` its preferred successor, until `node` leads (the
        preference is passed over for a peer the leader has not heard from lately)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            leader = self.ask(info_subject).get("cluster", {}).get("leader")
            if leader == node:
                return
            if leader is not None:
                self.ask(stepdown_subject, {"placement": {"preferred": node}})
                cloudtest.wait_until(
                    lambda: self.ask(info_subject).get("cluster", {}).get("leader") not in (None, leader), 10,
                    interval=0.1)
            else:
                time.sleep(0.1)  # an election under way: its answer is a leader in INFO
        self.fail(f"{node} never led {info_subject}:\n{self.cluster.logs()}")

    def declare_and_publish(self, queue, exchange):
        """The topology and 20 confirmed messages; a declare the bus cannot answer while it
        elects (541) is retried on a new channel, as the error says."""
        deadline = time.monotonic() + 45
        with pika.BlockingConnection(params(self.cloud)) as conn:
            while True:
                try:
                    ch = conn.channel()
                    ch.queue_declare(queue, durable=True)
                    ch.exchange_declare(exchange, "topic", durable=True)
                    ch.queue_bind(queue, exchange, routing_key="down.*")
                    break
                except pika.exceptions.ChannelClosedByBroker as e:
                    self.assertEqual(e.reply_code, 541, e.reply_text)
                    self.assertLess(time.monotonic(), deadline, f"declares refused for 45 s: {e}\n{self.cloud.log}")
            ch.confirm_delivery()
            sent = set()
            # mandatory: a route missed is returned (UnroutableError), a nack raises NackError.
            for i in range(self.PER_ROUTE):
                ch.basic_publish("", queue, f"default-{i}", pika.BasicProperties(delivery_mode=2), mandatory=True)
                sent.add(f"default-{i}")
            for i in range(self.PER_ROUTE):
                ch.basic_publish(exchange, f"down.{i}", f"topic-{i}", pika.BasicProperties(delivery_mode=2),
                                 mandatory=True)
                sent.add(f"topic-{i}")
        return sent

    def consume(self, queue, sent):
        received = set()
        with pika.BlockingConnection(params(self.cloud)) as conn:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=50)
            for method, _props, body in ch.consume(queue, inactivity_timeout=15):
                if method is None:
                    break
                received.add(body.decode())
                ch.basic_ack(method.delivery_tag)
                if sent <= received:
                    break
        return received

    def test_every_message_sent_while_a_node_was_down_is_delivered_once_it_leads(self):
        lost = []
        for round_ in range(self.ROUNDS):
            # A rolling restart: each round stops the next node, the meta leader's turn too. Stopped,
            # not killed: a killed node counts online until its heartbeats are missed, and a new
            # consumer's leader placed on it makes the declare wait for an election (541, 5 s).
            node = self.cluster.nodes[(round_ + 1) % len(self.cluster.nodes)]["name"]
            queue, exchange = f"down-{round_}-{uuid.uuid4().hex[:8]}", f"down-x-{round_}"
            consumer = queue  # routing::consumer_name of a name of word characters only
            self.cluster.stop(node)
            sent = self.declare_and_publish(queue, exchange)
            self.cluster.start(node)
            self.cluster.wait_ready()
            streams = self.cluster.api("STREAM.NAMES").get("streams") or []
            self.assertIn("AMQP", streams)
            for stream in streams:
                self.wait_caught_up(f"STREAM.INFO.{stream}")
            for stream in streams:
                self.lead(node, f"STREAM.INFO.{stream}", f"STREAM.LEADER.STEPDOWN.{stream}")
            # A queue nobody read has no consumer: its messages wait on its subject, in the streams
            # the node back now leads, and its first read below makes it.
            self.assertEqual(self.ask(f"CONSUMER.INFO.AMQP.{consumer}").get("error", {}).get("err_code"), 10014)
            missing = sent - self.consume(queue, sent)
            if missing:
                lost.append(f"round {round_} ({node} down): {len(missing)} of {len(sent)} never delivered: "
                            f"{sorted(missing)}")
        self.assertEqual(lost, [], f"\n{self.cloud.log[-4000:]}\n{self.cluster.logs()}")

if __name__ == "__main__":
    unittest.main(verbosity=2)
