#!/usr/bin/env python3
"""Seeds the wire fuzzer with what real clients say: runs interop client programs
(tests/interop, their own idiom, unchanged) against a real `cloud` through a recording TCP proxy,
splits both directions of every connection into AMQP frames, and writes distinct frames into
corpus/ as `<client>.<client|server>.<frame kind>.<n>`, plus each client's opening as one
stream (`<client>.client.opening`). A developer tool, not a test: rerun it when a client or the
server changes, and commit what changed in corpus/.

Needs the interop matrix's environment (tests/interop/README.md): CLOUD_BIN, CLOUD_PLUGIN_DIR,
CLOUD_MANIFEST, NATS_SERVER, ... e.g. pointing at a release build.
    capture_seeds.py [--client NAME ...]   (default: every client of the matrix)
"""
import argparse
import hashlib
import os
import pathlib
import re
import socket
import struct
import sys
import tempfile
import threading

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[3]
sys.path.insert(0, str(ROOT / "tests" / "interop"))
import matrix  # noqa: E402  (puts tests/support on the path: cloudtest)

CORPUS = HERE / "corpus"
PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_END = 0xCE
KINDS = {2: "header", 3: "body", 8: "heartbeat"}
# How many distinct frames of one kind are kept: one per client of what it sends (clients differ
# in properties, tables and flags), and a couple from the server in all (one codec answers every
# client). The corpus stays a few hundred small files.
PER_CLIENT_KIND = 1
PER_SERVER_KIND = 2
MAX_FRAME = 2048       # larger bodies teach the decoders nothing a small one does not
OPENING_FRAMES = 8     # the client's first frames, as one stream: handshake to first methods


def method_names():
    """{(class id, method id): "basic.publish"} from the codec's own table."""
    table = (ROOT / "plugins/amqp/wire/include/amqp/wire/methods.def").read_text()
    names = {}
    for cls, cid, meth, mid in re.findall(r"AMQP_METHOD\((\w+), (\d+), (\w+), (\d+),", table):
        names[(int(cid), int(mid))] = f"{cls}.{meth.rstrip('_')}"
    return names


def split_frames(stream):
    """The complete frames of one direction of a connection, in order (the protocol header and a
    cut-off last frame left out)."""
    at = len(PROTOCOL_HEADER) if stream.startswith(PROTOCOL_HEADER) else 0
    while at + 7 <= len(stream):
        _, _, size = struct.unpack_from(">BHI", stream, at)
        end = at + 7 + size + 1
        if end > len(stream) or stream[end - 1] != FRAME_END:
            return
        yield bytes(stream[at:end])
        at = end


def kind_of(frame, names):
    if frame[0] == 1 and len(frame) >= 12:
        cid, mid = struct.unpack_from(">HH", frame, 7)
        return names.get((cid, mid), f"method-{cid}-{mid}")
    return KINDS.get(frame[0], f"type-{frame[0]}")


class RecordingProxy:
    """Forwards every connection to the server's port and keeps what each side sent."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = []  # (client octets, server octets), one per connection
        self.lock = threading.Lock()
        self.threads = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                downstream, _ = self.listener.accept()
            except OSError:
                return
            t = threading.Thread(target=self.serve, args=(downstream,), daemon=True)
            t.start()
            self.threads.append(t)

    def serve(self, downstream):
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
        except OSError:
            downstream.close()
            return
        sent = {"client": bytearray(), "server": bytearray()}
        pumps = [threading.Thread(target=self.pump, args=(downstream, upstream, sent["client"])),
                 threading.Thread(target=self.pump, args=(upstream, downstream, sent["server"]))]
        for p in pumps:
            p.start()
        for p in pumps:
            p.join()
        with self.lock:
            self.connections.append((bytes(sent["client"]), bytes(sent["server"])))

    @staticmethod
    def pump(source, sink, record):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                record += data
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (sink, source):  # either side ending ends the connection for both
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def take(self):
        for t in list(self.threads):
            t.join(timeout=10)
        with self.lock:
            taken, self.connections = self.connections, []
        return taken

    def close(self):
        self.listener.close()


class ProxiedServer:
    """The matrix's server as a client program sees it: through the proxy."""

    def __init__(self, server, proxy):
        self.server, self.proxy = server, proxy

    @property
    def port(self):
        return self.proxy.port

    @property
    def url(self):
        return f"amqp://guest:guest@127.0.0.1:{self.proxy.port}/"

    def ca_env(self):
        return {}


def run_client(client, lang, path):
    """The client's connections, as (client octets, server octets) pairs, and its exit status."""
    argv, missing = matrix.command_for(path)
    if argv is None:
        raise SystemExit(f"{client}: {missing}")
    scratch = tempfile.mkdtemp(prefix=f"capture-{client}-")
    with matrix.Server() as server, matrix.Control(server) as control:
        proxy = RecordingProxy(server.port)
        try:
            env = matrix.program_env(client, ProxiedServer(server, proxy), control, scratch)
            code, output = matrix.run_program(argv, os.path.dirname(path), env)
        finally:
            proxy.close()
        connections = proxy.take()
    failed = [line for line in output.splitlines() if line.startswith("RESULT") and " fail " in line]
    if code != 0 and not connections:
        raise SystemExit(f"{client} made no connection (exit {code}); its output ends:\n{output[-3000:]}")
    return connections, code, failed


def seeds_of(client, connections, names, seen, server_counts):
    """{file name: octets}: distinct frames by side and kind, and the client's opening stream.
    `server_counts` carries the server's kinds across clients."""
    seeds, counts = {}, {}
    for client_octets, server_octets in connections:
        for side, octets in (("client", client_octets), ("server", server_octets)):
            for frame in split_frames(octets):
                if len(frame) > MAX_FRAME:
                    continue
                digest = hashlib.sha256(frame).digest()
                kind = kind_of(frame, names)
                tally, most = (counts, PER_CLIENT_KIND) if side == "client" else (server_counts, PER_SERVER_KIND)
                n = tally.get(kind, 0)
                if digest in seen or n >= most:
                    continue
                seen.add(digest)
                tally[kind] = n + 1
                seeds[f"{client}.{side}.{kind}.{n + 1}"] = frame
    if connections:
        opening = b"".join(f for f, _ in zip(split_frames(connections[0][0]), range(OPENING_FRAMES)))
        if opening and hashlib.sha256(opening).digest() not in seen:
            seen.add(hashlib.sha256(opening).digest())
            seeds[f"{client}.client.opening"] = PROTOCOL_HEADER + opening
    return seeds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--client", action="append", help="a client of tests/interop (repeatable)")
    args = parser.parse_args()
    clients = matrix.discover()
    wanted = args.client or list(clients)
    names = method_names()
    # What the corpus already holds (hand-written seeds, other clients' captures) is not repeated.
    kept = [p for p in CORPUS.iterdir() if not any(p.name.startswith(f"{c}.") for c in wanted)]
    seen = {hashlib.sha256(p.read_bytes()).digest() for p in kept}
    server_counts = {}
    for p in kept:
        if ".server." in p.name:
            kind = p.name.split(".server.", 1)[1].rsplit(".", 1)[0]
            server_counts[kind] = server_counts.get(kind, 0) + 1
    for client in wanted:
        lang, path = clients[client]
        connections, code, failed = run_client(client, lang, path)
        for old in CORPUS.glob(f"{client}.*"):
            old.unlink()
        seeds = seeds_of(client, connections, names, seen, server_counts)
        for name, octets in seeds.items():
            (CORPUS / name).write_bytes(octets)
        note = f"exit {code}" + (f", {len(failed)} scenarios failed through the proxy" if failed else "")
        print(f"{client}: {len(connections)} connections, {len(seeds)} seeds ({note})")
        for line in failed:
            print(f"  {line}")
    files = list(CORPUS.iterdir())
    print(f"corpus: {len(files)} files, {sum(p.stat().st_size for p in files)} octets")


if __name__ == "__main__":
    main()
