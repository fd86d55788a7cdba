#!/usr/bin/env bash
# Stop the daemons tools/slurm-up.sh started, by their pid files (never by name).
set -uo pipefail
S=${1:?usage: slurm-down.sh DIR}
for f in slurmd slurmctld munged; do
  [ -f "$S/$f.pid" ] && kill "$(cat "$S/$f.pid")" 2>/dev/null
done
exit 0
