"""Authentication decided by the bus, and vhosts as tenants: with
CLOUD_AMQP_AUTH=bus the credentials of connection.start-ok sign in to the bus, whose users,
accounts and subject permissions then decide what the connection may do; every vhost is a NATS
account of its own. The test's own nats-server has three accounts: AMQP, vhost "/" (the
adaptor's user `svc`, `alice` with every permission, `bob` denied one exchange's subjects and one
queue's pulls), PROD, vhost "prod" (`svc-prod`, `pat`), and OTHER (`carol`, of no vhost).
Stock clients: pika (PLAIN), amqplib (AMQPLAIN and connection.update-secret) and rabbitmq-c's
amqp-tools.
"""
import json
import os
import subprocess
import tempfile
import time
import unittest

import pika
import pika.exceptions

import cloudtest
import pikatest

CONFIG = """
accounts {
  AMQP: {
    jetstream: enabled
    users: [
      {user: svc, password: svc-pw}
      {user: alice, password: alice-pw}
      {user: bob, password: bob-pw, permissions: {
        publish: {deny: ["amqp.secret.>", "$JS.API.CONSUMER.MSG.NEXT.AMQP.vault", "$KV.amqp.q.forbidden",
                         "$JS.API.CONSUMER.MSG.NEXT.AMQP_STREAM_svault.>"]}
      }}
      {user: dave, password: dave-pw, permissions: {
        publish: {allow: ["amqp.open.>", "amqp._.>", "amqp.*", "$JS.API.>", "$JS.ACK.AMQP.>", "$KV.amqp.>", "$SYS.REQ.USER.INFO"]}
      }}
      {user: erin, password: erin-pw, permissions: {
        publish: {allow: ["amqp.open.>", "amqp._.>", "amqp.*", "$JS.API.>", "$JS.ACK.AMQP.>", "$KV.amqp.>"]}
      }}
    ]
  }
  PROD: {
    jetstream: enabled
    users: [
      {user: svc-prod, password: svc-prod-pw}
      {user: pat, password: pat-pw}
    ]
  }
  OTHER: {
    jetstream: enabled
    users: [{user: carol, password: carol-pw}]
  }
}
"""

# A denial must be answered within a bounded time: the bus's request timeout (CLOUD_AMQP_BUS_TIMEOUT,
# 5 s) at the most, and a refused publish or pull at once.
DENIAL_BOUND = 15

NODE_MODULES = os.path.join(os.environ.get("CLOUD_SOURCE_DIR", ""), "tests", "node", "node_modules")


def connect(port, user, password, vhost="/"):
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=port, virtual_host=vhost, credentials=pika.PlainCredentials(user, password),
        heartbeat=0, socket_timeout=10, blocked_connection_timeout=10, connection_attempts=1))


def bus_env(nats, auth):
    return {"CLOUD_PUBSUB_URL": f"nats://svc:svc-pw@127.0.0.1:{nats.port}",
            "CLOUD_AMQP_VHOSTS": "prod=svc-prod:svc-prod-pw", "CLOUD_AMQP_AUTH": auth}


def two_tenants(test, port, root_user, prod_user, then=None):
    """Queue 'orders' of vhost '/' and of vhost 'prod' are two queues, each with its own message:
    `root_user` and `prod_user` are (user, password) of each; then(prod connection), if given."""
    root = connect(port, *root_user)
    prod = connect(port, *prod_user, "prod")
    try:
        same_name_two_tenants(test, root, prod)
        if then:
            then(prod)
    finally:
        root.close()
        prod.close()


def publish_open(conn, ch):
    ch.confirm_delivery()
    ch.basic_publish("open", "k", b"x")


def same_name_two_tenants(test, root, prod):
    for conn, body in ((root, b"root order"), (prod, b"prod order")):
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("orders", auto_delete=False)
        ch.basic_publish("", "orders", body)
    for conn, body in ((root, b"root order"), (prod, b"prod order")):
        ch = conn.channel()
        _, _, got = ch.basic_get("orders", auto_ack=True)
        test.assertEqual(got, body)
        test.assertEqual(ch.queue_declare("orders", passive=True).method.message_count, 0)
        ch.queue_delete("orders")


class AuthenticationByTheBus(cloudtest.CloudOnItsNats):
    NATS_CONFIG = CONFIG

    @classmethod
    def cloud_env(cls, nats):
        return bus_env(nats, "bus")

    def refused_login(self, user, password):
        with self.assertRaises(pika.exceptions.ProbableAuthenticationError) as raised:
            connect(self.cloud.amqp_port, user, password)
        self.assertIn("ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN", str(raised.exception))

    def channel_error(self, work, user=("bob", "bob-pw")):
        """Runs work(channel) and returns the channel.close it ends in, within DENIAL_BOUND."""
        conn = connect(self.cloud.amqp_port, *user)
        try:
            ch = conn.channel()
            started = time.monotonic()
            with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as raised:
                work(conn, ch)
            self.assertLess(time.monotonic() - started, DENIAL_BOUND)
            self.assertTrue(conn.is_open, "a denial closes the channel, not the connection")
            return raised.exception
        finally:
            conn.close()

    def test_right_password_round_trip_and_user_id(self):
        conn = connect(self.cloud.amqp_port, "alice", "alice-pw")
        try:
            pikatest.user_id_is_checked(self, conn, "alice", "alice-q")
        finally:
            conn.close()

    def test_wrong_password_and_unknown_user_are_refused(self):
        self.refused_login("alice", "wrong")
        self.refused_login("nobody", "alice-pw")
        self.assertIn("login of user 'alice' failed", "\n".join(self.cloud.lines))
        # Refusals hurt nobody else.
        connect(self.cloud.amqp_port, "alice", "alice-pw").close()

    def refused_vhost(self, user, password, vhost, text):
        # pika's word for a connection.close during connection.open
        with self.assertRaises(pika.exceptions.ProbableAccessDeniedError) as raised:
            connect(self.cloud.amqp_port, user, password, vhost)
        self.assertIn(f'(530) "{text}', str(raised.exception))

    def test_a_user_opens_its_own_account_s_vhost_only(self):
        self.refused_vhost("pat", "pat-pw", "/", "NOT_ALLOWED - access to vhost '/' refused for user 'pat'")
        self.refused_vhost("alice", "alice-pw", "prod", "NOT_ALLOWED - access to vhost 'prod' refused for user 'alice'")
        self.refused_vhost("carol", "carol-pw", "/", "NOT_ALLOWED - access to vhost '/' refused for user 'carol'")
        self.refused_vhost("alice", "alice-pw", "nope", "NOT_ALLOWED - vhost 'nope' not found")
        self.assertIn("the user's account has no stream AMQP", "\n".join(self.cloud.lines))

    def test_vhosts_are_tenants(self):
        def refusals_name_the_vhost(prod):
            with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as raised:
                prod.channel().queue_declare("orders", passive=True)
            self.assertIn("no queue 'orders' in vhost 'prod'", raised.exception.reply_text)
        two_tenants(self, self.cloud.amqp_port, ("alice", "alice-pw"), ("pat", "pat-pw"), refusals_name_the_vhost)

    def test_denied_publish_is_403_naming_the_subject(self):
        setup = connect(self.cloud.amqp_port, "alice", "alice-pw")
        try:
            setup.channel().exchange_declare("secret", "direct", auto_delete=False)
        finally:
            setup.close()

        def publish(conn, ch):
            ch.confirm_delivery()
            ch.basic_publish("secret", "k", b"x")
        closed = self.channel_error(publish)
        self.assertEqual(closed.reply_code, 403)
        self.assertIn("ACCESS_REFUSED", closed.reply_text)
        self.assertIn("user 'bob' publish to amqp.secret.k", closed.reply_text)

    def test_an_allow_list_decides_which_exchanges_a_user_publishes_to(self):
        # Messages are stored under their queues' subjects: the user's permissions on the exchange's
        # subject are read from the server ($SYS.REQ.USER.INFO) and applied as it applies them.
        setup = connect(self.cloud.amqp_port, "alice", "alice-pw")
        try:
            ch = setup.channel()
            for exchange in ("open", "secret"):
                ch.exchange_declare(exchange, "direct", auto_delete=False)
                ch.queue_declare(exchange + "-q", auto_delete=False)
                ch.queue_bind(exchange + "-q", exchange, "k")
        finally:
            setup.close()
        dave = connect(self.cloud.amqp_port, "dave", "dave-pw")
        try:
            ch = dave.channel()
            ch.confirm_delivery()
            ch.basic_publish("open", "k", b"allowed")  # confirmed, or pika raises
            _, _, body = ch.basic_get("open-q", auto_ack=True)
            self.assertEqual(body, b"allowed")
        finally:
            dave.close()

        def publish(conn, ch):
            ch.confirm_delivery()
            ch.basic_publish("secret", "k", b"x")
        closed = self.channel_error(publish, ("dave", "dave-pw"))
        self.assertEqual(closed.reply_code, 403)
        self.assertIn("user 'dave' publish to amqp.secret.k", closed.reply_text)
        # A user the server will not tell its permissions publishes nowhere, told what to grant.
        closed = self.channel_error(publish_open, ("erin", "erin-pw"))
        self.assertEqual(closed.reply_code, 403)
        self.assertIn("the bus did not say what user 'erin' may publish", closed.reply_text)
        self.assertIn("$SYS.REQ.USER.INFO", closed.reply_text)

    def test_a_denied_declaration_is_403_within_the_bus_timeout(self):
        # The bucket write is a request the server refuses without answering: it ends denied once
        # the request times out (CLOUD_AMQP_BUS_TIMEOUT, 5 s), never as a hang or a 541.
        closed = self.channel_error(lambda conn, ch: ch.queue_declare("forbidden"))
        self.assertEqual(closed.reply_code, 403)
        self.assertIn("user 'bob' publish to $KV.amqp.q.forbidden", closed.reply_text)

    def test_a_denied_stream_queue_read_is_403_naming_the_queue(self):
        setup = connect(self.cloud.amqp_port, "alice", "alice-pw")
        try:
            setup.channel().queue_declare("svault", durable=True, arguments={"x-queue-type": "stream"})
        finally:
            setup.close()

        def consume(conn, ch):
            ch.basic_qos(prefetch_count=10)
            ch.basic_consume("svault", lambda *args: None, arguments={"x-stream-offset": "first"})
            conn.call_later(DENIAL_BOUND, ch.stop_consuming)
            ch.start_consuming()
        closed = self.channel_error(consume)
        self.assertEqual(closed.reply_code, 403)
        self.assertIn("basic.consume of queue 'svault'", closed.reply_text)
        self.assertIn("$JS.API.CONSUMER.MSG.NEXT.AMQP_STREAM_svault.", closed.reply_text)
        check = connect(self.cloud.amqp_port, "alice", "alice-pw")
        try:
            check.channel().queue_delete("svault")
        finally:
            check.close()

    def test_denied_consume_and_get_are_403_naming_the_queue(self):
        setup = connect(self.cloud.amqp_port, "alice", "alice-pw")
        try:
            ch = setup.channel()
            ch.confirm_delivery()
            ch.queue_declare("vault", auto_delete=False)
            ch.basic_publish("", "vault", b"gold")
        finally:
            setup.close()

        def consume(conn, ch):
            ch.basic_consume("vault", lambda *args: None)
            conn.call_later(DENIAL_BOUND, ch.stop_consuming)  # a consume never refused ends the wait
            ch.start_consuming()  # raises the channel's closing by the broker
        closed = self.channel_error(consume)
        self.assertEqual(closed.reply_code, 403)
        self.assertIn("basic.consume of queue 'vault'", closed.reply_text)
        self.assertIn("$JS.API.CONSUMER.MSG.NEXT.AMQP.vault", closed.reply_text)

        closed = self.channel_error(lambda conn, ch: ch.basic_get("vault"))
        self.assertEqual(closed.reply_code, 403)
        self.assertIn("basic.get of queue 'vault'", closed.reply_text)
        # Nothing was taken: alice still gets the message.
        check = connect(self.cloud.amqp_port, "alice", "alice-pw")
        try:
            ch = check.channel()
            _, _, body = ch.basic_get("vault", auto_ack=True)
            self.assertEqual(body, b"gold")
            ch.queue_delete("vault")
        finally:
            check.close()

    def test_amqplain_and_update_secret_with_amqplib(self):
        script = r"""
const amqp = require('amqplib');
(async () => {
  const url = {protocol: 'amqp', hostname: '127.0.0.1', port: +process.env.PORT, heartbeat: 0};
  const out = {};
  const ok = await amqp.connect(url, {credentials: amqp.credentials.amqplain('alice', 'alice-pw')});
  const ch = await ok.createChannel();
  out.declared = (await ch.assertQueue('amqplain-q', {autoDelete: true})).queue;
  await ok.updateSecret(Buffer.from('alice-pw'), 'same secret');
  out.updated = true;
  const refused = new Promise(resolve => ok.on('error', e => resolve(e.message)));
  ok.updateSecret(Buffer.from('not-alice-pw'), 'wrong secret').catch(() => {});
  out.wrong_secret = await refused;
  try {
    await amqp.connect(url, {credentials: amqp.credentials.amqplain('alice', 'wrong')});
    out.wrong_password = 'accepted';
  } catch (e) { out.wrong_password = e.message; }
  console.log(JSON.stringify(out));
  process.exit(0);
})().catch(e => { console.log(JSON.stringify({failed: String(e)})); process.exit(1); });
"""
        env = dict(os.environ, PORT=str(self.cloud.amqp_port), NODE_PATH=NODE_MODULES)
        run = subprocess.run(["node", "-e", script], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        out = json.loads(run.stdout.strip().splitlines()[-1])
        self.assertEqual(out["declared"], "amqplain-q")
        self.assertTrue(out["updated"])
        self.assertIn("403", out["wrong_secret"])
        self.assertIn("the bus refused the new secret", out["wrong_secret"])
        self.assertIn("ACCESS_REFUSED", out["wrong_password"])

    def test_rabbitmq_c_signs_in(self):
        url = f"amqp://alice:alice-pw@127.0.0.1:{self.cloud.amqp_port}"
        ok = subprocess.run(["amqp-declare-queue", "--url", url, "-q", "tools-q", "-d"],
                            capture_output=True, text=True, timeout=30)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertEqual(ok.stdout.strip(), "tools-q")
        wrong = subprocess.run(["amqp-declare-queue", "--url", url.replace("alice-pw", "nope"), "-q", "tools-q"],
                               capture_output=True, text=True, timeout=30)
        self.assertNotEqual(wrong.returncode, 0)
        self.assertIn("ACCESS_REFUSED", wrong.stderr + wrong.stdout)
        subprocess.run(["amqp-delete-queue", "--url", url, "-q", "tools-q"], capture_output=True, timeout=30)


class EmbeddedBusWithItsOwnUsers(unittest.TestCase):
    """CLOUD_PUBSUB_CONFIG: the nats-server pubsub launches takes the users and accounts, and the
    adaptor is CLOUD_PUBSUB_USER; no password reaches the log."""

    def test_users_of_the_embedded_bus_sign_in(self):
        with tempfile.TemporaryDirectory() as tmp:
            config = os.path.join(tmp, "users.conf")
            with open(config, "w", encoding="utf-8") as f:
                f.write(CONFIG)
            env = {"CLOUD_PUBSUB_CONFIG": config, "CLOUD_PUBSUB_USER": "svc", "CLOUD_PUBSUB_PASSWORD": "svc-pw",
                   "CLOUD_AMQP_VHOSTS": "prod=svc-prod:svc-prod-pw", "CLOUD_AMQP_AUTH": "bus"}
            with cloudtest.Cloud(env=env) as cloud:
                two_tenants(self, cloud.amqp_port, ("alice", "alice-pw"), ("pat", "pat-pw"))
                with self.assertRaises(pika.exceptions.ProbableAuthenticationError):
                    connect(cloud.amqp_port, "alice", "svc-pw")
                log = "\n".join(cloud.lines)
                self.assertNotIn("svc-pw", log)
                self.assertNotIn("svc-prod-pw", log)


class VhostsWithoutAuthentication(unittest.TestCase):
    def test_the_same_name_in_two_vhosts_names_two_queues(self):
        with cloudtest.NatsServer(config=CONFIG) as nats, cloudtest.Cloud(env=bus_env(nats, "none")) as cloud:
            two_tenants(self, cloud.amqp_port, ("guest", "guest"), ("guest", "guest"))


class SecureByDefault(unittest.TestCase):
    def test_a_reachable_listener_without_authentication_does_not_boot(self):
        with cloudtest.Cloud(env={"CLOUD_AMQP_HOST": "0.0.0.0"}, wait=False) as cloud:
            self.assertNotEqual(cloud.wait_exit(), 0)
            log = "\n".join(cloud.lines)
            self.assertIn("CLOUD_AMQP_HOST='0.0.0.0'", log)
            self.assertIn("CLOUD_AMQP_AUTH='none'", log)


if __name__ == "__main__":
    unittest.main()
