#!/bin/sh
# Shared by the Java clients' scripts: `_java.sh <main class>` compiles that client's sources in
# src/ (javac follows its imports) against the jars scripts/install-deps copied for this pom.xml,
# into the driver's private INTEROP_TMP (the plain and TLS twins run in parallel), and runs it.
set -e
here="$(cd "$(dirname "$0")" && pwd)"
main="${1:?usage: _java.sh <main class>}"
scratch="${INTEROP_TMP:?INTEROP_TMP is set by the interop driver}"
tools="${CLOUD_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cloud-tools}"
lib="$tools/interop-java-$(sha256sum "$here/pom.xml" | cut -c1-16)/lib"
if [ ! -d "$lib" ]; then
  echo "_java.sh: no jars for tests/interop/java/pom.xml at $lib: run scripts/install-deps" >&2
  exit 1
fi
src="$here/src/main/java"
javac -encoding UTF-8 --release 17 \
      -d "$scratch/classes" -cp "$lib/*" -sourcepath "$src" "$src/$(echo "$main" | tr . /).java"
# Short-lived: the client JIT tier and class data sharing start it fastest.
exec java -XX:TieredStopAtLevel=1 -Xshare:auto -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
     -cp "$scratch/classes:$lib/*" "$main"
