#!/bin/bash
# Stops everything the Slurm research started, by pid file / exact daemon command line.
# Order: jobs -> slurmd -> slurmctld -> slurmdbd -> mariadb -> munged -> netns/bridge.
for conf in /etc/slurm/slurm.conf /etc/slurm-b/slurm.conf; do
  [ -f "$conf" ] && SLURM_CONF=$conf timeout 10 scancel --state=RUNNING,PENDING -u slt-stu1,slt-stu2,slt-stu3,slt-stu4 2>/dev/null
done
sleep 2
stop() {  # stop <pid...>: SIGTERM, wait up to 10 s, then SIGKILL
  [ -n "$*" ] || return 0
  kill "$@" 2>/dev/null
  for i in $(seq 1 20); do kill -0 "$@" 2>/dev/null || return 0; sleep 0.5; done
  kill -9 "$@" 2>/dev/null
}
stop $(pgrep -x slurmd)                     # every slurmd (-N n1/n2/b1/b2)
stop $(pgrep -x slurmctld)
stop $(pgrep -x slurmdbd)
stop $(pgrep -x mariadbd)
stop $(pgrep -x munged)
# leftover job processes after a killed slurmstepd live on in the job's cgroup:
for d in freezer memory cpuset; do
  for g in /sys/fs/cgroup/$d/slurm_*; do
    [ -d "$g" ] || continue
    find "$g" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null
    find "$g" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
done
for ns in slnb1 slnb2; do ip netns del $ns 2>/dev/null; done   # deletes eth0 inside; peer veth goes too
ip link del slbr0 2>/dev/null
true
