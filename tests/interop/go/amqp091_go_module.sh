#!/bin/sh
# Client `amqp091_go_module` of the interop matrix (tests/interop/README.md): the program of
# amqp091_go/ built in module mode with /usr/local/go's Go against the amqp091-go release its
# go.mod pins, from the module cache scripts/install-deps filled (`go mod download`): offline,
# read-only. The binary lives in the driver's private INTEROP_TMP; the build cache (safe for
# concurrent builds) in the build tree, so that only the first run compiles the standard library.
set -e
export GO111MODULE=on GOTOOLCHAIN=local GOPROXY=off GOFLAGS="-mod=readonly -buildvcs=false"
# The module cache install-deps filled, named the same way there: not under the driver's GOPATH,
# which is for GOPATH-mode programs.
export GOMODCACHE="${GOMODCACHE:-$HOME/go/pkg/mod}"
scratch="${INTEROP_TMP:?INTEROP_TMP is set by the interop driver}"
export GOCACHE="${INTEROP_BUILD_DIR:-$scratch}/go/module-cache" GOTMPDIR="$scratch/go-tmp"
mkdir -p "$GOTMPDIR"
cd "$(dirname "$0")/amqp091_go"
# amqp091_recovery: reconnect through the release's own recovery (amqp091_go/reconnect_recovery.go).
/usr/local/go/bin/go build -tags amqp091_recovery -o "$scratch/amqp091_go_module" .
exec "$scratch/amqp091_go_module"
