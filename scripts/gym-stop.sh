#!/usr/bin/env bash
# Stops one `gym env start` (or `gym eval reverify`) launcher and everything it started.
#
# Usage: scripts/gym-stop.sh PID [GRACE_SECONDS]      (GRACE_SECONDS defaults to 90)
#
# 1. Lists the launcher's descendants first (its servers, the Ray head it started, Ray's
#    `ray::IDLE` workers, which sit in process groups of their own), so none is missed later,
#    and every process of the launcher's process group (PID is the group's id when the launcher
#    was started as a job of an interactive shell or with `setsid`). After the launcher has
#    exited, the group is all that is left to find: `gym eval reverify` exits and leaves its
#    servers running, orphaned, in its group.
# 2. Sends SIGINT to the servers (every listed process that is not part of Ray), the signal the
#    launcher itself forwards on shutdown: uvicorn finishes its requests, StateGym closes its
#    databases. The launcher is not asked: with nemo-gym 0.7.0 and its Ray head running it did
#    not react to a SIGINT of its own within 90 s; it notices exited servers at its next 60 s
#    poll and then prints a traceback (what a Ctrl+C to the whole group shows).
# 3. Once the servers are gone (or after GRACE_SECONDS), SIGTERMs the launcher and what is left
#    of Ray, and 10 s later SIGKILLs any listed process still alive with the same start time
#    (a recycled PID is left alone; a zombie counts as gone).
# Exit status 0 when nothing of the list is left, 1 otherwise.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
launcher=$1
grace=${2:-90}

cmdline() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null || true; }
# A process's identity: its start time (field 22 of /proc/PID/stat), which survives exec but not
# PID reuse; empty for a process that is gone or a zombie (exited, not yet reaped).
identity() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  set -- ${stat##*) }
  [ "$1" = Z ] || echo "${20}"
}
declare -A born=()

# Every descendant, breadth first, with its command line at this moment.
declare -A family=()
queue=("$launcher")
while [ ${#queue[@]} -gt 0 ]; do
  parent=${queue[0]}
  queue=("${queue[@]:1}")
  for child in $(ps -o pid= --ppid "$parent" 2>/dev/null); do
    family[$child]=$(cmdline "$child")
    born[$child]=$(identity "$child")
    queue+=("$child")
  done
done
for member in $(ps -eo pid=,pgid= | awk -v g="$launcher" '$2 == g {print $1}'); do
  if [ "$member" != "$launcher" ] && [ "$member" != "$$" ]; then
    family[$member]=$(cmdline "$member")
    born[$member]=$(identity "$member")
  fi
done
if [ -d "/proc/$launcher" ]; then
  family[$launcher]=$(cmdline "$launcher")
  born[$launcher]=$(identity "$launcher")
elif [ ${#family[@]} = 0 ]; then
  echo "gym-stop: no process $launcher and nothing left in its process group"
  exit 0
fi

alive() { [ -n "${born[$1]}" ] && [ "$(identity "$1")" = "${born[$1]}" ]; }
is_ray() { [[ ${family[$1]} =~ (/ray/|ray::|ray-dashboard|multiprocessing) ]]; }

started=$(date +%s)
servers=()
for pid in "${!family[@]}"; do
  if [ "$pid" != "$launcher" ] && ! is_ray "$pid"; then servers+=("$pid"); fi
done
kill -INT "${servers[@]}" 2>/dev/null || true
waiting=1
while [ $waiting = 1 ] && [ $(($(date +%s) - started)) -lt "$grace" ]; do
  waiting=0
  for pid in "${servers[@]}"; do if alive "$pid"; then waiting=1; fi; done
  [ $waiting = 0 ] || sleep 1
done
echo "gym-stop: ${#servers[@]} server processes stopped in $(($(date +%s) - started))s"
for pid in "${!family[@]}"; do if alive "$pid"; then kill -TERM "$pid" 2>/dev/null || true; fi; done
for _ in $(seq 10); do
  left=0
  for pid in "${!family[@]}"; do if alive "$pid"; then left=$((left + 1)); fi; done
  [ $left -gt 0 ] || break
  sleep 1
done
killed=0
for pid in "${!family[@]}"; do
  if alive "$pid"; then
    echo "gym-stop: SIGKILL to $pid: ${family[$pid]:0:100}" >&2
    kill -KILL "$pid" 2>/dev/null || true
    killed=$((killed + 1))
  fi
done
[ $killed = 0 ] || sleep 1
for pid in "${!family[@]}"; do
  if alive "$pid"; then
    echo "gym-stop: $pid survived SIGKILL" >&2
    exit 1
  fi
done
echo "gym-stop: ${#family[@]} processes stopped in $(($(date +%s) - started))s ($killed needed SIGKILL); none left"
