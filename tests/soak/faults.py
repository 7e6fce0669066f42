"""Carries out the fault schedule against the environment, each fault in a thread of its own at
its planned time (later, when the previous fault of its scope is not over yet: one node and one
replica impaired at most), and records each fault's window: from the fault until the part is
back (restarted and ready, reachable, resumed, its disk freed)."""
import signal
import threading
import time


class Injector:
    def __init__(self, env, plan, t0, stop):
        self.env, self.plan, self.t0, self.stop = env, plan, t0, stop
        self.windows = []   # {kind, target, planned_at, start, end, notes}
        self._lock = threading.Lock()
        self._scope_free = {"node": threading.Lock(), "cloud": threading.Lock()}
        self._threads = []

    def start(self):
        for fault in self.plan:
            thread = threading.Thread(target=self._run, args=(fault,), daemon=True, name=f"fault-{fault['kind']}")
            thread.start()
            self._threads.append(thread)

    def join(self, timeout):
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return all(not t.is_alive() for t in self._threads)

    def active(self):
        """Faults on now (their windows so far)."""
        with self._lock:
            return [w for w in self.windows if w["end"] is None]

    def _run(self, fault):
        if self.stop.wait(max(0.0, self.t0 + fault["at"] - time.time())):
            return
        scope = "cloud" if fault["kind"] == "cloud-kill" else "node"
        with self._scope_free[scope]:
            if self.stop.is_set():
                return
            window = {"kind": fault["kind"], "target": fault["target"], "planned_at": fault["at"],
                      "duration": fault["duration"], "start": time.time(), "end": None, "notes": []}
            with self._lock:
                self.windows.append(window)
            try:
                getattr(self, "_" + fault["kind"].replace("-", "_"))(fault["target"], fault["duration"], window["notes"])
            except Exception as e:  # noqa: BLE001 - a fault that could not be carried out is reported
                window["notes"].append(f"fault failed: {e!r}"[:2000])
            window["end"] = time.time()

    # -- the faults ----------------------------------------------------------------------------

    def _node_kill(self, name, duration, notes):
        self.env.cluster.kill(name)
        time.sleep(duration)
        self.env.restart_node(name, notes)

    def _partition(self, name, duration, notes):
        node = self.env.cluster.node(name)
        self.env.firewall.isolate(node["host"], node["group"])
        notes.append(f"{name} ({node['host']}, group {node['group']}) cut off")
        time.sleep(duration)
        self.env.firewall.heal()
        self.env.wait_node_back(name, notes)

    def _pause(self, name, duration, notes):
        self.env.cluster.pause(name)
        time.sleep(duration)
        self.env.cluster.resume(name)
        self.env.wait_node_back(name, notes)

    def _disk_full(self, name, duration, notes):
        disk = self.env.disks[name]
        disabled_before = self.env.jetstream_disabled_count(name)
        taken = disk.fill()
        notes.append(f"{name}'s store filled ({taken // (1024 * 1024)} MiB taken)")
        time.sleep(duration)
        disk.free()
        if self.env.jetstream_disabled_count(name) > disabled_before:
            # nats-server turns JetStream off on a node whose disk filled up and leaves it off once
            # space is back: an operator restarts it.
            notes.append(f"{name} disabled JetStream on the full disk and kept it off once freed: restarted")
            self.env.cluster.kill(name)
            self.env.restart_node(name, notes)
        else:
            self.env.wait_node_back(name, notes)

    def _cloud_kill(self, name, duration, notes):
        cloud = self.env.clouds[name]
        self.env.save_cloud_log(name)
        try:
            code = cloud.restart(signal.SIGKILL, down_for=duration)
            notes.append(f"cloud {name} killed (exit {code}) and started again")
        except AssertionError as e:
            notes.append(f"cloud {name} did not come back at once: {str(e)[:300]}")
            self.env.start_cloud_until_up(name, notes)

