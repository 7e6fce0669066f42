"""The shared part of tests that run one scenario on the adaptor and on a private RabbitMQ and
compare what each observed: a session on one broker (a connection, a confirming channel and a
word that makes the run's names unique, written W in what is compared).
"""
import uuid

import pika


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
