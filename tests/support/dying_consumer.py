"""A pika consumer in a process of its own that holds what it receives unacknowledged until it is
killed: its connection then ends without a basic.cancel or a close (pika's own close cancels its
consumers first, which is another scenario). Used where "the consumer's connection ends" is the
point."""
import subprocess
import sys
import threading
import time

_PROGRAM = r'''
import sys
import pika
port, queue, prefetch = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
header = sys.argv[4] if len(sys.argv) > 4 else ""
conn = pika.BlockingConnection(pika.ConnectionParameters(host="127.0.0.1", port=port, heartbeat=0))
ch = conn.channel()
ch.basic_qos(prefetch_count=prefetch)
ch.basic_consume(queue, lambda c, m, p, b: print(f"{int(m.redelivered)} {p.headers[header]}" if header
                                                 else b.decode(), flush=True))
print("-- consuming", flush=True)
ch.start_consuming()
'''


class DyingConsumer:
    """Started consuming `queue` (consume-ok received) when the constructor returns; `got` lists
    the bodies it received, in order, or with `header`, "<redelivered 0|1> <that header's value>"
    for each delivery."""

    def __init__(self, port, queue, prefetch, timeout=30, header=None):
        self.got = []
        self.got_at = []  # when each of `got` arrived (time.time())
        self._ready = threading.Event()
        self.proc = subprocess.Popen([sys.executable, "-c", _PROGRAM, str(port), queue, str(prefetch)]
                                     + ([header] if header else []),
                                     stdout=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout):
            self.kill()
            raise AssertionError(f"the consumer process did not start consuming {queue} within {timeout} s")

    def _read(self):
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            if line == "-- consuming":
                self._ready.set()
            else:
                self.got_at.append(time.time())
                self.got.append(line)

    def wait_for(self, n, timeout=15):
        deadline = time.monotonic() + timeout
        while len(self.got) < n and time.monotonic() < deadline:
            time.sleep(0.02)
        return len(self.got) >= n

    def kill(self):
        """SIGKILL, and wait for it (by PID)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self._reader.join(timeout=5)
        self.proc.stdout.close()
