#!/bin/sh
# Client `celery_pypi` of the interop matrix (tests/interop/README.md): celery.py on the current
# PyPI releases (pypi-requirements.txt, installed by scripts/install-deps) instead of Debian's.
here="$(dirname "$0")"
. "$here/_pypi.sh"
exec_on_pypi "$here" celery.py
