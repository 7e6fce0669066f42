# Sourced, not run (the leading underscore keeps the interop driver from running it): where the
# current PyPI releases pinned by pypi-requirements.txt live, for scripts/install-deps, which
# installs them, and for the *_pypi clients, which run a program of this folder on them.

# interop_pypi_dir FOLDER: prints where FOLDER/pypi-requirements.txt is installed. The name holds
# the file's hash, so a changed pin is a new folder and a stale one is never used.
interop_pypi_dir() {
  local tools hash
  tools="${CLOUD_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cloud-tools}"
  hash="$(sha256sum "$1/pypi-requirements.txt" | cut -c1-16)"
  echo "$tools/interop-pypi-$hash"
}

# exec_on_pypi FOLDER PROGRAM: runs FOLDER/PROGRAM as the driver runs a .py, with the PyPI
# releases ahead of Debian's on the import path. INTEROP_PYPI_DIR tells the program (and whatever
# it starts) where they are: its LIBRARY line says which release it loaded.
exec_on_pypi() {
  INTEROP_PYPI_DIR="$(interop_pypi_dir "$1")"
  if [ ! -d "$INTEROP_PYPI_DIR" ]; then
    echo "the PyPI releases pinned by $1/pypi-requirements.txt are not installed" \
         "(expected in $INTEROP_PYPI_DIR): run scripts/install-deps" >&2
    exit 1
  fi
  export INTEROP_PYPI_DIR
  export PYTHONPATH="$INTEROP_PYPI_DIR${PYTHONPATH:+:$PYTHONPATH}"
  exec /usr/bin/python3 -u -P "$1/$2"
}
