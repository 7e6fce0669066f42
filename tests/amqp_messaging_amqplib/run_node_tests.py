"""Runs amqplib messaging tests (`node --test`) against one real `cloud`.

AMQPLIB_TESTS names the test files (space-separated, in this folder); default: every *.test.js.

The host is booted and stopped by tests/support/cloudtest.py (ephemeral ports, own data dir,
no nats-server left behind); the Node side gets AMQP_URL. Exit code: node's, or 1 when the
host did not stop cleanly.
"""
import glob
import os
import shutil
import subprocess
import sys

import cloudtest

HERE = os.path.dirname(os.path.abspath(__file__))
NODE = shutil.which("node") or "/usr/bin/node"


def main():
    names = os.environ.get("AMQPLIB_TESTS", "").split()
    tests = [os.path.join(HERE, n) for n in names] or sorted(glob.glob(os.path.join(HERE, "*.test.js")))
    with cloudtest.Cloud() as cloud:
        env = dict(os.environ, AMQP_URL=f"amqp://guest:guest@127.0.0.1:{cloud.amqp_port}/")
        code = subprocess.run([NODE, "--test", "--test-reporter=spec", *tests], env=env, cwd=HERE).returncode
        if code != 0:
            print(f"--- cloud log (last 80 lines) ---\n" + "\n".join(cloud.log.splitlines()[-80:]))
    return code


if __name__ == "__main__":
    sys.exit(main())
