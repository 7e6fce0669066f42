"""kombu (Debian's 5.2 in `kombu`, PyPI's in `kombu_pypi`; py-amqp transport) as kombu's user guide
writes it: a topic Exchange and Queues declared as entities, a Producer (JSON serializer,
confirm_publish, on_return) and a Consumer with callbacks and prefetch_count, draining with
Connection.drain_events; the reconnect scenario is kombu's own: publish(retry=True) and
Connection.ensure_connection/autoretry (contract: ../README.md).
"""
import json
import os
import socket
import sys

import kombu
from kombu import Connection, Consumer, Exchange, Producer, Queue

sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # after the library: see _interop
from _interop import (URL, WAIT, Report, expect, expect_equal, headers_of, restart_server,  # noqa: E402
                      wait_until)

report = Report("kombu", extras=["simple_queue"])
report.library(kombu)
EXCHANGE = Exchange(report.name("topic"), type="topic", durable=True)
RETRY = {"max_retries": 60, "interval_start": 0.1, "interval_step": 0.2, "interval_max": 1}


def connect():
    # confirm_publish: py-amqp waits for the broker's ack on every publish (kombu's documented
    # transport option for publisher confirms).
    return Connection(URL, transport_options={"confirm_publish": True})


def fresh_queue(conn, suffix, key=None):
    queue = Queue(report.name(suffix), exchange=EXCHANGE if key else None, routing_key=key, durable=True)
    bound = queue(conn.channel())
    bound.declare()
    bound.purge()
    return bound


def payload(i):
    return {"n": i, "text": f"item {i}"}


def publish(producer, queue, payloads, key=None, **kwargs):
    for i, body in enumerate(payloads):
        producer.publish(body, routing_key=key or queue.name, serializer="json", headers=headers_of(i),
                         delivery_mode=2, **kwargs)


def drain(conn, queue, count, on_message, prefetch=None):
    """A Consumer on `queue` until `count` messages; on_message(message, seen) settles them."""
    seen = []

    def callback(body, message):
        seen.append((body, message))
        on_message(message, seen)
    with Consumer(conn.channel(), queues=[queue], callbacks=[callback], accept=["json"], prefetch_count=prefetch):
        wait_until(lambda: len(seen) >= count, f"{count} messages on {queue.name}", step=lambda: drain_once(conn))
    return seen


def drain_once(conn):
    try:
        conn.drain_events(timeout=0.2)
    except socket.timeout:
        pass


def get_one(queue, no_ack=True):
    got = []

    def poll():
        message = queue.get(no_ack=no_ack, accept=["json"])
        if message is not None:
            got.append(message)
    wait_until(lambda: got, f"a message on {queue.name}", step=poll)
    return got[0]


def declare(conn):
    queue = fresh_queue(conn, "declare", key="orders.*")
    channel = conn.channel()
    EXCHANGE(channel).declare(passive=True)
    _, count, _ = queue.queue_declare(passive=True)
    expect_equal(count, 0, "messages in the new queue")
    publish(Producer(channel, exchange=EXCHANGE), queue, [payload(0)], key="orders.new")
    message = get_one(queue)
    expect_equal((message.payload, message.delivery_info["exchange"], message.delivery_info["routing_key"]),
                 (payload(0), EXCHANGE.name, "orders.new"), "routed message")


def publish_confirm(conn):
    queue = fresh_queue(conn, "confirm", key="confirm.*")
    sent = [payload(i) for i in range(20)]
    publish(Producer(conn.channel(), exchange=EXCHANGE), queue, sent, key="confirm.item", mandatory=True)
    seen = drain(conn, queue, len(sent), lambda message, _: message.ack())
    expect_equal([body for body, _ in seen], sent, "payloads in order")
    for i, (_, message) in enumerate(seen):
        expect_equal((message.content_type, message.properties.get("delivery_mode"), message.headers),
                     ("application/json", 2, headers_of(i)), f"properties of message {i}")


def consume_prefetch_ack(conn):
    prefetch, sent = 5, [payload(i) for i in range(30)]
    queue = fresh_queue(conn, "prefetch")
    publish(Producer(conn.channel()), queue, sent)
    unacked, most = [], [0]

    def on_message(message, seen):
        # One multiple ack when the window is full: an unbounded server would deliver a sixth first.
        unacked.append(message)
        most[0] = max(most[0], len(unacked))
        expect(len(unacked) <= prefetch, f"{len(unacked)} unacked deliveries with prefetch {prefetch}")
        if len(unacked) == prefetch or len(seen) == len(sent):
            message.ack(multiple=True)
            unacked.clear()
    seen = drain(conn, queue, len(sent), on_message, prefetch=prefetch)
    expect_equal([body for body, _ in seen], sent, "payloads in order, each once")
    expect_equal(most[0], prefetch, "largest number of unacked deliveries")
    expect(not any(m.delivery_info["redelivered"] for _, m in seen), "a first delivery is marked redelivered")


def nack_requeue(conn):
    queue = fresh_queue(conn, "nack")
    publish(Producer(conn.channel()), queue, [payload(0)])

    def on_message(message, seen):
        # kombu's word for reject-with-requeue.
        message.requeue() if len(seen) == 1 else message.ack()
    seen = drain(conn, queue, 2, on_message)
    expect_equal([(m.delivery_info["redelivered"], body) for body, m in seen],
                 [(False, payload(0)), (True, payload(0))], "(redelivered, payload) of the delivery and its redelivery")


def mandatory_return(conn):
    returned = []
    producer = Producer(conn.channel(), exchange=EXCHANGE,
                        on_return=lambda exc, exchange, key, message: returned.append((exc, exchange, key, message)))
    # With confirm_publish the publish returns once acked; the return arrived before the ack.
    producer.publish(payload(7), routing_key="nobody.listens", serializer="json", headers=headers_of(7),
                     mandatory=True)
    expect_equal(len(returned), 1, "returns received by the time the publish was confirmed")
    exc, exchange, key, message = returned[0]
    expect_equal((exc.reply_code, exc.reply_text, exchange, key), (312, "NO_ROUTE", EXCHANGE.name, "nobody.listens"),
                 "basic.return")
    expect_equal((json.loads(message.body), message.properties["application_headers"]),
                 (payload(7), headers_of(7)), "the returned message")


def basic_get(conn):
    queue = fresh_queue(conn, "get")
    expect_equal(queue.get(no_ack=True), None, "get on an empty queue")
    publish(Producer(conn.channel()), queue, [payload(1), payload(2)])
    first = get_one(queue, no_ack=False)
    expect_equal((first.payload, first.delivery_info["message_count"], first.delivery_info["redelivered"]),
                 (payload(1), 1, False), "first get")
    first.ack()
    second = get_one(queue)
    expect_equal((second.payload, second.delivery_info["message_count"]), (payload(2), 0), "second get")


def reconnect(conn):
    queue = fresh_queue(conn, "reconnect")
    producer = Producer(conn)
    publish(producer, queue, [payload(0)])
    restart_server()
    lost = []
    # kombu's way: a publish with retry notices the dead connection, re-establishes it
    # (ensure_connection) and publishes again.
    publish(producer, queue, [payload(1)], retry=True,
            retry_policy=dict(RETRY, errback=lambda exc, interval: lost.append(exc)))
    expect(lost, "the publish after the restart did not notice the closed connection")
    conn.ensure_connection(**RETRY)
    seen = drain(conn, queue(conn.channel()), 2, lambda message, _: message.ack())
    expect_equal([body for body, _ in seen], [payload(0), payload(1)], "the messages from before and after the restart")


def simple_queue(conn):
    """kombu's SimpleQueue (the Queue.Queue-like interface its user guide starts with)."""
    with conn.SimpleQueue(report.name("simple")) as queue:
        queue.clear()
        for i in range(3):
            queue.put(payload(i), headers=headers_of(i))
        got = []
        for _ in range(3):
            message = queue.get(block=True, timeout=WAIT)
            got.append((message.payload, message.headers))
            message.ack()
        expect_equal(got, [(payload(i), headers_of(i)) for i in range(3)], "(payload, headers) of what was put")
        expect_equal(queue.qsize(), 0, "qsize after the gets")


def main():
    with connect() as conn:
        conn.ensure_connection(**RETRY)
        for scenario in (declare, publish_confirm, consume_prefetch_ack, nack_requeue, mandatory_return,
                         basic_get, simple_queue, reconnect):
            report.run(scenario.__name__, scenario, conn)
    report.exit()


if __name__ == "__main__":
    main()
