#!/bin/bash
set -e
[ -s /etc/munge/munge.key ] || { mungekey --create --keyfile=/etc/munge/munge.key; chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
install -d -o munge -g munge -m 755 /run/munge
pgrep -x munged >/dev/null || su -s /bin/sh munge -c /usr/sbin/munged     # daemonizes itself
for i in $(seq 1 20); do munge -n </dev/null | unmunge >/dev/null 2>&1 && exit 0; sleep 0.25; done
echo "munge not answering" >&2; exit 1
