"""Resident memory and open file descriptors of every `cloud` and nats-server process, sampled
over the run, and the criterion that they stay flat once warmed up."""
import os
import threading
import time


def read_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


def count_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class Sampler:
    def __init__(self, processes, stop, interval=5.0):
        self.processes, self.stop, self.interval = processes, stop, interval
        self.samples = []  # {t, role, pid, rss_kib, fds}

    def run(self):
        while not self.stop.is_set():
            self.sample_once()
            self.stop.wait(self.interval)

    def sample_once(self):
        now = time.time()
        for role, pid in self.processes().items():
            try:
                self.samples.append({"t": now, "role": role, "pid": pid, "rss_kib": read_rss_kib(pid),
                                     "fds": count_fds(pid)})
            except (OSError, ValueError):
                pass  # it died between the listing and the read


# Flat: over a process's life (first third = warm-up, ignored), the last third's maximum is at
# most the second third's maximum plus GROWTH of it plus a small absolute allowance (a few pages
# of allocator slack or a handful of sockets of passing clients are no leak).
RSS_GROWTH, RSS_SLACK_KIB = 0.20, 16 * 1024
FD_GROWTH, FD_SLACK = 0.10, 16
# Judged: a process that lived ten minutes. Under the soak's load a nats-server's heap grows for
# up to nine minutes before it levels off (at 200-230 MiB); judged sooner, warm-up reads as growth.
MIN_SAMPLES, MIN_LIFE_S = 9, 600
# Every run this long so far had processes that lived MIN_LIFE_S: judging none is no pass.
LONG_LOAD_S = 1800


def flatness(samples):
    """Per process (role and PID): the verdict on RSS and fds, or why it was not judged (too
    short a life: a restarted process is a new one)."""
    by_process = {}
    for s in samples:
        by_process.setdefault((s["role"], s["pid"]), []).append(s)
    results = []
    for (role, pid), rows in sorted(by_process.items(), key=lambda kv: kv[1][0]["t"]):
        life = rows[-1]["t"] - rows[0]["t"]
        entry = {"role": role, "pid": pid, "samples": len(rows), "life_s": round(life, 1),
                 "rss_kib_first": rows[0]["rss_kib"], "rss_kib_max": max(r["rss_kib"] for r in rows),
                 "fds_max": max(r["fds"] for r in rows)}
        if len(rows) < MIN_SAMPLES or life < MIN_LIFE_S:
            entry["judged"] = False
            results.append(entry)
            continue
        third = len(rows) // 3
        middle, last = rows[third:2 * third], rows[2 * third:]
        entry["judged"] = True
        for key, growth, slack in (("rss_kib", RSS_GROWTH, RSS_SLACK_KIB), ("fds", FD_GROWTH, FD_SLACK)):
            mid_max, last_max = max(r[key] for r in middle), max(r[key] for r in last)
            bound = mid_max * (1 + growth) + slack
            entry[key] = {"second_third_max": mid_max, "last_third_max": last_max, "bound": round(bound),
                          "flat": last_max <= bound}
        entry["flat"] = entry["rss_kib"]["flat"] and entry["fds"]["flat"]
        results.append(entry)
    return results
