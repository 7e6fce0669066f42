"""The host booted with the build's manifest: routes, boot order, stopping, the bus dying."""
import os
import shutil
import signal
import subprocess
import unittest

import cloudtest


class RunningHostTest(cloudtest.OneCloudTest):
    """One boot shared by the read-only checks."""

    def test_every_row_has_a_constant_health_route(self):
        for name in self.cloud.rows:
            status, body = self.cloud.get(f"/v1/{name}/health")
            self.assertEqual(status, 200)
            self.assertEqual(body, {"service": name, "status": "ok"})

    def test_amqp_row_is_served_when_its_plugin_is_built(self):
        if not cloudtest.have_plugin("libcloud_amqp.so"):
            self.assertNotIn("amqp", self.cloud.rows)  # not built yet: the harness left it out
            return
        self.assertIn("amqp", self.cloud.rows)
        status, body = self.cloud.get("/v1/amqp/health")
        self.assertEqual((status, body), (200, {"service": "amqp", "status": "ok"}))

    def test_overall_health_lists_every_row(self):
        status, body = self.cloud.get("/v1/health")
        self.assertEqual(status, 200)
        self.assertEqual(body["status"], "ok")
        self.assertEqual([s["service"] for s in body["services"]], self.cloud.rows)
        self.assertTrue(all(s["state"] == "mounted" for s in body["services"]), body)
        self.assertEqual(body["degraded"], [])

    def test_overall_health_names_the_bus_server_version(self):
        _, body = self.cloud.get("/v1/health")
        services = {s["service"]: s for s in body["services"]}
        self.assertTrue(cloudtest.NATS_SERVER_VERSION, "ctest sets NATS_SERVER_VERSION")
        self.assertEqual(services["pubsub"].get("server_version"), cloudtest.NATS_SERVER_VERSION, body)
        # Only a capability that published one has it.
        for name, service in services.items():
            if name != "pubsub":
                self.assertNotIn("server_version", service)

    def test_unknown_path_is_json_404_and_other_methods_405(self):
        status, body = self.cloud.get("/v1/nothing-here")
        self.assertEqual(status, 404)
        self.assertEqual(body["path"], "/v1/nothing-here")
        status, body = self.cloud.get("/v1/health", method="POST")
        self.assertEqual(status, 405)
        self.assertIn("only GET", body["error"])

    def test_boot_order_and_addresses_are_logged(self):
        log = self.cloud.log
        pubsub = self.cloud.log_index("mounted pubsub")
        self.assertGreaterEqual(pubsub, 0, log)
        self.assertIn("cloud[pubsub]: nats-server (pid", log)
        self.assertRegex(log, r"listening on nats://127\.0\.0\.1:\d+")
        # The startup line names the server's version and the binary launched.
        self.assertIn(f", nats-server {cloudtest.NATS_SERVER_VERSION} ({cloudtest.NATS_SERVER}), JetStream store", log)
        self.assertIn("http listening on http://127.0.0.1:", log)
        if "amqp" in self.cloud.rows:
            amqp = self.cloud.log_index("mounted amqp")
            self.assertGreater(amqp, pubsub, log)
            self.assertIn(str(self.cloud.amqp_port), log)

    def test_version_and_check(self):
        out = subprocess.run([cloudtest.CLOUD_BIN, "--version"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0)
        self.assertRegex(out.stdout, r"^cloud \d+\.\d+\.\d+ \(plugin ABI \d+, ")
        out = subprocess.run([cloudtest.CLOUD_BIN, "--check", "--manifest", self.cloud.manifest,
                              "--plugin-dir", cloudtest.PLUGIN_DIR], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("row 0 (pubsub): ok", out.stderr)
        self.assertIn("check: ok", out.stderr)


class StoppingTest(unittest.TestCase):
    def test_sigterm_exits_zero_and_stops_nats_server(self):
        cloud = cloudtest.Cloud()
        with cloud:
            nats = cloud.nats_children()
            self.assertEqual(len(nats), 1, cloud.log)
            code = cloud.stop(signal.SIGTERM)  # asserts no nats-server survives
        self.assertEqual(code, 0, cloud.log)
        self.assertIn("received SIGTERM; stopping", cloud.log)
        self.assertIn("stopped", cloud.log)
        # Reverse order: amqp stops before pubsub.
        if "amqp" in cloud.rows:
            self.assertLess(cloud.log_index("shutting down amqp"), cloud.log_index("shutting down pubsub"))
        self.assertFalse(cloudtest.Cloud._accepts(cloud.http_port))

    def test_sigint_exits_zero(self):
        cloud = cloudtest.Cloud()
        with cloud:
            code = cloud.stop(signal.SIGINT)
        self.assertEqual(code, 0, cloud.log)

    def test_sigkill_of_the_host_leaves_no_nats_server(self):
        cloud = cloudtest.Cloud()
        with cloud:
            nats = cloud.nats_children()
            self.assertEqual(len(nats), 1)
            code = cloud.stop(signal.SIGKILL)  # PR_SET_PDEATHSIG takes the child down
        self.assertEqual(code, -signal.SIGKILL)
        for pid in nats:
            self.assertFalse(os.path.exists(f"/proc/{pid}") and pid in cloudtest.pids_running("nats-server"))

    def test_nats_server_dying_after_boot_is_restarted_on_its_port_and_store(self):
        cloud = cloudtest.Cloud()
        with cloud:
            [pid] = cloud.nats_children()
            port = cloud.nats_port
            os.kill(pid, signal.SIGKILL)

            def restarted():
                children = cloud.nats_children()
                _, body = cloud.get("/v1/health")
                return children and children != [pid] and body["degraded"] == []
            self.assertTrue(cloudtest.wait_until(restarted, 30), cloud.log)
            self.assertIn("pubsub degraded: nats-server killed by signal 9 (Killed); the bus is gone, restarting it",
                          cloud.log)
            [new_pid] = cloud.nats_children()
            self.assertIn(f"nats-server (pid {pid}) killed by signal 9 (Killed); restarted it as pid {new_pid} "
                          "on the same port and store", cloud.log)
            self.assertIn("pubsub recovered", cloud.log)
            self.assertIn(f"-p {port} ", " ".join(cloudtest.command_line_of(new_pid)) + " ")
            self.assertIn(cloud.data_dir, " ".join(cloudtest.command_line_of(new_pid)))
            # Liveness routes stay constant (HIP-1326, "It mounts one HTTP route, and does not serve
            # it").
            self.assertEqual(cloud.get("/v1/pubsub/health"), (200, {"service": "pubsub", "status": "ok"}))

    def test_with_restarts_off_a_dead_nats_server_leaves_pubsub_degraded(self):
        cloud = cloudtest.Cloud(env={"CLOUD_PUBSUB_RESTARTS": "0"})
        with cloud:
            [pid] = cloud.nats_children()
            os.kill(pid, signal.SIGKILL)

            def degraded():
                _, body = cloud.get("/v1/health")
                return body["status"] == "degraded"
            self.assertTrue(cloudtest.wait_until(degraded, 20), cloud.log)
            _, body = cloud.get("/v1/health")
            reasons = {d["service"]: d["reason"] for d in body["degraded"]}
            self.assertEqual(reasons["pubsub"], "nats-server killed by signal 9 (Killed); the bus is gone "
                                                "(CLOUD_PUBSUB_RESTARTS=0: not restarted)")
            self.assertEqual(cloud.nats_children(), [])

    def test_a_nats_server_that_cannot_come_back_is_given_up_after_the_restarts_allowed(self):
        cloud = cloudtest.Cloud(env={"CLOUD_PUBSUB_RESTARTS": "2"})
        binary = os.path.join(cloud.tmp, "nats-server")
        shutil.copy2(cloudtest.NATS_SERVER, binary)
        cloud.env["NATS_SERVER_BIN"] = binary
        with cloud:
            [pid] = cloud.nats_children()
            os.remove(binary)
            os.kill(pid, signal.SIGKILL)

            def gave_up():
                _, body = cloud.get("/v1/health")
                return "gave up" in " ".join(d["reason"] for d in body["degraded"])
            self.assertTrue(cloudtest.wait_until(gave_up, 30), cloud.log)
            _, body = cloud.get("/v1/health")
            [reason] = [d["reason"] for d in body["degraded"] if d["service"] == "pubsub"]
            self.assertTrue(reason.startswith("nats-server killed by signal 9 (Killed); the bus is gone: gave up "
                                              "after 2 restarts in a row (CLOUD_PUBSUB_RESTARTS); the last one: "
                                              f"cannot execute {binary}: No such file or directory"), reason)
            self.assertIn("restart 1 of 2 of nats-server failed: cannot execute", cloud.log)

    def test_pubsub_sync_always_makes_the_server_fsync_before_each_ack(self):
        with cloudtest.Cloud(env={"CLOUD_PUBSUB_SYNC": "always"}) as cloud:
            with open(os.path.join(cloud.data_dir, "pubsub", "cloud-pubsub.conf")) as f:
                self.assertIn("jetstream {\n  sync_interval: always\n}", f.read())
            _, body = cloud.get("/v1/health")
            self.assertEqual(body["degraded"], [], cloud.log)

    def test_a_host_whose_bus_just_died_boots_again_at_once_on_the_same_port(self):
        # The dead server's connections leave TIME_WAIT sockets on its port: no conflict for it.
        port = cloudtest.free_port()
        cloud = cloudtest.Cloud(env={"CLOUD_PUBSUB_PORT": str(port), "CLOUD_PUBSUB_RESTARTS": "0"})
        with cloud:
            self.assertEqual(cloud.nats_port, port)
            [pid] = cloud.nats_children()
            os.kill(pid, signal.SIGKILL)
            self.assertTrue(cloudtest.wait_until(lambda: not cloud.nats_children(), 10), cloud.log)
            self.assertEqual(cloud.restart(), 0, cloud.previous_log)
            self.assertEqual(cloud.nats_port, port, cloud.log)


class DefaultServerTest(unittest.TestCase):
    def test_unset_nats_server_bin_launches_the_pinned_server_beside_the_plugins(self):
        """No NATS_SERVER_BIN: pubsub runs <plugin dir>/../bin/nats-server, the pinned build the
        build tree holds at lib/cloud/bin (as the package does at /usr/lib/cloud/bin)."""
        shipped = os.path.normpath(os.path.join(cloudtest.PLUGIN_DIR, "..", "bin", "nats-server"))
        pinned = cloudtest.nats_server_versions()["NATS_SERVER_PINNED"]
        cloud = cloudtest.Cloud(env={"NATS_SERVER_BIN": None})
        with cloud:
            [pid] = cloud.nats_children()
            self.assertEqual(cloudtest.executable_of(pid), os.path.realpath(shipped))
            self.assertIn(f", nats-server {pinned} ({shipped}), JetStream store", cloud.log)
            _, body = cloud.get("/v1/health")
            self.assertEqual(body["services"][0]["server_version"], pinned, body)
        self.assertEqual(cloud.proc.returncode, 0, cloud.log)


class ExternalBusTest(unittest.TestCase):
    def test_pubsub_url_at_an_existing_server_launches_nothing(self):
        with cloudtest.NatsServer() as nats:
            cloud = cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": nats.url})
            with cloud:
                self.assertEqual(cloud.nats_children(), [])
                self.assertEqual(cloud.pubsub_url, nats.url)
                self.assertIn("launched nothing", cloud.log)
                self.assertNotIn("nats-server (pid", cloud.log)
                # The dialled server's version, read from its INFO: logged and on /v1/health.
                self.assertIn(f"nats-server {cloudtest.NATS_SERVER_VERSION} at {nats.url}", cloud.log)
                _, body = cloud.get("/v1/health")
                self.assertEqual(body["services"][0]["server_version"], cloudtest.NATS_SERVER_VERSION, body)
            self.assertEqual(cloud.proc.returncode, 0)
            self.assertIsNone(nats.proc.poll(), "the host must not stop a server it did not start")


if __name__ == "__main__":
    unittest.main(verbosity=2)
