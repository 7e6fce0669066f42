"""The soak's messages: a unique id and the publisher's sequence number in headers, a body whose
checksum travels with it (so a consumer can tell a truncated or mixed-up body)."""
import hashlib

import pika

ID, SEQ, PUBLISHER, SUM = "soak-id", "soak-seq", "soak-publisher", "soak-sum"
MiB = 1024 * 1024


def body_of(message_id, size):
    """`size` bytes that differ from one message to the next (the id repeated)."""
    unit = (message_id + ";").encode()
    return (unit * (size // len(unit) + 1))[:size]


def properties(message_id, publisher, seq, body, expiration_ms=None):
    return pika.BasicProperties(
        delivery_mode=2,
        headers={ID: message_id, SEQ: seq, PUBLISHER: publisher, SUM: hashlib.sha1(body).hexdigest()},
        expiration=str(expiration_ms) if expiration_ms is not None else None)


def identify(props, body):
    """(id, intact, death reason or None) of a delivery; id None for a message not the soak's."""
    headers = props.headers or {}
    message_id = headers.get(ID)
    if isinstance(message_id, bytes):
        message_id = message_id.decode()
    intact = headers.get(SUM) in (hashlib.sha1(body).hexdigest(), hashlib.sha1(body).hexdigest().encode())
    deaths = headers.get("x-death") or []
    reason = deaths[0].get("reason") if deaths else None
    if isinstance(reason, bytes):
        reason = reason.decode()
    return message_id, intact, reason
