#!/bin/sh
# Client `amqp091_go` of the interop matrix (tests/interop/README.md): builds the program in
# amqp091_go/ against Debian's golang-github-rabbitmq-amqp091-go-dev with Debian's Go 1.19
# (/usr/bin/go, GOPATH mode: the folder's go.mod, amqp091_go_module's, is ignored) and runs it.
# The build cache and the binary live in the driver's private INTEROP_TMP, because the
# matrix runs clients in parallel and twice, and nothing may share writable state.
set -e
export GO111MODULE=off
export GOPATH="${GOPATH:-/usr/share/gocode}"
export GOFLAGS=
scratch="${INTEROP_TMP:?INTEROP_TMP is set by the interop driver}"
export GOCACHE="$scratch/go-cache" GOTMPDIR="$scratch/go-tmp"
mkdir -p "$GOTMPDIR"
# A GOPATH build records no module versions: the program prints this one in its LIBRARY line.
AMQP091_GO_DEBIAN_VERSION="$(dpkg-query -W -f='${Version}' golang-github-rabbitmq-amqp091-go-dev)"
export AMQP091_GO_DEBIAN_VERSION
cd "$(dirname "$0")"
/usr/bin/go build -o "$scratch/amqp091_go" ./amqp091_go
exec "$scratch/amqp091_go"
