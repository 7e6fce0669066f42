"""Answers RabbitMQ clients rely on where the order of frames on the wire is the point:
a raw socket speaking pika's frame codec, against a real `cloud`.

- connection.close with frames pipelined behind it: close-ok arrives and the connection ends
  with an orderly EOF, never a reset (amqplib writes its pending publishes after its close).
- Crossing channel.close: the client's own close and the server's 406 cross; both are answered
  with close-ok and the connection lives on.
- connection.update-secret is answered update-secret-ok.
- A connection exception ends the connection's consumers at once: while the server waits for
  close-ok, a no-ack consumer on another channel takes nothing more off its queue.
"""
import socket
import struct
import time
import unittest
import uuid

import pika
import pika.frame
import pika.spec

import cloudtest

CLOUD = None


def setUpModule():
    global CLOUD
    CLOUD = unittest.enterModuleContext(cloudtest.Cloud())


class Raw:
    """One AMQP connection over a plain socket; frames are read in order."""

    def __init__(self):
        self.sock = socket.create_connection(("127.0.0.1", CLOUD.amqp_port), timeout=10)
        self.buffered = b""
        self.sock.sendall(b"AMQP\x00\x00\x09\x01")
        self.expect(pika.spec.Connection.Start)
        self.send(0, pika.spec.Connection.StartOk(client_properties={}, mechanism="PLAIN",
                                                  response="\0guest\0guest", locale="en_US"))
        tune = self.expect(pika.spec.Connection.Tune)
        self.send(0, pika.spec.Connection.TuneOk(channel_max=tune.channel_max, frame_max=tune.frame_max,
                                                 heartbeat=0))
        self.send(0, pika.spec.Connection.Open(virtual_host="/"))
        self.expect(pika.spec.Connection.OpenOk)

    def close(self):
        self.sock.close()

    @staticmethod
    def method(channel, method):
        return pika.frame.Method(channel, method).marshal()

    def send(self, channel, method):
        self.sock.sendall(self.method(channel, method))

    def frame(self):
        """The next frame, or None at an orderly EOF (a reset raises)."""
        while True:
            used, frame = pika.frame.decode_frame(self.buffered)
            if frame is not None:
                self.buffered = self.buffered[used:]
                return frame
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffered += chunk

    def expect(self, cls, channel=None):
        while True:
            frame = self.frame()
            if frame is None:
                raise AssertionError(f"the connection ended before {cls.NAME}")
            if isinstance(frame, pika.frame.Method) and isinstance(frame.method, cls):
                if channel is None or frame.channel_number == channel:
                    return frame.method

    # connection.update-secret (10, 70) and its -ok (10, 71) are RabbitMQ's extension, which
    # pika's codec does not know: written and read as octets.
    def update_secret(self, secret, reason):
        payload = struct.pack(">HHI", 10, 70, len(secret)) + secret + struct.pack(">B", len(reason)) + reason
        self.sock.sendall(struct.pack(">BHI", 1, 0, len(payload)) + payload + b"\xce")

    UPDATE_SECRET_OK = struct.pack(">BHIHH", 1, 0, 4, 10, 71) + b"\xce"

    def raw_octets(self, n):
        while len(self.buffered) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError("the connection ended")
            self.buffered += chunk
        out, self.buffered = self.buffered[:n], self.buffered[n:]
        return out

    def publish(self, channel, queue, body):
        return (self.method(channel, pika.spec.Basic.Publish(exchange="", routing_key=queue))
                + pika.frame.Header(channel, len(body), pika.spec.BasicProperties()).marshal()
                + pika.frame.Body(channel, body).marshal())


class ConnectionClose(unittest.TestCase):
    def test_a_close_with_publishes_behind_it_gets_close_ok_and_an_orderly_end(self):
        for round_ in range(10):
            raw = Raw()
            self.addCleanup(raw.close)
            q = f"close-{uuid.uuid4().hex[:8]}"
            raw.send(1, pika.spec.Channel.Open())
            raw.expect(pika.spec.Channel.OpenOk)
            raw.send(1, pika.spec.Queue.Declare(queue=q))
            raw.expect(pika.spec.Queue.DeclareOk)
            # The close, then ten publishes, in one write (as amqplib flushes its buffer).
            behind = b"".join(raw.publish(1, q, f"late-{i}".encode()) for i in range(10))
            raw.sock.sendall(raw.method(0, pika.spec.Connection.Close(reply_code=200, reply_text="bye",
                                                                      class_id=0, method_id=0)) + behind)
            # More arrives while close-ok is on its way, unread: a server that closed its socket
            # on it would answer with a reset, and the reset would destroy the close-ok here.
            time.sleep(0.1)
            raw.sock.sendall(behind)
            time.sleep(0.1)
            raw.expect(pika.spec.Connection.CloseOk)
            self.assertIsNone(raw.frame(), f"round {round_}: a frame after close-ok")
            raw.close()


class ConnectionException(unittest.TestCase):
    def test_consumers_stop_while_close_ok_is_awaited(self):
        q = f"noack-{uuid.uuid4().hex[:8]}"
        raw = Raw()
        self.addCleanup(raw.close)
        raw.send(1, pika.spec.Channel.Open())
        raw.expect(pika.spec.Channel.OpenOk)
        raw.send(1, pika.spec.Queue.Declare(queue=q))
        raw.expect(pika.spec.Queue.DeclareOk)
        raw.send(1, pika.spec.Basic.Consume(queue=q, no_ack=True))
        raw.expect(pika.spec.Basic.ConsumeOk)
        # A method on a channel never opened is a connection exception (504 CHANNEL_ERROR).
        raw.send(9, pika.spec.Queue.Declare(queue=q, passive=True))
        close = raw.expect(pika.spec.Connection.Close)
        self.assertEqual(close.reply_code, 504, close.reply_text)
        # Published after the close, never answered with close-ok: the frames a no-ack consumer
        # would be sent cannot be (only close-ok may follow a close), so it must not take them.
        with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", CLOUD.amqp_port)) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            for i in range(20):
                ch.basic_publish("", q, f"after-close-{i}".encode())
            # The server gives up on close-ok after its close timeout and ends the connection.
            while raw.frame() is not None:
                pass
            bodies = []
            while (got := ch.basic_get(q, auto_ack=True))[0] is not None:
                bodies.append(got[2].decode())
            self.assertEqual(bodies, [f"after-close-{i}" for i in range(20)])
            ch.queue_delete(q)


class CrossingChannelClose(unittest.TestCase):
    def test_both_closes_are_answered_and_the_connection_lives_on(self):
        raw = Raw()
        self.addCleanup(raw.close)
        for round_ in range(5):
            raw.send(2, pika.spec.Channel.Open())
            raw.expect(pika.spec.Channel.OpenOk, 2)
            # An ack of a tag never delivered (the server closes the channel with 406) and the
            # client's own close, in one write: the two closes cross.
            raw.sock.sendall(raw.method(2, pika.spec.Basic.Ack(delivery_tag=99))
                             + raw.method(2, pika.spec.Channel.Close(reply_code=200, reply_text="done",
                                                                     class_id=0, method_id=0)))
            got = []
            while len(got) < 2:
                frame = raw.frame()
                self.assertIsNotNone(frame, f"round {round_}: the connection ended")
                if isinstance(frame, pika.frame.Method):
                    got.append(frame.method)
            closes = [m for m in got if isinstance(m, pika.spec.Channel.Close)]
            self.assertEqual([m.reply_code for m in closes], [406])
            self.assertTrue(any(isinstance(m, pika.spec.Channel.CloseOk) for m in got), got)
            raw.send(2, pika.spec.Channel.CloseOk())  # the client's answer to the server's close
            raw.update_secret(b"still here", b"probe")
            self.assertEqual(raw.raw_octets(len(Raw.UPDATE_SECRET_OK)), Raw.UPDATE_SECRET_OK)


if __name__ == "__main__":
    unittest.main(verbosity=2)
