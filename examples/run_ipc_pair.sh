#!/bin/sh
# Runs ipc_producer and ipc_consumer the way a reader would in two shells:
#   run_ipc_pair.sh PRODUCER CONSUMER [producer options...]
# The socket is the name cudyn-example-<this shell's pid>, in this user's
# private socket directory, so that runs in parallel (two build folders)
# never meet. Exits 0 when both programs
# did. Bounded: the producer is killed after 30 s.
set -u
producer=$1
consumer=$2
shift 2
socket="cudyn-example-$$"

"$producer" "$socket" --words 65536 "$@" &
producer_pid=$!
"$consumer" "$socket"
consumer_status=$?

waited=0
while kill -0 "$producer_pid" 2>/dev/null && [ "$waited" -lt 300 ]; do
    sleep 0.1
    waited=$((waited + 1))
done
if kill -0 "$producer_pid" 2>/dev/null; then
    echo "the producer did not finish: killed" >&2
    kill -9 "$producer_pid"
    wait "$producer_pid"
    exit 1
fi
wait "$producer_pid"
producer_status=$?
echo "producer exited $producer_status, consumer exited $consumer_status"
[ "$producer_status" -eq 0 ] && [ "$consumer_status" -eq 0 ]
