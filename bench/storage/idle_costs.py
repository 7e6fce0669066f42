#!/usr/bin/python3
"""What an idle AMQP queue costs on raw JetStream, boot after SIGKILL, and the same on R3 (#55).

No `cloud`: the pinned nats-server alone, driven by a small pipelined client of the NATS
protocol written here (stdlib only). Every server gets free ports and a private temporary store,
is stopped by PID (SIGKILL: the figures are taken by then) and its directory removed.

  bench/storage/idle_costs.py [--queues 10000] [--r3-queues 2000] [--messages 10000]
                              [--big 100000] [--repeat 3]
                              [--only memory,boot,big,r3-memory,r3-messages]

About 10 minutes with the defaults on two cores.

Sections (markdown tables on stdout, progress on stderr):
  memory       one node, N queues, a fresh server per variant: (a) today's queue: a durable pull
               consumer (two filters) on interest stream AMQP plus a key q.<queue> in bucket amqp;
               (b) the planned idle queue: the key alone (stream AMQP with limits retention);
               (c) the key plus one 100-byte message stored on amqp._.<queue>. nats-server VmRSS
               3 s and 13 s after the last create, minus VmRSS before the first (the same server
               with stream and bucket but no queue), over N; store bytes per queue; creates/s;
               the server's CPU while idle.
  boot         the servers of (a) and (b) SIGKILLed and started again on their store: seconds until
               the stream answers with every consumer (or the bucket with every key) and the last
               consumer (key) answers.
  big          (b) with --big queues (default 100,000): creation, memory and boot.
  r3-memory    3 nodes on loopback, stream and bucket with num_replicas 3: (a) with --r3-queues,
               (b) with --queues and then up to --big; RSS summed over the three servers.
  r3-messages  --messages confirmed 100-byte publishes to amqp._.hot (256 PubAcks in flight),
               then pulled and acked one by one through the durable `hot`, beside 0 and
               --r3-queues idle durables: interest, limits, and limits with a
               STREAM.MSG.DELETE (no_erase) per acked message. CPU (utime+stime) summed over the
               three servers from the first publish until they are idle again, net of their idle
               rate measured over 5 s just before; the median of --repeat runs (one when a run
               takes over 20 s).

nats-server: $NATS_SERVER, else /root/.cache/cloud-tools/nats-server-2.15.2/nats-server.
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "support"))
os.environ.setdefault("NATS_SERVER", "/root/.cache/cloud-tools/nats-server-2.15.2/nats-server")
import cloudtest  # noqa: E402
from cloudtest import free_port, stop_process  # noqa: E402, F401

BINARY = os.environ["NATS_SERVER"]
CLK_TCK = os.sysconf("SC_CLK_TCK")
WINDOW = 256
MAX_CONSUMERS = 1_000_000
SETTLE = 3.0
IDLE_WAIT = 10.0


def log(*args):
    print(time.strftime("%H:%M:%S"), *args, file=sys.stderr, flush=True)


# --- processes -----------------------------------------------------------------------------

def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def store_bytes(path):
    """(apparent bytes, bytes on disk, files) under path."""
    apparent = disk = files = 0
    for root, _dirs, names in os.walk(path):
        for name in names:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            apparent += st.st_size
            disk += st.st_blocks * 512
            files += 1
    return apparent, disk, files


class Node:
    """One nats-server with JetStream on a private store; kill() and start() keep the store."""

    def __init__(self, tag):
        self.tmp = tempfile.mkdtemp(prefix=f"idle-costs-{tag}-")
        self.store = os.path.join(self.tmp, "store")
        self.port = free_port()
        self.proc = None

    def start(self, wait=True):
        self.proc = subprocess.Popen(
            [BINARY, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", self.store,
             "-l", os.path.join(self.tmp, "server.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if wait:
            deadline = time.monotonic() + 60
            while not cloudtest.Cloud._accepts(self.port):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"nats-server did not start: {self.tail()}")
                time.sleep(0.02)
        return self

    def tail(self):
        try:
            with open(os.path.join(self.tmp, "server.log"), errors="replace") as f:
                return "".join(f.readlines()[-20:])
        except OSError:
            return ""

    @property
    def pids(self):
        return [self.proc.pid]

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()
        self.proc = None

    def close(self):
        self.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)


class Cluster:
    """cloudtest.NatsCluster (3 nodes on loopback), SIGKILLed node by node at the end: a SIGTERM
    stops thousands of consumers one after another (10 ms each) and tells nothing more."""

    def __init__(self):
        self.c = cloudtest.NatsCluster(size=3, binary=BINARY)
        self.c.__enter__()
        self.port = self.c.nodes[0]["port"]

    @property
    def pids(self):
        return [n["proc"].pid for n in self.c.running()]

    def close(self):
        for n in self.c.nodes:
            if n["proc"] is not None:
                self.c.kill(n["name"])
        self.c.__exit__(None, None, None)


def total_rss(server):
    return sum(rss_kib(p) for p in server.pids)


def total_cpu(server):
    return sum(cpu_seconds(p) for p in server.pids)


# --- a pipelined NATS client ---------------------------------------------------------------

class Pipe:
    """One connection; requests carry reply subjects <inbox>.<token>, up to `window` in flight."""

    def __init__(self, port, host="127.0.0.1", timeout=120):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.inbox = b"_INBOX.ic%08x" % random.getrandbits(32)
        self.pending = []
        while b"\r\n" not in self.buf:
            self._recv()
        self.buf.clear()  # INFO
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n'
                          b"SUB " + self.inbox + b".> 1\r\nPING\r\n")
        while b"PONG\r\n" not in self.buf:
            self._recv()
        self.buf.clear()

    def _recv(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("nats-server closed the connection")
        self.buf += chunk

    def messages(self):
        """Blocks until at least one message arrived: [(subject, reply, headers, payload)]."""
        out = []
        while not out:
            self._recv()
            buf, pos = self.buf, 0
            while True:
                nl = buf.find(b"\r\n", pos)
                if nl < 0:
                    break
                if buf.startswith(b"MSG ", pos):
                    parts = bytes(buf[pos:nl]).split()
                    n = int(parts[-1])
                    end = nl + 2 + n + 2
                    if len(buf) < end:
                        break
                    out.append((parts[1], parts[3] if len(parts) == 5 else None, None, bytes(buf[nl + 2:nl + 2 + n])))
                    pos = end
                elif buf.startswith(b"HMSG ", pos):
                    parts = bytes(buf[pos:nl]).split()
                    hl, n = int(parts[-2]), int(parts[-1])
                    end = nl + 2 + n + 2
                    if len(buf) < end:
                        break
                    out.append((parts[1], parts[3] if len(parts) == 6 else None,
                                bytes(buf[nl + 2:nl + 2 + hl]), bytes(buf[nl + 2 + hl:nl + 2 + n])))
                    pos = end
                elif buf.startswith(b"PING", pos):
                    self.sock.sendall(b"PONG\r\n")
                    pos = nl + 2
                elif buf.startswith(b"-ERR", pos):
                    raise RuntimeError(bytes(buf[pos:nl]).decode())
                else:
                    pos = nl + 2  # PONG, +OK, INFO
            del buf[:pos]
        return out

    def pub(self, subject, payload=b"", reply=None):
        self.pending.append(b"PUB %s %s%d\r\n%s\r\n" % (subject, reply + b" " if reply else b"", len(payload), payload))

    def flush(self):
        if self.pending:
            self.sock.sendall(b"".join(self.pending))
            self.pending.clear()

    def requests(self, items, window=WINDOW):
        """items: iterable of (subject, payload) as bytes. Returns (replies, errors, first error)."""
        it = iter(items)
        inflight = done = errors = 0
        first_error = None
        token = 0
        exhausted = False
        while True:
            while not exhausted and inflight < window:
                try:
                    subject, payload = next(it)
                except StopIteration:
                    exhausted = True
                    break
                token += 1
                self.pub(subject, payload, b"%s.r%d" % (self.inbox, token))
                inflight += 1
            self.flush()
            if inflight == 0:
                return done, errors, first_error
            for _subject, _reply, headers, payload in self.messages():
                inflight -= 1
                done += 1
                if headers is not None and not payload:  # a status (503 no responders, ...)
                    errors += 1
                    first_error = first_error or headers.decode(errors="replace").strip()
                elif b'"error":' in payload:
                    errors += 1
                    first_error = first_error or payload.decode(errors="replace")

    def api(self, subject, body=None):
        data = json.dumps(body).encode() if body is not None else b""
        self.pub(b"$JS.API." + subject.encode(), data, self.inbox + b".api")
        self.flush()
        while True:
            for _s, _r, headers, payload in self.messages():
                if headers is not None and not payload:
                    return {"status": headers.decode(errors="replace")}
                return json.loads(payload or b"{}")

    def close(self):
        self.sock.close()


def api(port, subject, body=None):
    p = Pipe(port, timeout=30)
    try:
        return p.api(subject, body)
    finally:
        p.close()


def check(answer, what):
    if "error" in answer or "status" in answer:
        raise RuntimeError(f"{what}: {answer}")
    return answer


# --- topology ------------------------------------------------------------------------------

def make_stream_and_bucket(port, retention, replicas=1):
    check(api(port, "STREAM.CREATE.AMQP", {
        "name": "AMQP", "subjects": ["amqp.>"], "retention": retention, "storage": "file",
        # 2.15 caps a stream that sets no max_consumers at 1,000 (the adaptor sets its own too).
        "discard": "old", "num_replicas": replicas, "max_consumers": MAX_CONSUMERS, "max_msgs": -1,
        "max_bytes": -1, "max_age": 0}), "stream AMQP")
    # As nats.c's kvStore_Create (and the nats CLI) makes a bucket with history 1.
    check(api(port, "STREAM.CREATE.KV_amqp", {
        "name": "KV_amqp", "subjects": ["$KV.amqp.>"], "retention": "limits", "max_consumers": -1,
        "max_msgs": -1, "max_bytes": -1, "max_age": 0, "max_msgs_per_subject": 1,
        "max_msg_size": -1, "discard": "new", "storage": "file", "num_replicas": replicas,
        "duplicate_window": 120_000_000_000, "allow_rollup_hdrs": True, "deny_delete": True,
        "deny_purge": False, "allow_direct": True}), "bucket amqp")


def consumer_request(i):
    name = f"q{i}"
    body = {"stream_name": "AMQP", "config": {
        "durable_name": name, "deliver_policy": "new", "ack_policy": "explicit",
        "ack_wait": 30_000_000_000, "max_deliver": -1, "max_ack_pending": -1, "max_waiting": 4096,
        "filter_subjects": [f"amqp._.{name}", f"amqp.t.{name}.>"]}}
    return b"$JS.API.CONSUMER.DURABLE.CREATE.AMQP." + name.encode(), json.dumps(body).encode()


def key_request(i):
    name = f"q{i}"
    value = {"name": name, "durable": True, "exclusive": False, "auto_delete": False, "arguments": {},
             "bindings": [{"exchange": "amq.topic", "key": f"{name}.#", "after": 1000 + i}],
             "consumer": name, "created": 1796600000 + i}
    data = json.dumps(value, separators=(",", ":")).encode()
    return b"$KV.amqp.q." + name.encode(), data.ljust(200, b" ")


def message_request(i):
    return b"amqp._.q%d" % i, b"m" * 100


def create_queues(port, variant, first, count, window=WINDOW):
    """Creates queues first..first+count-1 as `variant` wants; returns seconds taken."""
    def items():
        for i in range(first, first + count):
            if variant in ("a", "consumer"):
                yield consumer_request(i)
            if variant in ("a", "b", "c"):
                yield key_request(i)
            if variant == "c":
                yield message_request(i)
    p = Pipe(port)
    t0 = time.monotonic()
    done, errors, first_error = p.requests(items(), window)
    took = time.monotonic() - t0
    p.close()
    if errors:
        raise RuntimeError(f"{errors} of {done} creates failed, first: {first_error}")
    return took


def idle_cpu(server, seconds):
    c0, t0 = total_cpu(server), time.monotonic()
    time.sleep(seconds)
    return (total_cpu(server) - c0) / (time.monotonic() - t0)


# --- 1 and 2: one node -----------------------------------------------------------------------

def one_node(variant, n, boot):
    retention = "interest" if variant == "a" else "limits"
    node = Node(f"{variant}{n}").start()
    try:
        make_stream_and_bucket(node.port, retention)
        time.sleep(SETTLE)
        rss0 = total_rss(node)
        disk0 = store_bytes(node.store)
        log(f"one node ({variant}), {n} queues: creating")
        took = create_queues(node.port, variant, 0, n)
        time.sleep(SETTLE)
        rss1 = total_rss(node)
        cpu_idle = idle_cpu(node, IDLE_WAIT)
        rss2 = total_rss(node)
        disk1 = store_bytes(node.store)
        r = {"variant": variant, "n": n, "rate": n / took, "rss0": rss0, "rss1": rss1, "rss2": rss2,
             "kib1": (rss1 - rss0) / n, "kib2": (rss2 - rss0) / n,
             "apparent": (disk1[0] - disk0[0]) / n, "disk": (disk1[1] - disk0[1]) / n,
             "files": (disk1[2] - disk0[2]) / n, "store_total": disk1[1], "idle_cpu": cpu_idle}
        log(f"  {r}")
        if boot:
            r["boot"] = boot_after_kill(node, variant, n)
            log(f"  boot {r['boot']}")
        return r
    finally:
        node.close()


def boot_after_kill(node, variant, n):
    last = n - 1
    node.kill()
    t0 = time.monotonic()
    node.start(wait=False)
    t_conn = t_stream = t_last = None
    while t_conn is None:
        if cloudtest.Cloud._accepts(node.port):
            t_conn = time.monotonic() - t0
        elif node.proc.poll() is not None:
            raise RuntimeError(f"nats-server exited at boot: {node.tail()}")
        else:
            time.sleep(0.01)
    p = Pipe(node.port)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if t_stream is None:
                if variant == "a":
                    info = p.api("STREAM.INFO.AMQP")
                    ok = info.get("state", {}).get("consumer_count") == n
                else:
                    info = p.api("STREAM.INFO.KV_amqp")
                    ok = info.get("state", {}).get("messages") == n
                if ok:
                    t_stream = time.monotonic() - t0
            if t_stream is not None:
                if variant == "a":
                    info = p.api(f"CONSUMER.INFO.AMQP.q{last}")
                    ok = info.get("name") == f"q{last}"
                else:
                    info = p.api(f"DIRECT.GET.KV_amqp.$KV.amqp.q.q{last}")
                    ok = "status" not in info  # the value (our JSON), no status header
                if ok:
                    t_last = time.monotonic() - t0
                    break
            time.sleep(0.01)
    finally:
        p.close()
    time.sleep(SETTLE)
    return {"conn": t_conn, "stream": t_stream, "last": t_last, "rss": total_rss(node)}


# --- 3: R3 ---------------------------------------------------------------------------------

def hot_consumer(port):
    check(api(port, "CONSUMER.DURABLE.CREATE.AMQP.hot", {"stream_name": "AMQP", "config": {
        "durable_name": "hot", "deliver_policy": "all", "ack_policy": "explicit",
        "ack_wait": 30_000_000_000, "max_deliver": -1, "max_ack_pending": -1, "max_waiting": 4096,
        "filter_subject": "amqp._.hot"}}), "durable hot")


def wait_idle(server, background, t0, c0, timeout=120):
    """Until the servers' CPU over the last second is near their idle rate; returns
    (net CPU seconds since t0, seconds busy after the call)."""
    start = time.monotonic()
    samples = [(start, total_cpu(server))]
    while True:
        time.sleep(0.25)
        now, cpu = time.monotonic(), total_cpu(server)
        samples.append((now, cpu))
        old = [s for s in samples if now - s[0] >= 1.0]
        if old:
            t_old, c_old = old[-1]
            if cpu - c_old <= background * (now - t_old) * 1.3 + 0.03 or now - start > timeout:
                return cpu - c0 - background * (now - t0), t_old - start


def hot_run(server, m, settle_delete):
    """Publishes m confirmed messages to amqp._.hot, then pulls and acks each through `hot`."""
    background = idle_cpu(server, 5.0)
    payload = b"h" * 100
    p = Pipe(server.port)
    c0, t0 = total_cpu(server), time.monotonic()
    done, errors, first = p.requests(((b"amqp._.hot", payload) for _ in range(m)), WINDOW)
    if errors:
        raise RuntimeError(f"{errors} publishes failed: {first}")
    t_pub = time.monotonic() - t0
    # Pull and ack: batches of 256, two requests open; with deletes, at most 512 unanswered.
    pull_subject = b"$JS.API.CONSUMER.MSG.NEXT.AMQP.hot"
    pull_reply = p.inbox + b".pull"
    del_reply = p.inbox + b".del"
    asked = got = deletes_open = deletes_done = del_errors = 0
    first_del_error = None
    t1 = time.monotonic()
    while got < m or deletes_open:
        while asked - got < 2 * WINDOW and asked < m and deletes_open < 2 * WINDOW:
            p.pub(pull_subject, b'{"batch":%d,"expires":30000000000}' % WINDOW, pull_reply)
            asked += WINDOW
        p.flush()
        for subject, reply, headers, payload in p.messages():
            if subject == pull_reply:  # a status: 408/404 ends a request; count what it did not fill
                text = (headers or b"").decode(errors="replace")
                for line in text.split("\r\n"):
                    if line.lower().startswith("nats-pending-messages:"):
                        asked -= int(line.split(":")[1])
            elif subject != del_reply:  # a delivery (on its own subject, with its ack subject as reply)
                got += 1
                p.pub(reply, b"")  # +ACK
                if settle_delete:
                    tokens = reply.split(b".")
                    seq = int(tokens[5] if len(tokens) == 9 else tokens[-5])
                    p.pub(b"$JS.API.STREAM.MSG.DELETE.AMQP", b'{"seq":%d,"no_erase":true}' % seq, del_reply)
                    deletes_open += 1
            else:  # a delete's answer
                deletes_open -= 1
                deletes_done += 1
                if b'"success":true' not in payload:
                    del_errors += 1
                    first_del_error = first_del_error or (payload or headers or b"").decode(errors="replace")
        p.flush()
    t_con = time.monotonic() - t1
    p.close()  # ends the pull requests still open
    net, tail = wait_idle(server, background, t0, c0)
    gross = total_cpu(server) - c0
    left = api(server.port, "STREAM.INFO.AMQP").get("state", {}).get("messages")
    if del_errors:
        log(f"  {del_errors} deletes failed, first: {first_del_error}")
    check(api(server.port, "STREAM.PURGE.AMQP", {"filter": "amqp._.hot"}), "purge")
    time.sleep(1.0)
    return {"pub_rate": m / t_pub, "con_rate": m / t_con, "us": net / m * 1e6, "gross_us": gross / m * 1e6,
            "took": t_pub + t_con,
            "background_ms": background * 1000, "tail": tail, "left": left, "del_errors": del_errors}


def r3_memory_step(cluster, variant, n, window, first=0):
    time.sleep(SETTLE)
    rss0 = total_rss(cluster)
    bg0 = idle_cpu(cluster, 3.0)
    log(f"R3 ({variant}), queues {first}..{first + n - 1}: creating")
    took = create_queues(cluster.port, variant, first, n, window)
    time.sleep(SETTLE)
    rss1 = total_rss(cluster)
    cpu_idle = idle_cpu(cluster, IDLE_WAIT)
    rss2 = total_rss(cluster)
    r = {"variant": variant, "n": n, "first": first, "rate": n / took, "rss0": rss0, "rss1": rss1, "rss2": rss2,
         "kib1": (rss1 - rss0) / n, "kib2": (rss2 - rss0) / n, "idle0": bg0, "idle1": cpu_idle,
         "per_node": [rss_kib(pid) for pid in cluster.pids]}
    log(f"  {r}")
    return r


def repeated(label, server, m, delete, repeat):
    """hot_run up to `repeat` times (once when a run takes over 20 s); the median by net CPU."""
    results = []
    while len(results) < repeat:
        log(label + (f", run {len(results) + 1}" if repeat > 1 else ""))
        results.append(hot_run(server, m, delete))
        log(f"  {results[-1]}")
        if results[-1]["took"] > 20:
            break
    ordered = sorted(results, key=lambda r: r["us"])
    median = dict(ordered[(len(ordered) - 1) // 2])
    median["all_us"] = [r["us"] for r in results]
    return median


def r3(n_consumers, n_keys, n_big, m, do_memory, do_messages, repeat):
    memory, runs = [], []
    # Cluster A: interest retention, today's queues (consumer + key).
    cluster = Cluster()
    try:
        make_stream_and_bucket(cluster.port, "interest", 3)
        hot_consumer(cluster.port)
        time.sleep(SETTLE)
        if do_messages:
            runs.append(("interest", "ack", 0, repeated("R3 interest, 0 idle", cluster, m, False, repeat)))
        memory.append(r3_memory_step(cluster, "a", n_consumers, 64))
        if do_messages:
            runs.append(("interest", "ack", n_consumers,
                         repeated(f"R3 interest, {n_consumers} idle", cluster, m, False, repeat)))
    finally:
        cluster.close()
    # Cluster B: limits retention; the planned idle queue (a key alone), then idle durables.
    cluster = Cluster()
    try:
        make_stream_and_bucket(cluster.port, "limits", 3)
        hot_consumer(cluster.port)
        if do_memory:
            memory.append(r3_memory_step(cluster, "b", n_keys, WINDOW))
            if n_big > n_keys:
                memory.append(r3_memory_step(cluster, "b", n_big - n_keys, WINDOW, first=n_keys))
        if do_messages:
            for idle in (0, n_consumers):
                if idle:
                    memory.append(r3_memory_step(cluster, "consumer", n_consumers, 64))
                for delete in (False, True):
                    label = f"R3 limits{' + delete' if delete else ''}, {idle} idle"
                    runs.append(("limits", "ack + MSG.DELETE" if delete else "ack", idle,
                                 repeated(label, cluster, m, delete, repeat)))
    finally:
        cluster.close()
    return memory, runs


# --- output --------------------------------------------------------------------------------

VARIANT = {"a": "(a) today: durable consumer + key", "b": "(b) planned: key only",
           "c": "(c) planned: key + one 100-byte message", "consumer": "durable consumer only (limits stream, keys already there)"}


def f0(x):
    return f"{x:,.0f}"


def f1(x):
    return f"{x:,.1f}"


def print_memory(rows):
    print(f"\n### 1. Memory per idle queue, one node\n")
    print("| variant | N | create (queues/s) | RSS 0 queues (KiB) | RSS +3 s (KiB) | KiB/queue +3 s | KiB/queue +13 s | "
          "store bytes/queue (apparent / on disk) | store files/queue | idle CPU (ms/s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {VARIANT[r['variant']]} | {r['n']:,} | {f0(r['rate'])} | {f0(r['rss0'])} | {f0(r['rss1'])} | "
              f"{f1(r['kib1'])} | {f1(r['kib2'])} | {f0(r['apparent'])} / {f0(r['disk'])} | {r['files']:.2f} | "
              f"{r['idle_cpu'] * 1000:.1f} |")


def print_boot(rows):
    print(f"\n### 2. Boot after SIGKILL, one node\n")
    print("| variant | N | store on disk (MiB) | accepts a connection (s) | stream answers with all consumers / keys (s) | "
          "last consumer / key answers (s) | RSS after boot +3 s (KiB/queue over the empty server) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        b = r["boot"]
        fmt = lambda x: "timeout" if x is None else f"{x:.2f}"  # noqa: E731
        print(f"| {VARIANT[r['variant']]} | {r['n']:,} | {r['store_total'] / 2**20:,.1f} | {fmt(b['conn'])} | "
              f"{fmt(b['stream'])} | {fmt(b['last'])} | {f1((b['rss'] - r['rss0']) / r['n'])} |")


def print_r3_memory(rows):
    print(f"\n### 3a. Memory per idle queue, R3 (3 nodes on loopback, RSS summed over the three)\n")
    print("| variant | N | create (queues/s) | RSS sum before (KiB) | KiB/queue +3 s | KiB/queue +13 s | "
          "RSS per node after (KiB) | idle CPU of the 3 before → after (ms/s) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        n = f"{r['first']:,} → {r['first'] + r['n']:,}" if r["first"] else f"{r['n']:,}"
        print(f"| {VARIANT[r['variant']]} | {n} | {f0(r['rate'])} | {f0(r['rss0'])} | {f1(r['kib1'])} | "
              f"{f1(r['kib2'])} | {' / '.join(f0(x) for x in r['per_node'])} | "
              f"{r['idle0'] * 1000:.1f} → {r['idle1'] * 1000:.1f} |")


def print_r3_messages(runs, m):
    print(f"\n### 3b. Per message on R3: {m:,} confirmed publishes, then pull + ack each through one durable\n")
    print("| retention | settle | idle durables beside | publish (msg/s) | pull+ack (msg/s) | "
          "CPU of the 3 servers per message, net of idle (µs, median; runs) | gross (µs) | "
          "their idle CPU before (ms/s) | busy after the last ack (s) | messages left |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for retention, settle, idle, r in runs:
        each = ", ".join(f0(x) for x in r["all_us"])
        print(f"| {retention} | {settle} | {idle:,} | {f0(r['pub_rate'])} | {f0(r['con_rate'])} | "
              f"{f0(r['us'])} ({each}) | {f0(r['gross_us'])} | {r['background_ms']:.1f} | {r['tail']:.2f} | {r['left']} |")


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))  # so every server is still stopped
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queues", type=int, default=10000)
    ap.add_argument("--r3-queues", type=int, default=2000)
    ap.add_argument("--messages", type=int, default=10000)
    ap.add_argument("--big", type=int, default=100000,
                    help="keys of the (b)-only boot run, and of R3 (b)'s second step; 0 skips them")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each R3 message shape (the median is shown)")
    ap.add_argument("--only", default="", help="comma-separated: memory, boot, big, r3-memory, r3-messages")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(","))) or {"memory", "boot", "big", "r3-memory", "r3-messages"}
    unknown = only - {"memory", "boot", "big", "r3-memory", "r3-messages"}
    if unknown:
        ap.error(f"unknown --only {','.join(sorted(unknown))}")
    if not os.access(BINARY, os.X_OK):
        sys.exit(f"no nats-server at {BINARY} (set NATS_SERVER)")
    version = subprocess.run([BINARY, "--version"], capture_output=True, text=True).stdout.strip()
    started = time.time()
    print(f"# idle_costs.py: {version}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.2f} at {time.strftime('%H:%M:%S', time.gmtime())} UTC")
    print(f"\n`{' '.join(['bench/storage/idle_costs.py'] + sys.argv[1:])}`")

    rows = []
    if only & {"memory", "boot"}:
        for variant in ("a", "b", "c"):
            if variant == "c" and "memory" not in only:
                continue
            rows.append(one_node(variant, a.queues, boot="boot" in only and variant != "c"))
    if a.big and "big" in only:
        rows.append(one_node("b", a.big, boot=True))
    if "memory" in only or "big" in only:
        print_memory(rows)
    if "boot" in only or "big" in only:
        print_boot([r for r in rows if "boot" in r])
    if only & {"r3-memory", "r3-messages"}:
        memory, runs = r3(a.r3_queues, a.queues, a.big, a.messages, "r3-memory" in only, "r3-messages" in only,
                          a.repeat)
        print_r3_memory(memory)
        if runs:
            print_r3_messages(runs, a.messages)
    print(f"\nTook {time.time() - started:.0f} s; load {os.getloadavg()[0]:.2f} at the end.")


if __name__ == "__main__":
    main()
