#!/bin/sh
# Client `rabbitmq_c` of the interop matrix (tests/interop/README.md): compiles the program in
# rabbitmq_c/ against Debian's librabbitmq-dev (rabbitmq-c 0.11) into the driver's private
# INTEROP_TMP, and runs it. Compiling here rather than in the build keeps the program in step
# with its source and out of every build that does not run the matrix.
set -e
scratch="${INTEROP_TMP:?INTEROP_TMP is set by the interop driver}"
cd "$(dirname "$0")/rabbitmq_c"
cc -std=c11 -D_DEFAULT_SOURCE -O1 -g -Wall -Wextra -o "$scratch/rabbitmq_c" support.c scenarios.c -lrabbitmq
exec "$scratch/rabbitmq_c"
