"""Consumers: each delivery recorded (id, queue, redelivered, body intact, x-death reason), then
acked, nacked with requeue or rejected (dead-lettered) as the consumer's odds say."""
import random
import time

import pika

import clients
import messages


class Consumer:
    """`odds`: (requeue, reject) probabilities; the rest is acked."""

    def __init__(self, name, replicas, preferred, ledger, stop, queue, prefetch=20, odds=(0.0, 0.0), seed=0):
        self.name, self.replicas, self.preferred = name, replicas, preferred
        self.ledger, self.stop, self.queue = ledger, stop, queue
        self.prefetch, self.odds = prefetch, odds
        self.rng = random.Random(seed)

    def run(self):
        clients.sessions(self.name, self.replicas, self.preferred, self.ledger, self.stop, self._session)

    def _session(self, conn, _replica):
        ch = conn.channel()
        ch.basic_qos(prefetch_count=self.prefetch)
        for method, props, body in ch.consume(self.queue, inactivity_timeout=1):
            if self.stop.is_set():
                break
            if method is None:
                continue
            self.settle(ch, method, props, body)
        ch.cancel()

    def settle(self, ch, method, props, body):
        message_id, intact, death = messages.identify(props, body)
        self.ledger.delivered(message_id, self.queue, method.redelivered, self.name, intact, death)
        requeue, reject = self.odds
        draw = self.rng.random()
        if draw < requeue:
            ch.basic_nack(method.delivery_tag, requeue=True)
        elif draw < requeue + reject:
            self.ledger.settle_away(message_id, self.queue)
            ch.basic_reject(method.delivery_tag, requeue=False)
        else:
            ch.basic_ack(method.delivery_tag)


def drain(name, replica, ledger, queue, idle, deadline_s):
    """Takes and acks everything `queue` holds, until nothing came for `idle` seconds; returns
    the number taken. Raises what the session raised (the caller records it)."""
    taken = 0
    deadline = time.monotonic() + deadline_s
    with pika.BlockingConnection(clients.params(replica)) as conn:
        ch = conn.channel()
        ch.basic_qos(prefetch_count=100)
        for method, props, body in ch.consume(queue, inactivity_timeout=idle):
            if method is None or time.monotonic() > deadline:
                break
            message_id, intact, death = messages.identify(props, body)
            ledger.delivered(message_id, queue, method.redelivered, name, intact, death)
            ch.basic_ack(method.delivery_tag)
            taken += 1
        ch.cancel()
    return taken
