"""The same clients' work on the adaptor and on a private RabbitMQ 3.10 with its management and
prometheus plugins, and the same questions asked of both: the fields the tools read (a queue's
counts and flags, its exchanges and bindings, its consumers, the overview's totals, the
definitions file, Prometheus's queue figures) must answer alike. What differs by design (node
names, RabbitMQ's headers and trace exchanges, its users and permissions in definitions) is
named where it is left out.
"""
import base64
import json
import time
import unittest
import urllib.error
import urllib.request

import pika
import pika.exceptions
from prometheus_client.parser import text_string_to_metric_families

import cloudtest
import rabbitmq
import side_by_side

QUEUE_FIELDS = ("name", "vhost", "durable", "auto_delete", "exclusive", "arguments", "consumers", "messages",
                "messages_ready", "messages_unacknowledged", "state", "type")
# RabbitMQ's standard exchanges the adaptor does not have: headers exchanges and the tracer.
ONLY_RABBITMQ_EXCHANGES = {"amq.headers", "amq.match", "amq.rabbitmq.trace"}


def get(port, path):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                     headers={"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.loads(reply.read())


def request(port, path, method, body=None):
    """(status, JSON or None) of a write."""
    data = None if body is None else json.dumps(body).encode()
    r = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, data=data,
                               headers={"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode(),
                                        "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r, timeout=30) as reply:
            text = reply.read()
            return reply.status, json.loads(text) if text else None
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read() or b"null")


def queue_samples(port, path, queue):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as reply:
        text = reply.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in ("rabbitmq_queue_messages", "rabbitmq_queue_messages_ready", "rabbitmq_queue_messages_unacked",
                          "rabbitmq_queue_consumers") and s.labels.get("queue", queue) == queue:
                out[s.name] = s.value
    return out


# What Grafana's RabbitMQ-Overview dashboard (rabbitmq_prometheus's own) queries.
GRAFANA_OVERVIEW_METRICS = (
    "rabbitmq_queue_messages_ready", "rabbitmq_queue_messages_unacked", "rabbitmq_channel_messages_published_total",
    "rabbitmq_channels", "rabbitmq_channel_consumers", "rabbitmq_connections", "rabbitmq_queues", "rabbitmq_build_info",
    "rabbitmq_identity_info", "rabbitmq_channel_messages_redelivered_total", "rabbitmq_channel_messages_delivered_total",
    "rabbitmq_channel_messages_delivered_ack_total", "rabbitmq_channel_get_total", "rabbitmq_channel_get_ack_total",
    "rabbitmq_resident_memory_limit_bytes", "rabbitmq_process_resident_memory_bytes", "rabbitmq_disk_space_available_bytes",
    "rabbitmq_process_max_fds", "rabbitmq_process_open_fds", "rabbitmq_process_max_tcp_sockets",
    "rabbitmq_process_open_tcp_sockets", "rabbitmq_channel_messages_confirmed_total",
    "rabbitmq_queue_messages_published_total", "rabbitmq_channel_messages_unconfirmed",
    "rabbitmq_channel_messages_unroutable_dropped_total", "rabbitmq_channel_messages_unroutable_returned_total",
    "rabbitmq_channel_messages_acked_total", "rabbitmq_channel_get_empty_total", "rabbitmq_queues_declared_total",
    "rabbitmq_queues_created_total", "rabbitmq_queues_deleted_total", "rabbitmq_channels_opened_total",
    "rabbitmq_channels_closed_total", "rabbitmq_connections_opened_total", "rabbitmq_connections_closed_total")
# Of them, what the adaptor does not have (README, "Management API and metrics"): no memory or
# disk alarm, no per-queue publish counts, unconfirmed publishes and dropped unroutable ones uncounted.
NOT_EXPOSED = {"rabbitmq_resident_memory_limit_bytes", "rabbitmq_disk_space_available_bytes",
               "rabbitmq_queue_messages_published_total", "rabbitmq_channel_messages_unconfirmed",
               "rabbitmq_channel_messages_unroutable_dropped_total"}


class ManagementBesideRabbitMQ(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rmq = rabbitmq.RabbitMQ(management=True).__enter__()
        try:
            cls.api_port, cls.metrics_port = cloudtest.free_port(), cloudtest.free_port()
            cls.cloud = cloudtest.Cloud(env={"CLOUD_AMQP_MANAGEMENT_PORT": str(cls.api_port),
                                             "CLOUD_AMQP_PROMETHEUS_PORT": str(cls.metrics_port)}).__enter__()
        except BaseException:
            cls.rmq.__exit__(None, None, None)
            raise
        cls.brokers = {"adaptor": (cls.cloud.amqp_port, cls.api_port, cls.metrics_port),
                       "rabbitmq": (cls.rmq.amqp_port, cls.rmq.management_port, cls.rmq.prometheus_port)}

    @classmethod
    def tearDownClass(cls):
        cls.cloud.__exit__(None, None, None)
        cls.rmq.__exit__(None, None, None)

    def on_both(self, scenario):
        """scenario(session, api_port, metrics_port) on each broker, both at once → {broker: what it
        returned}."""
        def run(broker):
            amqp_port, api_port, metrics_port = self.brokers[broker]
            session = side_by_side.Session(amqp_port)
            try:
                # The run's word makes each broker's names its own; what is compared says W.
                return json.loads(json.dumps(scenario(session, api_port, metrics_port)).replace(session.word, "W"))
            finally:
                session.close()
        ours, theirs = side_by_side.on_both(run, "adaptor", "rabbitmq")
        return {"adaptor": ours, "rabbitmq": theirs}

    def assert_alike(self, seen):
        self.assertEqual(seen["adaptor"], seen["rabbitmq"], json.dumps(seen, indent=1, sort_keys=True, default=str))

    def test_a_queue_its_bindings_and_its_consumer(self):
        def scenario(s, api, metrics):
            queue, exchange = s.name("orders"), s.name("topic")
            s.ch.exchange_declare(exchange, "topic", durable=True)
            s.ch.queue_declare(queue, durable=True, arguments={"x-message-ttl": 60000, "x-max-length": 100})
            s.ch.queue_bind(queue, exchange, "eu.#")
            for n in range(5):
                s.ch.basic_publish("", queue, f"m{n}".encode())
            consumer = s.conn.channel()
            consumer.basic_qos(prefetch_count=2)
            tag = consumer.basic_consume(queue, lambda *a: None, auto_ack=False)

            def settled():
                q = get(api, f"/api/queues/%2F/{queue}")
                return q.get("messages_unacknowledged") == 2 and q.get("messages_ready") == 3
            # RabbitMQ's figures come from its statistics, emitted every 5 s.
            self.assertTrue(cloudtest.wait_until(settled, 20), get(api, f"/api/queues/%2F/{queue}"))
            q = get(api, f"/api/queues/%2F/{queue}")
            bindings = [{k: b[k] for k in ("source", "destination", "destination_type", "routing_key", "arguments",
                                           "properties_key")}
                        for b in get(api, f"/api/queues/%2F/{queue}/bindings")]
            x = get(api, f"/api/exchanges/%2F/{exchange}")
            consumers = [{"tag": c["consumer_tag"] == tag, "queue": c["queue"]["name"] == queue,
                          "prefetch": c["prefetch_count"], "ack_required": c["ack_required"],
                          "exclusive": c["exclusive"], "active": c["active"]}
                         for c in get(api, "/api/consumers/%2F") if c["queue"]["name"] == queue]
            figures = queue_samples(metrics, "/metrics/per-object", queue)
            consumer.basic_cancel(tag)
            s.ch.queue_delete(queue)
            s.ch.exchange_delete(exchange)
            return {"queue": {k: q[k] for k in QUEUE_FIELDS if k != "name"},
                    "bindings": sorted(bindings, key=json.dumps),
                    "exchange": {k: x[k] for k in ("type", "durable", "auto_delete", "internal", "arguments")},
                    "consumers": consumers, "prometheus": figures}

        self.assert_alike(self.on_both(scenario))

    def test_message_counters_count_the_same_work(self):
        stats = ("publish", "confirm", "return_unroutable", "deliver", "deliver_no_ack", "get", "get_no_ack",
                 "get_empty", "redeliver", "ack", "deliver_get")

        def counted(api):
            overview = get(api, "/api/overview")["message_stats"]
            return {k: overview.get(k, 0) for k in stats}

        def settled(api):
            """The counters once two reads 6 s apart agree (RabbitMQ emits its statistics every 5 s)."""
            before = counted(api)
            for _ in range(5):
                time.sleep(6)
                now = counted(api)
                if now == before:
                    return now
                before = now
            return before

        def scenario(s, api, metrics):
            queue = s.name("counted")
            s.ch.queue_declare(queue, auto_delete=False)
            start = settled(api)
            for n in range(3):
                s.ch.basic_publish("", queue, f"m{n}".encode())
            try:
                s.ch.basic_publish("", s.name("nowhere"), b"x", mandatory=True)
            except pika.exceptions.UnroutableError:
                pass  # pika says so for a returned message on a confirming channel
            plain = s.conn.channel()
            got, _, _ = plain.basic_get(queue, auto_ack=False)
            plain.basic_ack(got.delivery_tag)
            plain.basic_get(queue, auto_ack=True)
            seen = []

            def on_message(channel, method, properties, body):
                seen.append(method.redelivered)
                if not method.redelivered:
                    channel.basic_nack(method.delivery_tag, requeue=True)
                else:
                    channel.basic_ack(method.delivery_tag)
                    channel.stop_consuming()
            plain.basic_consume(queue, on_message)
            plain.start_consuming()
            self.assertEqual(plain.basic_get(queue, auto_ack=True), (None, None, None))
            end = settled(api)
            s.ch.queue_delete(queue)
            return {k: end[k] - start[k] for k in stats}

        seen = self.on_both(scenario)
        self.assertEqual(seen["adaptor"]["publish"], 4, seen)
        self.assert_alike(seen)

    def test_grafanas_overview_dashboard_finds_its_metrics(self):
        def families(port):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as reply:
                return {f.name for f in text_string_to_metric_families(reply.read().decode())}

        def present(metrics):
            # The client's parser names a counter family without its _total.
            return {m for m in GRAFANA_OVERVIEW_METRICS if m in metrics or m.removesuffix("_total") in metrics}
        rabbitmq = present(families(self.rmq.prometheus_port))
        adaptor = present(families(self.metrics_port))
        self.assertEqual(rabbitmq, set(GRAFANA_OVERVIEW_METRICS))
        self.assertEqual(set(GRAFANA_OVERVIEW_METRICS) - adaptor, NOT_EXPOSED)

    def test_exchanges_listed_and_overview_totals(self):
        def scenario(s, api, metrics):
            names = sorted(x["name"] for x in get(api, "/api/exchanges/%2F") if x["name"] not in ONLY_RABBITMQ_EXCHANGES)
            overview = get(api, "/api/overview")
            return {"standard exchanges": [n for n in names if n == "" or n.startswith("amq.")],
                    "overview fields": sorted(k for k in ("object_totals", "queue_totals", "message_stats", "node",
                                                          "listeners", "rabbitmq_version", "management_version",
                                                          "product_name", "product_version") if k in overview),
                    "object totals": sorted(overview["object_totals"]),
                    "rates mode": overview["rates_mode"],
                    "queue totals": sorted(k for k in overview["queue_totals"] if not k.endswith("_details"))}

        self.assert_alike(self.on_both(scenario))

    def test_definitions_name_the_same_objects(self):
        def scenario(s, api, metrics):
            queue, exchange = s.name("defs"), s.name("direct")
            s.ch.exchange_declare(exchange, "direct", durable=True)
            s.ch.queue_declare(queue, durable=True, arguments={"x-dead-letter-exchange": exchange})
            s.ch.queue_bind(queue, exchange, "k")
            defs = get(api, "/api/definitions")
            s.ch.queue_delete(queue)
            s.ch.exchange_delete(exchange)
            return {"queues": [q for q in defs["queues"] if q["name"] == queue],
                    "exchanges": [x for x in defs["exchanges"] if x["name"] == exchange],
                    "bindings": [b for b in defs["bindings"] if b["destination"] == queue],
                    "sections": sorted(k for k in defs if k not in ("users", "permissions"))}

        self.assert_alike(self.on_both(scenario))

    def test_a_policy_is_kept_shown_and_applied_alike(self):
        def scenario(s, api, metrics):
            queue, policy, dlx = s.name("limited"), s.name("limit"), s.name("dlx")
            s.ch.queue_declare(queue, durable=True, arguments={"x-max-length": 10})
            for n in range(5):
                s.ch.basic_publish("", queue, f"m{n}".encode())
            body = {"pattern": f"^{queue}$", "apply-to": "queues", "priority": 1,
                    "definition": {"max-length": 3, "message-ttl": 600000, "dead-letter-exchange": dlx}}
            refusals = [request(api, f"/api/policies/%2F/{policy}", "PUT", bad)[0] for bad in (
                {"definition": {"max-length": 3}}, {"pattern": "^a", "definition": {}},
                {"pattern": "^a", "definition": {"message-ttl": -1}}, {"pattern": "^a", "definition": {"foo": 1}},
                {"pattern": "^a", "apply-to": "streams", "definition": {"expires": 1}})]
            put = [request(api, f"/api/policies/%2F/{policy}", "PUT", body)[0] for _ in range(2)]

            def applied():
                q = get(api, f"/api/queues/%2F/{queue}")
                return q.get("policy") == policy and q.get("messages_ready") == 3
            # RabbitMQ's figures come from its statistics, emitted every 5 s.
            self.assertTrue(cloudtest.wait_until(applied, 20), get(api, f"/api/queues/%2F/{queue}"))
            q = get(api, f"/api/queues/%2F/{queue}")
            got = [s.ch.basic_get(queue, auto_ack=True)[2] for _ in range(4)]
            listed = [p for p in get(api, "/api/policies/%2F") if p["name"] == policy]
            deleted = [request(api, f"/api/policies/%2F/{policy}", "DELETE")[0] for _ in range(2)]
            s.ch.queue_delete(queue)
            return {"refusals": refusals, "put": put, "deleted": deleted, "listed": listed,
                    "queue": {k: q.get(k) for k in ("policy", "effective_policy_definition", "arguments",
                                                    "operator_policy")},
                    "left after the trim": [m.decode() if m else None for m in got]}

        seen = self.on_both(scenario)
        self.assertEqual((seen["adaptor"]["put"], seen["adaptor"]["deleted"], seen["adaptor"]["refusals"],
                          seen["adaptor"]["left after the trim"]),
                         ([201, 204], [204, 404], [400] * 5, ["m2", "m3", "m4", None]), seen)
        self.assert_alike(seen)


if __name__ == "__main__":
    unittest.main()
