"""What the soak's clients did, as they saw it: every publish attempted and how it was answered,
every delivery, every settlement without requeue, and every close or refusal with its time.
The verdict is computed from this record alone. Thread-safe; times are time.time()."""
import threading
import time


class Ledger:
    def __init__(self):
        self._lock = threading.Lock()
        self.published = {}    # id -> {queue, publisher, seq, t, kind, ttl_ms}
        self.confirmed = {}    # id -> time of its basic.ack
        self.nacked = {}       # id -> time of its basic.nack
        self.returned = {}     # id -> time its mandatory publish came back unroutable
        self.deliveries = []   # {t, id, queue, redelivered, consumer, intact, death}
        self.settled_away = {}  # id -> (queue, time): rejected or nacked without requeue
        self.excused = {}      # id -> why its loss is by design
        self.events = []       # {t, who, replica, kind, code, text}: closes, refusals, failures
        self.intended = []     # {t, who, what}: closes the soak caused on purpose

    def publishing(self, message_id, queue, publisher, seq, kind, ttl_ms=None):
        with self._lock:
            self.published[message_id] = {"queue": queue, "publisher": publisher, "seq": seq,
                                          "t": time.time(), "kind": kind, "ttl_ms": ttl_ms}

    def confirm(self, message_id):
        with self._lock:
            self.confirmed[message_id] = time.time()

    def nack(self, message_id):
        with self._lock:
            self.nacked[message_id] = time.time()

    def unroutable(self, message_id):
        with self._lock:
            self.returned[message_id] = time.time()

    def delivered(self, message_id, queue, redelivered, consumer, intact=True, death=None, at=None):
        with self._lock:
            self.deliveries.append({"t": at or time.time(), "id": message_id, "queue": queue,
                                    "redelivered": bool(redelivered), "consumer": consumer,
                                    "intact": intact, "death": death})

    def settle_away(self, message_id, queue):
        with self._lock:
            self.settled_away[message_id] = (queue, time.time())

    def excuse(self, message_ids, why):
        with self._lock:
            for message_id in message_ids:
                self.excused[message_id] = why

    def event(self, who, replica, kind, code=None, text=""):
        with self._lock:
            self.events.append({"t": time.time(), "who": who, "replica": replica, "kind": kind,
                                "code": code, "text": str(text)[:300]})

    def intend(self, who, what):
        with self._lock:
            self.intended.append({"t": time.time(), "who": who, "what": what})

    def snapshot_counts(self):
        with self._lock:
            return {"published": len(self.published), "confirmed": len(self.confirmed),
                    "deliveries": len(self.deliveries), "events": len(self.events)}
