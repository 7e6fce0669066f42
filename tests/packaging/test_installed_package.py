"""The installed Debian package (issue 7), run by scripts/package-check as the user `cloud`.

CLOUD_BIN is /usr/bin/cloud and the manifest and plugin directory are the packaged ones; the
harness (tests/support/cloudtest.py) gives the host ephemeral ports and a temporary data dir,
on top of the environment package-check read from /etc/default/cloud. Not a ctest test: it
needs the package installed, which needs root.
"""
import pwd
import unittest
import uuid

import pika

import cloudtest

MANIFEST = "/usr/share/cloud/apps.json"
PLUGIN_DIR = "/usr/lib/cloud/plugins"


def process_user(pid):
    with open(f"/proc/{pid}/status") as f:
        uid = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
    return pwd.getpwuid(uid).pw_name


class InstalledPackage(unittest.TestCase):
    def test_packaged_host_serves_amqp_as_the_cloud_user(self):
        self.assertEqual(cloudtest.CLOUD_BIN, "/usr/bin/cloud")
        with cloudtest.Cloud(manifest=MANIFEST, plugin_dir=PLUGIN_DIR) as cloud:
            self.assertEqual(process_user(cloud.proc.pid), "cloud")
            self.assertEqual(cloud.get("/v1/amqp/health"), (200, {"service": "amqp", "status": "ok"}))
            self.assertEqual(round_trip(cloud.amqp_port), b"packaged")


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
