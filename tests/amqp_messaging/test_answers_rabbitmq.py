"""RabbitMQ's own answers, side by side with a real RabbitMQ 3.10 (the Debian package): where RabbitMQ
refuses a method with a text of its own, clients and their test suites match that text literally
(`PRECONDITION_FAILED - unknown delivery tag 82`), so the adaptor sends exactly the same reply code
and text; the remedy it would add goes to its log. And sender-selected distribution (the CC and BCC
headers), which RabbitMQ routes by. Each scenario runs, through pika, once on the
adaptor and once on a private RabbitMQ, and reduces what it observed (the channel or connection
exception, and what the queues hold afterwards) to a plain summary with the run's unique word
written W; the two summaries must be equal.
"""
import time
import unittest

import pika
import pika.exceptions

import cloudtest
import rabbitmq
import side_by_side

CLOUD = None
RABBITMQ = None


def setUpModule():
    global CLOUD, RABBITMQ
    CLOUD = unittest.enterModuleContext(cloudtest.Cloud())
    RABBITMQ = unittest.enterModuleContext(rabbitmq.RabbitMQ())


class Session(side_by_side.Session):
    """A session on one broker, with further connections of its own."""

    def __init__(self, port):
        super().__init__(port)
        self.others = []

    def other(self):
        """A second connection to the same broker, closed with this session."""
        conn = pika.BlockingConnection(pika.ConnectionParameters(host="127.0.0.1", port=self.port, heartbeat=0))
        self.others.append(conn)
        return conn

    def publish(self, queue, *bodies):
        for body in bodies:
            self.ch.basic_publish("", queue, body)

    def get_unacked(self, channel, queue, n):
        """n messages of `queue` taken with basic.get and left unacked; their delivery tags."""
        tags = []
        deadline = time.monotonic() + 15
        while len(tags) < n and time.monotonic() < deadline:
            method, _, _ = channel.basic_get(queue, auto_ack=False)
            if method is None:
                time.sleep(0.05)
                continue
            tags.append(method.delivery_tag)
        return tags

    def ready(self, queue):
        """How many messages `queue` holds, asked on a fresh channel."""
        channel = self.conn.channel()
        count = channel.queue_declare(queue, passive=True).method.message_count
        channel.close()
        return count

    def close(self):
        for conn in self.others:
            if conn.is_open:
                conn.close()
        super().close()


def refusal(action):
    """What the broker answered `action` with: the channel (or connection) exception's code and text."""
    try:
        action()
    except pika.exceptions.ChannelClosedByBroker as e:
        return {"channel": e.reply_code, "text": e.reply_text}
    except pika.exceptions.ConnectionClosedByBroker as e:
        return {"connection": e.reply_code, "text": e.reply_text}
    return "accepted"


def run(scenario, port):
    session = Session(port)
    try:
        out = scenario(session)
        return replaced(out, session.word)
    finally:
        session.close()


def replaced(value, word):
    if isinstance(value, dict):
        return {replaced(k, word): replaced(v, word) for k, v in value.items()}
    if isinstance(value, list):
        return [replaced(v, word) for v in value]
    if isinstance(value, str):
        return value.replace(word, "W")
    return value


# ---- acknowledgements ----------------------------------------------------------------------------

def settled_by(settle):
    """Two messages taken unacked on a channel of their own, then settle(channel) there: the answer,
    and how many messages the queue holds once that channel is gone."""
    def scenario(s):
        q = s.name("q")
        s.ch.queue_declare(q)
        s.publish(q, b"m1", b"m2")
        channel = s.conn.channel()
        s.get_unacked(channel, q, 2)
        answer = refusal(lambda: (settle(channel), channel.basic_qos(prefetch_count=1)))
        return {"answer": answer, "ready afterwards": s.ready(q)}
    return scenario



# ---- declarations ----------------------------------------------------------------------------------

def queue_declared_again(first, again):
    """A queue declared with the flags `first`, then on another channel with `again`: the answer."""
    def scenario(s):
        q = s.name("q")
        s.ch.queue_declare(q, **first)
        return refusal(lambda: s.conn.channel().queue_declare(q, **again))
    return scenario


def exchange_declared_again_of_another_type(s):
    x = s.name("x")
    s.ch.exchange_declare(x, exchange_type="direct")
    return refusal(lambda: s.conn.channel().exchange_declare(x, exchange_type="fanout"))


def passive_declare_of_an_absent_queue(s):
    return refusal(lambda: s.ch.queue_declare(s.name("absent"), passive=True))


def passive_declare_of_an_absent_exchange(s):
    return refusal(lambda: s.ch.exchange_declare(s.name("absent"), passive=True))


def bind_to_an_absent_exchange(s):
    q = s.name("q")
    s.ch.queue_declare(q)
    return refusal(lambda: s.ch.queue_bind(q, s.name("absent"), "k"))


def bind_to_the_default_exchange(s):
    q = s.name("q")
    s.ch.queue_declare(q)
    return refusal(lambda: s.ch.queue_bind(q, "", "k"))


def queue_with_the_reserved_prefix(s):
    return refusal(lambda: s.ch.queue_declare("amq." + s.name("q")))


def purge_with_no_queue_declared_on_the_channel(s):
    return refusal(lambda: s.conn.channel().queue_purge(""))


# ---- deletions -------------------------------------------------------------------------------------

def delete_if_unused_of_a_consumed_queue(s):
    q = s.name("q")
    s.ch.queue_declare(q)
    s.ch.basic_consume(q, lambda *a: None, auto_ack=True)
    return refusal(lambda: s.conn.channel().queue_delete(q, if_unused=True))


def delete_if_empty_of_a_queue_holding_messages(s):
    q = s.name("q")
    s.ch.queue_declare(q)
    s.publish(q, b"m1")
    return refusal(lambda: s.conn.channel().queue_delete(q, if_empty=True))


def exchange_delete_if_unused_of_a_bound_exchange(s):
    x, q = s.name("x"), s.name("q")
    s.ch.exchange_declare(x, exchange_type="direct")
    s.ch.queue_declare(q)
    s.ch.queue_bind(q, x, "k")
    return refusal(lambda: s.conn.channel().exchange_delete(x, if_unused=True))


# ---- consumers and publishes -------------------------------------------------------------------------

def consume_beside_an_exclusive_consumer(s):
    q = s.name("q")
    s.ch.queue_declare(q)
    s.ch.basic_consume(q, lambda *a: None, auto_ack=True, exclusive=True)
    return refusal(lambda: s.conn.channel().basic_consume(q, lambda *a: None, auto_ack=True))


def get_from_another_connections_exclusive_queue(s):
    q = s.name("q")
    s.ch.queue_declare(q, exclusive=True)
    return refusal(lambda: s.other().channel().basic_get(q))


def publish_to_an_absent_exchange(s):
    channel = s.conn.channel()
    return refusal(lambda: (channel.basic_publish(s.name("absent"), "k", b"m"), channel.basic_qos(prefetch_count=1)))


def publish_to_an_internal_exchange(s):
    x = s.name("x")
    s.ch.exchange_declare(x, exchange_type="direct", internal=True)
    channel = s.conn.channel()
    return refusal(lambda: (channel.basic_publish(x, "k", b"m"), channel.basic_qos(prefetch_count=1)))


# ---- sender-selected distribution (the CC and BCC headers) -----------------------------------------

def routed_by_cc_and_bcc(s):
    """What each queue holds: every queue a key reaches gets one copy, showing the publish's own
    exchange and routing key; BCC is taken out of what is delivered, CC stays."""
    x = s.name("ccx")
    queues = {s.name(q): keys for q, keys in
              (("qa", ["a"]), ("qb", ["b"]), ("qc", ["c.*"]), ("qab", ["a", "b"]), ("qz", ["z"]))}
    s.ch.exchange_declare(x, exchange_type="topic")
    for q, keys in queues.items():
        s.ch.queue_declare(q)
        for key in keys:
            s.ch.queue_bind(q, x, key)
    s.ch.basic_publish(x, "a", b"m1", pika.BasicProperties(headers={"CC": ["b", "c.x", 5], "BCC": ["b"], "keep": 1}),
                       mandatory=True)
    s.ch.basic_publish(x, "nothing", b"m2", pika.BasicProperties(headers={"BCC": ["b"]}), mandatory=True)
    s.ch.basic_publish("", s.name("qa"), b"m3", pika.BasicProperties(headers={"CC": [s.name("qz")]}))
    held = {}
    for q in queues:
        got = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(got) < 3:
            method, props, body = s.ch.basic_get(q, auto_ack=True)
            if method is None:
                if s.ready(q) == 0 and got:
                    break
                time.sleep(0.05)
                continue
            got.append([body.decode(), method.exchange, method.routing_key, props.headers])
        held[q] = got
    return held


def cc_that_is_not_an_array(s):
    channel = s.conn.channel()
    return refusal(lambda: (channel.basic_publish("", "k", b"m", pika.BasicProperties(headers={"CC": "b"})),
                            channel.basic_qos(prefetch_count=1)))


SCENARIOS = {
    "ack of an unknown tag": settled_by(lambda channel: channel.basic_ack(82)),
    # Nothing is settled: the channel's close requeues both.
    "ack multiple of a tag never delivered": settled_by(lambda channel: channel.basic_ack(5, multiple=True)),
    "nack multiple of a tag never delivered": settled_by(
        lambda channel: channel.basic_nack(9, multiple=True, requeue=False)),
    "exclusive queue declared again shared": queue_declared_again({"exclusive": True}, {"exclusive": False}),
    "shared queue declared again exclusive": queue_declared_again({}, {"exclusive": True}),
    "queue declared again durable": queue_declared_again({"durable": False}, {"durable": True}),
    "exchange declared again of another type": exchange_declared_again_of_another_type,
    "passive declare of an absent queue": passive_declare_of_an_absent_queue,
    "passive declare of an absent exchange": passive_declare_of_an_absent_exchange,
    "bind to an absent exchange": bind_to_an_absent_exchange,
    "bind to the default exchange": bind_to_the_default_exchange,
    "queue with the reserved prefix": queue_with_the_reserved_prefix,
    "purge with no queue declared on the channel": purge_with_no_queue_declared_on_the_channel,
    "delete if-unused of a consumed queue": delete_if_unused_of_a_consumed_queue,
    "delete if-empty of a queue holding messages": delete_if_empty_of_a_queue_holding_messages,
    "exchange delete if-unused of a bound exchange": exchange_delete_if_unused_of_a_bound_exchange,
    "consume beside an exclusive consumer": consume_beside_an_exclusive_consumer,
    "get from another connection's exclusive queue": get_from_another_connections_exclusive_queue,
    "publish to an absent exchange": publish_to_an_absent_exchange,
    "publish to an internal exchange": publish_to_an_internal_exchange,
    "routed by CC and BCC": routed_by_cc_and_bcc,
    "CC that is not an array": cc_that_is_not_an_array,
}


class SameAnswersAsRabbitMQ(unittest.TestCase):
    pass


def _case(name, scenario):
    def test(self):
        theirs = run(scenario, RABBITMQ.amqp_port)
        ours = run(scenario, CLOUD.amqp_port)
        self.assertEqual(ours, theirs)
    test.__doc__ = name
    return test


for _name, _scenario in SCENARIOS.items():
    setattr(SameAnswersAsRabbitMQ, "test_" + "_".join(_name.replace("'", "").replace("-", "_").split()),
            _case(_name, _scenario))


if __name__ == "__main__":
    unittest.main(verbosity=2)
