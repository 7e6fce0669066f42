"""The soak: hours (or minutes) of varied AMQP load on two `cloud` replicas over a 3-node
nats-server cluster, with faults injected on a schedule drawn from --seed, then a verdict on what
was lost. Run through scripts/soak (it finds or builds the release build); needs root (tmpfs
mounts, iptables). Exit status 0 only when every check passed."""
import argparse
import json
import os
import signal
import sys
import threading
import time
import traceback

import pika.exceptions as px

import bus_trouble
import clients
import cloudtest
import consumers
import evidence
import report
import sampler as sampling
import schedule
import topology
import verdict
from churn import QueueChurn
from environment import ACK_WAIT_S, Environment
from faults import Injector
from ledger import Ledger


def parse(argv):
    p = argparse.ArgumentParser(prog="scripts/soak", description=__doc__)
    p.add_argument("--minutes", type=float, default=10, help="how long the load and faults run (default 10)")
    p.add_argument("--seed", type=int, default=1, help="draws the fault schedule and the load's choices (default 1)")
    p.add_argument("--out", default=None, help="the run's folder (default build/soak/<UTC time>)")
    p.add_argument("--grace", type=float, default=30.0,
                   help="seconds after a fault's end that still count as its window (default 30)")
    p.add_argument("--faults", default=",".join(schedule.NODE_FAULTS + schedule.CLOUD_FAULTS),
                   help="comma-separated kinds to draw from, or 'none' (default: all)")
    return p.parse_args(argv)


def log(t0, text):
    print(f"[soak +{time.time() - t0:7.1f}s] {text}", flush=True)


def interrupt_on_terminate():
    """SIGTERM and SIGHUP unwind like Ctrl-C, so that every cleanup runs."""
    def raise_interrupt(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, raise_interrupt)
    signal.signal(signal.SIGHUP, raise_interrupt)


def recorded(run, name, ledger):
    """A worker whose unforeseen exception is an event of the run (so a failed check), not a
    thread that silently stops."""
    def guarded():
        try:
            run()
        except Exception as e:  # noqa: BLE001 - whatever it was, the report names it
            ledger.event(name, None, "worker-crashed", None, traceback.format_exc()[-600:])
            raise e
    return guarded


def start_threads(objects, ledger, name_of=lambda o: o.name):
    threads = []
    for o in objects:
        t = threading.Thread(target=recorded(o.run, name_of(o), ledger), daemon=True, name=name_of(o))
        t.start()
        threads.append(t)
    return threads


def wait_out_load(t0, seconds, ledger, injector):
    end = t0 + seconds
    while time.time() < end:
        time.sleep(min(30.0, max(0.0, end - time.time())))
        active = ", ".join(f"{w['kind']} {w['target']}" for w in injector.active()) or "none"
        log(t0, f"{ledger.snapshot_counts()}; faults on: {active}")


def drain_everything(env, ledger, churners, t0):
    """After the load: every queue read to the end (what dead holders kept comes back after the
    ack wait first), then the final state checked. Returns the problems found."""
    time.sleep(max(topology.QUEUE_TTL_MS, topology.MESSAGE_TTL_MS) / 1000 + ACK_WAIT_S + 5)
    replica = env.clouds["a"]
    left = [q for c in churners for q in c.queues if not any(q == e for e, _ in c.expiring)]
    queues = [q for q in topology.FIXED_QUEUES if q not in topology.UNREAD_QUEUES] + left
    problems, results = [], {}

    def drain_one(queue):
        try:
            results[queue] = consumers.drain("drain", replica, ledger, queue, idle=8, deadline_s=300)
        except px.ChannelClosedByBroker as e:
            if e.reply_code != 404 or queue in topology.FIXED_QUEUES:  # a churn queue deleted: fine
                problems.append({"queue": queue, "drain": f"{e.reply_code} {e.reply_text}"})
        except clients.SESSION_ERRORS as e:
            clients.record(ledger, "drain", "a", e)
    threads = [threading.Thread(target=drain_one, args=(q,)) for q in queues]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log(t0, f"drained {sum(results.values())} messages from {len(results)} queues")
    problems += queue_counts(replica, topology.FIXED_QUEUES)
    for problem in problems:
        if "messages_left" in problem:  # what the bus says the queue's consumer holds, and why
            problem["bus_consumer"] = consumer_state(env.cluster, problem["queue"])
    problems += expiring_queues_left(replica, churners)
    return problems


def keep_evidence(out, lost, t0):
    """What the bus says of the queues that kept confirmed messages (evidence.py), in lost.json."""
    if not lost:
        return
    with open(os.path.join(out, "lost.json"), "w") as f:
        json.dump(lost, f, indent=1, default=str)
    log(t0, f"{len(lost['queues'])} queue(s) kept confirmed messages from every reader: the bus's view in "
            f"{out}/lost.json")


def settle(cluster, t0, timeout=120):
    """Before the load: the stream, the bucket and every fixed queue's consumer have a leader (new
    raft groups elect theirs in a few seconds; load before that only measures the election)."""
    subjects = ["STREAM.INFO.AMQP", "STREAM.INFO.KV_amqp"] + [f"CONSUMER.INFO.AMQP.{q}" for q in topology.FIXED_QUEUES]

    def led():
        try:
            return all(cluster.api(s).get("cluster", {}).get("leader") for s in subjects)
        except (AssertionError, OSError, ConnectionError):
            return False
    began = time.time()
    if not cloudtest.wait_until(led, timeout, interval=0.5):
        raise AssertionError(f"the soak's queues had no leaders on the bus within {timeout} s:\n{cluster.logs()}")
    log(t0, f"every queue has a leader on the bus ({time.time() - began:.1f} s)")


def consumer_state(cluster, queue):
    try:
        info = cluster.api(f"CONSUMER.INFO.AMQP.{queue}")
    except AssertionError as e:
        return str(e)[:300]
    keep = ("num_pending", "num_ack_pending", "num_redelivered", "num_waiting", "delivered", "ack_floor")
    return {k: info.get(k) for k in keep} if "error" not in info else info


def queue_counts(replica, queues):
    problems = []
    with clients.pika.BlockingConnection(clients.params(replica)) as conn:
        for queue in queues:
            count = conn.channel().queue_declare(queue, passive=True).method.message_count
            if count:
                problems.append({"queue": queue, "messages_left": count})
    return problems


def expiring_queues_left(replica, churners):
    problems = []
    with clients.pika.BlockingConnection(clients.params(replica)) as conn:
        for churner in churners:
            for queue, abandoned in churner.expiring:
                try:
                    conn.channel().queue_declare(queue, passive=True)
                    problems.append({"queue": queue, "abandoned_at": abandoned, "problem": "still there after x-expires"})
                except px.ChannelClosedByBroker as e:
                    if e.reply_code != 404:
                        problems.append({"queue": queue, "problem": f"{e.reply_code} {e.reply_text}"})
    return problems


def all_parts_up(env, t0):
    notes = []
    for node in env.cluster.nodes:
        if node["proc"] is None or node["proc"].poll() is not None:
            env.restart_node(node["name"], notes)
    for name, cloud in env.clouds.items():
        if cloud.proc is None or cloud.proc.poll() is not None:
            env.start_cloud_until_up(name, notes)
    env.cluster.wait_ready(120)
    for note in notes:
        log(t0, f"after the load: {note}")


def main(argv):
    args = parse(argv)
    kinds = tuple(k for k in args.faults.split(",") if k and k != "none")
    out = args.out or os.path.join("build", "soak", time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    os.makedirs(out, exist_ok=True)
    interrupt_on_terminate()
    ledger, stop, load_stop = Ledger(), threading.Event(), threading.Event()
    command = "scripts/soak " + " ".join(argv)
    wall0 = time.time()
    with Environment(out) as env:
        t0 = time.time()
        log(t0, f"cluster {env.cluster.url}; cloud a amqp :{env.clouds['a'].amqp_port}, "
                f"b :{env.clouds['b'].amqp_port}; output {out}")
        replicas = clients.Replicas(env.clouds)
        topology.declare(env.clouds["a"])
        settle(env.cluster, t0)
        t0 = time.time()  # the schedule counts from the start of the load
        plan = schedule.fault_schedule(args.seed, args.minutes, [n["name"] for n in env.cluster.nodes],
                                       sorted(env.clouds), kinds) if kinds else []
        for fault in plan:
            log(t0, f"planned: {fault}")
        monitor = sampling.Sampler(env.processes, stop)
        start_threads([monitor], ledger, lambda _o: "sampler")
        load = topology.workers(replicas, ledger, load_stop, args.seed)
        load_threads = start_threads(load, ledger)
        injector = Injector(env, plan, t0, stop)
        injector.start()
        try:
            wait_out_load(t0, args.minutes * 60, ledger, injector)
            log(t0, "load stops")
            load_end = time.time()
            load_stop.set()
            for t in load_threads:
                t.join(90)
            stuck = [t.name for t in load_threads if t.is_alive()]
            if stuck:
                ledger.event("soak", None, "worker-stuck", None, ", ".join(stuck))
            if not injector.join(300):
                ledger.event("soak", None, "fault-stuck", None, str(injector.active()))
            all_parts_up(env, t0)
            churners = [w for w in load if isinstance(w, QueueChurn)]
            problems = drain_everything(env, ledger, churners, t0)
            keep_evidence(out, evidence.collect(env.cluster, ledger), t0)
        finally:
            stop.set()
            load_stop.set()
        windows = verdict.Windows(injector.windows, args.grace)
        # Judged while the load ran: the final drain's many connections are not the load's.
        flatness = sampling.flatness([x for x in monitor.samples if x["t"] <= load_end])
        probes = [p for c in churners for p in c.probes]
        checks = [
            verdict.confirmed_delivered(ledger),
            verdict.no_phantoms(ledger),
            verdict.duplicates_redelivered(ledger, windows),
            verdict.order_kept(ledger, topology.ORDER_QUEUES),
            verdict.bodies_intact(ledger),
            verdict.dead_lettered(ledger),
            verdict.expired_dead_lettered(ledger),
            verdict.unbind_honoured(ledger, probes),
            verdict.final_state(problems),
            verdict.resources_flat(flatness, load_end - t0),
            verdict.closes_inside_windows(ledger, windows, bus_trouble.moments(
                env.cluster.tmp, [n["name"] for n in env.cluster.nodes])),
            verdict.faults_carried_out(injector.windows),
        ]
        summary = {"command": command, "minutes": args.minutes, "seed": args.seed, "grace_s": args.grace,
                   "wall_s": time.time() - wall0, "counts": report.counts(ledger, load),
                   "cluster": env.cluster.url}
        ok, markdown = report.write(out, summary, checks, injector.windows, ledger, flatness,
                                    monitor.samples, t0)
    print(markdown)
    print(f"soak: {'PASS' if ok else 'FAIL'}; report in {out}/report.md and report.json", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt as e:
        print(f"soak: interrupted ({e}); everything it started was undone", file=sys.stderr)
        sys.exit(130)
