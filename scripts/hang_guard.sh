#!/usr/bin/env bash
# Run a command with a time limit; if it is still running at the limit, print what every
# process under it is doing (the process tree, and each process's thread stacks from gdb),
# kill them all and exit 124. CI then fails within its budget with the hang's stacks in its
# log, instead of stalling until the CI runner's own timeout with nothing to read.
#
# usage: scripts/hang_guard.sh SECONDS COMMAND [ARG...]
set -u
limit=$1
shift
setsid "$@" &
pid=$!
deadline=$(($(date +%s) + limit))
while kill -0 "$pid" 2>/dev/null; do
    if (($(date +%s) >= deadline)); then
        echo "hang_guard: '$*' still running after ${limit}s; what each process is doing:" >&2
        ps -o pid,ppid,etimes,args --forest -g "$pid" >&2
        for p in $(ps -o pid= -g "$pid"); do
            echo "=== pid $p: $(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null)" >&2
            if command -v gdb >/dev/null; then
                timeout 60 gdb -p "$p" -batch -ex 'thread apply all bt 12' 2>/dev/null |
                    grep -E '^(Thread|#)' >&2
            fi
        done
        kill -KILL -- -"$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        echo "hang_guard: killed after ${limit}s" >&2
        exit 124
    fi
    sleep 2
done
wait "$pid"
