"""Test certificates, made with `openssl` (stdlib only otherwise)."""
import os
import subprocess


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_certificates(directory):
    """In `directory`: a CA (ca.pem), a server certificate for 127.0.0.1 (server.pem, server.key)
    and a client certificate (client.pem, client.key, CN=client), both signed by the CA; and a
    second, unrelated CA (other-ca.pem) with a client certificate of its own (stranger.pem)."""
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=cloudtest {ca}",
                "-keyout", f"{ca}.key", "-out", f"{ca}.pem", cwd=directory)
    # The address twice: as an IP entry (what Python, Go, Node and Ruby match an address against)
    # and as a DNS entry (rabbitmq-c compares the host it dialled with DNS entries only).
    with open(os.path.join(directory, "server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:127.0.0.1\n")
    for name, ca, ext in (("server", "ca", ["-extfile", "server.ext"]), ("client", "ca", []),
                          ("stranger", "other-ca", [])):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
                "-out", f"{name}.csr", cwd=directory)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
                "-days", "2", "-out", f"{name}.pem", *ext, cwd=directory)
