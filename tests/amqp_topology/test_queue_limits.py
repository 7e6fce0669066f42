"""How many queues there may be: CLOUD_AMQP_MAX_QUEUES bounds a vhost's queues
with RabbitMQ's own refusal; stream AMQP's max_consumers is set from it and converged at boot;
and a bus that refuses a queue's consumer for a limit (made at the queue's first read) is answered
406 naming the limit, the setting and the remedy, the queue and what it was sent kept. Runs on the pinned nats-server and, as its
.floor twin, on the floor.
"""
import unittest
import uuid

import pika
import pika.exceptions

import cloudtest
import pikatest
from natsraw import NatsRaw

ADAPTOR_CONSUMERS = 1000  # the adaptor's own room above CLOUD_AMQP_MAX_QUEUES


def stream_config(cloud):
    nats = NatsRaw(cloud.nats_port)
    try:
        return nats.api("STREAM.INFO.AMQP")
    finally:
        nats.close()


def exists(conn, queue):
    ch = conn.channel()
    try:
        ch.queue_declare(queue, passive=True)
    except pika.exceptions.ChannelClosedByBroker as e:
        if e.reply_code == 404:
            return False
        raise
    ch.close()
    return True


class QueueLimit(unittest.TestCase):
    def declare_and_use(self, conn, queue):
        """The queue is declared and holds what is published to it."""
        ch = conn.channel()
        ch.queue_declare(queue)
        ch.confirm_delivery()
        ch.basic_publish("", queue, queue.encode())
        self.assertEqual(ch.basic_get(queue, auto_ack=True)[2], queue.encode())
        ch.close()

    def test_the_vhost_limit_refuses_a_new_queue_as_rabbitmq_does(self):
        with cloudtest.Cloud(env={"CLOUD_AMQP_MAX_QUEUES": "5"}) as cloud:
            self.assertEqual(stream_config(cloud)["config"]["max_consumers"], 5 + ADAPTOR_CONSUMERS)
            conn = pikatest.connect(cloud)
            ch = conn.channel()
            prefix = "limited-" + uuid.uuid4().hex[:6]
            names = [f"{prefix}-{i}" for i in range(5)]
            for name in names:
                ch.queue_declare(name)
            extra = f"{prefix}-extra"
            text = pikatest.refused(self, lambda: conn.channel().queue_declare(extra), 406)
            self.assertEqual(text, f"PRECONDITION_FAILED - cannot declare queue '{extra}': "
                                   "queue limit in vhost '/' (5) is reached")
            self.assertFalse(exists(conn, extra))
            # At the limit an existing queue is still declared (it is not a new one), and a
            # deleted one makes room.
            ch = conn.channel()
            self.assertEqual(ch.queue_declare(names[0]).method.queue, names[0])
            ch.queue_delete(names[1])
            self.declare_and_use(conn, extra)
            conn.close()

    def test_a_consumer_limit_of_the_bus_is_named_at_the_first_read_and_the_queue_kept(self):
        # Stream AMQP allows 100 + 1000 consumers; another application's consumers of the stream
        # take what the queues have not.
        with cloudtest.Cloud(env={"CLOUD_AMQP_MAX_QUEUES": "100"}) as cloud:
            conn = pikatest.connect(cloud)
            nats = NatsRaw(cloud.nats_port)
            taken = 0
            while True:
                created = nats.api(f"CONSUMER.DURABLE.CREATE.AMQP.other{taken}", {
                    "stream_name": "AMQP", "config": {"durable_name": f"other{taken}", "ack_policy": "explicit",
                                                      "filter_subject": "amqp.other-app", "mem_storage": True}})
                if "error" in created:
                    self.assertEqual(created["error"]["err_code"], 10026, created)
                    break
                taken += 1
                self.assertLessEqual(taken, 100 + ADAPTOR_CONSUMERS)
            queue = "past-the-limit-" + uuid.uuid4().hex[:6]
            ch = conn.channel()
            ch.queue_declare(queue)  # no consumer until it is read
            ch.confirm_delivery()
            ch.basic_publish("", queue, queue.encode())
            text = pikatest.refused(self, lambda: conn.channel().basic_get(queue), 406)
            self.assertEqual(text, f"PRECONDITION_FAILED - create consumer for queue {queue}: the bus is at a "
                                   "consumer limit, stream AMQP's (1100: CLOUD_AMQP_MAX_QUEUES=100 + 1000) or the "
                                   "NATS account's; delete unused queues or raise the limit")

            # Room made on the bus is room for the queue's consumer (and for the adaptor's own).
            for i in range(10):
                self.assertNotIn("error", nats.api(f"CONSUMER.DELETE.AMQP.other{i}"))
            nats.close()
            self.assertTrue(exists(conn, queue))
            self.assertEqual(conn.channel().basic_get(queue, auto_ack=True)[2], queue.encode())
            conn.close()

    def test_an_existing_stream_gets_the_setting_at_boot(self):
        with cloudtest.NatsServer() as bus:
            # A stream made before max_consumers was set: none, as an earlier adaptor made it.
            nats = NatsRaw(bus.port)
            self.assertNotIn("error", nats.api("STREAM.CREATE.AMQP", {
                "name": "AMQP", "subjects": ["amqp.>"], "retention": "interest", "storage": "file"}))
            with cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": bus.url, "CLOUD_AMQP_MAX_QUEUES": "5"}):
                found = nats.api("STREAM.INFO.AMQP")["config"]["max_consumers"]
            self.assertEqual(found, 5 + ADAPTOR_CONSUMERS)
            with cloudtest.Cloud(env={"CLOUD_PUBSUB_URL": bus.url}):
                self.assertEqual(nats.api("STREAM.INFO.AMQP")["config"]["max_consumers"],
                                 1_000_000 + ADAPTOR_CONSUMERS)
            nats.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
