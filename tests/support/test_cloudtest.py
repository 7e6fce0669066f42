"""The harness's own contract: it finds the host's ports, and leaves nothing behind."""
import os
import socket
import unittest

import cloudtest


class HarnessTest(unittest.TestCase):
    def test_boot_reports_ports_and_stop_leaves_nothing(self):
        cloud = cloudtest.Cloud()
        with cloud:
            self.assertIsNotNone(cloud.http_port)
            self.assertTrue(cloud.pubsub_url.startswith("nats://127.0.0.1:"), cloud.log)
            self.assertEqual(len(cloud.nats_children()), 1, cloud.log)
        self.assertEqual(cloud.proc.returncode, 0, cloud.log)
        self.assertFalse(os.path.exists(cloud.tmp))

    def test_the_bus_is_the_server_ctest_named(self):
        """The plain test runs on the pinned nats-server, its `.floor` twin on the floor: the
        harness's NATS_SERVER reports NATS_SERVER_VERSION, the host's child runs that very file,
        and /v1/health names its version."""
        versions = cloudtest.nats_server_versions()
        self.assertIn(cloudtest.NATS_SERVER_VERSION, (versions["NATS_SERVER_PINNED"], versions["NATS_SERVER_FLOOR"]),
                      "ctest sets NATS_SERVER_VERSION (cmake/Testing.cmake)")
        self.assertEqual(cloudtest.server_version_of(cloudtest.NATS_SERVER), cloudtest.NATS_SERVER_VERSION)
        with cloudtest.Cloud() as cloud:
            [pid] = cloud.nats_children()
            self.assertEqual(cloudtest.executable_of(pid), os.path.realpath(cloudtest.NATS_SERVER))
            _, body = cloud.get("/v1/health")
            pubsub = next(s for s in body["services"] if s["service"] == "pubsub")
            self.assertEqual(pubsub.get("server_version"), cloudtest.NATS_SERVER_VERSION, body)

    def test_a_cluster_node_whose_port_was_taken_meanwhile_starts_on_fresh_ports(self):
        cluster = cloudtest.NatsCluster(3)
        taken = cluster.nodes[1]["route"]
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", taken))
            squatter.listen()
            with cluster:
                self.assertNotEqual(cluster.nodes[1]["route"], taken)
                self.assertEqual(len(cluster.running()), 3)
                self.assertIn(f":{cluster.nodes[1]['port']}", cluster.url)

    def test_a_chosen_port_is_free_and_below_what_the_kernel_hands_out_for_port_0(self):
        # A port-0 pick (the embedded nats-server's, a client's own end) cannot take it while a
        # restarted `cloud` has not bound it yet.
        for _ in range(50):
            port = cloudtest.free_port()
            self.assertLess(port, cloudtest.ephemeral_low())
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", port))

    def test_a_none_in_env_unsets_the_variable(self):
        cloud = cloudtest.Cloud(wait=False, env={"NATS_SERVER_BIN": None, "CLOUD_EXTRA": "x"})
        try:
            self.assertNotIn("NATS_SERVER_BIN", cloud.env)
            self.assertEqual(cloud.env["CLOUD_EXTRA"], "x")
        finally:
            cloud.cleanup()

    def test_available_manifest_keeps_only_built_rows(self):
        cloud = cloudtest.Cloud(wait=False)
        try:
            self.assertEqual(cloud.rows[0], "pubsub")
            for name in cloud.rows:
                row = next(r for r in cloudtest.manifest_rows() if r["name"] == name)
                self.assertTrue(cloudtest.have_plugin(row["library"]))
        finally:
            cloud.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)
