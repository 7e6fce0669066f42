"""Clients that vanish without closing, holding unacknowledged deliveries: a connection whose
socket is shut down under it, and a consumer process SIGKILLed mid-consume. What they held must
come back to the queue (redelivered) for the others."""
import socket

import pika

import clients
import messages
from dying_consumer import DyingConsumer


def _socket_of(conn):
    """pika's socket under a BlockingConnection (no public accessor)."""
    return conn._impl._transport._sock  # pylint: disable=protected-access


class SocketDropper:
    """Consumes a few deliveries without acking, then shuts its socket down: no close, no cancel."""

    def __init__(self, name, replicas, ledger, stop, queue, interval, hold=5):
        self.name, self.replicas, self.ledger, self.stop = name, replicas, ledger, stop
        self.queue, self.interval, self.hold = queue, interval, hold
        self.dropped = 0

    def run(self):
        replica = self.replicas.names()[0]
        while clients.pace(self.stop, self.interval):
            replica = self.replicas.after(replica)
            try:
                self._once(replica)
            except clients.SESSION_ERRORS as e:
                clients.record(self.ledger, self.name, replica, e)

    def _once(self, replica):
        conn = pika.BlockingConnection(clients.params(self.replicas.get(replica)))
        try:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=self.hold)
            held = 0
            for method, props, body in ch.consume(self.queue, inactivity_timeout=5):
                if method is None:
                    break  # nothing to hold now: drop the connection anyway
                message_id, intact, death = messages.identify(props, body)
                self.ledger.delivered(message_id, self.queue, method.redelivered, self.name, intact, death)
                held += 1
                if held >= self.hold:
                    break
            self.ledger.intend(self.name, f"socket shut on {replica} holding {held}")
            _socket_of(conn).shutdown(socket.SHUT_RDWR)
            self.dropped += 1
            try:
                conn.process_data_events(0.2)
            except clients.SESSION_ERRORS:
                pass  # the loss we caused
        finally:
            try:
                clients.close_quietly(conn)
            except clients.SESSION_ERRORS:
                pass


class ProcessKiller:
    """A consumer in its own process (tests/support/dying_consumer.py), SIGKILLed once it holds
    a few deliveries."""

    def __init__(self, name, replicas, ledger, stop, queue, interval, hold=5):
        self.name, self.replicas, self.ledger, self.stop = name, replicas, ledger, stop
        self.queue, self.interval, self.hold = queue, interval, hold
        self.killed = 0

    def run(self):
        replica = self.replicas.names()[0]
        while clients.pace(self.stop, self.interval):
            replica = self.replicas.after(replica)
            try:
                consumer = DyingConsumer(self.replicas.get(replica).amqp_port, self.queue, self.hold,
                                         timeout=20, header=messages.ID)
            except AssertionError as e:  # it could not start consuming (its replica is down, say)
                self.ledger.event(self.name, replica, "consumer-process-failed", None, e)
                continue
            consumer.wait_for(self.hold, timeout=10)
            self.ledger.intend(self.name, f"consumer process SIGKILLed on {replica}")
            consumer.kill()
            self.killed += 1
            for line, at in zip(consumer.got, consumer.got_at):
                redelivered, message_id = line.split(" ", 1)
                self.ledger.delivered(message_id, self.queue, redelivered == "1", self.name, at=at)
