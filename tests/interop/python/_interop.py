"""What every Python client program of the interop matrix shares: the RESULT protocol of
tests/interop/README.md, names, the restart request, and the expected messages.

Not a client itself (the leading underscore keeps the driver from running it). The driver runs
programs with `python3 -P`, so a program imports its library first and then appends its own
folder to sys.path for this module.
"""
import os
import subprocess
import sys
import time
import traceback

URL = os.environ.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
PORT = int(os.environ.get("AMQP_PORT", "5672"))
# A deadline for waiting on an event, not an assertion about time: generous for sanitized servers.
WAIT = float(os.environ.get("INTEROP_WAIT", "60"))
# Where Debian's python3-* packages are installed.
DEBIAN_PACKAGES = "/usr/lib/python3/dist-packages/"


class Refused(Exception):
    """Raised by a scenario that met a refusal by design (HIP-1326, "What is not implemented,
    and how it says so") and asserted it."""


class NotApplicable(Exception):
    """Raised by a scenario the client's API cannot express."""


class Report:
    """Runs scenarios and prints one RESULT line for each."""

    def __init__(self, default_client, extras=()):
        self.client = os.environ.get("INTEROP_CLIENT", default_client)
        self.failed = False
        if extras:
            print(f"SCENARIOS {self.client} {' '.join(extras)}", flush=True)

    def library(self, module, name=None):
        """The contract's LIBRARY line: the release of `module` this process loaded, and where from.
        A *_pypi client (INTEROP_PYPI_DIR set by _pypi.sh) that loaded anything else stops here, so
        its row never shows Debian's results under PyPI's name."""
        name = name or module.__name__
        path = os.path.realpath(module.__file__)
        pypi = os.environ.get("INTEROP_PYPI_DIR")
        if pypi and path.startswith(os.path.realpath(pypi) + os.sep):
            origin = "PyPI"
        elif path.startswith(DEBIAN_PACKAGES):
            origin = "Debian"
        else:
            origin = path
        print(f"LIBRARY {self.client} {name} {module.__version__} ({origin})", flush=True)
        if pypi and origin != "PyPI":
            raise SystemExit(f"{name} was loaded from {path}, not from the PyPI releases in {pypi}")

    def name(self, suffix):
        """An exchange or queue name of this client's own."""
        return f"{self.client}-{suffix}"

    def result(self, scenario, verdict, reason=""):
        self.failed |= verdict == "fail"
        one_line = " ".join(str(reason).split())
        print(f"RESULT {self.client} {scenario} {verdict} {one_line}".rstrip(), flush=True)

    def run(self, scenario, fn, *args):
        """Runs fn(*args): returning is a pass (a returned string is its note), AssertionError or
        any other exception a fail."""
        print(f"--- {scenario}", file=sys.stderr, flush=True)
        try:
            note = fn(*args)
        except Exception as e:
            return self.settle(scenario, e)
        self.settle(scenario, None, note)

    async def run_async(self, scenario, fn, *args):
        """run() for a coroutine function."""
        print(f"--- {scenario}", file=sys.stderr, flush=True)
        try:
            note = await fn(*args)
        except Exception as e:
            return self.settle(scenario, e)
        self.settle(scenario, None, note)

    def settle(self, scenario, error, note=None):
        """The RESULT line for a scenario that ended with `error` (None: it passed)."""
        if error is None:
            self.result(scenario, "pass", note or "")
        elif isinstance(error, Refused):
            self.result(scenario, "refused", error)
        elif isinstance(error, NotApplicable):
            self.result(scenario, "na", error)
        else:
            traceback.print_exception(error)
            self.result(scenario, "fail", f"{type(error).__name__}: {error}")

    def exit(self):
        sys.exit(1 if self.failed else 0)


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


def expect_equal(actual, expected, what):
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


def wait_until(predicate, what, step=None, timeout=WAIT):
    """Waits for an event: `step()` lets the client's I/O run (e.g. process_data_events)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        if step:
            step()
        else:
            time.sleep(0.02)


def restart_command():
    command = os.environ.get("CLOUD_RESTART_CMD")
    expect(command, "CLOUD_RESTART_CMD is not set: run this program through tests/interop/matrix.py")
    return command


def restart_server():
    """Asks the driver to restart the server (same store, same port); returns when it accepts."""
    done = subprocess.run(restart_command(), shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    expect(done.returncode == 0, f"server restart failed: {done.stdout.decode(errors='replace').strip()}")


async def restart_server_async():
    """restart_server for an event loop: the loop keeps running (and notices the close)."""
    import asyncio
    proc = await asyncio.create_subprocess_shell(restart_command(), stdout=asyncio.subprocess.PIPE,
                                                 stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    expect(proc.returncode == 0, f"server restart failed: {out.decode(errors='replace').strip()}")


def headers_of(i):
    """The headers table each published message carries: a nested table must round-trip."""
    return {"n": i, "origin": "interop", "nested": {"k": "v", "list": [1, 2]}}


def bodies(prefix, count):
    return [f"{prefix}-{i}".encode() for i in range(count)]


def expect_refusal(code, text, remedy_fragment):
    """A refusal of HIP-1326's "What is not implemented": reply code 540 and a reply text naming
    the remedy."""
    expect_equal(code, 540, "reply code of the refusal")
    expect(remedy_fragment.lower() in text.lower(), f"refusal text {text!r} does not name the remedy "
                                                    f"({remedy_fragment!r})")
