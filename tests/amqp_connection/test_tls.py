"""The amqps listener: TLS 1.2 and later through Boost.Asio's OpenSSL support, on
CLOUD_AMQPS_PORT when CLOUD_AMQPS_CERT and CLOUD_AMQPS_KEY name PEM files; with CLOUD_AMQPS_CA,
client certificates are required and verified. A failed handshake, a plain-text client on the TLS
port and a TLS client on the plain port are each closed without harm to other connections.
python3-pika against the real `cloud`; the certificates are made by the test with `openssl`.
"""
import os
import shutil
import socket
import ssl
import tempfile
import unittest

import pika
import pika.exceptions

import cloudtest
import pikatest
from certs import make_certificates


def tls_context(certs, client=None, maximum=None):
    context = ssl.create_default_context(cafile=os.path.join(certs, "ca.pem"))
    if client:
        context.load_cert_chain(os.path.join(certs, f"{client}.pem"), os.path.join(certs, f"{client}.key"))
    if maximum:
        context.maximum_version = maximum
    return context


def connect(port, context=None, credentials=pika.ConnectionParameters.DEFAULT_CREDENTIALS):
    options = pika.SSLOptions(context, "127.0.0.1") if context else None
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=port, ssl_options=options, credentials=credentials, heartbeat=0, socket_timeout=10,
        blocked_connection_timeout=10, connection_attempts=1))


def round_trip(test, conn, queue):
    ch = conn.channel()
    ch.confirm_delivery()
    ch.queue_declare(queue, auto_delete=True)
    ch.basic_publish("", queue, b"over " + queue.encode())
    method, _, body = ch.basic_get(queue, auto_ack=True)
    test.assertEqual(body, b"over " + queue.encode())


class TlsCase(unittest.TestCase):
    ca = False  # with CLOUD_AMQPS_CA: client certificates required

    @classmethod
    def setUpClass(cls):
        cls.certs = tempfile.mkdtemp(prefix="cloudtest-certs-")
        make_certificates(cls.certs)
        cls.tls_port = cloudtest.free_port()
        env = {"CLOUD_AMQPS_PORT": str(cls.tls_port), "CLOUD_AMQPS_CERT": os.path.join(cls.certs, "server.pem"),
               "CLOUD_AMQPS_KEY": os.path.join(cls.certs, "server.key")}
        if cls.ca:
            env["CLOUD_AMQPS_CA"] = os.path.join(cls.certs, "ca.pem")
        cls.cloud = cloudtest.Cloud(env=env).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.cloud.__exit__(None, None, None)
        shutil.rmtree(cls.certs, ignore_errors=True)


class Tls(TlsCase):
    def test_a_client_works_over_tls_beside_plain_connections(self):
        secure = connect(self.tls_port, tls_context(self.certs))
        plain = connect(self.cloud.amqp_port)
        round_trip(self, secure, "tls-q")
        round_trip(self, plain, "plain-q")
        ch = secure.channel()
        ch.queue_declare("shared-q", auto_delete=False)
        confirmed = plain.channel()
        confirmed.confirm_delivery()
        confirmed.basic_publish("", "shared-q", b"from plain")
        self.assertEqual(ch.basic_get("shared-q", auto_ack=True)[2], b"from plain")
        ch.queue_delete("shared-q")
        secure.close()
        plain.close()
        self.assertIn("amqps listening on 127.0.0.1:%d" % self.tls_port, self.cloud.log)

    def test_tls_before_1_2_is_refused_and_others_are_unharmed(self):
        survivor = connect(self.tls_port, tls_context(self.certs))
        context = tls_context(self.certs, maximum=ssl.TLSVersion.TLSv1_1)
        context.minimum_version = ssl.TLSVersion.TLSv1
        context.set_ciphers("DEFAULT:@SECLEVEL=0")
        with self.assertRaises((pika.exceptions.AMQPConnectionError, ssl.SSLError)):
            connect(self.tls_port, context)
        self.assertTrue(cloudtest.wait_until(lambda: "TLS handshake failed (unsupported protocol)" in self.cloud.log, 10),
                        self.cloud.log[-2000:])
        round_trip(self, survivor, "after-old-tls")
        survivor.close()

    def test_a_plain_client_on_the_tls_port_is_closed(self):
        survivor = connect(self.tls_port, tls_context(self.certs))
        with socket.create_connection(("127.0.0.1", self.tls_port), timeout=10) as raw:
            raw.sendall(b"AMQP\x00\x00\x09\x01")
            self.assertEqual(raw.recv(64), b"")  # not a ClientHello: the handshake fails, the socket closes
        with self.assertRaises(pika.exceptions.AMQPConnectionError):
            connect(self.tls_port)
        round_trip(self, survivor, "after-plain-on-tls")
        self.assertTrue(cloudtest.wait_until(lambda: "TLS handshake failed" in self.cloud.log, 10))
        survivor.close()

    def test_a_tls_client_on_the_plain_port_is_answered_and_closed(self):
        survivor = connect(self.cloud.amqp_port)
        with socket.create_connection(("127.0.0.1", self.cloud.amqp_port), timeout=10) as raw:
            tls = tls_context(self.certs)
            with self.assertRaises((ssl.SSLError, ConnectionError, OSError)):
                with tls.wrap_socket(raw, server_hostname="127.0.0.1"):
                    pass
        round_trip(self, survivor, "after-tls-on-plain")
        survivor.close()


class ClientCertificates(TlsCase):
    ca = True

    def test_a_client_certificate_signed_by_the_ca_is_required(self):
        with_cert = connect(self.tls_port, tls_context(self.certs, client="client"))
        round_trip(self, with_cert, "with-cert")
        for context, why in ((tls_context(self.certs), "peer did not return a certificate"),
                             (tls_context(self.certs, client="stranger"), "certificate verify failed")):
            with self.assertRaises((pika.exceptions.AMQPConnectionError, ssl.SSLError)):
                round_trip(self, connect(self.tls_port, context), "never")
            self.assertTrue(cloudtest.wait_until(lambda: f"TLS handshake failed ({why})" in self.cloud.log, 10),
                            self.cloud.log[-2000:])
        round_trip(self, with_cert, "still-there")
        with_cert.close()
        self.assertIn("(client certificates required, CLOUD_AMQPS_CA)", self.cloud.log)

    def test_external_names_the_certificate_s_common_name_as_the_user(self):
        conn = connect(self.tls_port, tls_context(self.certs, client="client"), pika.credentials.ExternalCredentials())
        try:
            pikatest.user_id_is_checked(self, conn, "client", "external-q")
        finally:
            conn.close()
        # Without a certificate there is nobody for EXTERNAL to name: pika finds it not offered.
        with self.assertRaises(pika.exceptions.AMQPConnectionError):
            connect(self.cloud.amqp_port, None, pika.credentials.ExternalCredentials())


class ReachableWithCertificatesOnly(unittest.TestCase):
    """Secure by default: a reachable CLOUD_AMQP_HOST under CLOUD_AMQP_AUTH=none boots only beside
    CLOUD_AMQPS_CA, and then opens no plain listener."""

    def test_only_the_amqps_listener_opens(self):
        certs = tempfile.mkdtemp(prefix="cloudtest-certs-")
        try:
            make_certificates(certs)
            tls_port = cloudtest.free_port()
            env = {"CLOUD_AMQP_HOST": "0.0.0.0", "CLOUD_AMQPS_PORT": str(tls_port),
                   "CLOUD_AMQPS_CERT": os.path.join(certs, "server.pem"),
                   "CLOUD_AMQPS_KEY": os.path.join(certs, "server.key"), "CLOUD_AMQPS_CA": os.path.join(certs, "ca.pem")}
            with cloudtest.Cloud(env=env, wait=False) as cloud:
                self.assertTrue(cloudtest.wait_until(lambda: cloud.proc.poll() is not None or
                                                     cloudtest.Cloud._accepts(tls_port), cloudtest.BOOT_TIMEOUT), cloud.log)
                self.assertIn("no plain amqp listener", cloud.log)
                self.assertFalse(cloudtest.Cloud._accepts(cloud.amqp_port))
                conn = connect(tls_port, tls_context(certs, client="client"), pika.credentials.ExternalCredentials())
                round_trip(self, conn, "certified-q")
                conn.close()
        finally:
            shutil.rmtree(certs, ignore_errors=True)


class Configuration(unittest.TestCase):
    def boot_fails(self, env, *fragments):
        cloud = cloudtest.Cloud(env=env, wait=False)
        with cloud:
            self.assertNotEqual(cloud.wait_exit(), 0)
            for fragment in fragments:
                self.assertIn(fragment, cloud.log)

    def test_files_that_are_not_a_certificate_and_its_key_stop_boot_naming_them(self):
        certs = tempfile.mkdtemp(prefix="cloudtest-certs-")
        try:
            make_certificates(certs)
            cert, key = os.path.join(certs, "server.pem"), os.path.join(certs, "server.key")
            self.boot_fails({"CLOUD_AMQPS_CERT": cert}, "needs both CLOUD_AMQPS_CERT and CLOUD_AMQPS_KEY")
            self.boot_fails({"CLOUD_AMQPS_CERT": cert, "CLOUD_AMQPS_KEY": os.path.join(certs, "absent.key")},
                            "CLOUD_AMQPS_KEY='", "a readable PEM file")
            self.boot_fails({"CLOUD_AMQPS_CERT": cert, "CLOUD_AMQPS_KEY": os.path.join(certs, "client.key")},
                            "CLOUD_AMQPS_KEY='", "private key of CLOUD_AMQPS_CERT")
            self.boot_fails({"CLOUD_AMQPS_CERT": key, "CLOUD_AMQPS_KEY": key}, "CLOUD_AMQPS_CERT='",
                            "a PEM certificate chain")
        finally:
            shutil.rmtree(certs, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
