"""The shared part of tests that run one scenario on the adaptor and on a private RabbitMQ and
compare what each observed: a session on one broker (a connection, a confirming channel and a
word that makes the run's names unique, written W in what is compared).
"""
import concurrent.futures
import uuid

import pika


def on_both(run, ours, theirs):
    """(run(ours), run(theirs)), both at once, each in a thread of its own: a scenario mostly waits
    on its broker's timers, so the pair takes the time of the longer run."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(run, broker) for broker in (ours, theirs)]
        return tuple(r.result() for r in runs)


class Session:
    def __init__(self, port):
        self.port = port
        self.conn = pika.BlockingConnection(pika.ConnectionParameters(
            host="127.0.0.1", port=port, heartbeat=0, blocked_connection_timeout=30))
        self.ch = self.conn.channel()
        self.ch.confirm_delivery()
        self.word = uuid.uuid4().hex[:8]

    def name(self, role):
        return f"{role}-{self.word}"

    def close(self):
        if self.conn.is_open:
            self.conn.close()
