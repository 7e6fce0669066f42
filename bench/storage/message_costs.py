#!/usr/bin/python3
"""Per-message storage costs on raw JetStream, measured before the broker moves (#55).

No `cloud` runs here: every figure is the pinned nats-server alone, one node, file storage,
stream `AMQP` over `amqp.>`, 100-byte bodies, a fresh server per row (ports and store dir of
its own, stopped by PID, dir removed). Server CPU is utime+stime of the nats-server PID, from
just before the work until the server is idle again, net of its idle rate.

    bench/storage/message_costs.py                       # all of them, ~8 min on 2 cores
    bench/storage/message_costs.py --only ack --messages 5000

Measurements: ack (ack cost beside idle consumers), settle (delete vs purge on LIMITS), copies
(K copies per route, individual vs atomic batch), refusals (one bad copy in a batch), get (a
consumer per basic.get vs direct get), facts (does amqp.> store a core publish; what could keep
it out). Rows where a message costs milliseconds run --heavy-messages instead of --messages.
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "support"))
import cloudtest  # noqa: E402

NATS_SERVER = os.environ.get("NATS_SERVER") or "/root/.cache/cloud-tools/nats-server-2.15.2/nats-server"
TICK = 1.0 / os.sysconf("SC_CLK_TCK")
BODY = b"x" * 100
NS = 1_000_000_000


# ---------------------------------------------------------------- raw client, pipelined

class Msg:
    __slots__ = ("subject", "reply", "hdr", "data")

    def __init__(self, subject, reply, hdr, data):
        self.subject, self.reply, self.hdr, self.data = subject, reply, hdr, data

    def status(self):
        """'404', '408', ... for a headers-only status message, else None."""
        if self.hdr and self.hdr.startswith(b"NATS/1.0 "):
            return self.hdr[9:12].decode()
        return None

    def json(self):
        return json.loads(self.data) if self.data else {}


class Conn:
    """One NATS connection. Replies come to one wildcard inbox; a reply's last token says
    which request it answers, so many requests can be in flight at once."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf, self.pos, self.out = bytearray(), 0, []
        self.inbox = "_R." + uuid.uuid4().hex[:12]
        self.batch = 0
        self.last_reply = None  # the last delivery's $JS.ACK subject (consume)
        self._line()  # INFO
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n'
                          b"SUB %s.> 1\r\nPING\r\n" % self.inbox.encode())
        while self._line() != b"PONG":
            pass

    def close(self):
        self.sock.close()

    def _more(self):
        if self.pos > 1 << 20:
            del self.buf[:self.pos]
            self.pos = 0
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("nats-server closed the connection")
        self.buf += chunk

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line = bytes(self.buf[self.pos:i])
                self.pos = i + 2
                return line
            self._more()

    def _bytes(self, n):
        while len(self.buf) - self.pos < n + 2:
            self._more()
        data = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n + 2
        return data

    def read(self):
        while True:
            line = self._line()
            if line.startswith(b"MSG "):
                p = line.split()
                return Msg(p[1].decode(), p[3].decode() if len(p) == 5 else None, None, self._bytes(int(p[-1])))
            if line.startswith(b"HMSG "):
                p = line.split()
                h, total = int(p[-2]), int(p[-1])
                raw = self._bytes(total)
                return Msg(p[1].decode(), p[3].decode() if len(p) == 6 else None, raw[:h], raw[h:])
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")
            elif line.startswith(b"-ERR"):
                raise ConnectionError(line.decode())

    def pub(self, subject, data=b"", reply=None, hdrs=None):
        r = b" " + reply.encode() if reply else b""
        if hdrs:
            h = b"NATS/1.0\r\n" + b"".join(b"%s: %s\r\n" % (k.encode(), str(v).encode()) for k, v in hdrs) + b"\r\n"
            self.out.append(b"HPUB %s%s %d %d\r\n%s%s\r\n" % (subject.encode(), r, len(h), len(h) + len(data), h, data))
        else:
            self.out.append(b"PUB %s%s %d\r\n%s\r\n" % (subject.encode(), r, len(data), data))

    def flush(self):
        if self.out:
            self.sock.sendall(b"".join(self.out))
            self.out = []

    def pipeline(self, items, window=256):
        """items: (subject, data, hdrs). Sends them with up to `window` awaiting a reply;
        returns the replies in order."""
        self.batch += 1
        base = "%s.p%d." % (self.inbox, self.batch)
        n, replies, sent, done = len(items), [None] * len(items), 0, 0
        while done < n:
            if sent - done <= window // 2 or sent - done == 0:
                while sent < n and sent - done < window:
                    subject, data, hdrs = items[sent]
                    self.pub(subject, data, base + str(sent), hdrs)
                    sent += 1
                self.flush()
            m = self.read()
            if m.subject.startswith(base):
                i = int(m.subject[len(base):])
                if replies[i] is None:
                    replies[i] = m
                    done += 1
        return replies

    def request(self, subject, data=b"", hdrs=None):
        return self.pipeline([(subject, data, hdrs)])[0]

    def api(self, subject, body=None):
        m = self.request("$JS.API." + subject, json.dumps(body).encode() if body is not None else b"")
        if m.status():
            raise RuntimeError(f"{subject}: status {m.hdr!r}")
        r = m.json()
        if "error" in r:
            raise RuntimeError(f"{subject}: {r['error']}")
        return r

    def api_many(self, requests, window=64):
        """[(api subject, body)]: pipelined; raises on the first error."""
        items = [("$JS.API." + s, json.dumps(b).encode(), None) for s, b in requests]
        out = []
        for s, m in zip(requests, self.pipeline(items, window)):
            r = m.json()
            if "error" in r:
                raise RuntimeError(f"{s[0]}: {r['error']}")
            out.append(r)
        return out

    def publish_many(self, items, window=256):
        """items: (subject, data, hdrs) to the stream; every PubAck checked; returns sequences."""
        seqs = []
        for m in self.pipeline(items, window):
            r = m.json() if not m.status() else {"error": m.hdr.decode()}
            if "error" in r:
                raise RuntimeError(f"publish refused: {r['error']}")
            seqs.append(r["seq"])
        return seqs


def ack_sseq(reply):
    """The stream sequence in a $JS.ACK subject (v1: 9 tokens, v2: 12)."""
    t = reply.split(".")
    return int(t[5] if len(t) == 9 else t[7])


def consume(conn, durable, count, ack=True, batch=100, no_wait=False):
    """Pulls `count` messages in batches, acking each (+ACK, fire-and-forget); returns their
    stream sequences. With no_wait, returns what one pull found."""
    seqs, inbox = [], conn.inbox + ".pull"
    while len(seqs) < count:
        req = {"batch": min(batch, count - len(seqs))}
        req.update({"no_wait": True} if no_wait else {"expires": 2 * NS})
        conn.pub(f"$JS.API.CONSUMER.MSG.NEXT.AMQP.{durable}", json.dumps(req).encode(), inbox)
        conn.flush()
        want, got = req["batch"], 0
        while got < want:
            m = conn.read()  # a delivery keeps its own subject; only its $JS.ACK reply tells it
            if m.subject == inbox and m.status():
                break
            if not (m.reply or "").startswith("$JS.ACK."):
                continue
            conn.last_reply = m.reply
            if ack:
                conn.pub(m.reply, b"+ACK")
            seqs.append(ack_sseq(m.reply))
            got += 1
        conn.flush()
        if no_wait:
            break
    return seqs


# ---------------------------------------------------------------- server and CPU

class Server:
    def __init__(self):
        self.ns = cloudtest.NatsServer(binary=NATS_SERVER)

    def __enter__(self):
        self.ns.__enter__()
        self.pid = self.ns.proc.pid
        self.c = Conn(self.ns.port)
        return self

    def __exit__(self, *exc):
        try:
            self.c.close()
        finally:
            self.ns.__exit__(*exc)  # stops by PID, removes the store dir
        return False

    def cpu(self):
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * TICK

    def stream(self, retention="limits", **extra):
        cfg = {"name": "AMQP", "subjects": ["amqp.>"], "retention": retention, "storage": "file",
               "max_consumers": 100_000, "num_replicas": 1}  # -1 means 2.15's cap of 1,000
        cfg.update(extra)
        return self.c.api("STREAM.CREATE.AMQP", cfg)

    def info(self):
        return self.c.api("STREAM.INFO.AMQP")["state"]

    def durable(self, name, filter_subject, **extra):
        cfg = {"durable_name": name, "filter_subject": filter_subject, "ack_policy": "explicit",
               "deliver_policy": "all", "max_ack_pending": -1}
        cfg.update(extra)
        return f"CONSUMER.CREATE.AMQP.{name}.{filter_subject}", {"stream_name": "AMQP", "config": cfg}


class Meter:
    """Server CPU of a stretch of work: from start() until the server is idle again, minus
    what it burns while idle (measured over 0.5 s before start)."""

    def __init__(self, server):
        self.s = server

    def start(self):
        self.idle_rate = self._idle_rate()
        self.c0, self.t0 = self.s.cpu(), time.monotonic()

    def _idle_rate(self):
        c0, t0 = self.s.cpu(), time.monotonic()
        time.sleep(0.5)
        return (self.s.cpu() - c0) / (time.monotonic() - t0)

    def stop(self):
        """Seconds of server CPU since start(); restarts the meter there."""
        last = self.s.cpu()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = self.s.cpu()
            if now - last <= TICK + self.idle_rate * 0.5:
                break
            last = now
        t1 = time.monotonic()
        used = max(0.0, now - self.c0 - self.idle_rate * (t1 - self.t0))
        self.c0, self.t0 = now, t1
        return used


def us(seconds, n):
    return f"{seconds / n * 1e6:.1f}" if n else "-"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- 1. ack cost beside idle queues

def measure_ack(args):
    rows = []
    for retention in ("interest", "workqueue", "limits"):
        for n in args.idle:
            # Where every ack walks 10,000 consumers a message costs milliseconds: fewer of them.
            count = args.heavy_messages if retention != "limits" and n >= 5000 else args.messages
            with Server() as s:
                s.stream(retention)
                t = time.monotonic()
                s.c.api_many([s.durable(f"idle{i}", f"amqp._.idle{i}") for i in range(n)])
                made = time.monotonic() - t
                s.c.api(*s.durable("hot", "amqp._.hot"))
                m = Meter(s)
                m.start()
                s.c.publish_many([("amqp._.hot", BODY, None)] * count)
                pub = m.stop()
                consume(s.c, "hot", count)
                con = m.stop()
                left = s.info()["messages"]
                ci = s.c.api("CONSUMER.INFO.AMQP.hot")
                want = count if retention == "limits" else 0
                check = "ok" if left == want and ci["num_ack_pending"] == 0 and ci["num_pending"] == 0 else \
                    f"stream {left}, ack pending {ci['num_ack_pending']}, redelivered {ci['num_redelivered']}"
                log(f"ack {retention} n={n}: made in {made:.1f}s pub {pub:.2f}s con {con:.2f}s {check}")
                rows.append([retention, n, count, us(pub, count), us(con, count), us(pub + con, count),
                             f"{made:.1f}", check])
    return ("1. Ack cost beside idle consumers: server CPU µs per message, published (PubAck awaited, "
            "256 in flight), pulled (batch 100) and acked",
            ["retention", "idle consumers", "messages", "publish", "pull+ack", "total",
             "creating the idle (s, wall)", "end state"], rows)


# ---------------------------------------------------------------- 2. settle by delete or purge

SETTLES = ["none", "delete", "delete, no ack", "purge every 1", "purge every 10", "purge every 100"]


def settle(s, mode, seqs):
    """Removes the settled messages `seqs` (in ack order); returns requests made."""
    if mode.startswith("delete"):
        s.c.api_many([("STREAM.MSG.DELETE.AMQP", {"seq": q, "no_erase": True}) for q in seqs], 256)
        return len(seqs)
    if mode.startswith("purge"):
        k = int(mode.split()[-1])
        floors = [seqs[i] + 1 for i in range(k - 1, len(seqs), k)]
        if len(seqs) % k:
            floors.append(seqs[-1] + 1)
        s.c.api_many([("STREAM.PURGE.AMQP", {"filter": "amqp._.hot", "seq": f}) for f in floors], 256)
        return len(floors)
    return 0


def settle_row(s, mode, count, filler, label):
    m = Meter(s)
    m.start()
    s.c.publish_many([("amqp._.hot", BODY, None)] * count)
    seqs = consume(s.c, "hot", count, ack=mode != "delete, no ack")
    base = m.stop()
    requests = settle(s, mode, seqs)
    rm = m.stop()
    left = s.info()["messages"]
    ci = s.c.api("CONSUMER.INFO.AMQP.hot")
    want = filler + (count if mode == "none" else 0)
    check = "ok" if left == want and ci["num_ack_pending"] == 0 else \
        f"stream {left} (want {want}), ack pending {ci['num_ack_pending']}"
    log(f"settle {label} {mode}: base {base:.2f}s removal {rm:.2f}s ({requests} requests) {check}")
    return [label, mode, count, us(base, count), us(rm, count), us(base + rm, count), requests, check]


def measure_settle(args):
    rows = []
    n = max(args.idle)
    for label, subjects in (("none", 0), (f"{n} subjects, 1 msg each", n)):
        for mode in SETTLES:
            with Server() as s:
                s.stream("limits")
                s.c.publish_many([(f"amqp._.idle{i}", BODY, None) for i in range(subjects)])
                s.c.api(*s.durable("hot", "amqp._.hot"))
                rows.append(settle_row(s, mode, args.messages, subjects, label))
    if not args.quick:
        # The same beside n idle durable consumers (today's shape). Making 10,000 takes a
        # while, so every settle runs in turn on one server, "none" last; a purge walks every
        # consumer, milliseconds each, so fewer messages.
        label = f"{n} subjects + {n} idle consumers (one server, in turn)"
        with Server() as s:
            s.stream("limits")
            s.c.publish_many([(f"amqp._.idle{i}", BODY, None) for i in range(n)])
            s.c.api_many([s.durable(f"idle{i}", f"amqp._.idle{i}") for i in range(n)])
            s.c.api(*s.durable("hot", "amqp._.hot"))
            for mode in SETTLES[1:] + SETTLES[:1]:
                rows.append(settle_row(s, mode, args.heavy_messages, n, label))
    return ("2. Settling on a LIMITS stream: server CPU µs per message; base = publish + pull + ack "
            "('no ack': pulled, never acked), removal = the settle requests, pipelined (256 in flight)",
            ["idle queues", "settle", "messages", "base", "removal", "total", "requests", "end state"], rows)


# ---------------------------------------------------------------- 3. copies per publish

def route_copies(k, route, batch):
    """One route's K copies: the queue's own subject, the routed-as subject, a message id."""
    items = []
    bid = uuid.uuid4().hex
    for i in range(k):
        h = [("Amqp-Routed-As", "amqp.x.k"), ("Nats-Msg-Id", f"{route}.{i}")]
        if batch:
            h += [("Nats-Batch-Id", bid), ("Nats-Batch-Sequence", i + 1)]
            if i == k - 1:
                h.append(("Nats-Batch-Commit", 1))
        items.append((f"amqp._.q{i}", BODY, h))
    return items


def send_batch(conn, items):
    """An atomic batch: only the commit asks for a reply (the rest are stored in order)."""
    for subject, data, hdrs in items[:-1]:
        conn.pub(subject, data, None, hdrs)
    return conn.request(*items[-1])


def measure_copies(args):
    rows = []
    for way in ("individual", "atomic batch"):
        for k in (1, 10, 100, 1000):
            # ~20,000 copies a row, so the CPU is well above the clock tick; a batch of 1 takes
            # ~3 ms, so at most 1,000 of those.
            routes = max(20, min(5000 if way == "individual" else 1000, 20000 // k))
            with Server() as s:
                s.stream("limits", allow_atomic=True)
                m = Meter(s)
                m.start()
                walls = []
                for r in range(routes):
                    items = route_copies(k, f"r{r}", way != "individual")
                    t = time.monotonic()
                    if way == "individual":
                        s.c.publish_many(items, window=4096)
                    else:
                        a = send_batch(s.c, items).json()
                        if "error" in a or a.get("count") != k:
                            raise RuntimeError(f"batch refused: {a}")
                    walls.append(time.monotonic() - t)
                cpu = m.stop()
                st = s.info()
                ok = "ok" if st["messages"] == routes * k else f"stored {st['messages']}"
                log(f"copies {way} k={k}: {routes} routes cpu {cpu:.2f}s {ok}")
                rows.append([way, k, routes, f"{statistics.median(walls)*1e3:.2f}",
                             f"{sorted(walls)[int(len(walls)*0.9)]*1e3:.2f}", us(cpu, routes * k),
                             f"{st['bytes'] / st['messages']:.0f}", ok])
    return ("3. Copies per route: K copies on amqp._.q<i> with Amqp-Routed-As and Nats-Msg-Id, routes one "
            "at a time (a batch's copies keep its Nats-Batch-* headers when stored)",
            ["way", "K", "routes", "wall ms p50", "wall ms p90", "server CPU µs per copy",
             "stored bytes per copy", "stored"], rows)


def measure_refusals(args):
    """Is a whole batch refused when one copy would be? (10 copies, the 5th is the bad one.)"""
    rows = []
    cases = {
        "5th copy's Nats-Msg-Id already stored": lambda it: it,
        "5th copy over max_msg_size (4 KiB)": lambda it: it[:4] + [(it[4][0], b"y" * 8000, it[4][2])] + it[5:],
        "5th copy expects another last subject seq": lambda it: it[:4] + [
            (it[4][0], it[4][1], it[4][2] + [("Nats-Expected-Last-Subject-Sequence", 999)])] + it[5:],
    }
    for what, spoil in cases.items():
        for way in ("individual", "atomic batch"):
            with Server() as s:
                s.stream("limits", allow_atomic=True, max_msg_size=4096)
                if what.startswith("5th copy's Nats-Msg-Id"):
                    s.c.publish_many([("amqp._.q4", BODY, [("Nats-Msg-Id", "r.4")])])
                before = s.info()["messages"]
                items = spoil(route_copies(10, "r", way != "individual"))
                if way == "individual":
                    answers = []
                    for m in s.c.pipeline(items):
                        r = m.json()
                        answers.append("dup" if r.get("duplicate") else r["error"]["err_code"] if "error" in r else "ok")
                    answer = ", ".join(str(a) for a in answers)
                else:
                    r = send_batch(s.c, items).json()
                    answer = f"{r['error']['err_code']} {r['error']['description']}" if "error" in r else "accepted"
                stored = s.info()["messages"] - before
                rows.append([what, way, stored, answer])
                log(f"refusal {what} {way}: stored {stored} answer {answer}")
    return ("3b. One bad copy among 10: what is stored",
            ["case", "way", "copies stored", "answer (per copy, or the commit's)"], rows)


# ---------------------------------------------------------------- 4. a consumer per basic.get

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] * 1e3


def measure_get(args):
    tries = args.tries
    rows = []
    with Server() as s:
        s.stream("limits", allow_direct=True)
        # Idle queues: one message on each subject, no consumer; "a" and "c" each use fresh ones.
        s.c.publish_many([(f"amqp._.g{i}", BODY, None) for i in range(max(max(args.idle), 21 * tries))])
        s.c.publish_many([("amqp._.b", BODY, None)] * 10 * tries)
        s.c.api(*s.durable("b", "amqp._.b"))
        m = Meter(s)
        c = s.c

        def pull_ack(durable):
            seqs = consume(c, durable, 1, ack=False, no_wait=True)
            if len(seqs) != 1:
                raise RuntimeError(f"pull on {durable} found nothing")
            # Acked as a request, so the time runs until the server applied it.
            c.request(c.last_reply, b"+ACK")

        def timed(label, fn, first, count):
            """Times `count` gets one at a time (p50/p90); CPU over all of them."""
            m.start()
            walls = []
            for i in range(first, first + count):
                t = time.monotonic()
                fn(i)
                walls.append(time.monotonic() - t)
            cpu = m.stop()
            log(f"get {label}: p50 {pct(walls, .5):.2f} ms cpu {cpu/count*1e6:.0f} µs")
            rows.append([label, count, f"{pct(walls, .5):.2f}", f"{pct(walls, .9):.2f}", us(cpu, count)])

        def create_pull_ack(i):
            c.api(*s.durable(f"g{i}", f"amqp._.g{i}", inactive_threshold=30 * NS))
            pull_ack(f"g{i}")

        def direct(i, delete=False):
            r = c.request("$JS.API.DIRECT.GET.AMQP", json.dumps({"next_by_subj": f"amqp._.g{i}", "seq": 0}).encode())
            if r.status() or r.data != BODY:
                raise RuntimeError(f"direct get: {r.hdr!r}")
            if delete:
                seq = int(r.hdr.split(b"Nats-Sequence: ")[1].split(b"\r\n")[0])
                c.api("STREAM.MSG.DELETE.AMQP", {"seq": seq, "no_erase": True})

        # The cheap ways run 10x as often, so their CPU is above the clock tick's resolution.
        timed("a. CONSUMER.CREATE (durable, deliver all, inactive_threshold 30 s) + pull no_wait + ack",
              create_pull_ack, 0, tries)
        timed("b. pull no_wait + ack on an existing consumer", lambda i: pull_ack("b"), 0, 10 * tries)
        timed("c. DIRECT.GET next_by_subj (no consumer)", direct, tries, 10 * tries)
        timed("c'. DIRECT.GET + STREAM.MSG.DELETE (get with no_ack, settled)",
              lambda i: direct(i, True), 11 * tries, 10 * tries)
        timed("d. CONSUMER.DELETE of a consumer from a.", lambda i: c.api(f"CONSUMER.DELETE.AMQP.g{i}"), 0, tries)
    return (f"4. basic.get on an idle queue (one at a time, each on a fresh subject but b., "
            f"{max(max(args.idle), 21 * tries)} idle subjects holding 1 message each; every step a request awaited)",
            ["way", "gets", "wall ms p50", "wall ms p90", "server CPU µs per get"], rows)


# ---------------------------------------------------------------- 5. facts for HIP-1326 §2.2

def measure_facts(args):
    rows = []
    with Server() as s:
        s.stream("limits")
        s.c.pub("amqp.x.k", BODY)  # core NATS, no reply
        s.c.flush()
        time.sleep(0.3)
        st = s.info()
        rows.append(["core PUB amqp.x.k, no reply; stream over amqp.>", f"stored: {st['messages']} message(s)"])
    with Server() as s:
        s.stream("limits", subjects=["amqp._.>"])
        s.c.out.append(b"SUB amqp.x.k 9\r\n")
        s.c.pub("amqp.x.k", BODY)
        s.c.flush()
        got = s.c.read()
        rows.append(["core PUB amqp.x.k; stream over amqp._.> only, a core subscriber on amqp.x.k",
                     f"subscriber got {len(got.data)} bytes; stream holds {s.info()['messages']}"])
    with Server() as s:
        s.stream("limits", allow_msg_ttl=True)
        s.c.publish_many([("amqp.x.k", BODY, [("Nats-TTL", "1s")])])
        n0 = s.info()["messages"]
        t = time.monotonic()
        while s.info()["messages"] and time.monotonic() - t < 10:
            time.sleep(0.1)
        rows.append(["PUB amqp.x.k with Nats-TTL: 1s (allow_msg_ttl)",
                     f"stored {n0}, gone after {time.monotonic() - t:.1f} s"])
        r = s.c.request("amqp.x.k", BODY, [("Nats-TTL", "500ms")]).json()
        rows.append(["Nats-TTL: 500ms", f"refused: {r.get('error', {}).get('description', r)}"])
    with Server() as s:
        s.stream("limits", subject_transform={"src": "amqp.x.k", "dest": "amqp._.q"})
        s.c.publish_many([("amqp.x.k", BODY, None)])
        last = s.c.api("STREAM.INFO.AMQP", {"subjects_filter": ">"})["state"].get("subjects")
        rows.append(["subject_transform amqp.x.k → amqp._.q", f"stored under {last}"])
    return ("5. Facts for HIP-1326 §2.2", ["what", "found"], rows)


# ---------------------------------------------------------------- main

MEASUREMENTS = {"ack": measure_ack, "settle": measure_settle, "copies": measure_copies,
                "refusals": measure_refusals, "get": measure_get, "facts": measure_facts}


def table(title, header, rows):
    out = [f"**{title}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--messages", type=int, default=20000, help="M, messages per row of 1 and 2")
    p.add_argument("--heavy-messages", type=int, default=2000,
                   help="messages where each costs milliseconds (interest/workqueue beside 10,000 consumers)")
    p.add_argument("--idle", type=lambda v: [int(x) for x in v.split(",")], default=[0, 1000, 10000],
                   help="idle queue counts for 1 (the largest is used in 2 and 4)")
    p.add_argument("--tries", type=int, default=200, help="basic.get tries per way in 4")
    p.add_argument("--only", action="append", choices=sorted(MEASUREMENTS), help="run only these (repeatable)")
    p.add_argument("--quick", action="store_true", help="skip the idle-consumers variant of 2")
    args = p.parse_args()
    while not os.access(NATS_SERVER, os.X_OK):  # scripts/install-deps may still be building it
        log(f"waiting for {NATS_SERVER}")
        time.sleep(60)
    version = cloudtest.server_version_of(NATS_SERVER)
    t0 = time.monotonic()
    print(f"nats-server {version} ({NATS_SERVER}), 1 node, file storage, 100-byte bodies, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} at start\n")
    for name in args.only or list(MEASUREMENTS):
        t = time.monotonic()
        print(table(*MEASUREMENTS[name](args)))
        log(f"{name}: {time.monotonic() - t:.0f} s")
    print(f"load {os.getloadavg()[0]:.2f} at end; {time.monotonic() - t0:.0f} s in all")


if __name__ == "__main__":
    main()
