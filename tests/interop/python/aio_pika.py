"""aio-pika (Debian's 8.2 in `aio_pika`, PyPI's in `aio_pika_pypi`) with connect_robust, as
aio-pika's documentation writes it: a robust connection, channels with publisher confirms (the
default), `async with message.process()`, queue iterators. Its automatic reconnection and
topology/consumer restore is the reconnect scenario (contract: ../README.md).
"""
import asyncio
import os
import sys

import aio_pika
import aiormq
from aio_pika import DeliveryMode, ExchangeType, Message
from aio_pika.patterns import RPC, JsonMaster

sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # after the libraries: see _interop
from _interop import (URL, WAIT, Refused, Report, bodies, expect, expect_equal, expect_refusal,  # noqa: E402
                      headers_of, restart_server_async)

report = Report("aio_pika", extras=["master_worker", "rpc_pattern"])
report.library(aio_pika, "aio-pika")


def message(body, i=0):
    return Message(body, content_type="application/json", delivery_mode=DeliveryMode.PERSISTENT,
                   message_id=f"m{i}", correlation_id=f"c{i}", headers=headers_of(i))


async def fresh_queue(channel, suffix, exchange=None, key=None):
    queue = await channel.declare_queue(report.name(suffix), durable=True)
    await queue.purge()
    if exchange is not None:
        await queue.bind(exchange, routing_key=key)
    return queue


async def topic(channel):
    return await channel.declare_exchange(report.name("topic"), ExchangeType.TOPIC, durable=True)


async def get_one(queue, no_ack=True):
    """queue.get until a message is there (a confirmed publish is stored, the get may race it)."""
    async def poll():
        while True:
            got = await queue.get(no_ack=no_ack, fail=False)
            if got is not None:
                return got
            await asyncio.sleep(0.02)
    return await asyncio.wait_for(poll(), WAIT)


async def take(queue, count, handle):
    """Iterates the queue (manual ack) until `count` messages; handle(message, seen) settles."""
    seen = []

    async def run():
        async with queue.iterator() as it:
            async for incoming in it:
                seen.append(incoming)
                await handle(incoming, seen)
                if len(seen) >= count:
                    return
    await asyncio.wait_for(run(), WAIT)
    return seen


async def declare(conn):
    channel = await conn.channel()
    exchange = await topic(channel)
    queue = await fresh_queue(channel, "declare", exchange, "orders.*")
    await channel.get_exchange(report.name("topic"), ensure=True)  # a passive declare
    passive = await channel.declare_queue(queue.name, passive=True)
    expect_equal(passive.declaration_result.message_count, 0, "messages in the new queue")
    await exchange.publish(message(b"declared"), routing_key="orders.new", mandatory=True)
    got = await get_one(queue)
    expect_equal((got.body, got.exchange, got.routing_key), (b"declared", exchange.name, "orders.new"),
                 "routed message")
    await channel.close()


async def publish_confirm(conn):
    channel = await conn.channel()
    exchange = await topic(channel)
    queue = await fresh_queue(channel, "confirm", exchange, "confirm.*")
    sent = bodies("confirm", 20)
    # Pipelined: every publish awaits its own confirm, all at once.
    confirms = await asyncio.gather(*(exchange.publish(message(b, i), routing_key="confirm.item", mandatory=True)
                                      for i, b in enumerate(sent)))
    expect(all(isinstance(c, aiormq.spec.Basic.Ack) for c in confirms), f"confirms: {confirms}")

    async def handle(incoming, _seen):
        async with incoming.process():
            pass
    seen = await take(queue, len(sent), handle)
    expect_equal([m.body for m in seen], sent, "bodies in order")
    for i, m in enumerate(seen):
        expect_equal((m.content_type, m.delivery_mode, m.message_id, m.correlation_id, m.headers),
                     ("application/json", DeliveryMode.PERSISTENT, f"m{i}", f"c{i}", headers_of(i)),
                     f"properties of message {i}")
    await channel.close()


async def consume_prefetch_ack(conn):
    prefetch, sent = 5, bodies("prefetch", 30)
    channel = await conn.channel()
    queue = await fresh_queue(channel, "prefetch")
    await asyncio.gather(*(channel.default_exchange.publish(Message(b), routing_key=queue.name) for b in sent))
    await channel.set_qos(prefetch_count=prefetch)
    unacked, most = [], [0]

    async def handle(incoming, seen):
        # One multiple ack when the window is full: an unbounded server would deliver a sixth first.
        unacked.append(incoming)
        most[0] = max(most[0], len(unacked))
        expect(len(unacked) <= prefetch, f"{len(unacked)} unacked deliveries with prefetch {prefetch}")
        if len(unacked) == prefetch or len(seen) == len(sent):
            await incoming.ack(multiple=True)
            unacked.clear()
    seen = await take(queue, len(sent), handle)
    expect_equal([m.body for m in seen], sent, "bodies in order, each once")
    expect_equal(most[0], prefetch, "largest number of unacked deliveries")
    expect(not any(m.redelivered for m in seen), "a first delivery is marked redelivered")
    await channel.close()


async def nack_requeue(conn):
    channel = await conn.channel()
    queue = await fresh_queue(channel, "nack")
    await channel.default_exchange.publish(Message(b"again"), routing_key=queue.name)

    async def handle(incoming, seen):
        if len(seen) == 1:
            await incoming.nack(requeue=True)
        else:
            await incoming.ack()
    seen = await take(queue, 2, handle)
    expect_equal([(m.redelivered, m.body) for m in seen], [(False, b"again"), (True, b"again")],
                 "(redelivered, body) of the delivery and its redelivery")
    await channel.close()


async def mandatory_return(conn):
    # aio-pika's documented way to learn about returns under confirms: on_return_raises.
    channel = await conn.channel(on_return_raises=True)
    exchange = await topic(channel)
    try:
        await exchange.publish(message(b"lost", 7), routing_key="nobody.listens", mandatory=True)
        raise AssertionError("an unroutable mandatory publish was confirmed without a return")
    except aio_pika.exceptions.PublishError as e:
        returned = e.message
    frame = returned.delivery
    expect_equal((frame.reply_code, frame.reply_text, frame.exchange, frame.routing_key, returned.body),
                 (312, "NO_ROUTE", exchange.name, "nobody.listens", b"lost"), "basic.return")
    props = returned.header.properties
    expect_equal((props.message_id, props.headers), ("m7", headers_of(7)), "properties of the return")
    await channel.close()


async def basic_get(conn):
    channel = await conn.channel()
    queue = await fresh_queue(channel, "get")
    expect_equal(await queue.get(fail=False), None, "get on an empty queue")
    for body in (b"g1", b"g2"):
        await channel.default_exchange.publish(Message(body), routing_key=queue.name)
    first = await get_one(queue, no_ack=False)
    expect_equal((first.body, first.message_count, first.redelivered), (b"g1", 1, False), "first get")
    await first.ack()
    second = await get_one(queue)
    expect_equal((second.body, second.message_count), (b"g2", 0), "second get")
    await channel.close()


async def reconnect(conn):
    channel = await conn.channel()
    queue = await fresh_queue(channel, "reconnect")
    live = await fresh_queue(channel, "reconnect-live")
    delivered = asyncio.Queue()

    async def on_live(incoming):
        async with incoming.process():
            await delivered.put(incoming.body)
    await live.consume(on_live)
    await channel.default_exchange.publish(message(b"before"), routing_key=queue.name)
    reconnected = asyncio.Event()
    conn.reconnect_callbacks.add(lambda *_: reconnected.set())
    await restart_server_async()
    # connect_robust notices the close, reconnects, and restores the channel, the queues and
    # the consumer on its own: the same objects keep working.
    await asyncio.wait_for(reconnected.wait(), WAIT)
    expect_equal((await get_one(queue)).body, b"before", "message published before the restart")
    await channel.default_exchange.publish(message(b"after"), routing_key=live.name)
    expect_equal(await asyncio.wait_for(delivered.get(), WAIT), b"after",
                 "delivery to the consumer restored after the restart")
    await channel.close()


async def master_worker(conn):
    """aio-pika's Master/Worker pattern (aio_pika.patterns): tasks on a durable queue, executed
    by a worker that acks each after its handler returned."""
    channel = await conn.channel()
    await channel.set_qos(prefetch_count=1)
    master, done = JsonMaster(channel), asyncio.Queue()

    async def job(n):
        await done.put(n)
    await master.create_worker(report.name("jobs"), job, durable=True)
    for n in range(5):
        await master.create_task(report.name("jobs"), kwargs=dict(n=n))
    received = [await asyncio.wait_for(done.get(), WAIT) for _ in range(5)]
    expect_equal(received, list(range(5)), "jobs the worker ran, in order")
    await channel.close()


async def rpc_pattern(conn):
    """aio-pika's RPC pattern declares a headers exchange 'rpc.dlx' for its dead letters:
    refused by design (540; HIP-1326, "What is not implemented, and how it says so"), and the
    connection survives."""
    channel = await conn.channel()
    try:
        await RPC.create(channel)
        raise AssertionError("RPC.create declared the headers exchange 'rpc.dlx' without a refusal")
    except aiormq.exceptions.ChannelClosed as e:
        code, text = e.args[0], e.args[1]
    expect_refusal(code, text, "bind by routing key on a direct or topic exchange")
    alive = await conn.channel()
    queue = await alive.declare_queue(report.name("alive"), auto_delete=True)
    expect_equal(queue.declaration_result.message_count, 0, "a declare on a new channel of the connection")
    await alive.close()
    raise Refused(f"{code} {text} (aio_pika.patterns.RPC dead-letters through a headers exchange; use "
                  f"aio_pika.patterns.Master or a reply_to queue)")


async def main():
    conn = await aio_pika.connect_robust(URL)
    async with conn:
        for scenario in (declare, publish_confirm, consume_prefetch_ack, nack_requeue, mandatory_return,
                         basic_get, master_worker, rpc_pattern, reconnect):
            await report.run_async(scenario.__name__, scenario, conn)
    report.exit()


if __name__ == "__main__":
    asyncio.run(main())
