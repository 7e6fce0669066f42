"""Client `amqp_tools` of the interop matrix (tests/interop/README.md): rabbitmq-c's command-line
programs (Debian amqp-tools 0.11: amqp-declare-queue, amqp-publish, amqp-consume, amqp-get,
amqp-delete-queue), run the way a shell script uses them, against AMQP_URL.

Each tool opens one connection, does one thing and closes it. What they cannot express is
reported `na` with the reason: amqp-publish has no confirms and never sets `mandatory`;
amqp-consume acks a message when its command exits 0 and otherwise leaves it unacked (it never
sends basic.nack or basic.reject), and its command sees only the body. The extras assert what
the tools do instead: `tools_roundtrip` (line-buffered publish, consume with prefetch, in order)
and `tools_requeue_on_close` (a message whose command failed comes back to the next consumer);
and what a script of separate tool runs relies on: `tools_get_during_declare`,
`tools_get_after_consume`, `tools_unacked_across_restart`.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import _interop  # noqa: E402  (the RESULT protocol shared with the Python clients)
from _interop import expect, expect_equal  # noqa: E402

SCRATCH = os.environ.get("INTEROP_TMP") or "/tmp"
RACE_WAIT = min(15.0, _interop.WAIT)
EXTRAS = ("tools_roundtrip", "tools_requeue_on_close", "tools_get_during_declare", "tools_get_after_consume",
          "tools_unacked_across_restart")
report = _interop.Report("amqp_tools", extras=EXTRAS)
print(f"LIBRARY {report.client} amqp-tools "
      f"{subprocess.run(['dpkg-query', '-W', '-f=${Version}', 'amqp-tools'], capture_output=True, text=True).stdout}"
      " (Debian)", flush=True)

# The command amqp-consume runs per message: appends the body and a newline to $1. When the body
# equals $3 it then blocks until the FIFO $2 is opened for writing and closed (the test's release),
# and exits with $4 (0: amqp-consume acks the message; anything else: it does not).
RECORD = r'''body=$(cat); printf '%s\n' "$body" >> "$1"
if [ "$body" = "$3" ]; then cat "$2" > /dev/null; fi
exit "$4"'''


# -- running the tools ---------------------------------------------------------------------------

def connection_options():
    """--url, and over TLS (an amqps URL) --ssl and the CA to trust: amqp-tools read no certificate
    store, nor the URL's scheme."""
    ca = os.environ.get("AMQP_CA_FILE")
    return ["--url", _interop.URL] + (["--ssl", "--cacert", ca] if _interop.URL.startswith("amqps:") and ca else [])


def run_tool(name, *args, stdin=None, timeout=_interop.WAIT):
    """Runs one tool against the server: the CompletedProcess (TimeoutExpired past `timeout`)."""
    return subprocess.run([name, *connection_options(), *args], input=stdin, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout)


def tool(name, *args, code=0, stdin=None):
    """Runs one tool; checks its exit status; returns its stdout and stderr."""
    done = run_tool(name, *args, stdin=stdin)
    err = done.stderr.decode(errors="replace").strip()
    expect(done.returncode == code, f"{name} {' '.join(args)}: exit {done.returncode} (expected {code}) {err}")
    return done.stdout.decode(errors="replace"), err


def get(queue):
    """amqp-get: the body, or None for get-empty (exit 2)."""
    done = run_tool("amqp-get", "-q", queue)
    expect(done.returncode in (0, 2), f"amqp-get -q {queue}: exit {done.returncode} {done.stderr.decode().strip()}")
    return done.stdout.decode() if done.returncode == 0 else None


def publish(queue, body, *options):
    tool("amqp-publish", "-r", queue, "-b", body, *options)


class Consumer:
    """amqp-consume in the background, running RECORD for each message; `hold` is the body whose
    command blocks until release(), `command_exit` what each command exits with. Each runs in a
    process group of its own, ended with its commands when the scenario ends (stop_all)."""

    running = []

    def __init__(self, scenario, *options, hold="", command_exit=0):
        self.out = os.path.join(SCRATCH, f"{scenario}.out")
        self.fifo = os.path.join(SCRATCH, f"{scenario}.fifo")
        open(self.out, "w").close()
        if not os.path.exists(self.fifo):
            os.mkfifo(self.fifo)
        self.proc = subprocess.Popen(
            ["amqp-consume", *connection_options(), *options, "--",  # the rest is the command's, not popt's
             "/bin/sh", "-c", RECORD, "record", self.out, self.fifo, hold, str(command_exit)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        Consumer.running.append(self)

    def lines(self):
        with open(self.out) as f:
            return f.read().splitlines()

    def wait_for(self, enough, what, timeout=_interop.WAIT):
        """Waits until the recorded bodies satisfy enough(lines); returns them."""
        def recorded():
            lines = self.lines()
            expect(self.proc.poll() is None or enough(lines),
                   f"amqp-consume exited {self.proc.returncode} before {what}: {self.stderr()}")
            return enough(lines)
        _interop.wait_until(recorded, what, timeout=timeout)
        return self.lines()

    def release(self):
        """Lets the held command finish (opening the FIFO for writing ends its `cat`)."""
        with open(self.fifo, "w"):
            pass

    def finish(self):
        """Waits for amqp-consume to end (its -c count reached); returns its exit status."""
        try:
            self.proc.wait(timeout=_interop.WAIT)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"amqp-consume did not finish within {_interop.WAIT:.0f}s; recorded {self.lines()}")
        return self.proc.returncode

    def stop(self):
        """Ends amqp-consume and a command it may be blocked in (their process group)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    @classmethod
    def stop_all(cls):
        for consumer in cls.running:
            consumer.stop()
        cls.running.clear()

    def stderr(self):
        return self.proc.stderr.read().decode(errors="replace").strip() if self.proc.poll() is not None else ""


def durable_queue(suffix):
    """amqp-declare-queue -d: prints the queue's name, which must be the one asked for."""
    name = report.name(suffix)
    out, _ = tool("amqp-declare-queue", "-d", "-q", name)
    expect_equal(out.strip(), name, "amqp-declare-queue output")
    return name


# -- the scenarios -----------------------------------------------------------------------------

def declare():
    """A durable queue, declared twice (idempotent), reached through the default exchange and
    deleted (queue.delete-ok counts its message; a get on it is then 404). A binding: amqp-consume
    declares its queue and binds it to amq.topic with a wildcard key before it consumes; a probe
    through the default exchange reaching its command shows the binding is in place; then a
    matching publish arrives and a non-matching one does not."""
    queue = durable_queue("declare-q")
    durable_queue("declare-q")
    publish(queue, "hello")
    out, _ = tool("amqp-delete-queue", "-q", queue)
    expect_equal(out.strip(), "1", "queue.delete-ok message count")
    _, err = tool("amqp-get", "-q", queue, code=1)
    expect("404" in err, f"amqp-get on a deleted queue: expected a 404, got {err!r}")

    bound = report.name("declare-bound")
    consumer = Consumer("declare", "-q", bound, "-e", "amq.topic", "-r", "stock.*.eu")  # no -c: stop_all ends it
    probe_until_consumed(bound, consumer)
    for key in ("stock.sap.eu", "stock.sap.us", "stock.ibm.eu"):
        tool("amqp-publish", "-e", "amq.topic", "-r", key, "-b", key)
    got = consumer.wait_for(lambda lines: "stock.ibm.eu" in lines, "stock.ibm.eu")
    expect_equal([b for b in got if b != "probe"], ["stock.sap.eu", "stock.ibm.eu"], "bodies through the binding")


def probe_until_consumed(queue, consumer):
    """amqp-consume declares and binds its queue, then consumes: once a probe published to the
    queue (default exchange) reaches its command, the binding is in place. Probes published
    before the queue exists are unroutable and dropped, hence the retries."""
    deadline = time.monotonic() + _interop.WAIT
    while time.monotonic() < deadline:
        expect(consumer.proc.poll() is None, f"amqp-consume exited {consumer.proc.returncode}: {consumer.stderr()}")
        publish(queue, "probe")
        try:
            consumer.wait_for(lambda lines: "probe" in lines, "a probe", timeout=0.5)
            return
        except AssertionError:
            continue
    raise AssertionError(f"no probe reached amqp-consume within {_interop.WAIT:.0f}s: {consumer.lines()}")


def get_during_declare():
    """A basic.get (amqp-get) while another connection declares the queue is answered: 404 if it
    came first, get-empty if the declaration did; never left waiting. Twenty queues, so that the
    get meets a declaration in flight at least once."""
    for i in range(20):
        queue = report.name(f"race-q{i}")
        declaring = subprocess.Popen(["amqp-declare-queue", *connection_options(), "-q", queue],
                                     stdout=subprocess.DEVNULL)
        try:
            done = run_tool("amqp-get", "-q", queue, timeout=RACE_WAIT)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"amqp-get racing amqp-declare-queue of {queue} got no answer "
                                 f"within {RACE_WAIT:.0f}s (try {i + 1} of 20)")
        finally:
            declaring.wait(timeout=_interop.WAIT)
        expect(done.returncode == 2 or b"404" in done.stderr,
               f"amqp-get racing the declaration of {queue}: exit {done.returncode} {done.stderr.decode().strip()}")


def consume_prefetch_ack():
    """amqp-consume -p 1: while the command for m1 runs (unacked), the server holds m2 back, so
    amqp-get finds it; released, the consumer gets the other eight once each, in order, acking
    each as its command exits 0."""
    queue = durable_queue("prefetch-q")
    bodies = [f"m{i}" for i in range(1, 11)]
    for body in bodies:
        publish(queue, body, "-p")
    consumer = Consumer("prefetch", "-q", queue, "-p", "1", "-c", "9", hold="m1")
    consumer.wait_for(lambda lines: lines == ["m1"], "m1")
    expect_equal(get(queue), "m2", "amqp-get while the consumer holds m1 under prefetch 1")
    consumer.release()
    expect_equal(consumer.finish(), 0, "amqp-consume exit status")
    expect_equal(consumer.lines(), [b for b in bodies if b != "m2"], "bodies consumed")
    expect_equal(get(queue), None, "amqp-get after everything was acked")


def requeue_on_close():
    """A command that fails leaves its message unacked; when amqp-consume closes, the server
    requeues it, and the next amqp-consume gets the same body (and acks it: the queue is empty)."""
    queue = durable_queue("requeue-q")
    publish(queue, "again")
    failing = Consumer("requeue-1", "-q", queue, "-c", "1", command_exit=1)
    expect_equal(failing.finish(), 0, "amqp-consume exit status")
    expect_equal(failing.lines(), ["again"], "first consumer's bodies")
    succeeding = Consumer("requeue-2", "-q", queue, "-c", "1")
    expect_equal(succeeding.finish(), 0, "amqp-consume exit status")
    expect_equal(succeeding.lines(), ["again"], "second consumer's bodies")
    expect_equal(get(queue), None, "amqp-get after the acked redelivery")


def basic_get():
    """amqp-get (basic.get with no-ack): exit 2 on an empty queue; after two publishes, the first
    then the second body; then empty again."""
    queue = durable_queue("get-q")
    expect_equal(get(queue), None, "amqp-get on a new queue")
    publish(queue, "g1")
    publish(queue, "g2")
    expect_equal(get(queue), "g1", "first amqp-get")
    expect_equal(get(queue), "g2", "second amqp-get")
    expect_equal(get(queue), None, "third amqp-get")


def roundtrip():
    """amqp-publish -l: one message per line of stdin on one connection; amqp-consume -p 3 -c 10
    gets them in order (each body is its line with the newline, which the command's $(cat) drops)."""
    queue = durable_queue("roundtrip-q")
    lines = [f"line-{i}" for i in range(10)]
    tool("amqp-publish", "-r", queue, "-l", "-p", stdin="".join(f"{line}\n" for line in lines).encode())
    consumer = Consumer("roundtrip", "-q", queue, "-p", "3", "-c", "10")
    expect_equal(consumer.finish(), 0, "amqp-consume exit status")
    expect_equal(consumer.lines(), lines, "bodies consumed")


def get_after_consume():
    """amqp-consume -c 1 takes one message and closes; a message published next is ready, so the
    amqp-get that follows returns it (get-empty would hide a ready message)."""
    queue = durable_queue("after-consume-q")
    publish(queue, "first")
    consumer = Consumer("after-consume", "-q", queue, "-c", "1")
    expect_equal(consumer.finish(), 0, "amqp-consume exit status")
    expect_equal(consumer.lines(), ["first"], "bodies consumed")
    publish(queue, "second")
    expect_equal(get(queue), "second", "amqp-get right after the consumer closed")


def unacked_across_restart():
    """A consumer holds `held` unacked across a server restart: amqp-consume cannot ack it once
    the server closed its connection, and exits non-zero; a new amqp-consume gets `held` again
    (HIP-1326, "Acknowledgement, and what bounds a consumer": deliveries outstanding when a
    connection closes are re-queued, never dropped)."""
    queue = durable_queue("held-q")
    publish(queue, "held", "-p")
    holder = Consumer("held-1", "-q", queue, "-c", "1", hold="held")
    holder.wait_for(lambda lines: lines == ["held"], "held, before the restart")
    _interop.restart_server()
    holder.release()
    expect(holder.finish() != 0, "amqp-consume acked `held` on a connection the restart closed")
    again = Consumer("held-2", "-q", queue, "-c", "1")
    expect_equal(again.finish(), 0, "amqp-consume exit status after the restart")
    expect_equal(again.lines(), ["held"], "bodies after the restart")


def reconnect():
    """The tools do not reconnect: an idle amqp-consume exits when the restart closes its
    connection (it skips the connection.close method as a non-delivery frame, then reads the end
    of the socket), and the script runs the tools again. `before`, published persistent, is consumed after the
    restart by a new amqp-consume; `after` is published and fetched by new processes too."""
    queue = durable_queue("reconnect")
    publish(queue, "before", "-p")
    idle = Consumer("reconnect-idle", "-q", durable_queue("reconnect-idle"))
    _interop.restart_server()
    expect(idle.finish() != 0, "amqp-consume survived the server's restart")
    stderr = idle.stderr()
    expect("connection closed" in stderr, f"amqp-consume's error does not say the connection closed: {stderr!r}")
    again = Consumer("reconnect", "-q", queue, "-c", "1")
    expect_equal(again.finish(), 0, "amqp-consume exit status after the restart")
    expect_equal(again.lines(), ["before"], "bodies after the restart")
    publish(queue, "after", "-p")
    fetch = Consumer("reconnect-after", "-q", queue, "-c", "1")
    expect_equal(fetch.finish(), 0, "amqp-consume exit status")
    expect_equal(fetch.lines(), ["after"], "bodies published after the restart")


def not_applicable(why):
    def scenario():
        raise _interop.NotApplicable(why)
    return scenario


SCENARIOS = [
    ("declare", declare),
    ("publish_confirm", not_applicable("amqp-publish has no publisher confirms (it never sends confirm.select) "
                                       "and amqp-consume's command sees only the body, not the properties")),
    ("consume_prefetch_ack", consume_prefetch_ack),
    ("nack_requeue", not_applicable("amqp-consume never sends basic.nack or basic.reject (a failed command "
                                    "leaves the message unacked: see tools_requeue_on_close), and cannot "
                                    "show the redelivered flag")),
    ("mandatory_return", not_applicable("amqp-publish always publishes with mandatory=0 and cannot receive "
                                        "basic.return")),
    ("basic_get", basic_get),
    ("tools_roundtrip", roundtrip),
    ("tools_requeue_on_close", requeue_on_close),
    ("tools_get_during_declare", get_during_declare),
    ("tools_get_after_consume", get_after_consume),
    ("tools_unacked_across_restart", unacked_across_restart),  # restarts the server
    ("reconnect", reconnect),  # restarts the server: last
]

def run(scenario):
    try:
        scenario()
    finally:
        Consumer.stop_all()


if __name__ == "__main__":
    for name, scenario in SCENARIOS:
        report.run(name, run, scenario)
    report.exit()
