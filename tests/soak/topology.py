"""The soak's fixed queues and exchange, and the load that runs on them: which publishers,
consumers and churners, on which replica, at what pace."""
import random

import pika

import clients
from churn import EXCHANGE, ConnectionChurn, QueueChurn
from consumers import Consumer
from messages import MiB
from publishers import Publisher
from vanishing import ProcessKiller, SocketDropper
from verdict import DEAD_QUEUE, EXPIRED_QUEUE

ORDER_QUEUES = ["soak-order-0", "soak-order-1"]
WORK_QUEUES = ["soak-work-0", "soak-work-1"]       # classic, quorum
TTL_QUEUE, MESSAGE_TTL_QUEUE = "soak-ttl", "soak-msgttl"
QUEUE_TTL_MS, MESSAGE_TTL_MS = 2000, 1500
FIXED_QUEUES = ORDER_QUEUES + WORK_QUEUES + [TTL_QUEUE, MESSAGE_TTL_QUEUE, DEAD_QUEUE, EXPIRED_QUEUE]
# Queues no one consumes: their messages leave by expiring into EXPIRED_QUEUE.
UNREAD_QUEUES = [TTL_QUEUE, MESSAGE_TTL_QUEUE]


def dead_letter_to(queue):
    return {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": queue}


def declare(replica):
    with pika.BlockingConnection(clients.params(replica)) as conn:
        ch = conn.channel()
        ch.exchange_declare(EXCHANGE, "topic", durable=True)
        for queue in ORDER_QUEUES + [DEAD_QUEUE, EXPIRED_QUEUE]:
            ch.queue_declare(queue, durable=True)
        for i, queue in enumerate(WORK_QUEUES):
            kind = {"x-queue-type": "quorum"} if i == 1 else {}
            ch.queue_declare(queue, durable=True, arguments={**dead_letter_to(DEAD_QUEUE), **kind})
            ch.queue_bind(queue, EXCHANGE, routing_key=f"work.{i}.#")
        ch.queue_declare(TTL_QUEUE, durable=True,
                         arguments={"x-message-ttl": QUEUE_TTL_MS, **dead_letter_to(EXPIRED_QUEUE)})
        ch.queue_declare(MESSAGE_TTL_QUEUE, durable=True, arguments=dead_letter_to(EXPIRED_QUEUE))


def small(rng):
    return lambda _seq: rng.randint(16, 4096)


def workers(replicas, ledger, stop, seed):
    """Every load worker (each has run()); `seed` makes their choices repeatable."""
    rng = random.Random(seed)
    w = []

    def to_queue(queue, kind="order"):
        return lambda _seq: ("", queue, queue, kind, None)

    def to_work_via_exchange(_seq):
        i = rng.randrange(2)
        return EXCHANGE, f"work.{i}.small", WORK_QUEUES[i], "work", None

    def to_work_large(seq):
        return "", WORK_QUEUES[seq % 2], WORK_QUEUES[seq % 2], "large", None

    def to_ttl(seq):
        if seq % 2:
            return "", TTL_QUEUE, TTL_QUEUE, "queue-ttl", QUEUE_TTL_MS
        return "", MESSAGE_TTL_QUEUE, MESSAGE_TTL_QUEUE, "message-ttl", MESSAGE_TTL_MS

    for i, (queue, pub_on, sub_on) in enumerate(zip(ORDER_QUEUES, "ab", "ba")):
        w.append(Publisher(f"pub-order-{i}", replicas, pub_on, ledger, stop, to_queue(queue), small(rng), 0.25))
        w.append(Consumer(f"cons-order-{i}", replicas, sub_on, ledger, stop, queue, prefetch=20))
    for on in "ab":
        w.append(Publisher(f"pub-work-{on}", replicas, on, ledger, stop, to_work_via_exchange, small(rng), 0.15))
    w.append(Publisher("pub-large", replicas, "a", ledger, stop, to_work_large,
                       lambda _seq: rng.randint(MiB, 2 * MiB), 4.0))
    w.append(Publisher("pub-ttl", replicas, "b", ledger, stop, to_ttl, small(rng), 0.5))
    for queue in WORK_QUEUES:
        for on in "ab":
            w.append(Consumer(f"cons-{queue[5:]}-{on}", replicas, on, ledger, stop, queue, prefetch=10,
                              odds=(0.05, 0.03), seed=rng.random()))
    w.append(Consumer("cons-dead", replicas, "a", ledger, stop, DEAD_QUEUE, prefetch=20))
    w.append(Consumer("cons-expired", replicas, "b", ledger, stop, EXPIRED_QUEUE, prefetch=20))
    for on in "ab":
        w.append(QueueChurn(f"churn-{on}", replicas, on, ledger, stop, 3.0))
    w.append(ConnectionChurn("conn-churn", replicas, ledger, stop, ORDER_QUEUES[0], 2.0))
    w.append(SocketDropper("socket-dropper", replicas, ledger, stop, WORK_QUEUES[0], 15.0))
    w.append(ProcessKiller("process-killer", replicas, ledger, stop, WORK_QUEUES[1], 20.0))
    return w
