"""A real `cloud` (embedded nats-server + the amqp plugin) for the messaging tests.

Each instance gets ports the kernel chose and its own data directory, and is stopped by
PID (the nats-server child too, by the PID read from /proc). `restart()` brings the same
store back on the same ports, which the durability test needs.
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cloud_binary():
    path = os.environ.get("CLOUD_BIN")
    if not path:
        raise RuntimeError("CLOUD_BIN is not set: run these tests through ctest")
    return path


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def _port_open(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Cloud:
    def __init__(self):
        self.data_dir = tempfile.mkdtemp(prefix="cloud-messaging-")
        self.amqp_port = free_port()
        self.nats_port = free_port()
        self.http_port = free_port()
        self.proc = None
        self.children = []
        self.log_path = os.path.join(self.data_dir, "cloud.log")

    @classmethod
    def launch(cls):
        """A started Cloud; nothing is left behind when it cannot start."""
        cloud = cls()
        try:
            return cloud.start()
        except BaseException:
            cloud.close()
            raise

    def start(self, timeout=60):
        env = dict(os.environ)
        env.update({
            "CLOUD_DATA_DIR": self.data_dir,
            "CLOUD_AMQP_HOST": "127.0.0.1",
            "CLOUD_AMQP_PORT": str(self.amqp_port),
            "CLOUD_PUBSUB_HOST": "127.0.0.1",
            "CLOUD_PUBSUB_PORT": str(self.nats_port),
            "CLOUD_HTTP_PORT": str(self.http_port),
            "CLOUD_STARTUP_TIMEOUT": "30s",
        })
        env.pop("CLOUD_PUBSUB_URL", None)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([cloud_binary()], env=env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"cloud exited with {self.proc.returncode}:\n{self.log()}")
            if _port_open(self.amqp_port):
                self.children = _children(self.proc.pid)
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"cloud did not accept on :{self.amqp_port} within {timeout}s:\n{self.log()}")

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-6000:]
        except OSError:
            return ""

    def _reap(self, grace):
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        deadline = time.monotonic() + 10
        for pid in self.children:
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.children = []

    def kill(self):
        """SIGKILL: no shutdown code runs in the adaptor."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc:
            self._reap(10)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        if self.proc:
            self._reap(20)

    def restart(self):
        self.kill()
        deadline = time.monotonic() + 15
        while (_port_open(self.nats_port) or _port_open(self.amqp_port)) and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.start()

    def close(self):
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)
