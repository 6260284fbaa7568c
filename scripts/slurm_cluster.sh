#!/usr/bin/env bash
# A private Slurm cluster on this machine, for the tests and for trying `trainperf slurm` by hand.
#
#   scripts/slurm_cluster.sh start [NODES]   install Slurm and munge from Debian if missing, start munged,
#                                            slurmctld and NODES slurmd (1 or 2, default 2), wait until every
#                                            node is idle, print the SLURM_CONF to export
#   scripts/slurm_cluster.sh stop            cancel its jobs and stop the processes it started (by their ids)
#   scripts/slurm_cluster.sh env             print `export SLURM_CONF=...` for a running cluster
#
# The controller and each node live in network namespaces of their own, joined by a bridge (10.254.47.0/24;
# this machine is .254 on it, so sbatch and sinfo reach the controller; nothing is routed further), each with its
# own host name and /etc/hosts (a private mount namespace): Debian's Slurm is built without multiple-slurmd
# support, so two slurmd on one network stack would share one port, and no daemon listens on this machine's own
# interfaces. Where namespaces cannot be made (not root), it falls back to one node whose daemons bind to the
# address this host's name resolves to (127.0.0.1 on a usual /etc/hosts) and says why.
# No systemd and no cgroups in use: proctrack/linuxproc, task/none.
# Everything lives under $TRAINPERF_SLURM_DIR (default /tmp/trainperf-slurm); nothing under /etc is written.
# Exit status: 0 started/stopped, 3 Slurm cannot start here (the reason on the last line of stderr), 1 failure.
set -euo pipefail

DIR=${TRAINPERF_SLURM_DIR:-/tmp/trainperf-slurm}
SUBNET=10.254.47            # the cluster's private network (two-node mode)
BRIDGE=tpslurm47            # its bridge, and the prefix of its veth links and namespaces
CTLD_PORT=16817             # not Slurm's defaults (6817/6818), so a real Slurm on this machine is left alone
SLURMD_PORT=16818
WAIT_S=${TRAINPERF_SLURM_WAIT_S:-60}
PACKAGES="slurmctld slurmd slurm-client munge"

cannot() { echo "slurm_cluster: Slurm cannot start here: $*" >&2; exit 3; }
say() { echo "slurm_cluster: $*" >&2; }

install_if_missing() {
  local missing=""
  for p in $PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  [ -z "$missing" ] && return 0
  command -v apt-get >/dev/null || cannot "Debian packages$missing are missing and there is no apt-get"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo -n true 2>/dev/null || cannot "Debian packages$missing are missing; install them (root) and run again"
    sudo="sudo -n"
  fi
  say "installing Debian packages:$missing"
  $sudo apt-get update -qq || cannot "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null \
    || cannot "apt-get install$missing failed"
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# one background process of ours, its id kept in $DIR/pids/NAME
spawn() {
  local name=$1; shift
  setsid "$@" </dev/null >>"$DIR/log/$name.out" 2>&1 &
  echo $! >"$DIR/pids/$name"
}

make_network() {  # NODES namespaces on a bridge; returns non-zero (and cleans up) where that is not allowed
  ip link add "$BRIDGE" type bridge 2>/dev/null || return 1
  ip addr add "$SUBNET.254/24" dev "$BRIDGE" && ip link set "$BRIDGE" up || return 1
  local i
  for i in $(seq 0 "$1"); do  # n0: the controller
    ip netns add "$BRIDGE-n$i" || return 1
    ip link add "$BRIDGE-v$i" type veth peer name eth0 netns "$BRIDGE-n$i" || return 1
    ip link set "$BRIDGE-v$i" master "$BRIDGE" up || return 1
    ip -n "$BRIDGE-n$i" addr add "$SUBNET.$((i + 1))/24" dev eth0 || return 1
    ip -n "$BRIDGE-n$i" link set eth0 up && ip -n "$BRIDGE-n$i" link set lo up || return 1
  done
}

remove_network() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk -v p="$BRIDGE-n" 'index($1, p) == 1 {print $1}'); do
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
}

write_conf() {  # $1 nodes, $2 mode (netns|local)
  local nodes=$1 mode=$2 cpus ctl comm node_lines=""
  cpus=$(nproc)
  if [ "$mode" = netns ]; then
    ctl="controller($SUBNET.1)"
    comm=""  # each daemon alone in its namespace: listening on any address there reaches only the bridge
    for i in $(seq 1 "$nodes"); do
      node_lines+="NodeName=node$i NodeAddr=$SUBNET.$((i + 1)) CPUs=$cpus State=UNKNOWN"$'\n'
    done
    NODELIST="node[1-$nodes]"
    [ "$nodes" -gt 1 ] || NODELIST=node1
  else
    ctl="$(hostname -s)"
    comm="$comm"
    node_lines="NodeName=$(hostname -s) NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN"$'\n'
    NODELIST=$(hostname -s)
  fi
  cat >"$DIR/slurm.conf" <<EOF
# written by scripts/slurm_cluster.sh: a private test cluster ($nodes node(s), $mode)
ClusterName=trainperf
SlurmctldHost=$ctl
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
$comm
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
PlugStackConfig=$DIR/plugstack.conf
KillWait=10
MinJobAge=600
$node_lines
PartitionName=main Nodes=$NODELIST Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
  : >"$DIR/plugstack.conf"
  # slurmd loads a cgroup plugin even when nothing uses it (proctrack/linuxproc, task/none); its autodetection
  # fails on a hybrid v1/v2 mount, so name the version that is mounted
  local cg=cgroup/v1
  [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ] && cg=cgroup/v2
  echo "CgroupPlugin=$cg" >"$DIR/cgroup.conf"
}

start_munge() {
  mkdir -p "$DIR/munge"
  chmod 0700 "$DIR/munge"
  [ -f "$DIR/munge/munge.key" ] || mungekey --create --keyfile="$DIR/munge/munge.key" 2>/dev/null \
    || dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$DIR/munge/munge.key"
  spawn munged munged --foreground --force --socket="$DIR/munge/munge.socket" --key-file="$DIR/munge/munge.key" \
    --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
  local i
  for i in $(seq 50); do
    [ -S "$DIR/munge/munge.socket" ] && return 0
    alive "$DIR/pids/munged" || break
    sleep 0.1
  done
  cannot "munged did not start (see $DIR/log/munged.log)"
}

start_slurmd() {  # $1 node number, $2 mode
  local i=$1 mode=$2
  mkdir -p "$DIR/spool/node$i" "$DIR/spool/$(hostname -s)"
  if [ "$mode" = netns ]; then
    in_namespace "slurmd-node$i" "$i" "node$i" "exec slurmd -D -N node$i -f '$DIR/slurm.conf'"
  else
    spawn slurmd slurmd -D -f "$DIR/slurm.conf"
  fi
}

# a daemon in namespace n$2 with host name $3 and the cluster's /etc/hosts (a private mount namespace); the
# processes it starts (a node's jobs) inherit all three
in_namespace() {
  spawn "$1" ip netns exec "$BRIDGE-n$2" unshare --mount --uts sh -c \
    "mount --bind '$DIR/hosts' /etc/hosts && hostname $3 && $4"
}

wait_idle() {  # until sinfo shows every node idle
  local deadline=$((SECONDS + WAIT_S)) states
  while [ $SECONDS -lt $deadline ]; do
    states=$(SLURM_CONF="$DIR/slurm.conf" sinfo -h -N -o '%t' 2>/dev/null | sort -u | tr '\n' ' ') || true
    [ "$states" = "idle " ] && return 0
    for p in "$DIR"/pids/*; do alive "$p" || cannot "$(basename "$p") exited (see $DIR/log/)"; done
    sleep 0.5
  done
  cannot "the nodes are not idle after ${WAIT_S}s (sinfo: ${states:-no answer}; see $DIR/log/)"
}

cmd_start() {
  local nodes=${1:-2} mode=netns
  [[ $nodes == [12] ]] || { echo "slurm_cluster: start [1|2]: give 1 or 2 nodes" >&2; exit 1; }
  if [ -d "$DIR/pids" ] && compgen -G "$DIR/pids/*" >/dev/null; then
    for p in "$DIR"/pids/*; do alive "$p" && { echo "slurm_cluster: already running ($DIR); stop it first" >&2; exit 1; }; done
  fi
  command -v setsid >/dev/null || cannot "setsid (util-linux) is missing"
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    cannot "another cluster of this script runs here (its bridge $BRIDGE exists): stop it with" \
      "TRAINPERF_SLURM_DIR=<its folder> $0 stop"
  fi
  install_if_missing
  rm -rf "$DIR"
  mkdir -p "$DIR"/{log,pids,run,state,spool}
  chmod 0755 "$DIR"
  if [ "$(id -u)" -ne 0 ]; then
    mode=local
    REASON="not root: network namespaces need CAP_NET_ADMIN"
  elif ! make_network "$nodes"; then
    remove_network
    mode=local
    REASON="network namespaces or a bridge cannot be made here"
  fi
  if [ "$mode" = local ]; then
    [ "$nodes" -eq 1 ] || say "one node instead of $nodes: $REASON (Debian's slurmd has no multiple-slurmd support)"
    nodes=1
  else
    {
      echo "127.0.0.1 localhost"
      echo "$SUBNET.1 controller"
      echo "$SUBNET.254 $(hostname -s)"
      for i in $(seq 1 "$nodes"); do echo "$SUBNET.$((i + 1)) node$i"; done
    } >"$DIR/hosts"
  fi
  write_conf "$nodes" "$mode"
  start_munge
  if [ "$mode" = netns ]; then
    in_namespace slurmctld 0 controller "exec slurmctld -D -f '$DIR/slurm.conf'"
  else
    spawn slurmctld slurmctld -D -f "$DIR/slurm.conf"
  fi
  if [ "$mode" = netns ]; then
    for i in $(seq 1 "$nodes"); do start_slurmd "$i" netns; done
  else
    start_slurmd 1 local
  fi
  wait_idle
  say "$nodes node(s) idle ($mode); for sbatch, sinfo and the tests: export SLURM_CONF=$DIR/slurm.conf"
  echo "export SLURM_CONF=$DIR/slurm.conf"
}

# a process is ours if its id is in our pid files and it still runs the program we started
stop_pid() {  # $1 pid file, $2 program name
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$2"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$1"
}

cmd_stop() {
  [ -d "$DIR/pids" ] || { say "not running ($DIR)"; return 0; }
  if alive "$DIR/pids/slurmctld"; then  # the cluster's jobs first, while the daemons can still end them
    SLURM_CONF="$DIR/slurm.conf" scancel --full --quiet --partition=main 2>/dev/null || true
    for _ in $(seq 30); do
      [ -z "$(SLURM_CONF="$DIR/slurm.conf" squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  local p name
  for p in "$DIR"/pids/slurmd*; do [ -e "$p" ] && stop_pid "$p" slurmd; done
  # whatever is left in the nodes' namespaces (slurmstepd, a job's processes) was started by their slurmd
  for ns in $(ip netns list 2>/dev/null | awk -v p="$BRIDGE-n" 'index($1, p) == 1 && $1 != p "0" {print $1}'); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  done
  for name in slurmctld munged; do stop_pid "$DIR/pids/$name" "$name"; done
  remove_network
  say "stopped"
}

case "${1:-}" in
  start) shift; cmd_start "$@" ;;
  stop) cmd_stop ;;
  env) [ -f "$DIR/slurm.conf" ] && echo "export SLURM_CONF=$DIR/slurm.conf" ;;
  *) echo "usage: $0 start [1|2] | stop | env" >&2; exit 1 ;;
esac
