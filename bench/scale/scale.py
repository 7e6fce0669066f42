#!/usr/bin/python3
"""Topology-at-scale probes for `bench/run --scale`, one AMQP broker at a time,
with pika's blocking connection (Debian's python3-pika 1.2), so that RabbitMQ and the adaptor
are measured by the same client. Each subcommand prints one line of key=value figures on stdout.

  declare --port P --queues N [--first 500]   N durable queues scale-000000…, each bound to the
                                              topic exchange scale-topic by q.<i>.#; queues/s over
                                              the first F and over all N
  get     --port P --queue Q [--times 200]    publish one persistent message (confirmed), then
                                              basic.get it (the timed part), ack, T times; p50/p90 ms
  confirm --port P --queue Q [--messages 5000] [--size 100]
                                              persistent messages with confirm_delivery, each
                                              publish waiting for its confirm (pika blocking); msg/s
  delete  --port P --queues N                 queue.delete of scale-000000…; queues/s
  small   --port P --queues K --prefix S      declare K bound queues S-0…, or with --delete delete them
  drop    --port P --queue Q                  queue.delete of Q
  wait    --port P [--timeout S]              until a connection.open succeeds; prints the epoch time
  check   --port P --queues N                 passive queue.declare of the first and last queues
"""
import argparse
import socket
import sys
import time

import pika

EXCHANGE = "scale-topic"


def qname(i):
    return f"scale-{i:06d}"


def connect(port, attempts=1):
    params = pika.ConnectionParameters(host="127.0.0.1", port=port, heartbeat=0,
                                       blocked_connection_timeout=None, socket_timeout=30,
                                       connection_attempts=attempts, retry_delay=0.1)
    return pika.BlockingConnection(params)


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def declare_bound(ch, name, key):
    ch.queue_declare(queue=name, durable=True)
    ch.queue_bind(queue=name, exchange=EXCHANGE, routing_key=key)


def cmd_declare(a):
    conn = connect(a.port)
    ch = conn.channel()
    ch.exchange_declare(exchange=EXCHANGE, exchange_type="topic", durable=True)
    first = min(a.first, a.queues)
    t0 = time.monotonic()
    t_first = None
    for i in range(a.queues):
        declare_bound(ch, qname(i), f"q.{i}.#")
        if i + 1 == first:
            t_first = time.monotonic() - t0
        if (i + 1) % 1000 == 0:
            el = time.monotonic() - t0
            print(f"scale.py: {i + 1} declared+bound in {el:.1f} s ({(i + 1) / el:.0f}/s)", file=sys.stderr, flush=True)
    total = time.monotonic() - t0
    conn.close()
    print(f"first={first} first_rate={first / t_first:.1f} all={a.queues} all_rate={a.queues / total:.1f} "
          f"seconds={total:.1f}")


def cmd_small(a):
    conn = connect(a.port)
    ch = conn.channel()
    ch.exchange_declare(exchange=EXCHANGE, exchange_type="topic", durable=True)
    for i in range(a.queues):
        if a.delete:
            ch.queue_delete(queue=f"{a.prefix}-{i}")
        else:
            declare_bound(ch, f"{a.prefix}-{i}", f"{a.prefix}.{i}.#")
    conn.close()
    print(f"{'deleted' if a.delete else 'declared'}={a.queues}")


def cmd_get(a):
    conn = connect(a.port)
    pub = conn.channel()
    pub.confirm_delivery()
    ch = conn.channel()
    ch.queue_declare(queue=a.queue, durable=True)
    ch.queue_purge(queue=a.queue)
    body = b"x" * 100
    props = pika.BasicProperties(delivery_mode=2)
    times, empties = [], 0
    for _ in range(a.times):
        pub.basic_publish(exchange="", routing_key=a.queue, body=body, properties=props, mandatory=False)
        while True:
            t0 = time.perf_counter()
            method, _props, _body = ch.basic_get(queue=a.queue, auto_ack=False)
            dt = time.perf_counter() - t0
            if method is not None:
                break
            empties += 1
            if empties > 10 * a.times:
                raise SystemExit("scale.py get: the published message never became gettable")
        times.append(dt * 1000.0)
        ch.basic_ack(delivery_tag=method.delivery_tag)
    conn.close()
    print(f"p50_ms={pct(times, 50):.2f} p90_ms={pct(times, 90):.2f} max_ms={max(times):.2f} "
          f"gets={a.times} empty_gets={empties}")


def timed_delete(port, queue, tries=5):
    """queue.delete of a queue that may hold messages, timed, retried on a new connection
    (at most `tries` in all) when the broker fails it; the first error goes to stderr."""
    t0, failures = time.monotonic(), 0
    while True:
        try:
            conn = connect(port)
            conn.channel().queue_delete(queue=queue)
            conn.close()
            break
        except Exception as e:  # pika's channel and connection closes
            failures += 1
            print(f"scale.py: queue.delete of {queue} failed (try {failures}): {e!r}", file=sys.stderr, flush=True)
            if failures >= tries:
                break
            time.sleep(2)
    ok = "yes" if failures < tries else "no"
    return f"delete_s={time.monotonic() - t0:.2f} delete_failures={failures} deleted={ok}"


def cmd_confirm(a):
    conn = connect(a.port)
    ch = conn.channel()
    ch.queue_declare(queue=a.queue, durable=True)
    ch.confirm_delivery()
    body = b"x" * a.size
    props = pika.BasicProperties(delivery_mode=2)
    t0 = time.monotonic()
    for _ in range(a.messages):
        ch.basic_publish(exchange="", routing_key=a.queue, body=body, properties=props)
    dt = time.monotonic() - t0
    out = f"rate={a.messages / dt:.1f} messages={a.messages} seconds={dt:.2f}"
    if a.delete:
        conn.close()
        out += " " + timed_delete(a.port, a.queue)
    try:
        conn.close()
    except Exception:
        pass
    print(out)


def cmd_delete(a):
    conn = connect(a.port)
    ch = conn.channel()
    t0 = time.monotonic()
    for i in range(a.queues):
        ch.queue_delete(queue=qname(i))
        if (i + 1) % 1000 == 0:
            el = time.monotonic() - t0
            print(f"scale.py: {i + 1} deleted in {el:.1f} s ({(i + 1) / el:.0f}/s)", file=sys.stderr, flush=True)
    dt = time.monotonic() - t0
    ch.exchange_delete(exchange=EXCHANGE)
    conn.close()
    print(f"rate={a.queues / dt:.1f} seconds={dt:.1f}")


def cmd_drop(a):
    print(timed_delete(a.port, a.queue))


def cmd_wait(a):
    deadline = time.monotonic() + a.timeout
    last = None
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", a.port), timeout=1):
                pass
        except OSError as e:
            last = e
            time.sleep(0.05)
            continue
        try:
            conn = connect(a.port)
            now = time.time()
            conn.close()
            print(f"open_at={now:.3f}")
            return
        except Exception as e:  # pika raises several kinds while a broker boots
            last = e
            time.sleep(0.05)
    raise SystemExit(f"scale.py wait: no connection.open on {a.port} in {a.timeout} s: {last!r}")


def cmd_check(a):
    conn = connect(a.port)
    ch = conn.channel()
    for i in (0, a.queues - 1):
        ch.queue_declare(queue=qname(i), durable=True, passive=True)
    conn.close()
    print(f"present={qname(0)},{qname(a.queues - 1)}")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("declare", "get", "confirm", "delete", "small", "drop", "wait", "check"):
        p = sub.add_parser(name)
        p.add_argument("--port", type=int, required=True)
        p.add_argument("--queues", type=int, default=5000)
        p.add_argument("--first", type=int, default=500)
        p.add_argument("--queue", default="scale-probe")
        p.add_argument("--times", type=int, default=200)
        p.add_argument("--messages", type=int, default=5000)
        p.add_argument("--size", type=int, default=100)
        p.add_argument("--prefix", default="scale-small")
        p.add_argument("--delete", action="store_true")
        p.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    globals()["cmd_" + a.cmd](a)


if __name__ == "__main__":
    main()
