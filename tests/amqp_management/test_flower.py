"""Celery Flower (PyPI's, as scripts/install-deps installs it) pointed at the adaptor as at RabbitMQ:
`--broker` the AMQP port, `--broker_api` the management API. Its queue lengths (GET
/api/queues/length, what its Broker tab shows) must be the queues' depths as the clients left them.
"""
import json
import os
import subprocess
import tempfile
import unittest
import urllib.error
import urllib.request

import cloudtest
import pikatest

REQUIREMENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flower-requirements.txt")
# The release scripts/install-deps installs: the requirement's.
FLOWER_VERSION = next(line.split()[0].split("==")[1] for line in open(REQUIREMENTS) if line.startswith("flower=="))


def flower_dir():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    tools = os.environ.get("CLOUD_TOOLS_DIR") or os.path.join(cache, "cloud-tools")
    return os.path.join(tools, f"flower-{FLOWER_VERSION}")


def lengths(port):
    """Flower's {queue: its queue object} (None while Flower does not answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/queues/length", timeout=10) as reply:
            return {q["name"]: q for q in json.loads(reply.read())["active_queues"]}
    except (urllib.error.URLError, ConnectionError):
        return None


class FlowerReadsTheQueues(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        path = flower_dir()
        if not os.path.isdir(os.path.join(path, "flower")):
            raise AssertionError(f"Flower {FLOWER_VERSION} is not in {path}: run scripts/install-deps")
        cls.api_port, cls.flower_port = cloudtest.free_port(), cloudtest.free_port()
        # Celery's own names hold dots (celery.pidbox, celeryev.<id>).
        cls.cloud = cls.enterClassContext(cloudtest.Cloud(env={"CLOUD_AMQP_MANAGEMENT_PORT": str(cls.api_port),
                                                               "CLOUD_AMQP_NAMES": "escaped"}))
        cls.log = cls.enterClassContext(tempfile.NamedTemporaryFile("w+", prefix="cloudtest-flower-", suffix=".log"))
        env = dict(os.environ, PYTHONPATH=path, FLOWER_UNAUTHENTICATED_API="true")
        cls.flower = subprocess.Popen(
            ["/usr/bin/python3", "-m", "celery", "--broker", f"amqp://guest:guest@127.0.0.1:{cls.cloud.amqp_port}//",
             "flower", f"--port={cls.flower_port}", "--address=127.0.0.1",
             f"--broker_api=http://guest:guest@127.0.0.1:{cls.api_port}/api/"],
            env=env, stdout=cls.log, stderr=subprocess.STDOUT)
        cls.addClassCleanup(cloudtest.stop_process, cls.flower)

    def flower_log(self):
        self.log.seek(0)
        return self.log.read()

    def test_the_broker_tab_shows_each_queues_depth(self):
        conn = self.enterContext(pikatest.connect(self.cloud))
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("celery", durable=True)  # Celery's default queue, the one Flower asks about
        for n in range(3):
            ch.basic_publish("", "celery", json.dumps({"n": n}).encode())

        def depth(messages, ready):
            seen = lengths(self.flower_port) or {}
            q = seen.get("celery")
            return q is not None and (q["messages"], q["messages_ready"]) == (messages, ready)
        self.assertTrue(cloudtest.wait_until(lambda: depth(3, 3), 60, interval=0.5),
                        f"{lengths(self.flower_port)}\n{self.flower_log()}")
        method, _, _ = ch.basic_get("celery", auto_ack=False)
        self.assertTrue(cloudtest.wait_until(lambda: depth(3, 2), 30, interval=0.5), lengths(self.flower_port))
        ch.basic_ack(method.delivery_tag)
        self.assertTrue(cloudtest.wait_until(lambda: depth(2, 2), 30, interval=0.5), lengths(self.flower_port))
        self.assertIsNone(self.flower.poll(), self.flower_log())
        ch.queue_delete("celery")


if __name__ == "__main__":
    unittest.main()
