"""Quorum queues side by side with a real RabbitMQ 3.10 (the Debian package): the same pika
scenarios run once on the adaptor and once on a private RabbitMQ, and what each observed must be
equal: what a quorum queue's declaration is refused and with which text, how a redeclaration with
another x-queue-type is worded, and which deliveries carry x-delivery-count (a quorum queue's
redeliveries and basic.get-oks, never a classic queue's).

One difference by design, asserted on each side apart: the adaptor gives a quorum queue that sets
no delivery limit RabbitMQ 4's default of 20 (a message returned more often is dead-lettered);
RabbitMQ 3.10 has no default, so its message keeps coming back.
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
QUORUM = {"x-queue-type": "quorum"}
CLASSIC = {"x-queue-type": "classic"}


def setUpModule():
    global CLOUD, RABBITMQ
    CLOUD = unittest.enterModuleContext(cloudtest.Cloud())
    RABBITMQ = unittest.enterModuleContext(rabbitmq.RabbitMQ())


def run(scenario, port):
    s = side_by_side.Session(port)
    try:
        return scenario(s)
    finally:
        s.close()


def declared(s, queue, durable=True, exclusive=False, auto_delete=False, arguments=None):
    """'ok', or the reply code and text of the channel exception, with the run's word as W."""
    ch = s.conn.channel()
    try:
        ch.queue_declare(queue, durable=durable, exclusive=exclusive, auto_delete=auto_delete, arguments=arguments)
        ch.close()
        return "ok"
    except pika.exceptions.ChannelClosedByBroker as e:
        return f"{e.reply_code} {e.reply_text}".replace(s.word, "W")


def refusals(s):
    n = s.name
    out = {
        "non-durable": declared(s, n("q1"), durable=False, arguments=QUORUM),
        "exclusive": declared(s, n("q2"), exclusive=True, arguments=QUORUM),
        "auto-delete": declared(s, n("q3"), auto_delete=True, arguments=QUORUM),
        "all three": declared(s, n("q4"), durable=False, exclusive=True, auto_delete=True, arguments=QUORUM),
        "server-named": declared(s, "", arguments=QUORUM),
        "reject-publish-dlx": declared(s, n("q5"), arguments={**QUORUM, "x-overflow": "reject-publish-dlx"}),
    }
    for arg, value in (("x-max-priority", 5), ("x-queue-mode", "lazy"), ("x-queue-master-locator", "min-masters"),
                       ("x-queue-version", 2)):
        out[arg] = declared(s, n("qa"), durable=False, arguments={**QUORUM, arg: value})
    return out


def redeclarations(s):
    n = s.name
    steps = [("plain", None), ("plain", CLASSIC), ("plain", QUORUM),
             ("named", CLASSIC), ("named", None), ("named", QUORUM),
             ("quorum", QUORUM), ("quorum", QUORUM), ("quorum", None), ("quorum", CLASSIC)]
    out = [[queue, arguments, declared(s, n(queue), arguments=arguments)] for queue, arguments in steps]
    # The default delivery limit is no declared argument: 20 is another one. Only the start of the
    # text is compared: RabbitMQ names the client's field type ("the value '20' of type
    # 'signedint' but current is none"), which the adaptor does not keep for a number.
    twenty = declared(s, n("quorum"), arguments={**QUORUM, "x-delivery-limit": 20})
    out.append(["quorum", "x-delivery-limit 20", twenty.split(":")[0]])
    out.append(["quorum non-durable", QUORUM, declared(s, n("quorum"), durable=False, arguments=QUORUM)])
    return out


def get_within(s, queue, seconds):
    """basic.get of the queue's next message (not acked), waiting for one `seconds` at most:
    (method, properties), method None when none came."""
    deadline, method, props = time.monotonic() + seconds, None, None
    while method is None and time.monotonic() < deadline:
        method, props, _ = s.ch.basic_get(queue, auto_ack=False)
        time.sleep(0 if method else 0.05)
    return method, props


def get_and_return(s, queue, times):
    """(redelivered, x-delivery-count) of each basic.get of the queue's one message, nacked back."""
    seen = []
    for _ in range(times):
        method, props = get_within(s, queue, 15)
        if method is None:
            break
        seen.append([method.redelivered, (props.headers or {}).get("x-delivery-count")])
        s.ch.basic_nack(method.delivery_tag, requeue=True)
    return seen


def consumed_after_close(s, queue):
    """(redelivered, x-delivery-count) of a delivery to a consumer and of its redelivery after the
    consumer's channel closed."""
    seen = []
    for _ in range(2):
        ch = s.conn.channel()
        got = []
        ch.basic_consume(queue, lambda c, m, p, b: got.append((m, p)))
        deadline = time.monotonic() + 15
        while not got and time.monotonic() < deadline:
            s.conn.process_data_events(time_limit=0.05)
        if not got:
            break
        seen.append([got[0][0].redelivered, (got[0][1].headers or {}).get("x-delivery-count")])
        ch.close()
    return seen


def delivery_counts(s):
    out = {}
    for kind, arguments in (("classic", None), ("quorum", QUORUM)):
        got, consumed = s.name(kind + "-get"), s.name(kind + "-consume")
        for q in (got, consumed):
            s.ch.queue_declare(q, durable=True, arguments=arguments)
            s.ch.basic_publish("", q, b"m")
        out[kind] = {"basic.get": get_and_return(s, got, 3), "basic.consume": consumed_after_close(s, consumed)}
    return out


def returned_until_gone(s, limit=None, most=25):
    """How often a quorum queue's one message is delivered (basic.get, nacked back) before it stops
    coming (at most `most`), and the x-death reasons of what reached its dead-letter exchange."""
    dlx, dlq, q = s.name("dlx"), s.name("dlq"), s.name("bounded")
    s.ch.exchange_declare(dlx, exchange_type="fanout")
    s.ch.queue_declare(dlq)
    s.ch.queue_bind(dlq, dlx)
    arguments = {**QUORUM, "x-dead-letter-exchange": dlx}
    if limit is not None:
        arguments["x-delivery-limit"] = limit
    s.ch.queue_declare(q, durable=True, arguments=arguments)
    s.ch.basic_publish("", q, b"bounce")
    deliveries = 0
    while deliveries < most:
        method, _ = get_within(s, q, 3)
        if method is None:
            break
        deliveries += 1
        s.ch.basic_nack(method.delivery_tag, requeue=True)
    deadline, reasons = time.monotonic() + 10, []
    while not reasons and time.monotonic() < deadline:
        method, props, _ = s.ch.basic_get(dlq, auto_ack=True)
        if method is not None:
            reasons = [d.get("reason") for d in (props.headers or {}).get("x-death", [])]
        else:
            time.sleep(0.05)
    return {"deliveries": deliveries, "dead-lettered": reasons}


class QuorumQueuesAsRabbitMQ(unittest.TestCase):
    def same(self, scenario):
        ours, theirs = side_by_side.on_both(lambda port: run(scenario, port), CLOUD.amqp_port, RABBITMQ.amqp_port)
        self.assertEqual(ours, theirs)
        return ours

    def test_a_refusals_of_a_new_quorum_queue(self):
        seen = self.same(refusals)
        self.assertEqual(seen["non-durable"], "406 PRECONDITION_FAILED - invalid property 'non-durable' for queue "
                                              "'q1-W' in vhost '/'")
        self.assertEqual(seen["reject-publish-dlx"], "ok")  # 3.10 takes it on a quorum queue

    def test_b_redeclarations_with_another_type(self):
        seen = self.same(redeclarations)
        self.assertEqual(seen[2][2], "406 PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'plain-W' "
                                     "in vhost '/': received the value 'quorum' of type 'longstr' but current is none")

    def test_c_x_delivery_count_on_quorum_queues_only(self):
        seen = self.same(delivery_counts)
        self.assertEqual(seen["classic"]["basic.get"], [[False, None], [True, None], [True, None]])
        self.assertEqual(seen["quorum"]["basic.get"], [[False, 0], [True, 1], [True, 2]])
        self.assertEqual(seen["quorum"]["basic.consume"], [[False, None], [True, 1]])

    def test_d_an_explicit_delivery_limit(self):
        self.assertEqual(self.same(lambda s: returned_until_gone(s, limit=3)),
                         {"deliveries": 4, "dead-lettered": ["delivery_limit"]})

    def test_e_the_default_delivery_limit_is_rabbitmq_4s(self):
        # RabbitMQ 4: a quorum queue that sets no limit dead-letters a message returned 20 times
        # more after its first delivery. RabbitMQ 3.10 has no default: it keeps coming back.
        ours, theirs = side_by_side.on_both(lambda port: run(returned_until_gone, port), CLOUD.amqp_port,
                                            RABBITMQ.amqp_port)
        self.assertEqual(ours, {"deliveries": 21, "dead-lettered": ["delivery_limit"]})
        self.assertEqual(theirs["deliveries"], 25)

    def test_f_a_delivery_limit_of_minus_one_is_rabbitmq_4s_no_limit(self):
        # RabbitMQ 4's way back to 3.10's unbounded returns; 3.10 itself keeps returning too.
        self.assertEqual(run(lambda s: returned_until_gone(s, limit=-1), CLOUD.amqp_port),
                         {"deliveries": 25, "dead-lettered": []})


if __name__ == "__main__":
    unittest.main()
