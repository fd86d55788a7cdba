#!/usr/bin/env bash
# Start a real one-node Slurm (Debian 12's 22.05) for the executor tests; run as root.
# Usage: tools/slurm-up.sh DIR   -> daemons' state, logs and pid files under DIR;
#        prints `export RB_TEST_SLURM=DIR` for the tests. Stop: tools/slurm-down.sh DIR.
# Recipe: shared/slurm-notes.md. Daemons are stopped by pid file, never by name.
set -euo pipefail
S=${1:?usage: slurm-up.sh DIR}
mkdir -p "$S"/{spool,state,log}
S=$(cd "$S" && pwd)
H=$(hostname -s)
# Never overwrite a real cluster's configuration: only one this script wrote (ClusterName=rbtest).
if [ -f /etc/slurm/slurm.conf ] && ! grep -q '^ClusterName=rbtest$' /etc/slurm/slurm.conf; then
  echo "/etc/slurm/slurm.conf exists and is not rb's test cluster: refusing to replace it" >&2
  exit 1
fi
if [ ! -f /etc/munge/munge.key ]; then
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
fi
mkdir -p /run/munge && chown munge:munge /run/munge
if ! munge -n >/dev/null 2>&1; then
  # munged runs as the munge user, so its pid file lives in its own /run/munge; copy it here.
  runuser -u munge -- /usr/sbin/munged
  cp /run/munge/munged.pid "$S/munged.pid"
fi
MEM=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=rbtest
SlurmctldHost=$H
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/ctld.log
SlurmdLogFile=$S/log/d.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=600
KillWait=5
NodeName=$H CPUs=$(nproc) RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$H Default=YES MaxTime=INFINITE State=UP
CONF
/usr/sbin/slurmctld
/usr/sbin/slurmd
for _ in $(seq 1 30); do
  if sinfo -h -o '%t' 2>/dev/null | grep -q idle; then
    echo "export RB_TEST_SLURM=$S"
    exit 0
  fi
  sleep 1
done
echo "slurm did not become idle; logs in $S/log" >&2
sinfo >&2 || true
exit 1
