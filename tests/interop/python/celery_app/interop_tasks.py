"""The Celery app of the interop matrix, configured as Celery's "First steps" guide configures an
app: broker = the server under test (AMQP_URL), result backend rpc://, tasks routed to a topic
exchange. The worker (`celery -A interop_tasks worker`, started by ../celery.py) and the client
(../celery.py) both import it.

Nothing is set for this server: remote control, events, mingle and gossip keep Celery's defaults,
whose names hold dots ('celery.pidbox', 'reply.celery.pidbox', '<host>.celery.pidbox'), which the
matrix's server takes (CLOUD_AMQP_NAMES=escaped). ../celery.py's `celery_defaults` scenario
drives them.
"""
import os

from celery import Celery
from celery.exceptions import Reject
from gate_file import hold_until
from kombu import Exchange, Queue

app = Celery("interop_tasks", broker=os.environ.get("AMQP_URL"), backend="rpc://")
TASKS = Exchange("celery-topic", type="topic", durable=True)
app.conf.update(
    task_queues=[Queue("celery-tasks", TASKS, routing_key="tasks.#", durable=True)],
    task_default_queue="celery-tasks",
    task_default_exchange="celery-topic",
    task_default_exchange_type="topic",
    task_default_routing_key="tasks.default",
    # An explicit publish key: routed by queue alone, Celery would publish with the queue's binding
    # key 'tasks.#' as the routing key, and a published key must be literal (406; HIP-1326,
    # "Exchanges, queues and bindings become subjects, consumers and filters").
    task_routes={"interop_tasks.*": {"queue": "celery-tasks", "routing_key": "tasks.run"}},
    # Ack after the task ran (so a reject can requeue), one task in flight per worker process.
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    # Publisher confirms on every task message (py-amqp's confirm_publish).
    broker_transport_options={"confirm_publish": True},
)


@app.task
def add(x, y):
    return x + y


@app.task
def gate(path):
    """Holds the worker until `path` exists (the client's signal)."""
    return hold_until(path)


@app.task(bind=True)
def reject_once(self):
    """Rejects (requeue) its first delivery; the redelivery, flagged so, returns."""
    if not self.request.delivery_info.get("redelivered"):
        raise Reject("first delivery", requeue=True)
    return "redelivered"
