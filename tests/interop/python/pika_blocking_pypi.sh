#!/bin/sh
# Client `pika_blocking_pypi` of the interop matrix (tests/interop/README.md): pika_blocking.py on the current
# PyPI releases (pypi-requirements.txt, installed by scripts/install-deps) instead of Debian's.
here="$(dirname "$0")"
. "$here/_pypi.sh"
exec_on_pypi "$here" pika_blocking.py
