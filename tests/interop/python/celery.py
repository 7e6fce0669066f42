"""Celery (Debian's 5.2 in `celery`, PyPI's in `celery_pypi`): a real worker process
(`python3 -m celery -A interop_tasks worker --pool=solo`) executes tasks a client sends with
`delay`/`apply_async`, results come back through the rpc:// backend (contract: ../README.md; the
app: celery_app/interop_tasks.py). From Celery 5.5 on, a second worker runs the quorum-queue
scenarios (_celery_quorum.py).

Celery expresses publish/consume through tasks: a scenario's assertion is on what the tasks
returned and on the broker's own view (queue.declare-ok counts). Celery's API has no basic.get
and no mandatory publish: those columns are `na`.
"""
import os
import subprocess
import sys

import celery
from celery import Celery

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(HERE)  # after the library: see _interop
from _celery_worker import APP_DIR, SCRATCH, Worker, app_env  # noqa: E402
from _interop import (URL, WAIT, NotApplicable, Report, expect, expect_equal,  # noqa: E402
                      restart_server, wait_until)

sys.path.append(APP_DIR)
from interop_tasks import add, app, gate, reject_once  # noqa: E402

report = Report("celery", extras=["celery_rpc", "celery_defaults", "celery_quorum", "celery_native_delayed_delivery"])
report.library(celery)
HOSTNAME = "interop@cloud"
# Quorum-queue support (task_default_queue_type, worker_detect_quorum_queues, native delayed
# delivery) came in Celery 5.5; the rpc:// result consumer reconnects from 5.7 (celery/celery#6912).
HAS_QUORUM_SUPPORT = celery.VERSION[:2] >= (5, 5)
RESULTS_RECONNECT = celery.VERSION[:2] >= (5, 7)


def celery_command(*args):
    """`celery -A interop_tasks <args>` to the test's worker, as an operator types it; its output. Named
    by -d, the worker's one reply ends the command (without it, the command waits out its timeout
    for replies of other workers)."""
    done = subprocess.run([sys.executable, "-m", "celery", "-A", "interop_tasks", *args, "-d", HOSTNAME,
                           "--timeout", "10"],
                          env=app_env(), cwd=SCRATCH, capture_output=True, text=True,
                          timeout=2 * WAIT)
    expect(done.returncode == 0, f"celery {' '.join(args)} exited with {done.returncode}: {done.stderr[-800:]}")
    return done.stdout


def queue_counts(name):
    """(ready messages, consumers) of a queue, from a passive queue.declare."""
    with app.connection_for_read() as conn:
        _, messages, consumers = conn.default_channel.queue_declare(name, passive=True)
        return messages, consumers


def celery_rpc():
    expect_equal(add.delay(2, 3).get(timeout=WAIT), 5, "add(2, 3) through the worker and rpc://")
    results = [add.delay(i, i) for i in range(10)]
    expect_equal([r.get(timeout=WAIT) for r in results], [2 * i for i in range(10)], "ten results through rpc://")


def declare():
    # The worker declared the topic exchange, the queue and its binding from task_queues.
    expect_equal(add.apply_async((20, 1), routing_key="tasks.add").get(timeout=WAIT), 21,
                 "a task routed through the binding 'tasks.#'")
    with app.connection_for_read() as conn:
        channel = conn.default_channel
        channel.exchange_declare("celery-topic", "topic", passive=True)
        _, _, consumers = channel.queue_declare("celery-tasks", passive=True)
    expect_equal(consumers, 1, "consumers on celery-tasks (the worker)")


def publish_confirm():
    # broker_transport_options confirm_publish: each apply_async returns after the broker's ack
    # (a nack raises). The results prove each confirmed message was stored and delivered.
    sent = [add.apply_async((i, 100)) for i in range(20)]
    expect_equal([r.get(timeout=WAIT) for r in sent], [i + 100 for i in range(20)], "results of 20 confirmed tasks")


def consume_prefetch_ack():
    # The worker's qos is 1 (concurrency 1 × prefetch multiplier 1) and it acks late: while the
    # gate task runs, the other three stay in the queue, not in the worker.
    path = os.path.join(SCRATCH, "gate")
    held = gate.delay(path)
    rest = [add.delay(i, 0) for i in range(3)]
    wait_until(lambda: os.path.exists(path + ".started"), "the gate task to start")
    expect_equal(queue_counts("celery-tasks"), (3, 1), "(ready messages, consumers) while one task runs")
    open(path, "w").close()
    expect_equal(held.get(timeout=WAIT), "opened", "the gate task's result")
    expect_equal([r.get(timeout=WAIT) for r in rest], [0, 1, 2], "the queued tasks' results")
    wait_until(lambda: queue_counts("celery-tasks")[0] == 0, "the queue to drain")


def nack_requeue():
    # The task raises Reject(requeue=True) on its first delivery: basic.reject with requeue.
    expect_equal(reject_once.delay().get(timeout=WAIT), "redelivered", "result of the redelivered task")


def mandatory_return():
    raise NotApplicable("Celery's task API has no mandatory publish and no basic.return handler")


def basic_get():
    raise NotApplicable("Celery workers consume; Celery's API has no basic.get")


def reconnect():
    expect_equal(add.delay(1, 2).get(timeout=WAIT), 3, "a result before the restart")
    restart_server()
    # This process's producer reconnects on its own (publish retry) and the worker, reconnected
    # (broker_connection_retry), runs what it sends: the gate task, whose gate is already open.
    marker = os.path.join(SCRATCH, "after-restart")
    open(marker, "w").close()
    gate.delay(marker)
    wait_until(lambda: os.path.exists(marker + ".started"), "the worker to run a task sent after the restart")
    if RESULTS_RECONNECT:
        expect_equal(add.delay(20, 22).get(timeout=WAIT), 42, "a result through rpc:// after the restart, "
                                                               "in the same client process")
        return ""
    # Before 5.7 the rpc:// result consumer never reconnects (celery/celery#6912; the same with
    # RabbitMQ): as its users do, a new producer process fetches results.
    fresh = subprocess.run([sys.executable, "-P", "-c", "import interop_tasks as t; "
                            f"print(t.add.delay(20, 22).get(timeout={WAIT}))"],
                           env=app_env(), cwd=SCRATCH, capture_output=True, text=True,
                           timeout=2 * WAIT)
    expect_equal(fresh.stdout.strip(), "42", f"a result through rpc:// after the restart ({fresh.stderr[-500:]})")
    return "worker and producer reconnect; rpc:// results need a new client process (celery#6912)"


def celery_defaults(worker):
    """A worker with Celery's defaults answers its remote control (the pidbox, whose names hold
    dots), and a stock app's task (Celery's default exchange and queue 'celery', rpc://) runs once
    `celery control` tells the worker to consume that queue."""
    # Remote control answers once the worker is up: after mingle, which asks its neighbours first.
    wait_until(worker.ready, "the worker to say it is ready")
    expect(f" v{celery.__version__} " in worker.log(), f"the worker runs Celery {celery.__version__} as this process")
    ping = celery_command("inspect", "ping")
    expect(f"{HOSTNAME}: OK" in ping and "pong" in ping, f"celery inspect ping answered by the worker: {ping}")
    queues = celery_command("inspect", "active_queues")
    expect("'name': 'celery-tasks'" in queues, f"celery inspect active_queues names the worker's queue: {queues[-600:]}")
    limited = celery_command("control", "rate_limit", "interop_tasks.add", "100000/m")
    expect("new rate limit set successfully" in limited, f"celery control rate_limit: {limited}")
    added = celery_command("control", "add_consumer", "celery")
    expect("add consumer celery" in added, f"celery control add_consumer: {added}")
    stock = Celery("stock", broker=URL, backend="rpc://")
    expect_equal(stock.send_task("interop_tasks.add", (2, 2)).get(timeout=WAIT), 4,
                 "a stock app's task on Celery's default queue, its result through rpc://")
    cancelled = celery_command("control", "cancel_consumer", "celery")
    expect("no longer consuming from" in cancelled, f"celery control cancel_consumer: {cancelled}")


def quorum_scenarios():
    """celery_quorum and celery_native_delayed_delivery, on a worker of their own."""
    if not HAS_QUORUM_SUPPORT:
        reason = (f"Celery {celery.__version__} predates quorum-queue support (task_default_queue_type, "
                  "worker_detect_quorum_queues, native delayed delivery: Celery 5.5)")
        for scenario in ("celery_quorum", "celery_native_delayed_delivery"):
            report.settle(scenario, NotApplicable(reason))
        return
    from _celery_quorum import celery_native_delayed_delivery, celery_quorum
    with Worker("interop_quorum", "quorum@cloud") as worker:
        report.run("celery_quorum", celery_quorum, worker)
        report.run("celery_native_delayed_delivery", celery_native_delayed_delivery, worker)


def main():
    with Worker("interop_tasks", HOSTNAME, "-E") as worker:  # -E: task events too
        report.run("celery_defaults", celery_defaults, worker)
        for scenario in (celery_rpc, declare, publish_confirm, consume_prefetch_ack, nack_requeue,
                         mandatory_return, basic_get):
            report.run(scenario.__name__, scenario)
        quorum_scenarios()
        report.run("reconnect", reconnect)
    report.exit()


if __name__ == "__main__":
    main()
