"""What the two pika programs (BlockingConnection and SelectConnection) share."""
import pika

from _interop import expect_equal, headers_of


def properties(i):
    """The properties published message i carries: every field must round-trip."""
    return pika.BasicProperties(content_type="application/json", delivery_mode=2, message_id=f"m{i}",
                                correlation_id=f"c{i}", headers=headers_of(i))


def expect_round_trip(seen, sent):
    """Deliveries [(method, props, body)] carry the bodies sent, in order, and properties(i)."""
    expect_equal([b for _, _, b in seen], sent, "bodies in order")
    for i, (_, props, _) in enumerate(seen):
        expect_equal((props.content_type, props.delivery_mode, props.message_id, props.correlation_id,
                      props.headers), ("application/json", 2, f"m{i}", f"c{i}", headers_of(i)),
                     f"properties of message {i}")
