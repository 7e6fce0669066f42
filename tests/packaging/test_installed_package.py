"""The installed Debian package, run by scripts/package-check as the user `cloud`.

CLOUD_BIN is /usr/bin/cloud and the manifest and plugin directory are the packaged ones; the
harness (tests/support/cloudtest.py) gives the host ephemeral ports and a temporary data dir,
on top of the environment package-check read from /etc/default/cloud. The host's nats-server
child must run the binary the package ships (/usr/lib/cloud/bin/nats-server). Not a ctest test: it
needs the package installed, which needs root.
"""
import os
import pwd
import unittest
import uuid

import pika

import cloudtest

MANIFEST = "/usr/share/cloud/apps.json"
PLUGIN_DIR = "/usr/lib/cloud/plugins"
SHIPPED_SERVER = os.environ.get("CLOUD_TEST_NATS_SERVER_SHIPPED", "/usr/lib/cloud/bin/nats-server")


def process_user(pid):
    with open(f"/proc/{pid}/status") as f:
        uid = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
    return pwd.getpwuid(uid).pw_name


class InstalledPackage(unittest.TestCase):
    def test_packaged_host_serves_amqp_as_the_cloud_user(self):
        self.assertEqual(cloudtest.CLOUD_BIN, "/usr/bin/cloud")
        # NATS_SERVER_BIN as /etc/default/cloud sets it: unset by default, so the host runs the
        # nats-server the package ships.
        env = {"NATS_SERVER_BIN": os.environ.get("NATS_SERVER_BIN")}
        with cloudtest.Cloud(manifest=MANIFEST, plugin_dir=PLUGIN_DIR, env=env) as cloud:
            self.assertEqual(process_user(cloud.proc.pid), "cloud")
            self.assertEqual(cloud.get("/v1/amqp/health"), (200, {"service": "amqp", "status": "ok"}))
            self.assertEqual(round_trip(cloud.amqp_port), b"packaged")
            [child] = cloud.nats_children()
            if env["NATS_SERVER_BIN"] is None:
                self.assertEqual(cloudtest.executable_of(child), SHIPPED_SERVER)
            _, health = cloud.get("/v1/health")
            pubsub = next(s for s in health["services"] if s["service"] == "pubsub")
            self.assertEqual(pubsub.get("server_version"), cloudtest.NATS_SERVER_VERSION, health)


def round_trip(port):
    """Publishes one confirmed message to a new queue and gets it back (then acks it)."""
    params = pika.ConnectionParameters(host="127.0.0.1", port=port, heartbeat=0,
                                       connection_attempts=3, retry_delay=0.5)
    with pika.BlockingConnection(params) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        queue = f"package-check-{uuid.uuid4().hex[:8]}"
        ch.queue_declare(queue)
        ch.basic_publish("", queue, b"packaged")
        method, _, body = ch.basic_get(queue, auto_ack=False)
        if method is not None:
            ch.basic_ack(method.delivery_tag)
        return body


if __name__ == "__main__":
    unittest.main(verbosity=2)
