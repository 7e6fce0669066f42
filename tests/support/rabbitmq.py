"""A private RabbitMQ (the Debian package's 3.10) for tests that compare the adaptor with the real
broker: its own ports, asked of the kernel, its own epmd and its own directory, all stopped by PID on
exit (as bench/run's start_rabbitmq). stdlib only; works as root.

    with rabbitmq.RabbitMQ() as rmq:           # boots and waits (rabbitmqctl wait)
        pika.ConnectionParameters(port=rmq.amqp_port)
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time

import cloudtest

BIN = os.environ.get("RABBITMQ_BIN_DIR", "/usr/lib/rabbitmq/bin")
BOOT_TIMEOUT = 120


class RabbitMQ:
    """With `management`: its management plugin on `management_port` and rabbitmq_prometheus on
    `prometheus_port`, both on 127.0.0.1."""

    def __init__(self, management=False):
        self.tmp = tempfile.mkdtemp(prefix="cloudtest-rabbitmq-")
        self.amqp_port = cloudtest.free_port()
        self.epmd_port = cloudtest.free_port()
        self.management_port = cloudtest.free_port() if management else None
        self.prometheus_port = cloudtest.free_port() if management else None
        self.pid_file = os.path.join(self.tmp, "rabbitmq.pid")
        self.procs = []          # epmd, then the server script (whose child is the Erlang VM)
        self.server_pid = None   # the Erlang VM, from the pid file
        self.started_seconds = None
        for sub in ("home", "mnesia", "log"):
            os.mkdir(os.path.join(self.tmp, sub))
        config = os.path.join(self.tmp, "rabbitmq.conf")
        with open(config, "w") as f:
            f.write(f"listeners.tcp.default = 127.0.0.1:{self.amqp_port}\nloopback_users = none\n")
            if management:
                f.write(f"management.tcp.ip = 127.0.0.1\nmanagement.tcp.port = {self.management_port}\n"
                        f"prometheus.tcp.ip = 127.0.0.1\nprometheus.tcp.port = {self.prometheus_port}\n")
        plugins = os.path.join(self.tmp, "enabled_plugins")
        with open(plugins, "w") as f:
            f.write("[rabbitmq_management,rabbitmq_prometheus].\n" if management else "[].\n")
        self.env = dict(os.environ)
        self.env.update({
            "HOME": os.path.join(self.tmp, "home"),
            "RABBITMQ_NODENAME": "cloudtest-" + os.path.basename(self.tmp).rsplit("-", 1)[1] + "@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.amqp_port),
            "RABBITMQ_DIST_PORT": str(cloudtest.free_port()),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_MNESIA_BASE": os.path.join(self.tmp, "mnesia"),
            "RABBITMQ_LOG_BASE": os.path.join(self.tmp, "log"),
            "RABBITMQ_PID_FILE": self.pid_file,
            "RABBITMQ_CONFIG_FILE": config,
            "RABBITMQ_ENABLED_PLUGINS_FILE": plugins,
        })

    def _spawn(self, argv, log):
        with open(os.path.join(self.tmp, log), "ab") as out:
            proc = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, cwd=self.tmp)
        self.procs.append(proc)
        return proc

    def ctl(self, *args, timeout=BOOT_TIMEOUT + 30):
        return subprocess.run([os.path.join(BIN, "rabbitmqctl"), "-q", *args], env=self.env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)

    def start(self):
        began = time.monotonic()
        # Our own epmd, up before the VM looks for one (else the VM would start a daemon of its own).
        epmd = self._spawn(["epmd", "-port", str(self.epmd_port)], "epmd.log")
        if not cloudtest.wait_until(lambda: cloudtest.Cloud._accepts(self.epmd_port) or epmd.poll() is not None, 20) \
                or epmd.poll() is not None:
            raise AssertionError(f"epmd did not start on {self.epmd_port}:\n{self.log('epmd.log')}")
        server = self._spawn([os.path.join(BIN, "rabbitmq-server")], "server.log")
        waited = self.ctl("wait", "--timeout", str(BOOT_TIMEOUT), self.pid_file)
        self._read_pid()
        if waited.returncode != 0 or server.poll() is not None:
            raise AssertionError(f"RabbitMQ did not start ({waited.stdout}{waited.stderr}):\n{self.log('server.log')}")
        for port in (self.amqp_port, self.management_port, self.prometheus_port):
            if port and not cloudtest.wait_until(lambda: cloudtest.Cloud._accepts(port), 30):
                raise AssertionError(f"RabbitMQ does not accept on {port}:\n{self.log('server.log')}")
        self.started_seconds = time.monotonic() - began
        return self

    def _read_pid(self):
        try:
            with open(self.pid_file) as f:
                self.server_pid = int(f.read().strip())
        except (OSError, ValueError):
            pass

    def log(self, name):
        try:
            with open(os.path.join(self.tmp, name), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    @staticmethod
    def _alive(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    def _kill(self, pid):
        """TERM, up to 15 s to go, then KILL; only ever a PID this harness started."""
        if not self._alive(pid):
            return
        os.kill(pid, signal.SIGTERM)
        if not cloudtest.wait_until(lambda: not self._alive(pid), 15, interval=0.1):
            os.kill(pid, signal.SIGKILL)
            cloudtest.wait_until(lambda: not self._alive(pid), 10, interval=0.1)

    def stop(self):
        if self.server_pid is None:
            self._read_pid()
        if self.server_pid is not None and self._alive(self.server_pid):
            try:
                self.ctl("stop", self.pid_file, timeout=60)
            except subprocess.TimeoutExpired:
                pass  # killed below
        if self.server_pid is not None:
            self._kill(self.server_pid)
        for proc in reversed(self.procs):
            if proc.poll() is None:
                self._kill(proc.pid)
            proc.wait()
        self.procs = []

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(self, *exc):
        try:
            self.stop()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return False
