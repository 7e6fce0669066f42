"""Connecting to a `cloud` replica with pika and recording, with its time, every way a client's
session ended other than by its own close: a channel or connection closed by the server (reply
code and text), a connection lost, a connect refused, a publish nacked or returned."""
import random
import time

import pika
import pika.exceptions as px
from pika.adapters.utils.connection_workflow import AMQPConnectorException

# pika's exceptions, each as the kind of event the ledger records
_KINDS = (
    (px.ChannelClosedByBroker, "channel-closed"),
    (px.ConnectionClosedByBroker, "connection-closed"),
    (px.StreamLostError, "connection-lost"),
    (px.AMQPConnectionError, "connect-failed"),
    (AMQPConnectorException, "connect-failed"),  # a handshake that timed out, say
    (px.ChannelWrongStateError, "channel-wrong-state"),
    (px.ConnectionWrongStateError, "connection-wrong-state"),
    (px.AMQPChannelError, "channel-error"),
    (ConnectionError, "connection-lost"),
    (OSError, "socket-error"),
)
SESSION_ERRORS = tuple(k for k, _ in _KINDS)


def params(replica, heartbeat=0):
    return pika.ConnectionParameters(host="127.0.0.1", port=replica.amqp_port, heartbeat=heartbeat,
                                     blocked_connection_timeout=60, socket_timeout=10,
                                     connection_attempts=1)


def record(ledger, who, replica_name, error):
    """Records why a session ended: the server's reply code and text when it closed it."""
    kind = next((k for cls, k in _KINDS if isinstance(error, cls)), type(error).__name__)
    code = getattr(error, "reply_code", None)
    text = getattr(error, "reply_text", None) or repr(error)
    ledger.event(who, replica_name, kind, code, text)


class Replicas:
    """The `cloud` replicas by name; a worker starts on its preferred one and moves to the next
    when a session ends."""

    def __init__(self, clouds):
        self.clouds = clouds  # name -> cloudtest.Cloud

    def names(self):
        return sorted(self.clouds)

    def get(self, name):
        return self.clouds[name]

    def after(self, name):
        names = self.names()
        return names[(names.index(name) + 1) % len(names)]


def sessions(who, replicas, preferred, ledger, stop, body):
    """Runs body(connection, replica name) over and over until `stop` is set, on `preferred` and,
    after a session ended badly, on the other replica; each ending is recorded."""
    name = preferred
    while not stop.is_set():
        try:
            conn = pika.BlockingConnection(params(replicas.get(name)))
        except SESSION_ERRORS as e:
            record(ledger, who, name, e)
            name = replicas.after(name)
            stop.wait(0.5 + random.random())
            continue
        try:
            body(conn, name)
        except SESSION_ERRORS as e:
            record(ledger, who, name, e)
            name = replicas.after(name)
            stop.wait(0.2)
        finally:
            close_quietly(conn)
    return name


def close_quietly(conn):
    try:
        if conn.is_open:
            conn.close()
    except SESSION_ERRORS:
        pass


def pace(stop, interval):
    """Sleeps about `interval` seconds (jittered, so workers do not fall into step); False once
    stopped."""
    return not stop.wait(interval * (0.5 + random.random()))


def now():
    return time.time()
