#!/usr/bin/python3
"""Interop matrix driver: every stock client program in tests/interop/<lang>/ against a real `cloud`.

The contract a client program follows is in tests/interop/README.md. For each client this
boots one `cloud` (tests/support/cloudtest.py) so the reconnect scenario's restart disturbs
nobody else, serves the restart request behind CLOUD_RESTART_CMD, runs the program with a
timeout, parses its RESULT lines, and writes results/<client>.json.

    matrix.py [--client NAME ...] [--jobs N] [--results DIR]
    matrix.py --restart URL      # what CLOUD_RESTART_CMD runs: ask the driver to restart the server

ctest runs one client per test (INTEROP_CLIENT); a client that is not reported on, or not
runnable, is a failure, never a skip. Exit status: 0 iff every client passed every required
scenario (a documented `refused` or `na` counts as passing).
"""
import argparse
import concurrent.futures
import http.server
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
import cloudtest  # noqa: E402
import natsraw  # noqa: E402
from certs import make_certificates  # noqa: E402

STANDARD = ["declare", "publish_confirm", "consume_prefetch_ack", "nack_requeue",
            "mandatory_return", "basic_get", "reconnect"]
VERDICTS = ("pass", "fail", "refused", "na")
PYTHON = "/usr/bin/python3"
# How each kind of program is started; the runtime is looked up on PATH when it runs. Python
# runs with -P so a program named after its library (kombu.py) does not shadow that library.
RUNNERS = {
    ".py": [PYTHON, "-u", "-P"],
    ".js": ["node"],
    ".mjs": ["node"],
    ".go": ["go", "run"],
    ".rb": ["ruby"],
    ".sh": ["/bin/sh"],
}
TIMEOUT = float(os.environ.get("INTEROP_TIMEOUT", "300"))
# INTEROP_TLS=1: every client connects over TLS (amqps://, the amqps listener), trusting the test
# CA through the variables each runtime reads: SSL_CERT_FILE (OpenSSL, Python, Ruby, Go),
# NODE_EXTRA_CA_CERTS (Node) and AMQP_CA_FILE (what a program must be told: rabbitmq-c's).
TLS = os.environ.get("INTEROP_TLS") == "1"


# -- discovery ---------------------------------------------------------------------------------

def discover():
    """{client: (language, path)} for every program directly inside a language folder."""
    clients = {}
    for lang in sorted(os.listdir(HERE)):
        folder = os.path.join(HERE, lang)
        if not os.path.isdir(folder) or lang.startswith((".", "_")) or lang == "__pycache__":
            continue
        for name in sorted(os.listdir(folder)):
            stem, ext = os.path.splitext(name)
            path = os.path.join(folder, name)
            if ext in RUNNERS and not name.startswith("_") and os.path.isfile(path):
                if stem in clients:
                    raise SystemExit(f"client name {stem} is used twice: {clients[stem][1]} and {path}")
                clients[stem] = (lang, path)
    return clients


def command_for(path):
    """The argv that runs `path`, or None with a reason when its runtime is not installed."""
    ext = os.path.splitext(path)[1]
    runner = RUNNERS[ext]
    if shutil.which(runner[0]) is None:
        return None, f"runtime {runner[0]!r} for {ext} programs is not installed"
    return runner + [path], ""


# -- the server, and restarting it on request ----------------------------------------------------

class Server:
    """One cloud for one client, restartable on the same data dir and AMQP port."""

    def __init__(self):
        # Stock clients use RabbitMQ's names (Celery's pidbox, dotted queue names): the matrix's
        # server takes every one (README, "Names").
        env = {"CLOUD_AMQP_NAMES": "escaped"}
        self.certs = None
        if TLS:
            self.certs = tempfile.mkdtemp(prefix="interop-certs-")
            make_certificates(self.certs)
            self.tls_port = cloudtest.free_port()
            env.update({"CLOUD_AMQPS_PORT": str(self.tls_port),
                        "CLOUD_AMQPS_CERT": os.path.join(self.certs, "server.pem"),
                        "CLOUD_AMQPS_KEY": os.path.join(self.certs, "server.key")})
        self.cloud = cloudtest.Cloud(env=env)
        self.lock = threading.Lock()
        self.restarts = 0

    def __enter__(self):
        self.cloud.__enter__()
        return self

    def __exit__(self, *exc):
        try:
            self.stop()
        finally:
            self.cloud.cleanup()
            if self.certs:
                shutil.rmtree(self.certs, ignore_errors=True)
        return False

    def stop(self):
        """SIGTERM; a crash, a sanitizer report or an unclean exit is a failure of the run."""
        code = self.cloud.stop()
        if code != 0:
            raise AssertionError(f"cloud exited with {code} (expected 0 after SIGTERM); its log ends:\n"
                                 + self.cloud.log[-6000:])

    @property
    def port(self):
        return self.tls_port if TLS else self.cloud.amqp_port

    @property
    def url(self):
        return f"{'amqps' if TLS else 'amqp'}://guest:guest@127.0.0.1:{self.port}/"

    def ca_env(self):
        if not TLS:
            return {}
        ca = os.path.join(self.certs, "ca.pem")
        return {"SSL_CERT_FILE": ca, "NODE_EXTRA_CA_CERTS": ca, "AMQP_CA_FILE": ca}

    def restart(self):
        """SIGTERM (the server closes every client connection), then the same store and port again."""
        with self.lock:
            code = self.cloud.restart()
            if code != 0:
                raise AssertionError(f"cloud exited with {code} (expected 0 after SIGTERM) before the restart;"
                                     " its log ends:\n" + self.cloud.previous_log[-6000:])
            self.restarts += 1


class Control:
    """A loopback HTTP endpoint, POST /restart, behind CLOUD_RESTART_CMD."""

    def __init__(self, server):
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                status, text = owner.handle(self.path)
                body = text.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = server
        self.errors = []
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def handle(self, path):
        if path != "/restart":
            return 404, "unknown control path"
        try:
            self.server.restart()
            return 200, "restarted"
        except Exception as e:  # the client sees a failed restart as a non-zero exit
            self.errors.append(f"restart failed: {e}")
            return 500, f"restart failed: {e}"

    @property
    def restart_cmd(self):
        url = f"http://127.0.0.1:{self.httpd.server_address[1]}/restart"
        return " ".join(shlex.quote(a) for a in [PYTHON, os.path.abspath(__file__), "--restart", url])

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        return False


def request_restart(url):
    """--restart: blocks until the driver restarted the server; exit status says whether it did."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=TIMEOUT) as r:
            r.read()
        return 0
    except Exception as e:
        print(f"restart request to {url} failed: {e}", file=sys.stderr)
        return 1


# -- running one client ------------------------------------------------------------------------

def program_env(client, server, control, scratch):
    env = dict(os.environ)
    env.update({
        "AMQP_URL": server.url,
        "AMQP_PORT": str(server.port),
        "CLOUD_RESTART_CMD": control.restart_cmd,
        "INTEROP_CLIENT": client,
        "INTEROP_TMP": scratch,
        "INTEROP_BUILD_DIR": os.environ.get("INTEROP_BUILD_DIR", ""),
    })
    env.update(server.ca_env())
    env.setdefault("GO111MODULE", "off")
    env.setdefault("GOPATH", "/usr/share/gocode")
    return env


def run_program(argv, cwd, env):
    """(exit code, or None when it was killed after TIMEOUT; combined output). The program runs
    in its own process group so a timeout also ends whatever it started (a celery worker, say)."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
        return proc.returncode, out.decode(errors="replace")
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out.decode(errors="replace")


def parse(client, output):
    """(scenarios {name: {verdict, reason}}, required names, protocol problems, library)."""
    scenarios, required, problems, library = {}, list(STANDARD), [], None
    for line in output.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] in ("RESULT", "SCENARIOS", "LIBRARY") and words[1] != client:
            problems.append(f"line names client {words[1]!r}, expected {client!r}: {line}")
        elif words[:1] == ["LIBRARY"] and len(words) >= 4:
            library = line.split(None, 2)[2]
        elif words[:1] == ["SCENARIOS"]:
            required += [w for w in words[2:] if w not in required]
        elif words[:1] == ["RESULT"]:
            if len(words) < 4 or words[3] not in VERDICTS:
                problems.append(f"malformed RESULT line: {line}")
                continue
            reason = line.split(None, 4)[4] if len(words) > 4 else ""
            previous = scenarios.get(words[2])
            if previous is None or previous["verdict"] != "fail":  # a repeated scenario keeps its failure
                scenarios[words[2]] = {"verdict": words[3], "reason": reason}
    for name in required:
        if name not in scenarios:
            scenarios[name] = {"verdict": "fail", "reason": "not reported by the program"}
    if library is None:
        problems.append("no LIBRARY line: the program did not say which release of its library it ran")
    return scenarios, required, problems, library


def bus_state(cloud):
    """Every queue's consumer as the bus sees it, for a failed client: whether a message the
    client missed is still pending, delivered and unacknowledged, or gone."""
    try:
        bus = natsraw.NatsRaw(cloud.nats_port)
        try:
            stream = bus.api("STREAM.INFO.AMQP").get("state", {})
            lines = [f"(the bus) stream AMQP: {stream.get('messages')} messages, "
                     f"first {stream.get('first_seq')}, last {stream.get('last_seq')}"]
            offset = 0
            while True:
                page = bus.api("CONSUMER.LIST.AMQP", {"offset": offset})
                consumers = page.get("consumers") or []
                for c in consumers:
                    lines.append(f"  {c['name']}: pending {c.get('num_pending')}, unacked {c.get('num_ack_pending')}, "
                                 f"redelivered {c.get('num_redelivered')}, pulls {c.get('num_waiting')}, "
                                 f"delivered up to {c.get('delivered', {}).get('stream_seq')}, "
                                 f"acked up to {c.get('ack_floor', {}).get('stream_seq')}, "
                                 f"starts at {c.get('config', {}).get('opt_start_seq', 'new')}")
                offset += len(consumers)
                if not consumers or offset >= page.get("total", 0):
                    return "\n".join(lines)
        finally:
            bus.close()
    except Exception as e:  # a diagnostic: never the reason a run fails
        return f"(the bus) not readable: {e}"


def run_client(client, lang, path):
    """Boots a server, runs the program, returns its result record."""
    started = time.monotonic()
    argv, missing = command_for(path)
    record = {"client": client, "language": lang, "program": os.path.relpath(path, HERE), "tls": TLS,
              "exit_code": None, "seconds": 0.0, "problems": [], "output": ""}
    if argv is None:
        record["scenarios"] = {s: {"verdict": "fail", "reason": missing} for s in STANDARD}
        record["problems"].append(missing)
        return record
    scratch = tempfile.mkdtemp(prefix=f"interop-{client}-")
    code, output, ran = None, "", False
    try:
        with Server() as server, Control(server) as control:
            code, output = run_program(argv, os.path.dirname(path), program_env(client, server, control, scratch))
            ran = True
            # Shown when the client failed; a restart's earlier run too, for what it did last.
            record["server_log"] = server.cloud.log[-8000:]
            if server.restarts:
                record["server_log"] = (f"(before the last restart)\n{server.cloud.previous_log[-6000:]}\n"
                                        f"(after it)\n{record['server_log']}")
            record["restarts"] = server.restarts
            record["problems"] += control.errors
            if code != 0:
                record["server_log"] += "\n" + bus_state(server.cloud)
    except Exception as e:  # the server failed to boot or to stop cleanly: a failure of this client
        output += f"\nserver error: {e}"
        record["problems"].append(f"server error: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    scenarios, _, problems, library = parse(client, output)
    problems = record["problems"] + problems
    if code is None and ran:
        problems.append(f"killed after {TIMEOUT:.0f}s")
    elif code != 0 and not any(s["verdict"] == "fail" for s in scenarios.values()):
        problems.append(f"exit code {code} although no scenario failed")
    elif code == 0 and any(s["verdict"] == "fail" for s in scenarios.values()):
        problems.append("exit code 0 although a scenario failed")
    record.update(exit_code=code, seconds=round(time.monotonic() - started, 1), scenarios=scenarios, library=library,
                  finished=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                  problems=problems, output=output)
    return record


def passed(record):
    return not record["problems"] and all(s["verdict"] != "fail" for s in record["scenarios"].values())


# -- reporting ---------------------------------------------------------------------------------

def write_record(results_dir, record):
    os.makedirs(results_dir, exist_ok=True)
    with open(os.path.join(results_dir, f"{record['client']}{'.tls' if record['tls'] else ''}.json"), "w") as f:
        json.dump({k: v for k, v in record.items() if k not in ("output", "server_log")}, f, indent=2)
        f.write("\n")


def print_table(records):
    columns = list(STANDARD)
    for r in records:
        columns += [s for s in r["scenarios"] if s not in columns]
    width = max([len(r["client"]) for r in records] + [6])
    print("client".ljust(width), " ".join(c[:12].ljust(12) for c in columns))
    for r in records:
        cells = [r["scenarios"].get(c, {"verdict": "-"})["verdict"].ljust(12) for c in columns]
        print(r["client"].ljust(width), " ".join(cells))


def print_output(record, verbose):
    """A failed client's problems and output (every client's output when verbose)."""
    if passed(record) and not verbose:
        return
    print(f"\n=== {record['client']} ({record['program']}) {'passed' if passed(record) else 'FAILED'}")
    for problem in record["problems"]:
        print(f"  problem: {problem}")
    for name, s in record["scenarios"].items():
        if s["verdict"] == "fail":
            print(f"  {name}: {s['reason']}")
    print(f"--- output of {record['client']} ---\n{record['output'][-20000:]}\n--- end ---")
    if not passed(record) and record.get("server_log"):
        print(f"--- the server's log (its end; the bus's queues after a failure) ---\n{record['server_log']}\n--- end ---")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--client", action="append", help="run only this client (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="clients run at once (each has its own server)")
    parser.add_argument("--results", default=os.environ.get("INTEROP_RESULTS_DIR", os.path.join(os.getcwd(), "results")))
    parser.add_argument("--restart", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--list", action="store_true", help="print the client names and exit")
    parser.add_argument("--verbose", action="store_true", help="print every program's output")
    args = parser.parse_args()
    if args.restart:
        return request_restart(args.restart)
    clients = discover()
    if not args.list and not os.path.isfile(cloudtest.CLOUD_BIN):
        print("CLOUD_BIN (and CLOUD_PLUGIN_DIR, CLOUD_MANIFEST) must name a build: run through ctest",
              file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(clients))
        return 0
    wanted = args.client or ([os.environ["INTEROP_CLIENT"]] if os.environ.get("INTEROP_CLIENT") else list(clients))
    unknown = [c for c in wanted if c not in clients]
    if unknown:
        print(f"no program for client(s) {unknown}; known: {sorted(clients)}", file=sys.stderr)
        return 2
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        records = list(pool.map(lambda c: run_client(c, *clients[c]), wanted))
    for record in records:
        write_record(args.results, record)
        print_output(record, args.verbose)
    print()
    print_table(records)
    return 0 if all(passed(r) for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
