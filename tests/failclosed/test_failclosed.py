"""HIP-1326, "Fail closed at boot": amqp's mount fails CLOSED. For each way the bus or the port
can be wrong, `cloud` exits non-zero within the startup window, the log names the failing step,
and nothing accepts on the AMQP port. A bus below the adaptor's floor (nats-server 2.14.3) is
one of them: Debian 12's 2.9.10 (CLOUD_TEST_NATS_SERVER_BELOW_FLOOR) is this suite's fixture,
the only place the project runs it."""
import os
import socket
import subprocess
import tempfile
import shutil
import time
import unittest

import cloudtest
from natsraw import NatsRaw

WINDOW = 10  # CLOUD_STARTUP_TIMEOUT given to each boot, seconds
SLACK = 20   # process start/stop under sanitizers on a loaded 2-core machine


class BareNats:
    """A nats-server without JetStream (no -js), stopped by PID."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="failclosed-nats-")
        self.port = cloudtest.free_port()
        self.url = f"nats://127.0.0.1:{self.port}"

    def __enter__(self):
        self.proc = subprocess.Popen([cloudtest.NATS_SERVER, "-a", "127.0.0.1", "-p", str(self.port)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, cwd=self.tmp)
        if not cloudtest.wait_until(lambda: cloudtest.Cloud._accepts(self.port), 20):
            self.__exit__()
            raise AssertionError("the test's nats-server (no JetStream) did not start")
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)
        return False


class FailClosedTest(unittest.TestCase):
    def setUp(self):
        # Not a skip: these tests exist to check the amqp plugin, so its absence is a failure.
        self.assertTrue(cloudtest.have_plugin("libcloud_amqp.so"),
                        f"libcloud_amqp.so is not built in {cloudtest.PLUGIN_DIR}: build target cloud_amqp")

    def boot_fails(self, env, amqp_port_held=False):
        """Boots with `env`, expects a non-zero exit within the window; returns the log."""
        env = dict(env, CLOUD_STARTUP_TIMEOUT=f"{WINDOW}s")
        cloud = cloudtest.Cloud(wait=False, env=env)
        try:
            started = time.monotonic()
            cloud.start()
            code = cloud.wait_exit(timeout=WINDOW + SLACK)
            took = time.monotonic() - started
            cloud.assert_no_nats_survives()
            self.assertNotEqual(code, 0, cloud.log)
            self.assertLess(took, WINDOW + SLACK, cloud.log)
            self.assertIn("boot failed: ", cloud.log)
            self.assertNotIn("mounted amqp", cloud.log)
            if not amqp_port_held:
                self.assertFalse(cloudtest.Cloud._accepts(cloud.amqp_port), "the AMQP port accepts after a failed boot")
            return cloud.log
        finally:
            cloud.cleanup()

    def below_floor_server(self):
        binary = cloudtest.NATS_SERVER_BELOW_FLOOR
        self.assertTrue(os.access(binary, os.X_OK),
                        f"{binary} (Debian 12's nats-server 2.9.10, the below-the-floor fixture) is missing: "
                        "run scripts/install-deps")
        self.assertEqual(cloudtest.server_version_of(binary), "2.9.10")
        return binary

    def assert_refused_below_the_floor(self, log):
        self.assertIn("row 1 (amqp): bus version: the bus is nats-server 2.9.10, older than 2.14.3", log)
        self.assertIn("CLOUD_PUBSUB_URL", log)
        self.assertIn("NATS_SERVER_BIN", log)
        self.assertIn("shutting down pubsub", log)

    def test_an_embedded_server_below_the_floor_is_refused(self):
        log = self.boot_fails({"NATS_SERVER_BIN": self.below_floor_server()})
        self.assertIn("mounted pubsub", log)  # pubsub runs it; amqp refuses it
        self.assertIn("nats-server 2.9.10 (", log)
        self.assert_refused_below_the_floor(log)

    def test_an_existing_bus_below_the_floor_is_refused(self):
        with cloudtest.NatsServer(binary=self.below_floor_server()) as bus:
            log = self.boot_fails({"CLOUD_PUBSUB_URL": bus.url})
            self.assertIsNone(bus.proc.poll(), "the host must not stop a server it did not start")
        self.assertIn(f"nats-server 2.9.10 at {bus.url}", log)
        self.assert_refused_below_the_floor(log)

    def test_bus_unreachable(self):
        url = f"nats://127.0.0.1:{cloudtest.free_port()}"
        log = self.boot_fails({"CLOUD_PUBSUB_URL": url})
        # pubsub (row 0) dials the URL first; whichever row notices, the log names the bus.
        self.assertIn(url, log)
        self.assertTrue("is not reachable" in log or f"dial {url}" in log, log)

    def test_jetstream_disabled_on_the_bus(self):
        with BareNats() as bus:
            log = self.boot_fails({"CLOUD_PUBSUB_URL": bus.url})
        self.assertIn("row 1 (amqp): ", log)
        self.assertIn("stream AMQP: ", log)
        self.assertIn("JetStream is not enabled", log)

    def test_a_conflicting_amqp_stream(self):
        with cloudtest.NatsServer() as bus:
            nats = NatsRaw(bus.port)
            created = nats.api("STREAM.CREATE.AMQP", {"name": "AMQP", "subjects": ["amqp.>"], "retention": "workqueue"})
            self.assertNotIn("error", created)
            log = self.boot_fails({"CLOUD_PUBSUB_URL": bus.url})
            # Refused, and left exactly as it was.
            self.assertEqual(nats.api("STREAM.INFO.AMQP")["config"]["retention"], "workqueue")
            nats.close()
        self.assertIn("row 1 (amqp): ", log)
        self.assertIn("stream AMQP: ", log)
        self.assertIn("retention is workqueue, expected limits", log)

    def test_the_bucket_cannot_be_created(self):
        with cloudtest.NatsServer() as bus:
            nats = NatsRaw(bus.port)
            # A stream already holds the bucket's name but is not a key-value bucket.
            created = nats.api("STREAM.CREATE.KV_amqp", {"name": "KV_amqp", "subjects": ["legacy.>"]})
            self.assertNotIn("error", created)
            log = self.boot_fails({"CLOUD_PUBSUB_URL": bus.url})
            nats.close()
        self.assertIn("row 1 (amqp): ", log)
        self.assertIn("bucket amqp: ", log)
        self.assertIn("KV_amqp", log)

    def test_an_account_with_fewer_consumers_than_the_queues_need(self):
        config = ("accounts { APP: { jetstream: { max_consumers: 1500 }, "
                  "users: [{user: svc, password: svc-pw}] } }\n")
        with cloudtest.NatsServer(config=config) as bus:
            url = f"nats://svc:svc-pw@127.0.0.1:{bus.port}"
            log = self.boot_fails({"CLOUD_PUBSUB_URL": url})
            # Within the account's limit the same bus is taken.
            with cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": url, "CLOUD_AMQP_MAX_QUEUES": "500"}) as fits:
                self.assertIn("mounted amqp", fits.log)
        self.assertIn("row 1 (amqp): ", log)
        self.assertIn("stream AMQP: the NATS account allows a stream 1500 consumers (its max_consumers), and stream AMQP "
                      "needs 1001000 (CLOUD_AMQP_MAX_QUEUES=1000000 plus 1000 for the adaptor's own); "
                      "set CLOUD_AMQP_MAX_QUEUES to 500 or less, or raise the account's max_consumers", log)

    def test_the_amqp_port_is_already_bound(self):
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen()
            port = holder.getsockname()[1]
            log = self.boot_fails({"CLOUD_AMQP_PORT": str(port)}, amqp_port_held=True)
        self.assertIn("row 1 (amqp): ", log)
        self.assertIn(str(port), log)
        self.assertIn("mounted pubsub", log)
        self.assertIn("shutting down pubsub", log)


if __name__ == "__main__":
    unittest.main(verbosity=2)
