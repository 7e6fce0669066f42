"""What the pika-based integration tests share: a blocking connection to a `cloud`, the check of a
channel exception, and a test case with a fresh confirmed channel per test."""
import pika
import pika.exceptions


def connect(cloud):
    return pika.BlockingConnection(
        pika.ConnectionParameters(host="127.0.0.1", port=cloud.amqp_port, heartbeat=0,
                                  blocked_connection_timeout=30, socket_timeout=30))


def refused(test, fn, code, *fragments):
    """Runs fn, which must end in a channel exception with `code` whose text holds every
    fragment; returns the text."""
    with test.assertRaises(pika.exceptions.ChannelClosedByBroker) as caught:
        fn()
    test.assertEqual(caught.exception.reply_code, code, caught.exception.reply_text)
    for fragment in fragments:
        test.assertIn(fragment, caught.exception.reply_text)
    return caught.exception.reply_text


class ConfirmedChannel:
    """A mixin for a test case with `self.cloud`: each test gets `self.conn` and `self.ch`, a
    channel in confirm mode, closed after it."""

    def setUp(self):
        self.conn = connect(self.cloud)
        self.ch = self.conn.channel()
        self.ch.confirm_delivery()

    def tearDown(self):
        if self.conn.is_open:
            self.conn.close()
