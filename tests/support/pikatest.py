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


def user_id_is_checked(test, conn, user, queue):
    """On an authenticated connection: a publish whose user_id is `user` is taken, one naming
    another user is 406, as RabbitMQ checks it."""
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare(queue, auto_delete=True)
    ch.basic_publish("", queue, b"mine", pika.BasicProperties(user_id=user))
    test.assertEqual(ch.basic_get(queue, auto_ack=True)[2], b"mine")
    refused(test, lambda: ch.basic_publish("", queue, b"forged", pika.BasicProperties(user_id="mallory")), 406,
            f"user_id property set to 'mallory' but authenticated user was '{user}'")


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
