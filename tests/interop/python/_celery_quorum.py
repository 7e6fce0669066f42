"""The celery program's quorum-queue scenarios (Celery 5.5 and later; the app:
celery_app/interop_quorum.py), run by a worker of their own.

Celery 5.5 changed what a worker does when one of its queues is a quorum queue
(celery.utils.quorum_queues.detect_quorum_queues): it turns global QoS off, so its prefetch is
static (worker_detect_quorum_queues), and it sets up "native delayed delivery"
(celery.worker.consumer.delayed_delivery, kombu.transport.native_delayed_delivery): 28 topic
exchanges and quorum queues `celery_delayed_<level>` (x-message-ttl 2^level s, x-overflow
reject-publish, x-dead-letter-exchange the next level down, x-dead-letter-strategy
at-least-once), chained by exchange-to-exchange bindings into exchange `celery_delayed_delivery`,
which each topic or fanout exchange of the app is bound to with `#.<key>`. A countdown or eta
task behind such an exchange is then published to `celery_delayed_27` with the countdown's bits
as the first 28 words of its routing key. Exchange-to-exchange bindings are refused by design.
"""
import os
import time

import amqp
from kombu import Connection, Exchange, Producer, Queue
from kombu.transport.native_delayed_delivery import (calculate_routing_key,
                                                     declare_native_delayed_delivery_exchanges_and_queues,
                                                     level_name)

from _celery_worker import SCRATCH
from _interop import URL, WAIT, Refused, expect, expect_equal, expect_refusal, wait_until

# Prefetch of a worker with concurrency 1 and Celery's worker_prefetch_multiplier (4).
PREFETCH = 4
REMEDY = "bind the queue to each exchange it should read"


def queue_counts(app, name):
    """(ready messages, consumers) of a queue, from a passive queue.declare."""
    with app.connection_for_read() as conn:
        _, messages, consumers = conn.default_channel.queue_declare(name, passive=True)
        return messages, consumers


def expect_quorum_queue(app, name):
    """The broker holds `name` as a quorum queue: declaring it classic is refused as RabbitMQ does."""
    with app.connection_for_write() as conn:
        try:
            conn.default_channel.queue_declare(name, durable=True, auto_delete=False,
                                               arguments={"x-queue-type": "classic"})
        except amqp.exceptions.PreconditionFailed as e:
            expect("inequivalent arg 'x-queue-type'" in e.reply_text and "current is 'quorum'" in e.reply_text,
                   f"the refusal of a classic redeclaration of {name}: {e.reply_text}")
            return
    raise AssertionError(f"{name} was redeclared as a classic queue: it is not a quorum queue")


def celery_quorum(worker):
    """A stock worker on quorum queues: it turns global QoS off, its static prefetch
    (concurrency 1 × prefetch multiplier 4) is what the broker holds back while a late-acked task
    runs, and a countdown task behind a direct exchange runs when it is due."""
    import interop_quorum as q
    wait_until(worker.ready, "the quorum worker to say it is ready")
    expect("Global QoS is disabled" in worker.log(), "the worker's log says it turned global QoS off")
    for name in (q.TOPIC_QUEUE, q.DIRECT_QUEUE):
        expect_quorum_queue(q.app, name)
    # While the gate task runs unacknowledged, the worker holds PREFETCH - 1 more; the rest stay
    # ready. The gate is this worker's first task: Celery sends a late ack on its event loop's
    # next turn, so a task run just before could still be unacknowledged behind the gate.
    path = os.path.join(SCRATCH, "quorum-gate")
    held = q.gate.delay(path)
    rest = [q.add.delay(i, 0) for i in range(PREFETCH + 2)]
    wait_until(lambda: os.path.exists(path + ".started"), "the gate task to start")
    ready = len(rest) - (PREFETCH - 1)
    seen = []
    try:
        wait_until(lambda: seen.append(queue_counts(q.app, q.TOPIC_QUEUE)) or seen[-1] == (ready, 1),
                   f"(ready messages, consumers) of {q.TOPIC_QUEUE} to be {(ready, 1)} while the gate task runs")
    except AssertionError as e:
        raise AssertionError(f"{e}; they were {seen[0]} first, {seen[-1]} last") from None
    expect_equal(queue_counts(q.app, q.TOPIC_QUEUE), (ready, 1), "(ready messages, consumers) while one task runs")
    open(path, "w").close()
    expect_equal(held.get(timeout=WAIT), "opened", "the gate task's result")
    expect_equal([r.get(timeout=WAIT) for r in rest], list(range(len(rest))), "the queued tasks' results")

    # Behind a direct exchange Celery skips native delayed delivery (it logs why) and the worker
    # keeps the task until its ETA.
    sent = time.time()
    ran, exchange, key = q.stamp.apply_async(countdown=2, queue=q.DIRECT_QUEUE).get(timeout=WAIT)
    expect(ran - sent >= 2, f"a countdown=2 task ran {ran - sent:.2f}s after it was sent")
    expect(not exchange.startswith("celery_delayed"), f"the countdown task came through {exchange!r} ({key!r}), "
                                                      "not straight to its queue")
    return ("global QoS off, static prefetch 4 held; countdown behind a direct exchange waits in the worker "
            "(native delayed delivery: see celery_native_delayed_delivery)")


def celery_native_delayed_delivery(worker):
    """Celery's native delayed delivery as its worker sets it up: every exchange and queue is
    taken with its arguments, and they are honoured (a message in `celery_delayed_1` is
    dead-lettered, expired, to the next level after 2 s); the first exchange-to-exchange binding
    is refused by design, which the worker logs, so a countdown task sent to `celery_delayed_27`
    routes nowhere."""
    wait_until(worker.ready, "the quorum worker to say it is ready")
    said = [line for line in worker.log().splitlines() if "delayed delivery" in line]
    expect(any("Failed to setup delayed delivery" in line and REMEDY in line for line in said),
           f"the worker logs the refused setup of native delayed delivery: {said}")
    with Connection(URL, transport_options={"confirm_publish": True}) as conn:
        try:
            declare_native_delayed_delivery_exchanges_and_queues(conn, "quorum")
            raise AssertionError("native delayed delivery was set up: exchange-to-exchange bindings were taken")
        except amqp.exceptions.AMQPNotImplementedError as e:
            expect_refusal(e.reply_code, e.reply_text, REMEDY)
            refusal = f"{e.reply_code} {e.reply_text}"
        # The connection survives the refusal: a new channel finds every delay queue, publishes and gets.
        channel = conn.channel()
        for level in range(28):
            channel.queue_declare(level_name(level), passive=True)
        returned = []
        channel.events["basic_return"].add(lambda exc, *_: returned.append((exc.reply_code, exc.reply_text)))
        producer = Producer(channel)
        probe = Queue(f"{os.environ.get('INTEROP_CLIENT', 'celery')}-delay-probe",
                      Exchange(level_name(0), type="topic"), routing_key="#", durable=True)(channel)
        probe.declare()
        probe.purge()
        key = calculate_routing_key(2, "quorum.run")
        sent = time.monotonic()
        producer.publish(b"delayed", exchange=level_name(1), routing_key=key, delivery_mode=2)
        dead = get_one(probe)
        waited = time.monotonic() - sent
        expect(waited >= 2, f"a message left celery_delayed_1 (x-message-ttl 2000) after {waited:.2f}s")
        death = dead.headers.get("x-death", [{}])[0]
        expect_equal((death.get("reason"), death.get("queue")), ("expired", level_name(1)),
                     "x-death of the message the delay queue dead-lettered")
        expect_equal(dead.delivery_info["routing_key"], key, "the dead-lettered message's routing key")
        dead.ack()
        probe.delete()
        # A countdown task's first hop: nothing takes it at celery_delayed_27 (the next level was
        # to be an exchange-to-exchange binding).
        producer.publish(b"delayed", exchange=level_name(27), routing_key=key, mandatory=True, delivery_mode=2)
        expect_equal(returned, [(312, "NO_ROUTE")], "basic.return of a countdown=2 message at celery_delayed_27")
    raise Refused(f"{refusal} (a countdown or eta task on a quorum queue behind a topic or fanout exchange "
                  "routes nowhere; behind a direct exchange Celery keeps it in the worker until it is due)")


def get_one(queue):
    """basic.get until a message is there."""
    got = []
    wait_until(lambda: got.append(queue.get(no_ack=False)) or got[-1] is not None, f"a message on {queue.name}")
    return got[-1]
