#!/bin/sh
# Client `lapin` of the interop matrix (tests/interop/README.md): builds the Cargo project in
# lapin/ offline from the crates scripts/install-deps fetched (Cargo.lock pins them), and runs it.
# The target folder is in the build tree, so the TLS twin and later runs reuse the compiled
# crates; cargo's lock on it serialises the twins, which the driver runs in parallel.
set -e
command -v cargo >/dev/null || PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
scratch="${INTEROP_TMP:?INTEROP_TMP is set by the interop driver}"
export CARGO_TARGET_DIR="${INTEROP_BUILD_DIR:-$scratch}/rust/lapin"
cd "$(dirname "$0")/lapin"
cargo build --locked --offline --quiet
exec "$CARGO_TARGET_DIR/debug/lapin_interop"
