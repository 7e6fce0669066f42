"""The Celery app of ../celery.py's quorum scenarios (Celery 5.5 and later): Celery's defaults
but for late acks and its queues, which are quorum queues, as Celery's "Using Quorum Queues"
guide sets an app up. Its default queue sits behind a topic exchange, which native delayed
delivery needs; the other one behind a direct exchange, for which Celery keeps a countdown task
in the worker until it is due.

Each queue's binding key is literal because Celery publishes a task (and, through native delayed
delivery, a delayed one) with its queue's binding key, and a published key must be literal.
"""
import os
import time

from celery import Celery
from gate_file import hold_until
from kombu import Exchange, Queue

CLIENT = os.environ.get("INTEROP_CLIENT", "celery")
QUORUM = {"x-queue-type": "quorum"}
TOPIC_QUEUE = f"{CLIENT}-quorum"
DIRECT_QUEUE = f"{CLIENT}-quorum-direct"

app = Celery("interop_quorum", broker=os.environ.get("AMQP_URL"), backend="rpc://")
app.conf.update(
    task_acks_late=True,
    task_queues=[
        Queue(TOPIC_QUEUE, Exchange(TOPIC_QUEUE, type="topic"), routing_key="quorum.run", queue_arguments=QUORUM),
        Queue(DIRECT_QUEUE, Exchange(DIRECT_QUEUE, type="direct"), routing_key="quorum.direct",
              queue_arguments=QUORUM),
    ],
    task_default_queue=TOPIC_QUEUE,
)


@app.task
def add(x, y):
    return x + y


@app.task
def gate(path):
    """Holds the worker until `path` exists (the client's signal)."""
    return hold_until(path)


@app.task(bind=True)
def stamp(self):
    """When the worker ran it, and the exchange and routing key it came with."""
    info = self.request.delivery_info
    return time.time(), info.get("exchange"), info.get("routing_key")
