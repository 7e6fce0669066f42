"""The real parts the soak runs on: a 3-node nats-server cluster on loopback, each node on an
address of its own (127.0.0.2-4), in a process group of its own and with its JetStream store on a
small tmpfs, and two `cloud` replicas dialling all three nodes. Everything made here (processes,
mounts, iptables chains, temporary directories) is undone on exit, whatever the exit."""
import contextlib
import os
import shutil
import time

import cloudtest
from diskfill import SmallDisk
from firewall import Firewall

HOSTS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
ACK_WAIT_S = 10  # what a dead holder's deliveries wait before they return (the minimum is 6)


def node_groups():
    """Process group ids of the nodes' own (iptables tells a node's packets by them): derived from
    our PID, so that two soaks at once do not share them."""
    base = 3_000_000 + (os.getpid() % 100_000) * 4
    return [base + i for i in range(len(HOSTS))]


class Environment:
    def __init__(self, out_dir, store_mib=256):
        self.out_dir = out_dir
        self.store_mib = store_mib
        self.stack = contextlib.ExitStack()
        self.firewall = Firewall()
        self.cluster = None
        self.disks = {}
        self.clouds = {}

    def __enter__(self):
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self):
        self.stack.callback(self.firewall.remove)
        self.firewall.install()
        # Large messages (up to 2 MiB) need more than nats-server's default 1 MiB max_payload.
        self.cluster = cloudtest.NatsCluster(len(HOSTS), hosts=HOSTS, groups=node_groups(), config="max_payload: 4MB")
        self.stack.callback(shutil.rmtree, self.cluster.tmp, True)  # after the unmounts below
        for node in self.cluster.nodes:
            disk = SmallDisk(self.cluster.store_dir(node["name"]), self.store_mib)
            self.stack.callback(disk.unmount)
            disk.mount()
            self.disks[node["name"]] = disk
        self.stack.enter_context(self.cluster)
        env = {"CLOUD_PUBSUB_URL": self.cluster.url, "CLOUD_AMQP_ACK_WAIT": str(ACK_WAIT_S)}
        for name in ("a", "b"):
            cloud = cloudtest.Cloud(env=env)
            self.stack.callback(self.save_cloud_log, name)  # runs after the cloud stopped
            self.clouds[name] = self.stack.enter_context(cloud)

    def __exit__(self, *exc):
        for node in (self.cluster.nodes if self.cluster else []):
            if node["proc"] is not None and node["proc"].poll() is None:
                self.cluster.resume(node["name"])
        if self.cluster is not None:
            self.save_node_logs()
        self.stack.close()
        return False

    # -- what faults need ------------------------------------------------------------------------

    def restart_node(self, name, notes):
        self.cluster.start(name)
        self.wait_node_back(name, notes)

    def wait_node_back(self, name, notes, timeout=120):
        """The node accepts clients again and the cluster can place a stream on every running
        node (so the node rejoined the meta group)."""
        node = self.cluster.node(name)
        began = time.monotonic()
        if not cloudtest.wait_until(lambda: cloudtest.Cloud._accepts(node["port"], node["host"]), 30):
            notes.append(f"{name} did not accept clients within 30 s")
        try:
            self.cluster.wait_ready(timeout)
            notes.append(f"cluster ready {time.monotonic() - began:.1f} s after {name} was back")
        except AssertionError as e:
            notes.append(f"cluster not ready within {timeout} s after {name} was back: {str(e)[:400]}")

    def jetstream_disabled_count(self, name):
        path = os.path.join(self.cluster.tmp, f"{name}.log")
        try:
            with open(path, errors="replace") as f:
                return f.read().count("will be DISABLED")
        except FileNotFoundError:
            return 0

    def start_cloud_until_up(self, name, notes, attempts=5):
        cloud = self.clouds[name]
        for attempt in range(attempts):
            try:
                if cloud.proc is not None and cloud.proc.poll() is None:
                    cloud.stop()
                self.save_cloud_log(name)
                cloud.lines.clear()
                cloud.start()
                notes.append(f"cloud {name} up at attempt {attempt + 2}")
                return
            except AssertionError as e:
                notes.append(f"cloud {name} attempt {attempt + 2} failed: {str(e)[-300:]}")
        notes.append(f"cloud {name} stayed down")

    def save_cloud_log(self, name):
        """Appends the replica's log so far to <out>/cloud-<name>.log (a restart starts a new one)."""
        cloud = self.clouds.get(name)
        if cloud is None:
            return
        with open(os.path.join(self.out_dir, f"cloud-{name}.log"), "a") as f:
            f.write(f"===== cloud {name} pid {cloud.proc.pid if cloud.proc else None} =====\n")
            f.write(cloud.log + "\n")

    def save_node_logs(self):
        for node in self.cluster.nodes:
            path = os.path.join(self.cluster.tmp, f"{node['name']}.log")
            if os.path.exists(path):
                shutil.copy(path, os.path.join(self.out_dir, f"nats-{node['name']}.log"))

    def processes(self):
        """role -> PID of every live `cloud` and nats-server the soak runs."""
        found = {f"cloud-{n}": c.proc.pid for n, c in self.clouds.items() if c.proc and c.proc.poll() is None}
        for node in self.cluster.nodes:
            if node["proc"] is not None and node["proc"].poll() is None:
                found[f"nats-{node['name']}"] = node["proc"].pid
        return found
