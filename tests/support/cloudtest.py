"""Integration-test harness: runs the real `cloud` binary (real plugins, real nats-server).

stdlib only; run by /usr/bin/python3. ctest passes the paths of this build through the
environment (cmake/Testing.cmake, cloud_python_test): CLOUD_BIN, CLOUD_PLUGIN_DIR,
CLOUD_MANIFEST, CLOUD_SOURCE_DIR, and the nats-server the test runs on: NATS_SERVER (the pinned
build, or the floor's in a test's `.floor` twin) and NATS_SERVER_VERSION, the version it reports.
Every `cloud` gets NATS_SERVER_BIN=NATS_SERVER, and a test's own server (NatsServer) runs it too.

Every instance gets free ports and its own temporary data directory, is stopped by PID, and
on stop asserts that no nats-server it started survives.

    with cloudtest.Cloud() as cloud:          # boots and waits for health (+ the AMQP port)
        status, body = cloud.get("/v1/health")
        pika.ConnectionParameters(port=cloud.amqp_port)
"""
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

from natsraw import NatsRaw

CLOUD_BIN = os.environ.get("CLOUD_BIN", "")
PLUGIN_DIR = os.environ.get("CLOUD_PLUGIN_DIR", "")
MANIFEST = os.environ.get("CLOUD_MANIFEST", "")
# Outside ctest: the pinned nats-server the build copied beside the plugins (lib/cloud/bin).
NATS_SERVER = os.environ.get("NATS_SERVER") or os.path.normpath(os.path.join(PLUGIN_DIR, "..", "bin", "nats-server"))
NATS_SERVER_VERSION = os.environ.get("NATS_SERVER_VERSION", "")
# Debian 12's nats-server 2.9.10, below the floor: only tests/failclosed boots on it.
NATS_SERVER_BELOW_FLOOR = os.environ.get("CLOUD_TEST_NATS_SERVER_BELOW_FLOOR", "/usr/sbin/nats-server")

# Sanitized builds boot slower; generous bounds keep the tests stable on a loaded machine.
BOOT_TIMEOUT = float(os.environ.get("CLOUDTEST_BOOT_TIMEOUT", "60"))
STOP_TIMEOUT = 30.0


def ephemeral_low():
    """The lowest port the kernel hands out for a bind to port 0."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port(host="127.0.0.1"):
    """A free port below the kernel's ephemeral range. A port the kernel hands out for port 0 (a
    nats-server `cloud` starts on CLOUD_PUBSUB_PORT=0, a client socket's own end) comes from that
    range, so it cannot take a port a test chose while `cloud` restarts and the port is unbound."""
    low = ephemeral_low()
    for _attempt in range(100):
        port = random.randrange(10000, low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise OSError(f"no free port on {host} between 10000 and {low} after 100 tries")


def have_plugin(library):
    return os.path.isfile(os.path.join(PLUGIN_DIR, library))


def manifest_rows(path=None):
    with open(path or MANIFEST) as f:
        return json.load(f)["apps"]


def write_manifest(directory, rows):
    path = os.path.join(directory, "apps.json")
    with open(path, "w") as f:
        json.dump({"apps": rows}, f, indent=2)
    return path


def available_manifest(directory):
    """The build's manifest, without rows whose library is not built yet (e.g. amqp while it
    is being written). Returns (path, row names)."""
    rows = [r for r in manifest_rows() if have_plugin(r["library"])]
    return write_manifest(directory, rows), [r["name"] for r in rows]


def nats_server_versions():
    """cmake/nats-server.versions as a dict (NATS_SERVER_PINNED, NATS_SERVER_FLOOR, ...)."""
    path = os.path.join(os.environ.get("CLOUD_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                        "cmake", "nats-server.versions")
    with open(path) as f:
        return dict(line.strip().split("=", 1) for line in f if re.match(r"^[A-Z_]+=", line))


def server_version_of(binary):
    """'2.15.2' for a nats-server binary that says 'nats-server: v2.15.2'."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    m = re.search(r"nats-server: v(\S+)", out.stdout + out.stderr)
    if not m:
        raise AssertionError(f"{binary} --version said {out.stdout + out.stderr!r}")
    return m.group(1)


def executable_of(pid):
    """The file a process runs (/proc/<pid>/exe)."""
    return os.readlink(f"/proc/{pid}/exe")


def command_line_of(pid):
    """A process's arguments (/proc/<pid>/cmdline)."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode() for a in f.read().split(b"\0") if a]


def pids_running(pattern):
    """PIDs of live (non-zombie) processes whose command line contains `pattern`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if pattern in cmdline and state != "Z":
            found.append(int(entry))
    return found


def thread_stacks(pid):
    """Every thread's stack of a hung process, by gdb when it is installed: what a hang waits on."""
    if shutil.which("gdb") is None:
        return "(no gdb: thread stacks not taken)"
    done = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    return f"thread stacks of pid {pid} (gdb):\n{done.stdout[-60000:]}{done.stderr[-2000:]}\n{task_states(pid)}"


def task_states(pid):
    """The process's state and each thread's state, wait channel and kernel stack: what a hang
    waits on when gdb cannot attach (a zombie, or a process LeakSanitizer's exit check traces)."""
    def read(path):
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return "?"
    status = read(f"/proc/{pid}/status").splitlines()
    lines = [l for l in status if l.startswith(("State:", "TracerPid:", "Threads:"))]
    tasks = f"/proc/{pid}/task"
    for tid in sorted(os.listdir(tasks), key=int) if os.path.isdir(tasks) else []:
        stat = read(f"{tasks}/{tid}/stat")
        state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else "?"
        lines.append(f"{tid} {read(f'{tasks}/{tid}/comm')} {state} {read(f'{tasks}/{tid}/wchan')}")
        lines += ["    " + l for l in read(f"{tasks}/{tid}/stack").splitlines()[:12]]
    return "\n".join(lines)


def tcp_peer_ports(pid):
    """Remote ports of the process's established IPv4 TCP connections (/proc: which servers it
    talks to)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    with open(f"/proc/{pid}/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and fields[9] in inodes:  # 01: ESTABLISHED
                ports.add(int(fields[2].rsplit(":", 1)[1], 16))
    return ports


def wait_until(predicate, timeout, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


class Cloud:
    """One `cloud` process. Arguments:
    manifest: path (default: the build's manifest, minus rows whose plugin is not built)
    env: extra environment (overrides the harness's defaults; None unsets a variable, e.g.
         {"NATS_SERVER_BIN": None} boots on pubsub's default server)
    wait: False to start without waiting for readiness (for boots expected to fail)
    """

    def __init__(self, manifest=None, env=None, wait=True, plugin_dir=None):
        self.tmp = tempfile.mkdtemp(prefix="cloudtest-")
        self.data_dir = os.path.join(self.tmp, "data")
        if manifest is None:
            manifest, self.rows = available_manifest(self.tmp)
        else:
            self.rows = [r["name"] for r in manifest_rows(manifest)]
        self.manifest = manifest
        self.plugin_dir = plugin_dir or PLUGIN_DIR
        self.amqp_port = free_port()
        self.env = dict(os.environ)
        self.env.update({
            "CLOUD_HTTP_HOST": "127.0.0.1",
            "CLOUD_HTTP_PORT": "0",
            "CLOUD_PUBSUB_PORT": "0",
            "CLOUD_AMQP_PORT": str(self.amqp_port),
            "CLOUD_AMQP_HOST": "127.0.0.1",
            "CLOUD_DATA_DIR": self.data_dir,
            "NATS_SERVER_BIN": NATS_SERVER,
        })
        self.env.update(env or {})
        self.env = {k: v for k, v in self.env.items() if v is not None}
        self.wait = wait
        self.proc = None
        self.http_port = None
        self.pubsub_url = None
        self.lines = []
        self.previous_log = ""
        self._lines_lock = threading.Lock()
        self._reader = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self):
        self.proc = subprocess.Popen(
            [CLOUD_BIN, "--manifest", self.manifest, "--plugin-dir", self.plugin_dir],
            env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, cwd=self.tmp)
        self._reader = threading.Thread(target=self._read_output, daemon=True)
        self._reader.start()
        if self.wait:
            self.wait_ready()
        return self

    def _read_output(self):
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            with self._lines_lock:
                self.lines.append(line)

    def wait_ready(self, timeout=BOOT_TIMEOUT):
        """Health answers and, when the amqp row is mounted, its port accepts."""
        def http_up():
            if self.proc.poll() is not None:
                raise AssertionError(f"cloud exited with {self.proc.returncode} during boot:\n{self.log}")
            m = re.search(r"http listening on http://[^:]+:(\d+)", self.log)
            if m:
                self.http_port = int(m.group(1))
            return self.http_port is not None
        if not wait_until(http_up, timeout):
            raise AssertionError(f"cloud did not become ready in {timeout}s:\n{self.log}")
        status, _ = self.get("/v1/health")
        assert status == 200, self.log
        m = re.search(r"listening on (nats://\S+?),", self.log) or re.search(r"existing bus at (\S+)", self.log)
        self.pubsub_url = m.group(1) if m else None
        if "amqp" in self.rows:
            if not wait_until(lambda: self._accepts(self.amqp_port), timeout):
                raise AssertionError(f"AMQP port {self.amqp_port} does not accept:\n{self.log}")
        return self

    @staticmethod
    def _accepts(port, host="127.0.0.1"):
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            return False

    def wait_exit(self, timeout=BOOT_TIMEOUT):
        """For boots expected to fail: the exit code (the process is reaped)."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stacks = thread_stacks(self.proc.pid)
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"cloud did not exit within {timeout}s:\n{self.log}\n{stacks}")
        self._reader.join(timeout=5)
        self.proc.stdout.close()
        return code

    def nats_children(self):
        """nats-server processes serving this instance (their store is in our data dir)."""
        return pids_running(self.data_dir) if os.path.isdir(self.tmp) else []

    def stop(self, sig=signal.SIGTERM):
        """Signals the host by PID and returns its exit code; asserts no nats-server survives."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.wait_exit(STOP_TIMEOUT)
        self.assert_no_nats_survives()
        return code

    def restart(self, sig=signal.SIGTERM, down_for=0):
        """Stops the host with `sig` (SIGKILL: no shutdown code runs) and starts it again, after
        `down_for` seconds, on the same data directory and AMQP port; returns the stopped host's
        exit code."""
        code = self.stop(sig)
        time.sleep(down_for)
        with self._lines_lock:
            self.previous_log = "\n".join(self.lines)  # why the stopped run exited as it did
            self.lines.clear()  # ports are read from the log: the new run's log only
        self.http_port = None
        self.pubsub_url = None
        self.start()
        return code

    def assert_no_nats_survives(self, timeout=10):
        # After SIGKILL of the host the kernel's PDEATHSIG delivery is asynchronous: allow a moment.
        if not wait_until(lambda: not self.nats_children(), timeout):
            survivors = self.nats_children()
            for pid in survivors:
                os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"nats-server outlived the host: pids {survivors}\n{self.log}")

    def cleanup(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in self.nats_children():
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(self, *exc):
        try:
            if exc[0] is None:
                self.stop()
        finally:
            self.cleanup()
        return False

    # -- observation -------------------------------------------------------------------------

    @property
    def nats_port(self):
        """The port of the embedded nats-server (a plain NATS client can dial it)."""
        return int(self.pubsub_url.rsplit(":", 1)[1]) if self.pubsub_url else None

    @property
    def log(self):
        with self._lines_lock:
            return "\n".join(self.lines)

    def log_index(self, needle):
        """Index of the first log line containing `needle`, or -1."""
        with self._lines_lock:
            for i, line in enumerate(self.lines):
                if needle in line:
                    return i
        return -1

    def get(self, path, method="GET"):
        """(HTTP status, parsed JSON body) from the health endpoint."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.http_port}{path}", method=method)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


class OneCloudTest(unittest.TestCase):
    """A test case whose tests share one booted cloud, `self.cloud`, started before the first
    and stopped after the last."""

    @classmethod
    def setUpClass(cls):
        cls.cloud = Cloud()
        cls.cloud.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cloud.__exit__(None, None, None)


class CloudOnItsNats(unittest.TestCase):
    """A test case whose class shares one NatsServer of NATS_CONFIG (its accounts) and one Cloud
    on it, whose environment is cloud_env(nats)."""
    NATS_CONFIG = ""

    @classmethod
    def cloud_env(cls, nats):
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        cls.nats = NatsServer(config=cls.NATS_CONFIG).__enter__()
        try:
            cls.cloud = Cloud(env=cls.cloud_env(cls.nats)).__enter__()
        except BaseException:
            cls.nats.__exit__(None, None, None)
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cloud.__exit__(None, None, None)
        cls.nats.__exit__(None, None, None)


def sigstop(pid, timeout=5.0):
    """SIGSTOP, returning once the process is stopped: the kernel stops it when it next runs, and
    on a loaded machine a node still acks a replication for some milliseconds after the signal."""
    os.kill(pid, signal.SIGSTOP)

    def stopped():
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    if not wait_until(stopped, timeout, interval=0.001):
        raise AssertionError(f"process {pid} did not stop within {timeout}s of SIGSTOP")


def stop_process(proc):
    """TERM a process this harness started, KILL it after 10 s; reaped either way."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class NatsServer:
    """A nats-server of the test's own (for CLOUD_PUBSUB_URL), stopped by PID. `binary`: which
    one (default NATS_SERVER, the server this test runs on); `config`: the text of a nats-server
    configuration file (its users and accounts, say) besides the options given here; `log()` is
    what it wrote."""

    def __init__(self, binary=None, config=None):
        self.binary = binary or NATS_SERVER
        self.tmp = tempfile.mkdtemp(prefix="cloudtest-nats-")
        self.port = free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.proc = None
        self.log_path = os.path.join(self.tmp, "server.log")
        self.config_args = []
        if config is not None:
            path = os.path.join(self.tmp, "server.conf")
            with open(path, "w", encoding="utf-8") as f:
                f.write(config)
            self.config_args = ["-c", path]

    def __enter__(self):
        self.proc = subprocess.Popen(
            [self.binary, *self.config_args, "-js", "-a", "127.0.0.1", "-p", str(self.port),
             "-sd", os.path.join(self.tmp, "store"), "-l", self.log_path],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_until(lambda: Cloud._accepts(self.port), 20):
            self.__exit__(None, None, None)
            raise AssertionError(f"the test's own nats-server ({self.binary}) did not start")
        return self

    def __exit__(self, *exc):
        stop_process(self.proc)
        shutil.rmtree(self.tmp, ignore_errors=True)
        return False

    def log(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def api(self, subject, body=None):
        """A JetStream API request (test-side inspection)."""
        raw = NatsRaw(self.port, timeout=5)
        try:
            return raw.api(subject, body)
        finally:
            raw.close()


class NatsCluster:
    """`size` nats-servers clustered on loopback (JetStream on each), every one with its own
    ports and store, stopped by PID. `url` names them all, as CLOUD_PUBSUB_URL takes them."""

    def __init__(self, size=3, binary=None, hosts=None, groups=None, config=""):
        """`hosts`: each node's own listen address (default all 127.0.0.1), so that one node's
        traffic can be told apart; `groups`: each node's process group id (default ours), so that
        what a node sends can be told apart too (iptables' owner match); `config`: more lines of
        every node's configuration (a max_payload, say)."""
        self.binary = binary or NATS_SERVER
        self.extra_config = config
        self.tmp = tempfile.mkdtemp(prefix="cloudtest-cluster-")
        hosts = hosts or ["127.0.0.1"] * size
        groups = groups or [None] * size
        self.nodes = [{"name": f"n{i}", "host": hosts[i], "group": groups[i], "port": free_port(hosts[i]),
                       "route": free_port(hosts[i]), "proc": None}
                      for i in range(size)]
        self.url = ",".join(f"nats://{n['host']}:{n['port']}" for n in self.nodes)

    def _config(self, node):
        # Every node routes to the first (which ignores its own route) and learns the others from
        # it. With routes from each node to every other, a 2.10 node now and then never met the
        # meta leader (1 boot in 15; none in 70 so). Each advertises its own route address: the
        # one gossiped otherwise is the address its route to the first came from (127.0.0.1),
        # where a node on an address of its own does not listen, and the others never meet it.
        first = self.nodes[0]
        routes = f"nats-route://{first['host']}:{first['route']}"
        path = os.path.join(self.tmp, f"{node['name']}.conf")
        with open(path, "w") as f:
            f.write(f"server_name: {node['name']}\nlisten: {node['host']}:{node['port']}\n"
                    f"jetstream {{ store_dir: \"{self.store_dir(node['name'])}\" }}\n"
                    f"cluster {{ name: cloudtest, listen: {node['host']}:{node['route']}, "
                    f"advertise: \"{node['host']}:{node['route']}\", routes: [{routes}] }}\n"
                    f"{self.extra_config}\n")
        return path

    def store_dir(self, name):
        """The node's JetStream store (a test may mount a file system of its own there first)."""
        return os.path.join(self.tmp, name)

    def start(self, name):
        """Starts (or, after kill, restarts) a node on its ports and store."""
        node = self.node(name)
        log = open(os.path.join(self.tmp, f"{node['name']}.log"), "ab")
        node["proc"] = subprocess.Popen([self.binary, "-c", self._config(node)], stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=subprocess.STDOUT, group=node["group"])
        log.close()

    def pause(self, name):
        """SIGSTOP: a node that hangs (a long GC, a stalled disk) with its sockets open."""
        sigstop(self.node(name)["proc"].pid)

    def resume(self, name):
        os.kill(self.node(name)["proc"].pid, signal.SIGCONT)

    def kill(self, name):
        """SIGKILL, as a machine that dies: no shutdown, no leadership handed over."""
        node = self.node(name)
        node["proc"].kill()
        node["proc"].wait()
        node["proc"] = None

    def stop(self, name):
        """SIGTERM, as an operator stops a node: it tells the others it is going, so they count it
        offline at once (after a kill, not until its heartbeats are missed)."""
        node = self.node(name)
        stop_process(node["proc"])
        node["proc"] = None

    def node(self, name):
        return next(n for n in self.nodes if n["name"] == name)

    def running(self):
        return [n for n in self.nodes if n["proc"] is not None and n["proc"].poll() is None]

    def api(self, subject, body=None, exclude=None):
        """A JetStream API request through the first running node that answers."""
        last = None
        for node in self.running():
            if node["name"] == exclude:
                continue
            try:
                raw = NatsRaw(node["port"], node["host"], timeout=5)
                try:
                    return raw.api(subject, body)
                finally:
                    raw.close()
            except OSError as e:
                last = e
        raise AssertionError(f"no node of the cluster answered {subject}: {last}")

    def wait_ready(self, timeout=60):
        """Every running node answers JetStream requests, and the meta leader knows them all:
        a stream with a replica on each running node can be placed (and is deleted again)."""

        def node_ready(node):
            try:
                raw = NatsRaw(node["port"], node["host"], timeout=2)
                try:
                    return "error" not in raw.api("INFO")
                finally:
                    raw.close()
            except (OSError, ConnectionError):
                return False

        last = []

        def placed():
            config = {"name": "cloudtest_ready", "subjects": ["cloudtest.ready"], "storage": "memory",
                      "num_replicas": len(self.running())}
            try:
                for subject, body in (("STREAM.CREATE.cloudtest_ready", config), ("STREAM.DELETE.cloudtest_ready", None)):
                    answer = self.api(subject, body)
                    last[:] = [subject, answer]
                    if "error" in answer:
                        return False
                return True
            except (AssertionError, OSError, ConnectionError) as e:
                last[:] = ["placement", repr(e)]
                return False
        ready = lambda: all(node_ready(n) for n in self.running()) and placed()
        if not wait_until(ready, timeout, interval=0.2):
            raise AssertionError(f"the test's nats cluster did not become ready (last: {last}):\n{self.logs()}")

    def leader_of(self, stream, consumer=None):
        """The name of the node leading a stream (or one of its consumers)."""
        subject = f"CONSUMER.INFO.{stream}.{consumer}" if consumer else f"STREAM.INFO.{stream}"
        return self.api(subject).get("cluster", {}).get("leader")

    def logs(self, nodes=None):
        """The last lines of each node's log (of `nodes`, default all)."""
        out = []
        for node in self.nodes if nodes is None else nodes:
            path = os.path.join(self.tmp, f"{node['name']}.log")
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    lines = [line for line in f if "Error trying to connect to route" not in line]
                    out.append(f"--- {node['name']} ---\n" + "".join(lines[-40:]))
        return "\n".join(out)

    def __enter__(self):
        try:
            # One after another, each once it listens: three started at once dial each other at
            # once, and a floor (2.10.27) node then once kept its routes yet never heard the meta
            # leader (CI, the harness's 60 s readiness wait ran out).
            for node in self.nodes:
                self._start_listening(node)
            self.url = ",".join(f"nats://{n['host']}:{n['port']}" for n in self.nodes)
            self.wait_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start_listening(self, node, attempts=3):
        """Starts a node and waits until it listens. A port free when it was chosen can be taken
        by another process's connection before the node binds it (nats-server then exits with
        "address already in use"): the node gets fresh ports and starts again."""
        for _attempt in range(attempts):
            self.start(node["name"])
            proc = node["proc"]
            wait_until(lambda: Cloud._accepts(node["port"], node["host"]) or proc.poll() is not None, 20)
            if proc.poll() is None and Cloud._accepts(node["port"], node["host"]):
                return
            if proc.poll() is None or "address already in use" not in self.logs([node]):
                break
            node["port"], node["route"] = free_port(node["host"]), free_port(node["host"])
        state = "running" if proc.poll() is None else f"exited with {proc.returncode}"
        raise AssertionError(f"cluster node {node['name']} did not listen within 20 s ({state}):\n{self.logs()}")

    def __exit__(self, *exc):
        for node in self.nodes:
            if node["proc"] is not None:
                if node["proc"].poll() is None:
                    os.kill(node["proc"].pid, signal.SIGCONT)  # a paused node cannot act on SIGTERM
                stop_process(node["proc"])
            node["proc"] = None
        shutil.rmtree(self.tmp, ignore_errors=True)
        return False
