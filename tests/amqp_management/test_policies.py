"""RabbitMQ's policies through the management API, on two `cloud` replicas of one bus: a policy put
through one replica (by rabbitmqadmin, as operators do) gives the queues it matches their features
on both, as RabbitMQ applies one: matched by pattern, the highest priority first, a queue's own
arguments winning (the smaller of two limits); a length limit trims at once, an expiry counts from
the policy. What the adaptor does not have is refused with 400 naming it.
"""
import unittest

import pika

import cloudtest
import pikatest
from test_management import Admin, http

TTL_DLX = '{"message-ttl":200,"dead-letter-exchange":"","dead-letter-routing-key":"pol-dead"}'


class PoliciesOnTwoReplicas(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.bus = cls.enterClassContext(cloudtest.NatsServer())
        cls.api_ports = [cloudtest.free_port(), cloudtest.free_port()]
        cls.clouds = [cls.enterClassContext(cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": cls.bus.url,
                                                                 "CLOUD_AMQP_MANAGEMENT_PORT": str(port)}))
                      for port in cls.api_ports]
        cls.admin = Admin(cls.api_ports[0])

    def setUp(self):
        # The clients use the replica the operator does not.
        self.conn = self.enterContext(pikatest.connect(self.clouds[1]))
        self.ch = self.conn.channel()
        self.ch.confirm_delivery()

    def queue_on(self, replica, name):
        status, body = http(self.api_ports[replica], f"/api/queues/%2F/{name}")
        self.assertEqual(status, 200, body)
        return body

    def wait_for_policy(self, name, policy):
        """Until both replicas say the queue's policy is `policy` (None: no policy)."""
        for replica in (0, 1):
            self.assertTrue(cloudtest.wait_until(lambda: self.queue_on(replica, name)["policy"] == policy, 10),
                            self.queue_on(replica, name))

    def count(self, queue):
        return self.ch.queue_declare(queue, passive=True).method.message_count

    def test_a_ttl_and_dead_letter_policy_applies_on_every_replica_and_goes_with_it(self):
        self.ch.queue_declare("pol-dead")
        self.ch.queue_declare("pol-work")
        self.admin.ok("declare", "policy", "name=pol-ttl", "pattern=^pol-work$", f"definition={TTL_DLX}",
                      "apply-to=queues", "priority=1")
        self.addCleanup(self.admin.run, "delete", "policy", "name=pol-ttl")
        self.wait_for_policy("pol-work", "pol-ttl")
        shown = self.queue_on(0, "pol-work")
        self.assertEqual((shown["arguments"], shown["effective_policy_definition"]),
                         ({}, {"message-ttl": 200, "dead-letter-exchange": "", "dead-letter-routing-key": "pol-dead"}))
        self.assertEqual(self.admin.json("list", "policies"),
                         [{"vhost": "/", "name": "pol-ttl", "pattern": "^pol-work$", "apply-to": "queues",
                           "definition": {"message-ttl": 200, "dead-letter-exchange": "",
                                          "dead-letter-routing-key": "pol-dead"}, "priority": 1}])
        # Nobody reads pol-work: its message expires there and is dead-lettered, by the policy alone.
        self.ch.basic_publish("", "pol-work", b"late")
        self.assertTrue(cloudtest.wait_until(lambda: self.count("pol-dead") == 1, 10))
        method, properties, body = self.ch.basic_get("pol-dead", auto_ack=True)
        self.assertEqual((body, properties.headers["x-death"][0]["reason"]), (b"late", "expired"))
        # Its arguments are still what it declared: a redeclaration without any is no change.
        self.ch.queue_declare("pol-work")
        self.admin.ok("delete", "policy", "name=pol-ttl")
        self.wait_for_policy("pol-work", None)
        self.assertEqual(self.queue_on(1, "pol-work")["effective_policy_definition"], {})
        self.assertEqual(http(self.api_ports[0], "/api/policies/%2F/pol-ttl", "DELETE")[0], 404)

    def test_a_length_limit_policy_trims_at_once_and_the_smaller_limit_wins(self):
        self.ch.queue_declare("pol-capped")
        self.ch.queue_declare("pol-capped-args", arguments={"x-max-length": 1})
        for n in range(5):
            self.ch.basic_publish("", "pol-capped", f"m{n}".encode())
        self.admin.ok("declare", "policy", "name=pol-limit", "pattern=^pol-capped", 'definition={"max-length":2}')
        self.addCleanup(self.admin.run, "delete", "policy", "name=pol-limit")
        self.assertTrue(cloudtest.wait_until(lambda: self.count("pol-capped") == 2, 10), self.count("pol-capped"))
        self.wait_for_policy("pol-capped", "pol-limit")
        self.ch.basic_publish("", "pol-capped", b"m5")
        for n in range(3):
            self.ch.basic_publish("", "pol-capped-args", f"a{n}".encode())
        self.assertEqual(self.count("pol-capped-args"), 1)  # its own x-max-length, the smaller
        got = [self.ch.basic_get("pol-capped", auto_ack=True)[2] for _ in range(3)]
        self.assertEqual(got, [b"m4", b"m5", None])  # drop-head: the oldest went
        self.assertEqual(self.ch.basic_get("pol-capped-args", auto_ack=True)[2], b"a2")

    def test_an_expiry_policy_deletes_the_queues_nobody_uses_counting_from_the_policy(self):
        self.ch.queue_declare("pol-idle")
        self.ch.queue_declare("pol-idle-read")
        self.ch.basic_consume("pol-idle-read", lambda *a: None)
        self.admin.ok("declare", "policy", "name=pol-expires", "pattern=^pol-idle", 'definition={"expires":500}')
        self.addCleanup(self.admin.run, "delete", "policy", "name=pol-expires")

        def gone():  # asked of the API: a passive declaration is a use, as in RabbitMQ
            return http(self.api_ports[1], "/api/queues/%2F/pol-idle")[0] == 404
        self.assertTrue(cloudtest.wait_until(gone, 15, interval=0.2))
        self.assertEqual(self.count("pol-idle-read"), 0)  # it has a consumer: still there

    def test_what_rabbitmq_refuses_and_what_the_adaptor_lacks_is_400_naming_it(self):
        cases = [
            ({"definition": {"expires": 10}}, "the policy has no pattern"),
            ({"pattern": "^a", "definition": {}}, "no policy provided"),
            ({"pattern": "(", "definition": {"expires": 10}}, "pattern should be regular expression"),
            ({"pattern": "^a", "definition": {"message-ttl": -1}}, "-1 is not a valid message TTL"),
            ({"pattern": "^a", "definition": {"queue-mode": "lazy"}}, "policy setting 'queue-mode' is not implemented"),
            ({"pattern": "^a", "definition": {"ha-mode": "all"}}, "policy setting 'ha-mode' is not implemented"),
            ({"pattern": "^a", "definition": {"foo": 1}}, "'foo' is not a recognised policy setting"),
            ({"pattern": "^a", "apply-to": "streams", "definition": {"expires": 10}}, "apply-to \"streams\" unrecognised"),
        ]
        for body, reason in cases:
            status, answer = http(self.api_ports[0], "/api/policies/%2F/pol-bad", "PUT", body)
            self.assertEqual((status, answer["error"]), (400, "bad_request"), body)
            self.assertTrue(answer["reason"].startswith("Validation failed\n\n" + reason), answer)
        self.assertEqual(http(self.api_ports[0], "/api/policies/%2F/pol-bad")[0], 404)
        self.assertEqual(http(self.api_ports[0], "/api/policies/no-such-vhost/p", "PUT",
                              {"pattern": "^a", "definition": {"expires": 10}})[0], 404)
        # Runtime parameters and operator policies: none is set, and none can be.
        for path in ("/api/parameters", "/api/parameters/shovel", "/api/parameters/shovel/%2F", "/api/operator-policies"):
            self.assertEqual(http(self.api_ports[0], path), (200, []), path)
        status, answer = http(self.api_ports[0], "/api/parameters/shovel/%2F/s", "PUT", {"value": {}})
        self.assertEqual(status, 400)
        self.assertIn("component shovel not found", answer["reason"])
        status, answer = http(self.api_ports[0], "/api/operator-policies/%2F/o", "PUT",
                              {"pattern": "^a", "definition": {"max-length": 1}})
        self.assertEqual(status, 400)
        self.assertIn("operator policies are not implemented", answer["reason"])

    def test_definitions_export_and_import_carry_policies(self):
        self.admin.ok("declare", "policy", "name=pol-defs", "pattern=^pol-defs$", 'definition={"max-length":7}',
                      "priority=4")
        self.addCleanup(self.admin.run, "delete", "policy", "name=pol-defs")
        exported = http(self.api_ports[0], "/api/definitions")[1]
        mine = [p for p in exported["policies"] if p["name"] == "pol-defs"]
        self.assertEqual(mine, [{"vhost": "/", "name": "pol-defs", "pattern": "^pol-defs$", "apply-to": "all",
                                 "definition": {"max-length": 7}, "priority": 4}])
        self.admin.ok("delete", "policy", "name=pol-defs")
        status, _ = http(self.api_ports[1], "/api/definitions", "POST", {"policies": mine})
        self.assertEqual(status, 204)
        self.assertTrue(cloudtest.wait_until(lambda: http(self.api_ports[0], "/api/policies/%2F/pol-defs")[0] == 200, 10))
        self.assertEqual(http(self.api_ports[0], "/api/policies/%2F/pol-defs"), (200, mine[0]))

if __name__ == "__main__":
    unittest.main()
