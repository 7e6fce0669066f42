"""Publishers with confirms: each message persistent, mandatory, with its own id and the
publisher's sequence number; an id counts as confirmed only once basic.ack answered it."""
import pika.exceptions as px

import clients
import messages


class Publisher:
    """`route(seq)` gives (exchange, routing key, queue it should reach, kind, ttl in ms or
    None); `size(seq)` the body's size; one message each `interval` seconds or so."""

    def __init__(self, name, replicas, preferred, ledger, stop, route, size, interval):
        self.name, self.replicas, self.preferred = name, replicas, preferred
        self.ledger, self.stop = ledger, stop
        self.route, self.size, self.interval = route, size, interval
        self.seq = 0

    def run(self):
        clients.sessions(self.name, self.replicas, self.preferred, self.ledger, self.stop, self._session)

    def _session(self, conn, _replica):
        ch = conn.channel()
        ch.confirm_delivery()
        while clients.pace(self.stop, self.interval):
            self.publish_one(ch)

    def publish_one(self, ch):
        self.seq += 1
        exchange, key, queue, kind, ttl = self.route(self.seq)
        message_id = f"{self.name}-{self.seq}"
        body = messages.body_of(message_id, self.size(self.seq))
        props = messages.properties(message_id, self.name, self.seq, body,
                                    expiration_ms=ttl if kind == "message-ttl" else None)
        self.ledger.publishing(message_id, queue, self.name, self.seq, kind, ttl)
        try:
            ch.basic_publish(exchange, key, body, props, mandatory=True)
        except px.NackError:
            self.ledger.nack(message_id)
            self.ledger.event(self.name, None, "nacked", None, message_id)
            return False
        except px.UnroutableError:
            self.ledger.unroutable(message_id)
            self.ledger.event(self.name, None, "returned-unroutable", None, message_id)
            return False
        self.ledger.confirm(message_id)
        return True
