"""When the bus itself was in trouble without a fault injected: the moments the nats-servers
logged a raft group without quorum, without a meta leader, or a leader stepping down. A close
outside every fault window at such a moment points at the bus (on this 2-core machine, usually a
node starved of CPU), one at any other moment at `cloud`; the report says which."""
import os
import re
import time

SIGNS = ("has NO quorum", "no metadata leader", "Detected another leader with higher term")
AROUND_S = 10.0  # a sign is logged a few seconds into the trouble and outlives it a little
_STAMP = re.compile(r"^\[\d+\] (\d{4}/\d\d/\d\d \d\d:\d\d:\d\d)\.(\d+) ")


def moments(log_dir, names):
    """Times (time.time()) of every sign in the nodes' logs."""
    found = []
    for name in names:
        path = os.path.join(log_dir, f"{name}.log")
        if not os.path.exists(path):
            continue
        with open(path, errors="replace") as f:
            for line in f:
                if any(sign in line for sign in SIGNS):
                    m = _STAMP.match(line)
                    if m:  # nats-server logs local time
                        found.append(time.mktime(time.strptime(m.group(1), "%Y/%m/%d %H:%M:%S"))
                                     + float("0." + m.group(2)))
    return sorted(found)


def near(t, signs):
    return any(abs(t - s) <= AROUND_S for s in signs)
