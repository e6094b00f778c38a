#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for tests/slow/test_slurm_cluster.py.
#
#   sudo scripts/slurm_single_node.sh      # prints the partition name once the node is idle
#
# Installs Debian's slurmctld, slurmd, slurm-client and munge if they are missing (apt-get),
# writes /etc/slurm/slurm.conf for one node (this host, its CPUs and memory as `slurmd -C`
# reports them; no cgroups, no accounting database), starts munged, slurmctld and slurmd, and
# waits until `sinfo` shows the node idle. Idempotent: when the partition already answers with
# an idle node it does nothing; it never overwrites a slurm.conf it did not write.
# Daemons run as root (SlurmUser=root), which is enough for a test cluster and nothing more.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"   # the daemons live there; a job runner's PATH may lack it

PARTITION="${TABMEM_SLURM_PARTITION:-tabmem}"
CONF=/etc/slurm/slurm.conf
MARKER="# Written by tabmem scripts/slurm_single_node.sh"
LOG_DIR=/var/log/slurm
STATE_DIR=/var/lib/slurm

say() { echo "slurm_single_node: $*" >&2; }

node_state() {
    sinfo --noheader --partition="$PARTITION" --format=%T 2>/dev/null | head -n1 || true
}

# Already up: nothing to do.
case "$(node_state)" in
    idle | mixed | allocated | completing)
        echo "$PARTITION"
        exit 0
        ;;
esac

if [[ $EUID -ne 0 ]]; then
    say "run me as root: I install packages and start daemons"
    exit 1
fi

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v sinfo >/dev/null || ! command -v munged >/dev/null; then
    say "installing slurmctld slurmd slurm-client munge"
    export DEBIAN_FRONTEND=noninteractive
    packages=(slurmctld slurmd slurm-client munge)
    # A fresh machine may have no package lists yet: update only when the install needs it.
    if ! apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null; then
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
    fi
fi

# munge: the key the Debian package creates, or one made here.
if [[ ! -s /etc/munge/munge.key ]]; then
    mkdir -p /etc/munge
    mungekey --create --keyfile=/etc/munge/munge.key
fi
chown munge:munge /etc/munge /etc/munge/munge.key
chmod 700 /etc/munge
chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/lib/munge /var/log/munge
chown munge:munge /run/munge /var/lib/munge /var/log/munge
if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    say "starting munged"
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 50); do
        munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && break
        sleep 0.1
    done
fi

# slurm.conf: this host as the one node, with the CPUs and memory slurmd sees.
node_line="$(slurmd -C | head -n1)"   # NodeName=<host> CPUs=... RealMemory=...
node_name="${node_line#NodeName=}"
node_name="${node_name%% *}"
if [[ -e $CONF ]] && ! grep -qF "$MARKER" "$CONF"; then
    say "$CONF exists and was not written by this script; leaving it and its cluster alone"
    exit 1
fi
mkdir -p "$LOG_DIR" "$STATE_DIR/slurmctld" "$STATE_DIR/slurmd"
new_conf="$(mktemp)"
cat >"$new_conf" <<EOF
$MARKER: one node, no cgroups, no accounting.
ClusterName=tabmem
SlurmctldHost=$node_name(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
KillWait=5
MinJobAge=300
StateSaveLocation=$STATE_DIR/slurmctld
SlurmdSpoolDir=$STATE_DIR/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
$node_line NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=$PARTITION Nodes=$node_name Default=YES MaxTime=INFINITE State=UP
EOF
if ! cmp -s "$new_conf" "$CONF"; then
    install -m 644 "$new_conf" "$CONF"
    changed=1
fi
rm -f "$new_conf"

# Daemons: a changed configuration is reread; a missing daemon is started.
if scontrol ping 2>/dev/null | grep -q "is UP"; then
    [[ -n ${changed:-} ]] && scontrol reconfigure
else
    say "starting slurmctld"
    slurmctld
fi
if ! pgrep -x slurmd >/dev/null; then
    say "starting slurmd"
    slurmd -N "$node_name"
fi

for _ in $(seq 120); do
    case "$(node_state)" in
        idle | mixed | allocated | completing)
            echo "$PARTITION"
            exit 0
            ;;
        down* | drain*)
            scontrol update nodename="$node_name" state=resume 2>/dev/null || true
            ;;
    esac
    sleep 0.5
done
say "the node did not become idle in 60 s: $(sinfo --noheader 2>&1); see $LOG_DIR"
exit 1
