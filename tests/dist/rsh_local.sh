#!/bin/sh
# Open MPI's plm_rsh_agent for test_dist's two-"host" run on one machine:
# mpirun calls it as `ssh HOST COMMAND...`; it records HOST and runs the
# command here instead of over ssh (there is no sshd in CI).
host=$1
shift
[ -n "$WGPT_RSH_LOG" ] && echo "$host" >> "$WGPT_RSH_LOG"
exec sh -c "$*"
