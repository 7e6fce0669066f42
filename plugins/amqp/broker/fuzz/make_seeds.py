#!/usr/bin/env python3
"""Writes the sequence fuzzer's hand-written seeds into corpus/ (a developer tool, rerun after
changing the action table of sequence_fuzz.cpp; the fuzzer itself only reads the files).

sequence_fuzz.cpp reads its input through FuzzedDataProvider, which takes every integer from
the END of the input, one octet per value here: so a seed is its octets in reading order,
reversed. Each helper below lists the octets one action reads, in the order it reads them."""
import pathlib

ACTIONS = ["open", "close", "exchange_declare", "exchange_delete", "queue_declare", "queue_bind",
           "queue_unbind", "queue_delete", "queue_purge", "qos", "consume", "cancel", "publish",
           "confirm_select", "get", "ack", "nack", "reject", "recover", "store", "manual_publishes",
           "complete_publish", "poll", "wait", "drop"]
QUEUES = ["q1", "q2", "q3"]
EXCHANGES = ["", "x1", "x2", "amq.topic", "missing"]
TYPES = ["direct", "fanout", "topic"]
KEYS = ["q1", "q2", "q3", "k", "k.a"]
TAGS = ["c1", "c2", ""]


def op(name, conn=None, ch=None, *rest):
    out = [ACTIONS.index(name)]
    if conn is not None:
        out += [conn, ch - 1]
    return out + list(rest)


def open_(c=0, ch=1): return op("open", c, ch)
def close(c=0, ch=1): return op("close", c, ch)
def drop(c=0): return op("drop", c, 1)
def xdecl(x, t="direct", c=0, ch=1): return op("exchange_declare", c, ch, EXCHANGES.index(x), TYPES.index(t), 0, 1, 0)
def xdelete(x, c=0, ch=1): return op("exchange_delete", c, ch, EXCHANGES.index(x), 0)
def qdecl(q, passive=0, exclusive=0, c=0, ch=1): return op("queue_declare", c, ch, QUEUES.index(q), passive, 1, exclusive, 0)
def bind(q, x, key, c=0, ch=1): return op("queue_bind", c, ch, QUEUES.index(q), EXCHANGES.index(x), 0, KEYS.index(key))
def unbind(q, x, key, c=0, ch=1): return op("queue_unbind", c, ch, QUEUES.index(q), EXCHANGES.index(x), 0, KEYS.index(key))
def qdelete(q, c=0, ch=1): return op("queue_delete", c, ch, QUEUES.index(q), 0, 0)
def purge(q, c=0, ch=1): return op("queue_purge", c, ch, QUEUES.index(q))
def qos(n, glob=0, c=0, ch=1): return op("qos", c, ch, n, glob)
def consume(q, tag, no_ack=0, c=0, ch=1): return op("consume", c, ch, QUEUES.index(q), TAGS.index(tag), no_ack, 0)
def cancel(tag, c=0, ch=1): return op("cancel", c, ch, TAGS.index(tag))
def publish(x, key, mandatory=0, c=0, ch=1): return op("publish", c, ch, EXCHANGES.index(x), KEYS.index(key), mandatory)
def confirm(c=0, ch=1): return op("confirm_select", c, ch)
def get(q, no_ack=0, c=0, ch=1): return op("get", c, ch, QUEUES.index(q), no_ack)
# Tag kinds: 0 an unacked tag (the pick-th), 5 one given before, 6 one never given, 7 zero.
def ack(kind=0, pick=0, multiple=0, c=0, ch=1): return op("ack", c, ch, kind, pick, multiple)
def nack(kind=0, pick=0, multiple=0, requeue=1, c=0, ch=1): return op("nack", c, ch, kind, pick, multiple, requeue)
def reject(kind=0, pick=0, requeue=1, c=0, ch=1): return op("reject", c, ch, kind, pick, requeue)
def recover(requeue=1, c=0, ch=1): return op("recover", c, ch, requeue)
def store(key, x=""): return op("store") + ([1, KEYS.index(key)] if x == "" else [0, EXCHANGES.index(x), KEYS.index(key)])
def manual(on=1): return op("manual_publishes") + [on]
# With one publish made the start index reads nothing; outcome 0 ok, 1 failed, 2 denied.
def complete(start, outcome, made): return op("complete_publish") + ([start] if made > 1 else []) + [outcome]
def poll(n=16): return op("poll") + [n - 1]
def wait(): return op("wait")


# Methods that wait for the bus (declare, consume, get) hold the channel's later methods until the
# io_context runs: the seeds poll after them, as a client waits for the -ok.
SEEDS = {
    "settle_prefetch": [open_(), qdecl("q1"), poll(), qos(2), consume("q1", "c1"), poll(), store("q1"), store("q1"),
                        store("q1"), store("q1"), wait(), ack(), wait(), nack(multiple=1), wait(),
                        reject(requeue=0), recover(), wait(), get("q1"), poll(), ack(kind=5, pick=1), close()],
    "confirms_late": [open_(), qdecl("q1"), poll(), confirm(), manual(), publish("", "q1"), publish("", "q1"),
                      publish("", "q2", mandatory=1), publish("", "q1"), poll(), complete(2, 1, 3),
                      complete(0, 0, 3), poll(), complete(1, 0, 3), manual(0), poll(), get("q1", no_ack=1), poll()],
    "topology": [open_(), xdecl("x1"), xdecl("x2", "topic"), qdecl("q1"), qdecl("q2"), bind("q1", "x1", "k"),
                 bind("q2", "x2", "k.a"), poll(), publish("x1", "k", mandatory=1), publish("x2", "k.a"),
                 consume("q1", "c1"), poll(), wait(), unbind("q1", "x1", "k"), poll(),
                 publish("x1", "k", mandatory=1), qdelete("q1"), xdelete("x1"), poll(), purge("q2"), get("q2"),
                 poll()],
    "two_connections": [open_(0, 1), open_(1, 1), open_(1, 2), qdecl("q1"), poll(), qos(1, 1, 1, 1),
                        consume("q1", "c1", c=1, ch=1), consume("q1", "c2", c=1, ch=1),
                        consume("q1", "", c=0, ch=1), poll(), store("q1"), store("q1"), store("q1"), wait(),
                        drop(1), wait(), store("q1"), wait(), ack(multiple=1, kind=7),
                        qdecl("q2", exclusive=1, c=1, ch=2), poll(), get("q1", c=0, ch=1), poll()],
    "exceptions": [open_(), open_(0, 2), publish("missing", "k"), poll(), ack(kind=6, ch=2),
                   qdecl("q3", passive=1, ch=1), poll(), open_(), consume("q2", "c1"), poll(), qdecl("q2"), poll(),
                   consume("q2", "c1"), consume("q2", "c1"), poll(), open_(0, 3), get("q2", ch=3), poll()],
}

if __name__ == "__main__":
    corpus = pathlib.Path(__file__).resolve().parent / "corpus"
    corpus.mkdir(exist_ok=True)
    for name, actions in SEEDS.items():
        octets = [b for a in actions for b in a]
        (corpus / name).write_bytes(bytes(reversed(octets)))
