"""Topology churn: short-lived queues declared, bound, published to, read, unbound and deleted
(every third one left to its x-expires instead), and connections opened and closed."""
import pika
import pika.exceptions as px

import clients
import messages

EXCHANGE = "soak-x"
PER_CYCLE = 5
EXPIRES_MS = 4000


class QueueChurn:
    def __init__(self, name, replicas, preferred, ledger, stop, interval):
        self.name, self.replicas, self.preferred = name, replicas, preferred
        self.ledger, self.stop, self.interval = ledger, stop, interval
        self.cycle = 0
        self.seq = 0
        self.expiring = []  # (queue, time abandoned): must be gone once EXPIRES_MS passed
        self.queues = []    # every churn queue declared (the final drain reads those left)
        self.probes = []    # ids published after the unbind: each must come back unroutable

    def run(self):
        clients.sessions(self.name, self.replicas, self.preferred, self.ledger, self.stop, self._session)

    def _session(self, conn, _replica):
        ch = conn.channel()
        ch.confirm_delivery()
        while clients.pace(self.stop, self.interval):
            self.cycle += 1
            self.one_cycle(ch, f"soak-churn-{self.name}-{self.cycle}", expires=self.cycle % 3 == 0)

    def one_cycle(self, ch, queue, expires):
        key = f"churn.{queue}"
        self.queues.append(queue)
        ch.queue_declare(queue, durable=True, arguments={"x-expires": EXPIRES_MS} if expires else None)
        ch.queue_bind(queue, EXCHANGE, routing_key=key)
        sent = []
        try:
            for _ in range(PER_CYCLE):
                message_id = self._publish(ch, queue, key, "churn")
                if message_id:
                    sent.append(message_id)
            missing = self._take(ch, queue, set(sent))
        except clients.SESSION_ERRORS:
            if expires:  # left behind: it expires with what it holds, by design
                self.ledger.excuse(sent, f"in {queue}, which expires by x-expires when left")
            raise
        if missing:  # left for the final drain (or, expiring, to its x-expires)
            self.ledger.event(self.name, None, "churn-get-incomplete", None, f"{queue}: {sorted(missing)}")
            if expires:
                self.ledger.excuse(missing, f"in {queue}, which expires by x-expires when left")
            return
        ch.queue_unbind(queue, EXCHANGE, routing_key=key)
        self.probes.append(self._publish(ch, queue, key, "probe-after-unbind", probe=True))
        if expires:
            self.expiring.append((queue, clients.now()))
        else:
            ch.queue_delete(queue)

    def _publish(self, ch, queue, key, kind, probe=False):
        self.seq += 1
        message_id = f"{self.name}-{self.seq}"
        body = messages.body_of(message_id, 200)
        self.ledger.publishing(message_id, None if probe else queue, self.name, self.seq, kind)
        try:
            ch.basic_publish(EXCHANGE, key, body, messages.properties(message_id, self.name, self.seq, body),
                             mandatory=True)
        except px.UnroutableError:
            self.ledger.unroutable(message_id)
            if not probe:
                self.ledger.event(self.name, None, "returned-unroutable", None, message_id)
            return message_id if probe else None
        except px.NackError:
            self.ledger.nack(message_id)
            self.ledger.event(self.name, None, "nacked", None, message_id)
            return message_id if probe else None
        self.ledger.confirm(message_id)
        return message_id

    def _take(self, ch, queue, wanted, timeout=20):
        """basic.get until every confirmed message of the cycle came back (or the time is up:
        what stays is the final drain's, or lost, as the verdict will tell)."""
        got = set()
        deadline = clients.now() + timeout
        while not wanted <= got and clients.now() < deadline:
            method, props, body = ch.basic_get(queue)
            if method is None:
                self.stop.wait(0.1)
                continue
            message_id, intact, death = messages.identify(props, body)
            self.ledger.delivered(message_id, queue, method.redelivered, self.name, intact, death)
            got.add(message_id)
            ch.basic_ack(method.delivery_tag)
        return wanted - got


class ConnectionChurn:
    """Connections opened, a channel and a passive declare, closed, alternately on each replica."""

    def __init__(self, name, replicas, ledger, stop, queue, interval):
        self.name, self.replicas, self.ledger, self.stop = name, replicas, ledger, stop
        self.queue, self.interval = queue, interval
        self.count = 0

    def run(self):
        name = self.replicas.names()[0]
        while clients.pace(self.stop, self.interval):
            name = self.replicas.after(name)
            self.count += 1
            try:
                conn = pika.BlockingConnection(clients.params(self.replicas.get(name)))
                try:
                    conn.channel().queue_declare(self.queue, passive=True)
                finally:
                    clients.close_quietly(conn)
            except clients.SESSION_ERRORS as e:
                clients.record(self.ledger, self.name, name, e)
