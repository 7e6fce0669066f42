"""The checks, computed from the ledger, the fault windows and the process samples. Each check is
{name, ok, summary, count, items}: `items` names the message ids, queues and events involved
(the first ITEMS_SHOWN of `count`)."""
import time

import bus_trouble
import sampler as sampling

ITEMS_SHOWN = 50
EXPIRED_QUEUE, DEAD_QUEUE = "soak-expired", "soak-dead"
DEAD_LETTER_QUEUES = (EXPIRED_QUEUE, DEAD_QUEUE)
TTL_KINDS = ("queue-ttl", "message-ttl")


def check(name, items, summary):
    return {"name": name, "ok": not items, "summary": summary, "count": len(items), "items": items[:ITEMS_SHOWN]}


class Windows:
    """Fault windows widened by `grace` seconds after each end (recovery: elections, a replica's
    reconnect, deliveries a dead holder kept coming back)."""

    def __init__(self, windows, grace):
        now = time.time()
        self.spans = [(w["start"], (w["end"] or now) + grace) for w in windows]

    def covers(self, t):
        return any(start <= t <= end for start, end in self.spans)


def undelivered(ledger):
    """Every confirmed message no reader received and none excused, by its confirm's time."""
    seen = {d["id"] for d in ledger.deliveries}
    return [{"id": i, "queue": ledger.published[i]["queue"], "kind": ledger.published[i]["kind"],
             "confirmed_at": t}
            for i, t in sorted(ledger.confirmed.items(), key=lambda kv: kv[1])
            if i not in seen and i not in ledger.excused and ledger.published[i]["kind"] != "probe-after-unbind"]


def confirmed_delivered(ledger):
    missing = undelivered(ledger)
    return check("every confirmed message delivered at least once", missing,
                 f"{len(ledger.confirmed)} confirmed, {len(ledger.excused)} excused by design "
                 "(in a churn queue left to expire)")


def no_phantoms(ledger):
    items = [{"id": d["id"], "queue": d["queue"], "consumer": d["consumer"], "t": d["t"]}
             for d in ledger.deliveries if d["id"] not in ledger.published]
    return check("nothing delivered that was not published", items, f"{len(ledger.deliveries)} deliveries")


def duplicates_redelivered(ledger, windows):
    """A message delivered again from the same queue carries redelivered; a dead-letter queue may
    hold a second copy (dead-lettered again after a crash between copy and removal: documented)
    but only inside a fault window."""
    first_seen, items, in_windows = {}, [], []
    for d in sorted(ledger.deliveries, key=lambda d: d["t"]):
        key = (d["id"], d["queue"])
        if key not in first_seen:
            first_seen[key] = d
            continue
        if d["redelivered"]:
            continue
        item = {"id": d["id"], "queue": d["queue"], "consumer": d["consumer"], "t": d["t"],
                "first_consumer": first_seen[key]["consumer"], "first_t": first_seen[key]["t"]}
        # Inside a fault window: a consumer's new leader on the bus may not have the delivered
        # state its old one had not replicated yet, and hands a message out again as new.
        (in_windows if windows.covers(d["t"]) else items).append(item)
    result = check("duplicates only with redelivered set (outside fault windows)", items,
                   f"{sum(1 for d in ledger.deliveries if d['redelivered'])} redeliveries; "
                   f"{len(in_windows)} duplicates without it inside fault windows (listed, not failed)")
    result["inside_fault_windows"] = in_windows[:ITEMS_SHOWN]
    return result


def order_kept(ledger, order_queues):
    """One publisher, one consumer, no requeue: first deliveries in publisher sequence order."""
    items = []
    for queue in order_queues:
        last = None
        for d in sorted((d for d in ledger.deliveries if d["queue"] == queue and not d["redelivered"]),
                        key=lambda d: d["t"]):
            seq = ledger.published.get(d["id"], {}).get("seq")
            if seq is None:
                continue
            if last is not None and seq <= last[0]:
                items.append({"queue": queue, "id": d["id"], "seq": seq, "after_id": last[1], "after_seq": last[0],
                              "t": d["t"]})
            if last is None or seq > last[0]:
                last = (seq, d["id"])
    return check("per-queue order kept (one publisher, one consumer, no requeue)", items,
                 f"queues {', '.join(order_queues)}")


def bodies_intact(ledger):
    items = [{"id": d["id"], "queue": d["queue"], "consumer": d["consumer"]} for d in ledger.deliveries
             if not d["intact"]]
    return check("every body arrived as sent (checksum)", items, "")


def dead_lettered(ledger):
    """A rejected message reaches the dead-letter queue, or (the reject lost with its connection)
    comes back to its own queue."""
    dead = {d["id"] for d in ledger.deliveries if d["queue"] == DEAD_QUEUE and d["death"] == "rejected"}
    by_id = {}
    for d in ledger.deliveries:
        by_id.setdefault(d["id"], []).append(d)
    items = []
    for message_id, (queue, t) in ledger.settled_away.items():
        if message_id in dead:
            continue
        again = any(d["queue"] == queue and d["t"] > t for d in by_id.get(message_id, []))
        if not again:
            items.append({"id": message_id, "queue": queue, "rejected_at": t})
    return check("every rejected message dead-lettered", items, f"{len(ledger.settled_away)} rejected, {len(dead)} dead-lettered")


def expired_dead_lettered(ledger):
    expired = {d["id"] for d in ledger.deliveries if d["queue"] == EXPIRED_QUEUE and d["death"] == "expired"}
    wrong = [{"id": d["id"], "death": d["death"]} for d in ledger.deliveries
             if d["queue"] == EXPIRED_QUEUE and d["death"] != "expired"]
    missing = [{"id": i, "queue": ledger.published[i]["queue"], "kind": ledger.published[i]["kind"]}
               for i in ledger.confirmed if ledger.published[i]["kind"] in TTL_KINDS and i not in expired]
    return check("every confirmed TTL message expired into the dead-letter queue", missing + wrong,
                 f"{len(expired)} expired and dead-lettered")


def unbind_honoured(ledger, probes):
    items = [{"id": i} for i in probes if i and i in ledger.confirmed and i not in ledger.returned]
    return check("a publish after queue.unbind is returned unroutable", items, f"{len(probes)} probes")


def final_state(problems):
    return check("the queues' final state (drained, TTL queues empty, expiring queues gone)", problems, "")


def resources_flat(flatness, load_seconds):
    items = [e for e in flatness if e.get("judged") and not e.get("flat")]
    judged = sum(1 for e in flatness if e.get("judged"))
    detail = f"{judged} of {len(flatness)} processes lived long enough to be judged"
    if judged == 0 and load_seconds >= sampling.LONG_LOAD_S:  # nothing measured is no pass
        items = [{"problem": "no process lived long enough to be judged"}]
    elif judged == 0:
        detail = f"no process of this {load_seconds:.0f} s load lived the {sampling.MIN_LIFE_S} s a judgement needs"
    return check("RSS and open fds flat after warm-up", items, detail)


def closes_inside_windows(ledger, windows, bus_signs):
    """`bus_signs`: when the nats-servers logged trouble of their own (bus_trouble.py); each
    event outside the windows says whether it fell near one."""
    items = [dict(e, bus_trouble_logged=bus_trouble.near(e["t"], bus_signs))
             for e in ledger.events if not windows.covers(e["t"])]
    troubled = sum(1 for e in items if e["bus_trouble_logged"])
    return check("no close, refusal or failure outside a fault window", items,
                 f"{len(ledger.events)} events, {len(ledger.events) - len(items)} inside fault windows; "
                 f"of those outside, {troubled} within {bus_trouble.AROUND_S:.0f} s of a raft group without "
                 "quorum or leader that the nats-servers logged with no fault injected")


def faults_carried_out(fault_windows):
    items = [w for w in fault_windows if any(n.startswith("fault failed") or "not ready" in n or "stayed down" in n
                                             for n in w["notes"])]
    return check("every fault carried out and recovered from", items, f"{len(fault_windows)} faults")
