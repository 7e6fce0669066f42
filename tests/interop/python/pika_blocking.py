"""pika BlockingConnection (Debian's 1.2 in `pika_blocking`, PyPI's in `pika_blocking_pypi`),
written as pika's documentation shows it (contract: ../README.md)."""
import json
import os
import sys

import pika

sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # after the library: see _interop
from _interop import (URL, Report, bodies, expect, expect_equal, headers_of, restart_server,
                      wait_until)
from _pika_shared import expect_round_trip, properties  # noqa: E402

report = Report("pika_blocking", extras=["cancel_notify", "dead_letter", "length_limit", "single_active_consumer"])
report.library(pika)
EXCHANGE = report.name("topic")


def connect():
    return pika.BlockingConnection(pika.URLParameters(URL))


def confirmed_channel(conn):
    ch = conn.channel()
    ch.confirm_delivery()
    return ch


def get_one(ch, queue, auto_ack=True):
    """basic.get until a message is there (a confirmed publish is stored, the get may race it)."""
    got = []

    def poll():
        method, props, body = ch.basic_get(queue, auto_ack=auto_ack)
        if method is not None:
            got.append((method, props, body))
    wait_until(lambda: got, f"a message on {queue}", step=poll)
    return got[0]


def consume(conn, ch, queue, count, on_message):
    """Runs a manual-ack consumer until `count` deliveries; returns [(method, props, body)]."""
    seen = []

    def callback(channel, method, props, body):
        seen.append((method, props, body))
        on_message(channel, method, seen)
    tag = ch.basic_consume(queue, callback)
    wait_until(lambda: len(seen) >= count, f"{count} deliveries on {queue}",
               step=lambda: conn.process_data_events(time_limit=0.1))
    ch.basic_cancel(tag)
    return seen


def fresh_queue(ch, suffix, key=None, arguments=None):
    queue = report.name(suffix)
    ch.queue_declare(queue, durable=True, arguments=arguments)
    ch.queue_purge(queue)
    if key:
        ch.queue_bind(queue, EXCHANGE, routing_key=key)
    return queue


def declare(conn):
    ch = confirmed_channel(conn)
    ch.exchange_declare(EXCHANGE, exchange_type="topic", durable=True)
    queue = fresh_queue(ch, "declare", key="orders.*")
    ch.exchange_declare(EXCHANGE, passive=True)
    expect_equal(ch.queue_declare(queue, passive=True).method.message_count, 0, "messages in the new queue")
    ch.basic_publish(EXCHANGE, "orders.new", b"declared", properties(0), mandatory=True)
    method, props, body = get_one(ch, queue)
    expect_equal((body, method.exchange, method.routing_key), (b"declared", EXCHANGE, "orders.new"),
                 "routed message")
    ch.close()


def publish_confirm(conn):
    ch = confirmed_channel(conn)
    queue = fresh_queue(ch, "confirm", key="confirm.*")
    sent = bodies("confirm", 20)
    for i, body in enumerate(sent):
        # With confirms on, basic_publish returns only once the server acked (raises on a nack).
        ch.basic_publish(EXCHANGE, "confirm.item", body, properties(i), mandatory=True)
    seen = consume(conn, ch, queue, len(sent), lambda c, m, s: c.basic_ack(m.delivery_tag))
    expect_round_trip(seen, sent)
    ch.close()


def consume_prefetch_ack(conn):
    prefetch, sent = 5, bodies("prefetch", 30)
    ch = confirmed_channel(conn)
    queue = fresh_queue(ch, "prefetch")
    for body in sent:
        ch.basic_publish("", queue, body)
    ch.basic_qos(prefetch_count=prefetch)
    unacked, most = [], [0]

    def on_message(channel, method, seen):
        # Acks only when the window is full (one multiple ack): a server that ignored prefetch
        # would deliver one more before that ack.
        unacked.append(method.delivery_tag)
        most[0] = max(most[0], len(unacked))
        expect(len(unacked) <= prefetch, f"{len(unacked)} unacked deliveries with prefetch {prefetch}")
        if len(unacked) == prefetch or len(seen) == len(sent):
            channel.basic_ack(method.delivery_tag, multiple=True)
            unacked.clear()
    seen = consume(conn, ch, queue, len(sent), on_message)
    expect_equal([b for _, _, b in seen], sent, "bodies in order, each once")
    expect_equal(most[0], prefetch, "largest number of unacked deliveries")
    expect(not any(m.redelivered for m, _, _ in seen), "a first delivery is marked redelivered")
    expect_equal(ch.queue_declare(queue, passive=True).method.message_count, 0, "messages left")
    ch.close()


def nack_requeue(conn):
    ch = confirmed_channel(conn)
    # A quorum queue: x-delivery-count is a quorum queue's (RabbitMQ's classic queues never add it).
    queue = fresh_queue(ch, "nack", arguments={"x-queue-type": "quorum"})
    ch.basic_publish("", queue, b"again")

    def on_message(channel, method, seen):
        if len(seen) == 1:
            channel.basic_nack(method.delivery_tag, requeue=True)
        else:
            channel.basic_ack(method.delivery_tag)
    seen = consume(conn, ch, queue, 2, on_message)
    expect_equal([(m.redelivered, b) for m, _, b in seen], [(False, b"again"), (True, b"again")],
                 "(redelivered, body) of the delivery and its redelivery")
    expect_equal((seen[1][1].headers or {}).get("x-delivery-count"), 1, "x-delivery-count of the redelivery")
    ch.close()


def mandatory_return(conn):
    ch = confirmed_channel(conn)
    returned = []
    ch.add_on_return_callback(lambda c, method, props, body: returned.append((method, props, body)))
    try:
        ch.basic_publish(EXCHANGE, "nobody.listens", b"lost", properties(7), mandatory=True)
        raise AssertionError("an unroutable mandatory publish was confirmed without a return")
    except pika.exceptions.UnroutableError as e:
        # pika's documented behaviour under confirms: the return arrives, then the ack.
        expect_equal(len(e.messages), 1, "returned messages")
        method, props, body = e.messages[0].method, e.messages[0].properties, e.messages[0].body
    expect_equal((method.reply_code, method.reply_text, method.exchange, method.routing_key, body),
                 (312, "NO_ROUTE", EXCHANGE, "nobody.listens", b"lost"), "basic.return")
    expect_equal((props.message_id, props.headers), ("m7", headers_of(7)), "properties of the return")
    ch.close()


def basic_get(conn):
    ch = confirmed_channel(conn)
    queue = fresh_queue(ch, "get")
    expect_equal(ch.basic_get(queue, auto_ack=True), (None, None, None), "get on an empty queue")
    for body in (b"g1", b"g2"):
        ch.basic_publish("", queue, body)
    method, _, body = get_one(ch, queue, auto_ack=False)
    expect_equal((body, method.message_count, method.redelivered), (b"g1", 1, False), "first get")
    ch.basic_ack(method.delivery_tag)
    method, _, body = get_one(ch, queue, auto_ack=True)
    expect_equal((body, method.message_count), (b"g2", 0), "second get")
    expect_equal(ch.basic_get(queue, auto_ack=True), (None, None, None), "get after draining")
    ch.close()


def cancel_notify(conn):
    """Deleting a consumed queue cancels its consumer: pika's on-cancel callback receives the
    server's basic.cancel (consumer_cancel_notify is advertised)."""
    ch = conn.channel()
    queue = fresh_queue(ch, "cancelled")
    cancels = []
    ch.add_on_cancel_callback(lambda frame: cancels.append(frame.method))
    tag = ch.basic_consume(queue, lambda *args: None)
    conn.channel().queue_delete(queue)
    wait_until(lambda: cancels, "basic.cancel from the server", step=lambda: conn.process_data_events(time_limit=0.1))
    expect_equal(cancels[0].consumer_tag, tag, "consumer tag of the server's basic.cancel")
    expect(ch.is_open, "the channel closed after the server cancelled its consumer")
    ch.close()


def dead_letter(conn):
    """The AMQP primer's canonical consumer, with its names: a quorum queue with the
    fanout dead-letter exchange '<orders>.dlx', a poison message nacked without requeue, found on
    the dead-letter queue with its x-death history while the good ones are acked."""
    ch = confirmed_channel(conn)
    orders = report.name("orders")
    dlx = orders + ".dlx"  # the primer's 'orders.dlx': a dotted name, as the matrix's server takes
    ch.exchange_declare(orders, exchange_type="topic", durable=True)
    ch.exchange_declare(dlx, exchange_type="fanout", durable=True)
    parked = fresh_queue(ch, "parked")
    ch.queue_bind(parked, dlx)
    shipping = report.name("shipping")
    ch.queue_declare(shipping, durable=True, arguments={"x-queue-type": "quorum", "x-dead-letter-exchange": dlx})
    ch.queue_purge(shipping)
    ch.queue_bind(shipping, orders, routing_key="order.paid")
    dead = []
    ch.basic_consume(parked, lambda c, m, p, b: dead.append((p, b)), auto_ack=True)
    ch.basic_qos(prefetch_count=20)
    for body in (b'{"id": 1}', b"not json", b'{"id": 2}'):
        ch.basic_publish(orders, "order.paid", body, pika.BasicProperties(delivery_mode=2))

    def on_message(channel, method, seen):
        try:
            json.loads(seen[-1][2])
            channel.basic_ack(method.delivery_tag)
        except ValueError:
            channel.basic_nack(method.delivery_tag, requeue=False)
    consume(conn, ch, shipping, 3, on_message)
    wait_until(lambda: dead, "the poison message on the dead-letter queue",
               step=lambda: conn.process_data_events(time_limit=0.1))
    props, body = dead[0]
    expect_equal(body, b"not json", "the dead-lettered body")
    death = props.headers["x-death"][0]
    expect_equal((death["reason"], death["queue"], death["exchange"], death["routing-keys"], death["count"]),
                 ("rejected", shipping, orders, ["order.paid"], 1), "its x-death entry")
    ch.close()


def new_queue(ch, suffix, arguments):
    """A queue of report.name(suffix) declared afresh with `arguments` (an earlier run's is deleted)."""
    queue = report.name(suffix)
    ch.queue_delete(queue)
    ch.queue_declare(queue, arguments=arguments)
    return queue


def length_limit(conn):
    """x-max-length: reject-publish nacks the publish that finds the queue full; drop-head keeps
    the newest."""
    ch = confirmed_channel(conn)
    full = new_queue(ch, "full", {"x-max-length": 2, "x-overflow": "reject-publish"})
    answers = []
    for body in (b"1", b"2", b"3"):
        try:
            ch.basic_publish("", full, body)
            answers.append("ack")
        except pika.exceptions.NackError:
            answers.append("nack")
    expect_equal(answers, ["ack", "ack", "nack"], "confirms of three publishes to a queue of two")
    expect_equal(ch.queue_declare(full, passive=True).method.message_count, 2, "what the full queue holds")
    newest = new_queue(ch, "newest", {"x-max-length": 1})
    for body in (b"old", b"new"):
        ch.basic_publish("", newest, body)
    expect_equal(get_one(ch, newest)[2], b"new", "what a queue of one keeps")
    ch.close()


def single_active_consumer(conn):
    """x-single-active-consumer: of two consumers only the first receives, until it is cancelled."""
    ch = confirmed_channel(conn)
    queue = new_queue(ch, "single", {"x-single-active-consumer": True})
    got = {"first": [], "second": []}
    first, second = conn.channel(), conn.channel()
    tag = first.basic_consume(queue, lambda c, m, p, b: got["first"].append(b), auto_ack=True)
    second.basic_consume(queue, lambda c, m, p, b: got["second"].append(b), auto_ack=True)
    for i in range(4):
        ch.basic_publish("", queue, f"m{i}".encode())
    wait_until(lambda: len(got["first"]) == 4, "four deliveries to the active consumer",
               step=lambda: conn.process_data_events(time_limit=0.1))
    expect_equal(got["second"], [], "what the waiting consumer received")
    first.basic_cancel(tag)
    ch.basic_publish("", queue, b"after")
    wait_until(lambda: got["second"], "a delivery to the next consumer",
               step=lambda: conn.process_data_events(time_limit=0.1))
    expect_equal(got["second"], [b"after"], "what the next consumer received")
    for c in (first, second, ch):
        c.close()


def reconnect(conn):
    ch = confirmed_channel(conn)
    queue = fresh_queue(ch, "reconnect")
    ch.basic_publish("", queue, b"before", pika.BasicProperties(delivery_mode=2))
    restart_server()
    try:
        conn.process_data_events(time_limit=1)
        conn.channel()
        raise AssertionError("the connection still works after the server restarted")
    except pika.exceptions.AMQPConnectionError as e:
        print(f"connection closed by the restart: {e!r}", flush=True)
    # pika has no automatic recovery: its docs reconnect by opening a new connection.
    conn = connect()
    ch = confirmed_channel(conn)
    expect_equal(get_one(ch, queue)[2], b"before", "message published before the restart")
    ch.basic_publish("", queue, b"after", pika.BasicProperties(delivery_mode=2))
    expect_equal(get_one(ch, queue)[2], b"after", "message published after the restart")
    conn.close()


def main():
    conn = connect()
    for scenario in (declare, publish_confirm, consume_prefetch_ack, nack_requeue, mandatory_return, basic_get,
                     cancel_notify, dead_letter, length_limit, single_active_consumer):
        if conn.is_closed:  # a failed scenario may have closed it; the next one still runs
            conn = connect()
        report.run(scenario.__name__, scenario, conn)
    report.run("reconnect", reconnect, conn if conn.is_open else connect())
    report.exit()


if __name__ == "__main__":
    main()
