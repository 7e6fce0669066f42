"""pika SelectConnection (Debian's 1.2 in `pika_select`, PyPI's in `pika_select_pypi`), callback
style as pika's asynchronous examples write it: every broker operation takes a completion callback,
confirms arrive through confirm_delivery's ack_nack_callback, returns through
add_on_return_callback (contract: ../README.md).

To keep each scenario readable top to bottom, a scenario is a generator that yields the
operation it starts (a function taking the completion callback pika should call) or a
condition to wait for; `Runner` resumes it from pika's callbacks. Nothing blocks the ioloop.
"""
import os
import sys
import threading

import pika

sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # after the library: see _interop
from _interop import (URL, WAIT, Report, bodies, expect, expect_equal, headers_of, restart_server)
from _pika_shared import expect_round_trip, properties  # noqa: E402

report = Report("pika_select")
report.library(pika)
EXCHANGE = report.name("topic")


class Call:
    """Yielded by a scenario: starts an operation, resumes with its callback's arguments."""

    def __init__(self, start):
        self.start = start


class Until:
    """Yielded by a scenario: resumes once predicate() holds (checked after every event)."""

    def __init__(self, predicate, what):
        self.predicate, self.what = predicate, what


class Runner:
    """Drives one scenario generator from the ioloop; `done(error)` when it ends."""

    def __init__(self, ioloop, gen, done):
        self.ioloop, self.gen, self.done = ioloop, gen, done
        self.waiting = None
        self.finished = False
        self.timer = ioloop.call_later(WAIT, lambda: self.throw(
            AssertionError(f"timed out after {WAIT:.0f}s waiting for {getattr(self.waiting, 'what', 'a callback')}")))

    def send(self, value=None):
        self._step(lambda: self.gen.send(value))

    def throw(self, error):
        self._step(lambda: self.gen.throw(error))

    def poke(self, *_):
        """Called after every event. The check runs after pika's own handling of the frame
        (a get-empty clears pika's pending get only after our callback)."""
        self.ioloop.add_callback_threadsafe(self._check)

    def _check(self):
        if self.waiting is not None and not self.finished and self.waiting.predicate():
            self.waiting = None
            self.send()

    def _step(self, resume):
        if self.finished:
            return
        try:
            request = resume()
        except StopIteration:
            return self._finish(None)
        except Exception as e:
            return self._finish(e)
        if isinstance(request, Call):
            self.waiting = None
            request.start(lambda *args: self.send(args))
        else:
            self.waiting = request
            self.poke()

    def _finish(self, error):
        self.finished = True
        self.ioloop.remove_timeout(self.timer)
        self.done(error)


class Session:
    """The connection, the running scenario, and what the scenarios share."""

    def __init__(self):
        self.conn = None
        self.runner = None
        self.closed_by_server = None

    def connect(self, on_open, ioloop=None):
        self.closed_by_server = None
        self.conn = pika.SelectConnection(
            pika.URLParameters(URL), on_open_callback=on_open,
            on_open_error_callback=lambda c, e: self.fail(AssertionError(f"connection failed: {e!r}")),
            on_close_callback=self.on_connection_closed, custom_ioloop=ioloop)

    def on_connection_closed(self, _conn, reason):
        self.closed_by_server = reason
        if self.runner is None:
            _conn.ioloop.stop()
        else:
            self.runner.poke()

    def fail(self, error):
        if self.runner is not None:
            self.runner.throw(error)

    def channel(self, confirms=None):
        """Yields: a channel (with confirms if `confirms` is a list to collect them into)."""
        (ch,) = yield Call(lambda cb: self.conn.channel(on_open_callback=cb))
        ch.add_on_close_callback(lambda c, reason: isinstance(reason, pika.exceptions.ChannelClosedByBroker)
                                 and self.fail(AssertionError(f"channel closed by the server: {reason}")))
        if confirms is not None:
            def on_confirm(frame):
                confirms.append(frame.method)
                self.runner.poke()
            yield Call(lambda cb: ch.confirm_delivery(ack_nack_callback=on_confirm, callback=cb))
        return ch

    def fresh_queue(self, ch, suffix, key=None):
        queue = report.name(suffix)
        yield Call(lambda cb: ch.queue_declare(queue, durable=True, callback=cb))
        yield Call(lambda cb: ch.queue_purge(queue, callback=cb))
        if key:
            yield Call(lambda cb: ch.queue_bind(queue, EXCHANGE, routing_key=key, callback=cb))
        return queue

    def consume(self, ch, queue, count, on_message):
        """Yields: a manual-ack consumer's first `count` deliveries [(method, props, body)]."""
        seen = []

        def callback(channel, method, props, body):
            seen.append((method, props, body))
            on_message(channel, method, seen)
            self.runner.poke()
        tag = ch.basic_consume(queue, callback)
        yield Until(lambda: len(seen) >= count, f"{count} deliveries on {queue}")
        yield Call(lambda cb: ch.basic_cancel(tag, callback=cb))
        return seen

    def get_one(self, ch, queue, auto_ack=True):
        """Yields: (method, props, body) of a basic.get, retried while the queue is empty."""
        while True:
            got = []
            ch.basic_get(queue, lambda c, m, p, b: (got.append((m, p, b)), self.runner.poke()), auto_ack=auto_ack)
            # pika's basic_get takes no get-empty callback: listen for the frame (one shot).
            ch.callbacks.add(ch.channel_number, pika.spec.Basic.GetEmpty,
                             lambda frame: (got.append(None), self.runner.poke()))
            yield Until(lambda: got, f"basic.get on {queue}")
            if got[0] is not None:
                return got[0]


def acked(confirms, count):
    """The number of publishes `confirms` (basic.ack / basic.nack frames) acknowledges; a nack fails."""
    nacks = [m for m in confirms if isinstance(m, pika.spec.Basic.Nack)]
    expect(not nacks, f"the server nacked a publish: {nacks}")
    highest = max((m.delivery_tag for m in confirms), default=0)
    return highest >= count


def declare(s):
    confirms = []
    ch = yield from s.channel(confirms)
    yield Call(lambda cb: ch.exchange_declare(EXCHANGE, exchange_type="topic", durable=True, callback=cb))
    queue = yield from s.fresh_queue(ch, "declare", key="orders.*")
    yield Call(lambda cb: ch.exchange_declare(EXCHANGE, passive=True, callback=cb))
    (ok,) = yield Call(lambda cb: ch.queue_declare(queue, passive=True, callback=cb))
    expect_equal(ok.method.message_count, 0, "messages in the new queue")
    ch.basic_publish(EXCHANGE, "orders.new", b"declared", properties(0), mandatory=True)
    yield Until(lambda: acked(confirms, 1), "the publish confirm")
    method, _, body = yield from s.get_one(ch, queue)
    expect_equal((body, method.exchange, method.routing_key), (b"declared", EXCHANGE, "orders.new"),
                 "routed message")
    ch.close()


def publish_confirm(s):
    confirms = []
    ch = yield from s.channel(confirms)
    queue = yield from s.fresh_queue(ch, "confirm", key="confirm.*")
    sent = bodies("confirm", 20)
    for i, body in enumerate(sent):  # pipelined: no wait between publishes
        ch.basic_publish(EXCHANGE, "confirm.item", body, properties(i), mandatory=True)
    yield Until(lambda: acked(confirms, len(sent)), f"confirms for {len(sent)} publishes")
    seen = yield from s.consume(ch, queue, len(sent), lambda c, m, _: c.basic_ack(m.delivery_tag))
    expect_round_trip(seen, sent)
    ch.close()


def consume_prefetch_ack(s):
    prefetch, sent, confirms = 5, bodies("prefetch", 30), []
    ch = yield from s.channel(confirms)
    queue = yield from s.fresh_queue(ch, "prefetch")
    for body in sent:
        ch.basic_publish("", queue, body)
    yield Until(lambda: acked(confirms, len(sent)), "publish confirms")
    yield Call(lambda cb: ch.basic_qos(prefetch_count=prefetch, callback=cb))
    unacked, most = [], [0]

    def on_message(channel, method, seen):
        # One multiple ack when the window is full: an unbounded server would deliver a sixth first.
        unacked.append(method.delivery_tag)
        most[0] = max(most[0], len(unacked))
        if len(unacked) > prefetch:
            s.fail(AssertionError(f"{len(unacked)} unacked deliveries with prefetch {prefetch}"))
        elif len(unacked) == prefetch or len(seen) == len(sent):
            channel.basic_ack(method.delivery_tag, multiple=True)
            unacked.clear()
    seen = yield from s.consume(ch, queue, len(sent), on_message)
    expect_equal([b for _, _, b in seen], sent, "bodies in order, each once")
    expect_equal(most[0], prefetch, "largest number of unacked deliveries")
    expect(not any(m.redelivered for m, _, _ in seen), "a first delivery is marked redelivered")
    ch.close()


def nack_requeue(s):
    confirms = []
    ch = yield from s.channel(confirms)
    queue = yield from s.fresh_queue(ch, "nack")
    ch.basic_publish("", queue, b"again")
    yield Until(lambda: acked(confirms, 1), "the publish confirm")

    def on_message(channel, method, seen):
        if len(seen) == 1:
            channel.basic_nack(method.delivery_tag, requeue=True)
        else:
            channel.basic_ack(method.delivery_tag)
    seen = yield from s.consume(ch, queue, 2, on_message)
    expect_equal([(m.redelivered, b) for m, _, b in seen], [(False, b"again"), (True, b"again")],
                 "(redelivered, body) of the delivery and its redelivery")
    ch.close()


def mandatory_return(s):
    confirms, returned = [], []
    ch = yield from s.channel(confirms)
    ch.add_on_return_callback(lambda c, method, props, body: (returned.append((method, props, body)), s.runner.poke()))
    ch.basic_publish(EXCHANGE, "nobody.listens", b"lost", properties(7), mandatory=True)
    # The protocol: the return first, then the ack (a return is not a failed publish).
    yield Until(lambda: acked(confirms, 1), "the confirm of the unroutable publish")
    expect_equal(len(returned), 1, "returns received before the confirm")
    method, props, body = returned[0]
    expect_equal((method.reply_code, method.reply_text, method.exchange, method.routing_key, body),
                 (312, "NO_ROUTE", EXCHANGE, "nobody.listens", b"lost"), "basic.return")
    expect_equal((props.message_id, props.headers), ("m7", headers_of(7)), "properties of the return")
    ch.close()


def basic_get(s):
    confirms = []
    ch = yield from s.channel(confirms)
    queue = yield from s.fresh_queue(ch, "get")
    empty = []
    ch.callbacks.add(ch.channel_number, pika.spec.Basic.GetEmpty, lambda frame: (empty.append(1), s.runner.poke()))
    ch.basic_get(queue, lambda *a: s.fail(AssertionError("get-ok on an empty queue")), auto_ack=True)
    yield Until(lambda: empty, "basic.get-empty")
    for body in (b"g1", b"g2"):
        ch.basic_publish("", queue, body)
    yield Until(lambda: acked(confirms, 2), "publish confirms")
    method, _, body = yield from s.get_one(ch, queue, auto_ack=False)
    expect_equal((body, method.message_count, method.redelivered), (b"g1", 1, False), "first get")
    ch.basic_ack(method.delivery_tag)
    method, _, body = yield from s.get_one(ch, queue)
    expect_equal((body, method.message_count), (b"g2", 0), "second get")
    ch.close()


def reconnect(s):
    confirms = []
    ch = yield from s.channel(confirms)
    queue = yield from s.fresh_queue(ch, "reconnect")
    ch.basic_publish("", queue, b"before", pika.BasicProperties(delivery_mode=2))
    yield Until(lambda: acked(confirms, 1), "the publish confirm")
    # The restart runs beside the ioloop, which keeps serving and sees the server close.
    restarted = []

    def restart():
        restarted.append(_restart_outcome())
        s.runner.poke()
    threading.Thread(target=restart, daemon=True).start()
    ioloop = s.conn.ioloop
    yield Until(lambda: restarted and s.closed_by_server is not None, "the server restart and the close")
    expect(restarted[0] is None, f"server restart failed: {restarted[0]}")
    # pika's asynchronous examples reconnect from on_close_callback with a new SelectConnection.
    opened = []
    s.connect(lambda c: (opened.append(c), s.runner.poke()), ioloop=ioloop)
    yield Until(lambda: opened, "the new connection")
    confirms = []
    ch = yield from s.channel(confirms)
    method, _, body = yield from s.get_one(ch, queue)
    expect_equal(body, b"before", "message published before the restart")
    ch.basic_publish("", queue, b"after", pika.BasicProperties(delivery_mode=2))
    yield Until(lambda: acked(confirms, 1), "the confirm after the restart")
    method, _, body = yield from s.get_one(ch, queue)
    expect_equal(body, b"after", "message published after the restart")


def _restart_outcome():
    try:
        restart_server()
        return None
    except AssertionError as e:
        return str(e)


SCENARIOS = [declare, publish_confirm, consume_prefetch_ack, nack_requeue, mandatory_return, basic_get, reconnect]


def main():
    session = Session()
    queue = list(SCENARIOS)

    def next_scenario(_conn=None):
        if not queue:
            session.runner = None
            session.conn.close()
            return
        scenario = queue.pop(0)

        def done(error):
            report.settle(scenario.__name__, error)
            session.conn.ioloop.add_callback_threadsafe(next_scenario if session.conn.is_open else reopen)
        session.runner = Runner(session.conn.ioloop, scenario(session), done)
        session.runner.send()

    def reopen():
        # A failed scenario may have lost the connection: the next one gets a new one.
        session.runner = None
        session.connect(next_scenario, ioloop=session.conn.ioloop)

    session.connect(next_scenario)
    session.conn.ioloop.start()
    report.exit()


if __name__ == "__main__":
    main()
