"""RabbitMQ's management HTTP API and Prometheus metrics on a real `cloud`: what rabbitmqadmin
lists, declares, publishes, gets, exports and imports, what the Prometheus client parses from
/metrics, and who may see what under CLOUD_AMQP_AUTH=bus (users of one NATS account see their
vhost only). pika does what the clients do, so that each answer is checked against what happened.
"""
import base64
import json
import os
import subprocess
import tempfile
import unittest
import urllib.error
import urllib.request

import pika
from prometheus_client.parser import text_string_to_metric_families

import cloudtest
import pikatest

RABBITMQADMIN = "/usr/bin/rabbitmqadmin"


class Admin:
    """rabbitmqadmin against one API port, as one user."""

    def __init__(self, port, user="guest", password="guest"):
        self.port, self.user, self.password = port, user, password

    def run(self, *args, vhost=None):
        command = [RABBITMQADMIN, "-H", "127.0.0.1", "-P", str(self.port), "-u", self.user, "-p", self.password]
        if vhost:
            command += ["-V", vhost]
        return subprocess.run(command + list(args), capture_output=True, text=True, timeout=60)

    def ok(self, *args, vhost=None):
        done = self.run(*args, vhost=vhost)
        if done.returncode != 0:
            raise AssertionError(f"rabbitmqadmin {' '.join(args)}: {done.stdout}{done.stderr}")
        return done.stdout

    def json(self, *args, vhost=None):
        return json.loads(self.ok("-f", "raw_json", *args, vhost=vhost))

    def refused(self, *args, vhost=None):
        done = self.run(*args, vhost=vhost)
        if done.returncode == 0:
            raise AssertionError(f"rabbitmqadmin {' '.join(args)} was not refused: {done.stdout}")
        return done.stdout + done.stderr


def http(port, path, method="GET", body=None, user="guest", password="guest"):
    """(status, parsed JSON or text) of one request."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode())
    if user is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    if body is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            status, text = reply.status, reply.read().decode()
    except urllib.error.HTTPError as refused:
        status, text = refused.code, refused.read().decode()
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, text


def samples(port, path="/metrics"):
    """{(name, frozenset(labels)): value} as the Prometheus client parses the exposition."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as reply:
        text = reply.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


class ManagementWithRabbitmqadmin(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.api_port, cls.metrics_port = cloudtest.free_port(), cloudtest.free_port()
        cls.cloud = cloudtest.Cloud(env={"CLOUD_AMQP_MANAGEMENT_PORT": str(cls.api_port),
                                         "CLOUD_AMQP_PROMETHEUS_PORT": str(cls.metrics_port)}).__enter__()
        cls.admin = Admin(cls.api_port)

    @classmethod
    def tearDownClass(cls):
        cls.cloud.__exit__(None, None, None)

    def setUp(self):
        self.conn = pikatest.connect(self.cloud)
        self.ch = self.conn.channel()
        self.ch.confirm_delivery()

    def tearDown(self):
        if self.conn.is_open:
            self.conn.close()

    def test_declare_publish_get_and_delete_through_rabbitmqadmin(self):
        self.admin.ok("declare", "exchange", "name=adm-orders", "type=topic")
        self.admin.ok("declare", "queue", "name=adm-eu", "durable=true", 'arguments={"x-message-ttl":60000}')
        self.admin.ok("declare", "binding", "source=adm-orders", "destination=adm-eu", "routing_key=eu.#")
        self.assertIn("Message published", self.admin.ok(
            "publish", "exchange=adm-orders", "routing_key=eu.paris", "payload=bonjour",
            'properties={"content_type":"text/plain","headers":{"n":1},"delivery_mode":2}'))
        # A client sees what the operator declared: the queue, its argument, the routed message.
        self.assertEqual(self.ch.queue_declare("adm-eu", passive=True).method.message_count, 1)
        pikatest.refused(self, lambda: self.ch.queue_declare("adm-eu", durable=True, arguments={"x-message-ttl": 1}),
                         406, "inequivalent arg 'x-message-ttl'")
        self.ch = self.conn.channel()
        queue = next(q for q in self.admin.json("list", "queues") if q["name"] == "adm-eu")
        self.assertEqual((queue["messages"], queue["messages_ready"], queue["durable"], queue["arguments"]),
                         (1, 1, True, {"x-message-ttl": 60000}))
        bindings = self.admin.json("list", "bindings")
        self.assertIn(("adm-orders", "adm-eu", "eu.#"),
                      [(b["source"], b["destination"], b["routing_key"]) for b in bindings])
        got = self.admin.json("get", "queue=adm-eu", "ackmode=ack_requeue_false", "count=5")
        self.assertEqual(len(got), 1)
        self.assertEqual((got[0]["payload"], got[0]["exchange"], got[0]["routing_key"], got[0]["redelivered"]),
                         ("bonjour", "adm-orders", "eu.paris", False))
        self.assertEqual(got[0]["properties"], {"content_type": "text/plain", "headers": {"n": 1}, "delivery_mode": 2})
        self.assertEqual(self.ch.queue_declare("adm-eu", passive=True).method.message_count, 0)  # acked: gone
        # As an operator does: the properties_key the listing gives ("eu.%23", RabbitMQ's quoting).
        key = next(b["properties_key"] for b in bindings if b["source"] == "adm-orders")
        self.assertEqual(key, "eu.%23")
        self.admin.ok("delete", "binding", "source=adm-orders", "destination=adm-eu", "destination_type=queue",
                      f"properties_key={key}")
        self.assertNotIn(("adm-orders", "adm-eu"),
                         [(b["source"], b["destination"]) for b in self.admin.json("list", "bindings")])
        self.admin.ok("delete", "queue", "name=adm-eu")
        self.admin.ok("delete", "exchange", "name=adm-orders")
        pikatest.refused(self, lambda: self.ch.queue_declare("adm-eu", passive=True), 404, "no queue 'adm-eu'")

    def test_get_with_requeue_gives_the_messages_back_in_order(self):
        self.ch.queue_declare("adm-requeue", auto_delete=False)
        for n in range(3):
            self.ch.basic_publish("", "adm-requeue", f"m{n}".encode())
        got = self.admin.json("get", "queue=adm-requeue", "ackmode=ack_requeue_true", "count=2")
        self.assertEqual([m["payload"] for m in got], ["m0", "m1"])
        self.assertEqual([self.ch.basic_get("adm-requeue", auto_ack=True)[2] for _ in range(3)], [b"m0", b"m1", b"m2"])
        self.admin.ok("purge", "queue", "name=adm-requeue")
        self.ch.queue_delete("adm-requeue")

    def test_lists_show_what_the_clients_did(self):
        self.ch.queue_declare("adm-work", auto_delete=False)
        for n in range(5):
            self.ch.basic_publish("", "adm-work", str(n).encode())
        consumer = self.conn.channel()
        consumer.basic_qos(prefetch_count=2)
        tag = consumer.basic_consume("adm-work", lambda *a: None, auto_ack=False)
        cloudtest.wait_until(lambda: next(q for q in self.admin.json("list", "queues")
                                          if q["name"] == "adm-work")["messages_unacknowledged"] == 2, 15)
        queue = next(q for q in self.admin.json("list", "queues") if q["name"] == "adm-work")
        self.assertEqual((queue["messages"], queue["messages_ready"], queue["consumers"]), (5, 3, 1))
        mine = [c for c in self.admin.json("list", "consumers") if c["consumer_tag"] == tag]
        self.assertEqual(len(mine), 1)
        self.assertEqual((mine[0]["queue"]["name"], mine[0]["prefetch_count"], mine[0]["ack_required"]),
                         ("adm-work", 2, True))
        local_port = self.conn._impl._transport._sock.getsockname()[1]
        connection = [c for c in self.admin.json("list", "connections") if c["peer_port"] == local_port]
        self.assertEqual(len(connection), 1)
        self.assertEqual((connection[0]["vhost"], connection[0]["state"], connection[0]["channels"],
                          connection[0]["client_properties"]["product"]),
                         ("/", "running", 2, "Pika Python Client Library"))
        self.assertEqual(mine[0]["channel_details"]["connection_name"], connection[0]["name"])
        overview = self.admin.json("show", "overview")[0]
        self.assertGreaterEqual(overview["object_totals"]["consumers"], 1)
        consumer.basic_cancel(tag)
        self.ch.queue_delete("adm-work")

    def test_refusals_are_rabbitmqs(self):
        self.assertIn("Not found", self.admin.refused("delete", "queue", "name=adm-never"))
        self.assertIn("Not found", self.admin.refused("list", "queues", vhost="nosuch"))
        status, body = http(self.api_port, "/api/queues", user=None)
        self.assertEqual((status, body["error"]), (401, "not_authorized"))
        status, body = http(self.api_port, "/api/exchanges/%2F/amq.default/publish", "POST",
                            {"routing_key": "x", "payload": "p", "properties": {"content-type": "text/plain"}})
        self.assertEqual(status, 400)
        self.assertIn("properties.content-type is not a basic property", body["reason"])
        status, body = http(self.api_port, "/api/queues/%2F/adm-bad", "PUT", {"durable": "perhaps"})
        self.assertEqual((status, body["reason"]), (400, 'durable must be true or false, not "perhaps"'))
        status, body = http(self.api_port, "/api/queues/%2F/adm-bad", "PUT", {"arguments": {"x-overflow": "sideways"}})
        self.assertEqual(status, 400)
        self.assertIn("x-overflow", body["reason"])
        status, _ = http(self.api_port, "/api/queues/%2F/adm-bad", "PATCH")
        self.assertEqual(status, 405)

    def test_overview_rates_follow_the_work_and_fall_back_to_zero(self):
        self.ch.queue_declare("adm-rates", auto_delete=False)

        def publish_rate():
            stats = http(self.api_port, "/api/overview")[1]["message_stats"]
            return stats["publish_details"]["rate"]

        def busy():  # publishing while asking: the rate covers the last 5 s sample
            for n in range(20):
                self.ch.basic_publish("", "adm-rates", b"x")
            return publish_rate() > 0
        self.assertEqual(http(self.api_port, "/api/overview")[1]["rates_mode"], "basic")
        self.assertTrue(cloudtest.wait_until(busy, 30, interval=0.2), publish_rate())
        self.assertTrue(cloudtest.wait_until(lambda: publish_rate() == 0, 30, interval=0.5), publish_rate())
        stats = http(self.api_port, "/api/overview")[1]["message_stats"]
        self.assertEqual(stats["ack_details"], {"rate": 0.0})
        self.assertGreaterEqual(stats["publish"], 20)
        self.ch.queue_delete("adm-rates")

    def test_aliveness_and_health(self):
        self.assertEqual(http(self.api_port, "/api/aliveness-test/%2F"), (200, {"status": "ok"}))
        self.assertEqual(http(self.api_port, "/api/health/checks/alarms"), (200, {"status": "ok"}))

    def test_definitions_export_then_import_restores_the_topology(self):
        self.ch.exchange_declare("adm-defs-x", "direct", durable=True)
        self.ch.queue_declare("adm-defs", durable=True, arguments={"x-max-length": 10, "x-overflow": "reject-publish"})
        self.ch.queue_bind("adm-defs", "adm-defs-x", "k")
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "defs.json")
            self.admin.ok("export", path)
            with open(path) as f:
                exported = json.load(f)
            self.assertIn({"name": "adm-defs", "vhost": "/", "durable": True, "auto_delete": False,
                           "arguments": {"x-max-length": 10, "x-overflow": "reject-publish"}}, exported["queues"])
            self.assertNotIn("amq.direct", [x["name"] for x in exported["exchanges"]])
            self.ch.queue_delete("adm-defs")
            self.ch.exchange_delete("adm-defs-x")
            self.admin.ok("import", path)
            # Routed again through the imported binding, limited by the imported argument.
            self.ch.basic_publish("adm-defs-x", "k", b"again")
            self.assertEqual(self.ch.queue_declare("adm-defs", passive=True).method.message_count, 1)
            exported["users"] = [{"name": "u", "password_hash": "x", "tags": ""}]
            with open(path, "w") as f:
                json.dump(exported, f)
            self.assertIn("users cannot be imported", self.admin.refused("import", path))
        self.ch.queue_delete("adm-defs")
        self.ch.exchange_delete("adm-defs-x")

    def test_lists_page_sort_and_filter_as_rabbitmq(self):
        names = [f"adm-page-{n:03d}" for n in range(120)]
        for name in names:
            self.ch.queue_declare(name, auto_delete=False)
        status, page = http(self.api_port, "/api/queues/%2F?page=2&page_size=50&name=adm-page-&sort=name&sort_reverse=true"
                                           "&columns=name,messages")
        self.assertEqual(status, 200)
        self.assertEqual((page["filtered_count"], page["page"], page["page_count"], page["item_count"]), (120, 2, 3, 50))
        self.assertEqual([q["name"] for q in page["items"]], sorted(names, reverse=True)[50:100])
        self.assertEqual(set(page["items"][0]), {"name", "messages"})
        for name in names:
            self.ch.queue_delete(name)

    def test_prometheus_reads_the_metrics(self):
        self.ch.queue_declare("adm-metrics", auto_delete=False)
        for n in range(4):
            self.ch.basic_publish("", "adm-metrics", b"m")
        holder = self.conn.channel()
        holder.basic_get("adm-metrics", auto_ack=False)  # one held: unacked
        per_queue = samples(self.metrics_port, "/metrics/per-object")
        labels = frozenset({"vhost": "/", "queue": "adm-metrics"}.items())
        self.assertEqual(per_queue[("rabbitmq_queue_messages_ready", labels)], 3)
        self.assertEqual(per_queue[("rabbitmq_queue_messages_unacked", labels)], 1)
        self.assertEqual(per_queue[("rabbitmq_queue_messages", labels)], 4)
        aggregated = samples(self.metrics_port)
        self.assertGreaterEqual(aggregated[("rabbitmq_queue_messages_ready", frozenset())], 3)
        self.assertGreaterEqual(aggregated[("rabbitmq_connections", frozenset())], 1)
        amqp091 = frozenset({"protocol": "amqp091"}.items())
        self.assertGreaterEqual(aggregated[("rabbitmq_global_messages_received_total", amqp091)], 4)
        self.assertGreaterEqual(aggregated[("rabbitmq_global_messages_confirmed_total", amqp091)], 4)
        self.assertGreaterEqual(aggregated[("rabbitmq_global_messages_delivered_get_manual_ack_total", amqp091)], 1)
        root = frozenset({"vhost": "/"}.items())
        self.assertGreater(aggregated[("cloud_amqp_bus_requests_total", root)], 0)
        before = aggregated.get(("cloud_amqp_refusals_total", frozenset({"vhost": "/", "code": "406"}.items())), 0)
        pikatest.refused(self, lambda: self.ch.queue_declare("adm-metrics", arguments={"x-max-length": 1}), 406)
        self.ch = self.conn.channel()
        after = samples(self.metrics_port)[("cloud_amqp_refusals_total", frozenset({"vhost": "/", "code": "406"}.items()))]
        self.assertEqual(after, before + 1)
        # The same work under the channel counters Grafana's RabbitMQ-Overview reads.
        self.assertEqual(aggregated[("rabbitmq_channel_messages_published_total", frozenset())],
                         aggregated[("rabbitmq_global_messages_received_total", amqp091)])
        self.assertEqual(aggregated[("rabbitmq_channel_get_ack_total", frozenset())],
                         aggregated[("rabbitmq_global_messages_delivered_get_manual_ack_total", amqp091)])
        self.assertGreaterEqual(aggregated[("rabbitmq_channel_messages_unacked", frozenset())], 1)
        process = {k: aggregated[(k, frozenset())] for k in (
            "rabbitmq_process_open_fds", "rabbitmq_process_max_fds", "rabbitmq_process_resident_memory_bytes",
            "rabbitmq_process_open_tcp_sockets")}
        self.assertGreater(process["rabbitmq_process_open_fds"], process["rabbitmq_process_open_tcp_sockets"])
        self.assertGreater(process["rabbitmq_process_max_fds"], process["rabbitmq_process_open_fds"])
        self.assertGreater(process["rabbitmq_process_resident_memory_bytes"], 1 << 20)
        holder.close()
        self.ch.queue_delete("adm-metrics")

    def test_prometheus_counts_connections_channels_and_queues_opened_and_ended(self):
        names = ("connections_opened", "connections_closed", "channels_opened", "channels_closed",
                 "queues_declared", "queues_created", "queues_deleted")

        def counts():
            m = samples(self.metrics_port)
            return {n: m[(f"rabbitmq_{n}_total", frozenset())] for n in names}

        def settled():  # what earlier tests closed is counted: only this test's connection and channel are open
            c = counts()
            return (c["connections_opened"] - c["connections_closed"], c["channels_opened"] - c["channels_closed"]) == (1, 1)
        self.assertTrue(cloudtest.wait_until(settled, 10), counts())
        before = counts()
        conn = pikatest.connect(self.cloud)
        ch = conn.channel()
        ch.queue_declare("adm-churn", auto_delete=False)
        ch.queue_declare("adm-churn", auto_delete=False)
        ch.queue_declare("adm-churn", passive=True)
        ch.queue_delete("adm-churn")
        conn.close()
        self.assertTrue(cloudtest.wait_until(settled, 10), counts())
        after = counts()
        self.assertEqual({n: after[n] - before[n] for n in names},
                         {"connections_opened": 1, "connections_closed": 1, "channels_opened": 1, "channels_closed": 1,
                          "queues_declared": 2, "queues_created": 1, "queues_deleted": 1})


CONFIG = """
accounts {
  AMQP: {
    jetstream: enabled
    users: [
      {user: svc, password: svc-pw}
      {user: alice, password: alice-pw}
      # May do all but keep policies in the topology bucket.
      {user: nopolicy, password: nopolicy-pw, permissions: {publish: {allow: [">"], deny: ["$KV.amqp.p.>"]}}}
    ]
  }
  PROD: {
    jetstream: enabled
    users: [
      {user: svc-prod, password: svc-prod-pw}
      {user: pat, password: pat-pw}
    ]
  }
}
"""


class ManagementUnderBusAuthentication(cloudtest.CloudOnItsNats):
    """The API signs each user in to the bus and shows it only the vhosts its account joins."""

    NATS_CONFIG = CONFIG

    @classmethod
    def cloud_env(cls, nats):
        cls.api_port = cloudtest.free_port()
        cls.metrics_port = cloudtest.free_port()
        return {"CLOUD_PUBSUB_URL": f"nats://svc:svc-pw@127.0.0.1:{nats.port}",
                "CLOUD_AMQP_VHOSTS": "prod=svc-prod:svc-prod-pw", "CLOUD_AMQP_AUTH": "bus",
                "CLOUD_AMQP_MANAGEMENT_PORT": str(cls.api_port), "CLOUD_AMQP_PROMETHEUS_PORT": str(cls.metrics_port)}

    def test_a_password_the_bus_refuses_is_401(self):
        self.assertIn("Access refused", Admin(self.api_port, "alice", "wrong").refused("list", "queues"))
        status, body = http(self.api_port, "/api/overview", user="nobody", password="x")
        self.assertEqual((status, body["reason"]), (401, "Login failed"))

    def test_a_policy_the_bus_does_not_let_the_user_keep_is_403(self):
        status, body = http(self.api_port, "/api/policies/%2F/forbidden", "PUT",
                            {"pattern": "^x$", "definition": {"max-length": 1}}, user="nopolicy", password="nopolicy-pw")
        self.assertEqual((status, body["error"]), (403, "access_refused"), body)
        self.assertEqual(http(self.api_port, "/api/policies/%2F/forbidden", user="alice", password="alice-pw")[0], 404)
        alice = Admin(self.api_port, "alice", "alice-pw")
        alice.ok("declare", "policy", "name=allowed", "pattern=^x$", 'definition={"max-length":1}')
        self.assertEqual([p["name"] for p in alice.json("list", "policies")], ["allowed"])
        alice.ok("delete", "policy", "name=allowed")

    def test_what_a_signed_in_user_holds_is_counted_unacknowledged(self):
        """A connection's deliveries are held in its user's own bus client, not the adaptor's: the
        API, rabbitmqadmin and Prometheus count them unacknowledged all the same."""
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            host="127.0.0.1", port=self.cloud.amqp_port, credentials=pika.PlainCredentials("alice", "alice-pw"),
            heartbeat=0, socket_timeout=10, blocked_connection_timeout=10))
        try:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.exchange_declare("held-topic", "topic")
            ch.queue_declare("held", durable=True)
            ch.queue_bind("held", "held-topic", "orders.#")
            for n in range(7):
                ch.basic_publish("held-topic", "orders.new", f"m{n}".encode(),
                                 pika.BasicProperties(delivery_mode=2))
            consumer = conn.channel()
            consumer.basic_qos(prefetch_count=2)
            got = []
            consumer.basic_consume("held", lambda c, m, p, body: got.append(m.delivery_tag))
            self.assertTrue(cloudtest.wait_until(lambda: conn.process_data_events(0.05) or len(got) == 2, 10), got)
            alice = Admin(self.api_port, "alice", "alice-pw")

            def counted():
                _, q = http(self.api_port, "/api/queues/%2F/held", user="alice", password="alice-pw")
                listed = next(q for q in alice.json("list", "queues") if q["name"] == "held")
                labels = frozenset({"vhost": "/", "queue": "held"}.items())
                per_queue = samples(self.metrics_port, "/metrics/per-object")
                return [(q["messages_ready"], q["messages_unacknowledged"], q["messages"]),
                        (listed["messages_ready"], listed["messages_unacknowledged"]),
                        (per_queue[("rabbitmq_queue_messages_ready", labels)],
                         per_queue[("rabbitmq_queue_messages_unacked", labels)])]
            self.assertTrue(cloudtest.wait_until(lambda: counted() == [(5, 2, 7), (5, 2), (5, 2)], 10), counted())
            _, overview = http(self.api_port, "/api/overview", user="alice", password="alice-pw")
            self.assertGreaterEqual(overview["queue_totals"]["messages_unacknowledged"], 2)
            ch.queue_delete("held")
            ch.exchange_delete("held-topic")
        finally:
            conn.close()

    def test_each_user_sees_and_changes_its_own_vhost_only(self):
        alice, pat = Admin(self.api_port, "alice", "alice-pw"), Admin(self.api_port, "pat", "pat-pw")
        self.assertEqual([v["name"] for v in alice.json("list", "vhosts")], ["/"])
        self.assertEqual([v["name"] for v in pat.json("list", "vhosts")], ["prod"])
        pat.ok("declare", "queue", "name=ledger", vhost="prod")
        self.assertIn("ledger", [q["name"] for q in pat.json("list", "queues", vhost="prod")])
        self.assertNotIn("ledger", [q["name"] for q in alice.json("list", "queues")])
        status, body = http(self.api_port, "/api/queues/prod", user="alice", password="alice-pw")
        self.assertEqual((status, body["reason"]), (401, "User not authorised to access virtual host"))
        status, _ = http(self.api_port, "/api/queues/prod/intruder", "PUT", {}, user="alice", password="alice-pw")
        self.assertEqual(status, 401)
        self.assertNotIn("intruder", [q["name"] for q in pat.json("list", "queues", vhost="prod")])
        pat.ok("delete", "queue", "name=ledger", vhost="prod")


if __name__ == "__main__":
    unittest.main()
