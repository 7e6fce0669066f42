"""Just enough of the NATS client protocol (stdlib only) for a test to ask the bus itself: a
request/reply on the JetStream API, e.g. to create a conflicting stream before `cloud` boots
or to read a queue's consumer."""
import json
import socket


class NatsRaw:
    def __init__(self, port, host="127.0.0.1", timeout=10):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""
        self._line()  # INFO
        self.sock.sendall(b'CONNECT {"verbose":false,"headers":true,"no_responders":true}\r\n'
                          b"SUB _INBOX.cloudtest 1\r\nPING\r\n")
        while self._line() != b"PONG":
            pass

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("nats-server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _payload(self, n):
        while len(self.buf) < n + 2:
            self.buf += self.sock.recv(65536)
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def api(self, subject, body=None):
        """A JetStream API request: the decoded JSON reply (or {"status": "<headers>"})."""
        data = json.dumps(body).encode() if body is not None else b""
        self.sock.sendall(b"PUB $JS.API.%s _INBOX.cloudtest %d\r\n%s\r\n" % (subject.encode(), len(data), data))
        return self._answer()

    def publish(self, subject, body=b"", headers=None):
        """A publish awaiting its answer (a stream's PubAck, decoded, or {"status": ...}); `headers`
        a dict of NATS headers, e.g. a message as the adaptor stores it."""
        if isinstance(body, str):
            body = body.encode()
        if headers:
            head = b"NATS/1.0\r\n" + b"".join(b"%s: %s\r\n" % (k.encode(), v.encode()) for k, v in headers.items()) + b"\r\n"
            self.sock.sendall(b"HPUB %s _INBOX.cloudtest %d %d\r\n%s%s\r\n" % (
                subject.encode(), len(head), len(head) + len(body), head, body))
        else:
            self.sock.sendall(b"PUB %s _INBOX.cloudtest %d\r\n%s\r\n" % (subject.encode(), len(body), body))
        return self._answer()

    def _answer(self):
        while True:
            line = self._line()
            if line.startswith(b"MSG "):
                return json.loads(self._payload(int(line.split()[-1])) or b"{}")
            if line.startswith(b"HMSG "):
                return {"status": self._payload(int(line.split()[-1])).decode(errors="replace")}
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")

    def close(self):
        self.sock.close()
