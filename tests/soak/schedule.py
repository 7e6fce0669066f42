"""The fault schedule: which fault, on what, when and for how long, drawn from the seed alone, so
a run can be repeated. Faults start after a warm-up and stop before a quiet tail; the next fault
sometimes starts while one is on (overlap), but at most one nats-server node and at most one
`cloud` replica are ever impaired at a time: a majority of the bus and one replica always live,
which is what the guarantees are promised under."""
import random

NODE_FAULTS = ("node-kill", "partition", "pause", "disk-full")
CLOUD_FAULTS = ("cloud-kill",)
DURATION_S = {"node-kill": (5, 20), "partition": (10, 30), "pause": (4, 15), "disk-full": (15, 35),
              "cloud-kill": (2, 10)}


def fault_schedule(seed, minutes, nodes, replicas, kinds=NODE_FAULTS + CLOUD_FAULTS):
    rng = random.Random(seed)
    total = minutes * 60.0
    start = max(20.0, 0.1 * total)
    last_start = total - max(40.0, 0.2 * total)
    busy_until = {"node": 0.0, "cloud": 0.0}
    plan = []
    t = start
    while t < last_start:
        kind = rng.choice(kinds)
        scope = "cloud" if kind in CLOUD_FAULTS else "node"
        t = max(t, busy_until[scope] + 3.0)  # that scope's previous fault is over
        if t >= last_start:
            break
        low, high = DURATION_S[kind]
        duration = round(rng.uniform(low, high), 1)
        target = rng.choice(replicas if scope == "cloud" else nodes)
        plan.append({"kind": kind, "target": target, "at": round(t, 1), "duration": duration})
        busy_until[scope] = t + duration
        overlap = rng.random() < 0.3
        t += rng.uniform(2.0, duration) if overlap else duration + rng.uniform(10.0, 30.0)
    return plan
