#!/usr/bin/python3
"""Delayed-message probes for `bench/run --delayed`, through pika's blocking connection. Each
subcommand prints one line of key=value figures on stdout; progress goes to stderr.

  lateness --port P [--rate 1000] [--seconds 10] [--delay 2000]
      publishes RATE messages a second for SECONDS to an x-delayed-message exchange (direct),
      each with x-delay DELAY ms and its due time (epoch ns) as body; a consumer on its own
      connection takes them from the bound queue. Lateness = arrival - due, in ms: p50, p99, max.
  backlog --port P [--messages 1000000] [--delay 3600000]
      publishes MESSAGES delayed messages (DELAY ms: none comes due during the run) to an
      exchange of their own, pipelined, the last one confirmed; publishes/s.
  drop --port P
      deletes backlog's exchange (its waiting messages go with it); seconds taken.
"""
import argparse
import sys
import threading
import time

import pika

LATE_X, LATE_Q = "bench-delayed", "bench-delayed-q"
FAR_X, FAR_Q = "bench-delayed-far", "bench-delayed-far-q"


def connect(port):
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=port, heartbeat=0, blocked_connection_timeout=None, socket_timeout=60))


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def declare(ch, exchange, queue):
    ch.exchange_declare(exchange, "x-delayed-message", durable=True, arguments={"x-delayed-type": "direct"})
    ch.queue_declare(queue, durable=True)
    ch.queue_bind(queue, exchange, routing_key="k")


def cmd_lateness(a):
    conn = connect(a.port)
    ch = conn.channel()
    declare(ch, LATE_X, LATE_Q)
    ch.queue_purge(LATE_Q)
    total = a.rate * a.seconds
    late_ms = []
    ready = threading.Event()

    def consume():
        c = connect(a.port)
        cch = c.channel()
        cch.basic_qos(prefetch_count=1000)

        def on_message(chan, method, _props, body):
            late_ms.append((time.time_ns() - int(body)) / 1e6)
            chan.basic_ack(method.delivery_tag)
        cch.basic_consume(LATE_Q, on_message)
        ready.set()
        deadline = time.monotonic() + a.seconds + a.delay / 1000 + 60
        while len(late_ms) < total and time.monotonic() < deadline:
            c.process_data_events(time_limit=0.1)
        c.close()

    consumer = threading.Thread(target=consume)
    consumer.start()
    ready.wait()
    period = 1.0 / a.rate
    start = time.monotonic()
    for i in range(total):
        pause = start + i * period - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        due = time.time_ns() + a.delay * 1_000_000
        ch.basic_publish(LATE_X, "k", str(due), pika.BasicProperties(headers={"x-delay": a.delay}, delivery_mode=2))
    published_in = time.monotonic() - start
    consumer.join()
    conn.close()
    if not late_ms:
        print("received=0")
        return 1
    print(f"published={total} received={len(late_ms)} rate={total / published_in:.0f} "
          f"p50_ms={pct(late_ms, 50):.1f} p99_ms={pct(late_ms, 99):.1f} max_ms={max(late_ms):.1f} "
          f"min_ms={min(late_ms):.1f}")
    return 0 if len(late_ms) == total else 1


def cmd_backlog(a):
    conn = connect(a.port)
    ch = conn.channel()
    declare(ch, FAR_X, FAR_Q)
    props = pika.BasicProperties(headers={"x-delay": a.delay}, delivery_mode=2)
    start = time.monotonic()
    for i in range(a.messages - 1):
        ch.basic_publish(FAR_X, "k", b"x" * 100, props)
        if i % 100000 == 99999:
            print(f"delayed.py: {i + 1} published", file=sys.stderr)
    ch.confirm_delivery()  # the last one confirmed: every earlier one on the channel was handled
    ch.basic_publish(FAR_X, "k", b"x" * 100, props)
    took = time.monotonic() - start
    conn.close()
    print(f"messages={a.messages} seconds={took:.1f} rate={a.messages / took:.0f}")
    return 0


def cmd_drop(a):
    conn = connect(a.port)
    ch = conn.channel()
    start = time.monotonic()
    ch.exchange_delete(FAR_X)
    took = time.monotonic() - start
    ch.queue_delete(FAR_Q)
    conn.close()
    print(f"seconds={took:.1f}")
    return 0


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("lateness")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--rate", type=int, default=1000)
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--delay", type=int, default=2000)
    p = sub.add_parser("backlog")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--delay", type=int, default=3_600_000)
    p = sub.add_parser("drop")
    p.add_argument("--port", type=int, required=True)
    a = parser.parse_args()
    return {"lateness": cmd_lateness, "backlog": cmd_backlog, "drop": cmd_drop}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
