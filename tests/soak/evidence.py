"""What the bus says, after the drain, about each queue that kept confirmed messages from every
reader: its consumer (filters, how far it delivered and acked), its bucket entry (the bindings and
their windows) and what the stream still holds on its filters. Read before the run's stores go,
so that a message the stream lost can be told from one a consumer passed over."""
import base64
import json

import verdict

STORED_SHOWN = 50  # per filter subject


def collect(cluster, ledger, limit=20):
    """{"stream": its state, "queues": {queue: evidence}} for at most `limit` queues holding
    undelivered confirmed messages; None when there is none."""
    lost = {}
    for message in verdict.undelivered(ledger):
        lost.setdefault(message["queue"], []).append(message["id"])
    if not lost:
        return None
    return {"stream": _ask(cluster, "STREAM.INFO.AMQP", None, lambda r: r.get("state")),
            "queues": {queue: {"undelivered": sorted(ids), **of_queue(cluster, queue)}
                       for queue, ids in sorted(lost.items())[:limit]}}


def of_queue(cluster, queue):
    found = {}
    consumer = _ask(cluster, f"CONSUMER.INFO.AMQP.{queue}", None, lambda r: r)
    if isinstance(consumer, dict) and "config" in consumer:
        filters = consumer["config"].get("filter_subjects") or [consumer["config"].get("filter_subject")]
        found["consumer"] = {k: consumer.get(k) for k in ("created", "delivered", "ack_floor", "num_pending",
                                                         "num_ack_pending", "num_redelivered", "cluster")}
        found["consumer"]["filter_subjects"] = filters
        found["stored"] = {s: stored_on(cluster, s) for s in filters if s}
    else:
        found["consumer"] = consumer
    found["bucket_entry"] = _ask(cluster, "STREAM.MSG.GET.KV_amqp", {"last_by_subj": f"$KV.amqp.q.{queue}"},
                                 lambda r: _decoded(r["message"]))
    return found


def stored_on(cluster, subject):
    """The stream's messages on `subject`: sequence, time and soak id (from the body)."""
    stored, seq = [], 1
    while len(stored) < STORED_SHOWN:
        reply = _ask(cluster, "STREAM.MSG.GET.AMQP", {"seq": seq, "next_by_subj": subject}, lambda r: r)
        if not isinstance(reply, dict) or "message" not in reply:
            break
        message = reply["message"]
        body = base64.b64decode(message.get("data", ""))
        stored.append({"seq": message["seq"], "time": message.get("time"),
                       "id": body.split(b";", 1)[0].decode(errors="replace")})
        seq = message["seq"] + 1
    return stored


def _decoded(message):
    data = base64.b64decode(message.get("data", ""))
    try:
        return {"seq": message["seq"], "time": message.get("time"), "value": json.loads(data)}
    except ValueError:
        return {"seq": message["seq"], "time": message.get("time"), "raw": data.decode(errors="replace")}


def _ask(cluster, subject, body, pick):
    try:
        reply = cluster.api(subject, body)
    except (AssertionError, OSError, ConnectionError) as e:
        return f"no answer: {str(e)[:200]}"
    if "error" in reply:
        return reply["error"]
    try:
        return pick(reply)
    except (KeyError, TypeError) as e:
        return f"unexpected reply ({e}): {json.dumps(reply)[:300]}"
