#!/bin/sh
# Client `amqp091_go` of the interop matrix (tests/interop/README.md): builds the program in
# amqp091_go/ against Debian's golang-github-rabbitmq-amqp091-go-dev (GOPATH mode, Go 1.19) and
# runs it. The build cache and the binary live in the driver's private INTEROP_TMP, because the
# matrix runs clients in parallel and twice, and nothing may share writable state.
set -e
export GO111MODULE=off
export GOPATH="${GOPATH:-/usr/share/gocode}"
export GOFLAGS=
scratch="${INTEROP_TMP:?INTEROP_TMP is set by the interop driver}"
export GOCACHE="$scratch/go-cache" GOTMPDIR="$scratch/go-tmp"
mkdir -p "$GOTMPDIR"
cd "$(dirname "$0")"
go build -o "$scratch/amqp091_go" ./amqp091_go
exec "$scratch/amqp091_go"
