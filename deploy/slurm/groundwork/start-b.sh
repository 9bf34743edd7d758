#!/bin/bash
# Option B: slurmctld in the root netns (10.77.0.1), slurmd b1/b2 in netns slnb1/slnb2.
set -e
export SLURM_CONF=/etc/slurm-b/slurm.conf
ip link add slbr0 type bridge; ip addr add 10.77.0.1/24 dev slbr0; ip link set slbr0 up
for i in 1 2; do
  ns=slnb$i; ip netns add $ns
  ip link add slvb$i type veth peer name eth0 netns $ns
  ip link set slvb$i master slbr0 up
  ip -n $ns addr add 10.77.0.$((i+1))/24 dev eth0
  ip -n $ns link set eth0 up; ip -n $ns link set lo up
  ip -n $ns route add default via 10.77.0.1
done
install -d -o slurm -g slurm /var/spool/slurmctld-b /var/log/slurm
install -d /var/spool/slurmd-b/b1 /var/spool/slurmd-b/b2
setsid nice slurmctld -D -f $SLURM_CONF > /var/log/slurm/slurmctld-b.out 2>&1 < /dev/null &
for i in $(seq 1 40); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.25; done
for i in 1 2; do
  # nsenter --net, NOT "ip netns exec": the latter remounts /sys and hides /sys/fs/cgroup/*
  setsid nsenter --net=/run/netns/slnb$i nice slurmd -D -N b$i -f $SLURM_CONF > /var/log/slurm/slurmd-b$i.out 2>&1 < /dev/null &
done
for i in $(seq 1 60); do [ "$(sinfo -h -N -t idle,mix,alloc -o %N | wc -l)" = 2 ] && break; sleep 0.25; done
sinfo -N
