#!/usr/bin/env bash
# A private Docker daemon and the terminal tasks' base image, for the terminal environment's Docker backend
# (slime/slime/agentic/docker_sandbox.py; terminal-rl/README.md, "Docker backend").
#
#   bash scripts/setup_docker.sh [start]   # install, start the daemon, build the image (idempotent)
#   bash scripts/setup_docker.sh stop      # stop the daemon this script started (by the PID in its pidfile)
#   bash scripts/setup_docker.sh status    # say whether it runs; exit 1 when it does not
#   bash scripts/setup_docker.sh env       # only print where it lives (the export lines below), start nothing
#   bash scripts/setup_docker.sh ubuntu    # (daemon running) also the Ubuntu 24.04 stand-in for task images
#   eval "$(bash scripts/setup_docker.sh)" # start, and export DOCKER_HOST (and the others) into this shell
#
# start: installs Debian's docker.io with apt-get only when it is missing; starts dockerd unless the one of
# $SLIME_DOCKER_DIR already answers; builds the image `slime-terminal-base` (Debian bookworm minbase with python3,
# pytest, git, tmux) when the daemon does not have it. The image's root filesystem is cached as a tarball in
# $SLIME_DOCKER_DIR, so a later build (a fresh data root, another machine sharing the cache) imports it without
# network; only a build without that tarball needs debootstrap (installed then, when missing) and the network.
# On stdout it prints only `export KEY=VALUE` lines (values shell-quoted), for eval and for callers that parse them
# (slime.agentic.docker_sandbox.parse_exports; the tests):
#   SLIME_DOCKER_DIR=...  DOCKER_HOST=unix://...  DOCKERD_PID=N  DOCKERD_STARTED=1|0  SLIME_DOCKER_IMAGE=...
# Everything else goes to stderr.
#
# Exit status: 0 done; 2 Docker cannot run on this machine (not root, apt-get cannot install docker.io, dockerd
# fails for kernel or permission reasons): the only status a caller may take as "skip"; 3 dockerd failed otherwise;
# 4 the image could not be built; 5 a daemon this script does not manage answers on its socket; 64 usage.
#
# Its data root is a btrfs filesystem in a sparse image ($SLIME_DOCKER_DIR/data.btrfs, $SLIME_DOCKER_DATA_SIZE, default
# 64G of which only what is written takes host disk; installs btrfs-progs when missing), mounted with btrfs simple
# quotas on and used through dockerd's btrfs storage driver: each container's writable layer is a subvolume whose
# size the sandbox caps (slime/slime/agentic/container_disk.py; overlay2 can cap it only on xfs with project quotas,
# which this machine's kernel lacks). `stop` unmounts it. SLIME_DOCKER_STORAGE=overlay2 keeps a plain directory
# instead (no per-container disk cap: the sandbox then refuses to start unless SLIME_DOCKER_STORAGE_CAP=off, a
# logged, weaker guarantee).
#
# The daemon is private: its own data root, exec root, pidfile and socket under $SLIME_DOCKER_DIR (default
# ~/.cache/slime/docker, also slime.agentic.docker_sandbox.default_docker_dir()'s), and no network setup at all
# (--bridge=none, no iptables rules): containers run with --network none. It listens on nothing but its unix
# socket. It runs until `stop`.
set -euo pipefail

DIR=${SLIME_DOCKER_DIR:-$HOME/.cache/slime/docker}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IMAGE=${SLIME_DOCKER_IMAGE:-slime-terminal-base}
SUITE=${SLIME_DOCKER_SUITE:-bookworm}
# what the shipped tasks, their tests and the shell host need inside (procps: ps/kill for the agent)
PACKAGES=${SLIME_DOCKER_PACKAGES:-python3,python3-pytest,git,tmux,ca-certificates,procps}
SOCK=$DIR/docker.sock
PIDFILE=$DIR/dockerd.pid
LOG=$DIR/dockerd.log
EXEC_ROOT=$DIR/exec
CONTAINERD_DIR=$EXEC_ROOT/containerd  # where dockerd keeps the containerd it starts (its pidfile and socket)
ROOTFS_TAR=$DIR/$IMAGE.rootfs.tar
STORAGE=${SLIME_DOCKER_STORAGE:-btrfs}  # btrfs (a capped writable layer per container) or overlay2 (no cap)
DATA_SIZE=${SLIME_DOCKER_DATA_SIZE:-64G}
DATA_IMAGE=$DIR/data.btrfs
case "$STORAGE" in
    btrfs) DATA_ROOT=$DIR/data-btrfs ;;
    overlay2) DATA_ROOT=$DIR/data ;;
    *) echo "setup_docker: SLIME_DOCKER_STORAGE must be btrfs or overlay2, not '$STORAGE'" >&2; exit 64 ;;
esac
export DOCKER_HOST=unix://$SOCK

log() { echo "setup_docker: $*" >&2; }
say() { printf 'export %s=%q\n' "$1" "$2"; }  # one line for the caller

alive() {  # alive PID: it exists and is not a zombie (a parent that never reaps would keep it for ever)
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [ "${stat%% *}" != Z ]
}

daemon_pid() {  # the pid of our dockerd when it is alive, else nothing
    local pid
    pid=$(cat "$PIDFILE" 2>/dev/null) || return 0
    if [ -n "$pid" ] && alive "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]; then
        echo "$pid"
    fi
}

answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

apt_install() {  # apt_install PACKAGE...: exit 2 (cannot run here) when apt-get cannot install them
    # the packages' own docker/containerd services are not used: keep them from starting
    PREVENT_SERVICES=1 bash "$(dirname "$0")/apt_install.sh" "the Docker terminal backend" "$@" ||
        { log "apt-get could not install $*"; exit 2; }
}

install_missing() {
    if [ "$(id -u)" != 0 ]; then
        log "not root: a private dockerd needs root (run this as root)"
        exit 2
    fi
    if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
        apt_install docker.io
    fi
    command -v dockerd >/dev/null 2>&1 || { log "no dockerd (apt-get install docker.io): cannot start a daemon"; exit 2; }
    command -v docker >/dev/null 2>&1 || { log "no docker CLI (apt-get install docker.io)"; exit 2; }
}

mount_data_root() {  # the btrfs data root: made once, mounted (quotas on) unless it is
    mkdir -p "$DATA_ROOT"
    [ "$STORAGE" = btrfs ] || return 0
    if ! command -v mkfs.btrfs >/dev/null 2>&1 || ! command -v btrfs >/dev/null 2>&1; then
        apt_install btrfs-progs
    fi
    if [ -d "$DIR/data" ] && ! mountpoint -q "$DIR/data"; then  # an overlay2 data root of an earlier version: ours
        log "removing the earlier overlay2 data root $DIR/data (images come back from $ROOTFS_TAR)"
        rm -rf --one-file-system "$DIR/data"
    fi
    if mountpoint -q "$DATA_ROOT"; then
        return 0
    fi
    if [ ! -s "$DATA_IMAGE" ]; then
        rm -f "$DATA_IMAGE.tmp"
        truncate -s "$DATA_SIZE" "$DATA_IMAGE.tmp" && mkfs.btrfs -q -f "$DATA_IMAGE.tmp" >/dev/null 2>&1 ||
            { log "mkfs.btrfs of a $DATA_SIZE image failed"; rm -f "$DATA_IMAGE.tmp"; exit 2; }
        mv "$DATA_IMAGE.tmp" "$DATA_IMAGE"
        log "made the btrfs data root image $DATA_IMAGE ($DATA_SIZE, sparse)"
    fi
    mount -o loop,noatime "$DATA_IMAGE" "$DATA_ROOT" ||
        { log "cannot mount the btrfs image $DATA_IMAGE (a kernel without btrfs, or no loop devices):" \
              "SLIME_DOCKER_STORAGE=overlay2 starts without per-container disk caps"; exit 2; }
    use_simple_quotas || { log "enabling btrfs quotas on $DATA_ROOT failed"; umount "$DATA_ROOT"; exit 2; }
}

# simple quotas on the data root: counts that never go stale (full quota groups enforce no limit while a rescan runs
# or after Docker destroys a removed container's group; slime/slime/agentic/container_disk.py); full groups where the
# kernel lacks them. The switch drops the limits of containers running: only at mount, or while none runs.
use_simple_quotas() {
    local mode
    mode=$(PYTHONPATH="$REPO/slime" python3 -m slime.agentic.container_disk simple-quotas "$DATA_ROOT") || return 1
    [ "$mode" = squota ] || log "this kernel has no btrfs simple quotas (6.7+): full quota groups, whose limits lapse" \
        "for every container from one container's removal until the next sandbox's rescan"
}

unmount_data_root() {
    if [ "$STORAGE" = btrfs ] && mountpoint -q "$DATA_ROOT"; then
        umount "$DATA_ROOT" 2>/dev/null || umount -l "$DATA_ROOT"
        log "unmounted the data root $DATA_ROOT"
    fi
}

start_daemon() {
    local pid
    pid=$(daemon_pid)
    if [ -n "$pid" ] && answers; then
        log "dockerd $pid already answers on $SOCK"
        # a data root left in full quota groups (mounted by an older version, or switched by hand)
        if [ "$STORAGE" = btrfs ] && mountpoint -q "$DATA_ROOT" && [ -z "$(docker ps -q 2>/dev/null)" ]; then
            use_simple_quotas || log "could not switch $DATA_ROOT to btrfs simple quotas"
        fi
        say DOCKERD_PID "$pid"; say DOCKERD_STARTED 0
        return
    fi
    if [ -n "$pid" ]; then
        log "dockerd $pid is alive but does not answer; stopping it first"
        stop_daemon
    elif answers; then
        log "a Docker daemon answers on $SOCK but $PIDFILE names no live dockerd: it was not started by this script" \
            "(or its pidfile was removed). Not starting a second one on the same data root: stop that daemon first."
        exit 5
    fi
    mkdir -p "$DIR" "$EXEC_ROOT"
    chmod 0700 "$DIR"
    mount_data_root
    rm -f "$SOCK"  # nothing answers on it (checked above)
    log "starting dockerd (data root $DATA_ROOT, storage driver $STORAGE, socket $SOCK, log $LOG)"
    # no bridge, no iptables/NAT rules, no userland proxy: it touches none of the host's networking
    local mark=0  # the log's lines before this start
    if [ -f "$LOG" ]; then mark=$(wc -l < "$LOG"); fi
    setsid dockerd --iptables=false --ip6tables=false --bridge=none --ip-masq=false --userland-proxy=false \
        --data-root "$DATA_ROOT" --storage-driver "$STORAGE" --exec-root "$EXEC_ROOT" --pidfile "$PIDFILE" -H "unix://$SOCK" \
        >>"$LOG" 2>&1 </dev/null &
    local child=$! deadline=$((SECONDS + 60))
    until answers; do
        if ! alive "$child"; then
            log "dockerd exited while starting; the end of its log:"
            tail -n +"$((mark + 1))" "$LOG" | tail -n 20 >&2
            # the kernel or the privileges (a container without them, no cgroups, no overlay/vfs): not fixable here
            if tail -n +"$((mark + 1))" "$LOG" | grep -qiE 'operation not permitted|permission denied|cgroup|not supported|no such device|kernel|failed to mount'; then
                exit 2
            fi
            exit 3
        fi
        if [ $SECONDS -ge $deadline ]; then
            log "dockerd did not answer within 60 s; stopping it. The end of its log:"
            tail -n 20 "$LOG" >&2
            kill "$child" 2>/dev/null || true
            exit 3
        fi
        sleep 0.5
    done
    log "dockerd $child answers ($(docker version --format '{{.Server.Version}}'))"
    say DOCKERD_PID "$child"; say DOCKERD_STARTED 1
}

is_ours() {  # is_ours PID: its command line names our exec root (a containerd or shim of this daemon, no other's)
    tr '\0' '\n' < "/proc/$1/cmdline" 2>/dev/null | grep -qxF -e "$CONTAINERD_DIR/containerd.toml" -e "$CONTAINERD_DIR/containerd.sock"
}

stop_leftovers() {  # after a SIGKILLed dockerd: its containerd (by its pidfile) and the shims of its containers
    local pid d p child children
    pid=$(cat "$CONTAINERD_DIR/containerd.pid" 2>/dev/null) || pid=
    if [ -n "$pid" ] && alive "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = containerd ] && is_ours "$pid"; then
        log "stopping its containerd $pid"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    for d in /proc/[0-9]*; do  # a shim outlives containerd by design: end its container (its init), then it
        p=${d#/proc/}
        case "$(cat "$d/comm" 2>/dev/null)" in containerd-shim*) ;; *) continue ;; esac
        if ! alive "$p" || ! is_ours "$p"; then continue; fi
        log "stopping the container shim $p and its container"
        children=()
        read -ra children 2>/dev/null < "$d/task/$p/children" || true
        for child in "${children[@]}"; do kill -KILL "$child" 2>/dev/null || true; done
        kill -KILL "$p" 2>/dev/null || true
    done
    rm -f "$CONTAINERD_DIR/containerd.pid"
}

stop_daemon() {
    local pid
    pid=$(daemon_pid)
    if [ -z "$pid" ]; then
        log "no dockerd of $DIR is running"
        unmount_data_root
        return 0
    fi
    log "stopping dockerd $pid"
    kill -TERM "$pid"  # it stops its containers and its containerd, then exits
    local deadline=$((SECONDS + 30))
    while alive "$pid"; do
        if [ $SECONDS -ge $deadline ]; then
            log "dockerd $pid still alive after 30 s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 1
            stop_leftovers
            break
        fi
        sleep 0.2
    done
    rm -f "$PIDFILE"
    unmount_data_root
}

build_image() {
    if docker image inspect "$IMAGE" >/dev/null 2>&1; then
        log "image $IMAGE is there"
        say SLIME_DOCKER_IMAGE "$IMAGE"
        return
    fi
    if [ ! -s "$ROOTFS_TAR" ]; then
        command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
        command -v debootstrap >/dev/null 2>&1 || { log "no debootstrap (apt-get install debootstrap)"; exit 2; }
        local rootfs=$DIR/rootfs.tmp
        rm -rf "$rootfs" "$ROOTFS_TAR.tmp"
        log "building the root filesystem: debootstrap --variant=minbase --include=$PACKAGES $SUITE (a few minutes, ~400 MB)"
        local start=$SECONDS
        debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs" >&2 ||
            { log "debootstrap failed (it needs a Debian mirror)"; rm -rf "$rootfs"; exit 4; }
        rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
        tar --numeric-owner -C "$rootfs" -cf "$ROOTFS_TAR.tmp" .
        mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
        rm -rf "$rootfs"
        log "root filesystem cached at $ROOTFS_TAR in $((SECONDS - start)) s"
    fi
    log "importing $ROOTFS_TAR as $IMAGE"
    docker import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' "$ROOTFS_TAR" "$IMAGE" >/dev/null ||
        { log "docker import $ROOTFS_TAR failed"; exit 4; }
    say SLIME_DOCKER_IMAGE "$IMAGE"
}

# Ubuntu 24.04 (noble, Python 3.12) standing in for the Ubuntu and Python 3.12 base images Terminal-Bench's tasks name
# (slime/slime/agentic/terminal/task_images.py): debootstrap from the Ubuntu archive, its signature checked with the
# ubuntu-keyring package fetched by pinned hash (Debian has no Ubuntu keyring). Python images have pip and `python`:
# python3-pip and python-is-python3 are in, and pip may install into the system (EXTERNALLY-MANAGED removed), as in
# python:3.12. This machine's CA bundle goes in as /etc/ssl/certs/slime-host-ca.crt, named by PIP_CERT, SSL_CERT_FILE,
# REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE: HTTPS from a build then trusts what this machine trusts (here a proxy's CA).
UBUNTU_IMAGE=${SLIME_UBUNTU_IMAGE:-slime-standin-ubuntu-24.04}
UBUNTU_MIRROR=${SLIME_UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}
UBUNTU_KEYRING_DEB=pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb
UBUNTU_KEYRING_SHA256=36de43b15853ccae0028e9a767613770c704833f82586f28eb262f0311adb8a8
# no Debian-packaged Python libraries (python3-pytest would bring a pluggy that `pip install pytest` cannot uninstall,
# as python:3.12 has none): the tests get pytest from the task's own runner or the offline kit
UBUNTU_PACKAGES=python3,python3-pip,python3-venv,python-is-python3,git,tmux,ca-certificates,procps,curl
UBUNTU_KEY=$(printf '%s %s' "$UBUNTU_PACKAGES" "$UBUNTU_KEYRING_SHA256" | sha256sum | cut -c1-12)
UBUNTU_TAR=$DIR/$UBUNTU_IMAGE.$UBUNTU_KEY.rootfs.tar

build_ubuntu_image() {
    local have
    have=$(docker image inspect --format '{{index .Config.Labels "slime.standin"}}' "$UBUNTU_IMAGE" 2>/dev/null || true)
    if [ "$have" = "$UBUNTU_KEY" ]; then
        log "image $UBUNTU_IMAGE is there"
        say SLIME_UBUNTU_IMAGE "$UBUNTU_IMAGE"
        return
    fi
    if [ ! -s "$UBUNTU_TAR" ]; then
        command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
        local work=$DIR/ubuntu.tmp start=$SECONDS
        rm -rf "$work" "$UBUNTU_TAR.tmp"
        mkdir -p "$work"
        curl -fsS -o "$work/keyring.deb" "$UBUNTU_MIRROR/$UBUNTU_KEYRING_DEB" ||
            { log "cannot fetch $UBUNTU_MIRROR/$UBUNTU_KEYRING_DEB (the Ubuntu archive is needed once)"; exit 2; }
        echo "$UBUNTU_KEYRING_SHA256  $work/keyring.deb" | sha256sum -c --quiet - ||
            { log "$UBUNTU_KEYRING_DEB does not have the pinned sha256 $UBUNTU_KEYRING_SHA256"; exit 4; }
        dpkg-deb -x "$work/keyring.deb" "$work/keyring"
        log "building the Ubuntu 24.04 root filesystem: debootstrap noble (about a minute and a half, ~450 MB)"
        debootstrap --variant=minbase --components=main,universe --include="$UBUNTU_PACKAGES" \
            --keyring="$work/keyring/usr/share/keyrings/ubuntu-archive-keyring.gpg" \
            noble "$work/rootfs" "$UBUNTU_MIRROR" /usr/share/debootstrap/scripts/gutsy >&2 ||
            { log "debootstrap noble failed"; rm -rf "$work"; exit 4; }
        rm -f "$work"/rootfs/usr/lib/python3*/EXTERNALLY-MANAGED
        # builds reach the registries this machine reaches, through the TLS it trusts (a proxy's CA included)
        cp /etc/ssl/certs/ca-certificates.crt "$work/rootfs/etc/ssl/certs/slime-host-ca.crt"
        [ -e "$work/rootfs/usr/bin/pip" ] || ln -s pip3 "$work/rootfs/usr/bin/pip"
        rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/*
        tar --numeric-owner -C "$work/rootfs" -cf "$UBUNTU_TAR.tmp" .
        mv "$UBUNTU_TAR.tmp" "$UBUNTU_TAR"
        rm -rf "$work"
        log "Ubuntu root filesystem cached at $UBUNTU_TAR in $((SECONDS - start)) s"
    fi
    local ca=/etc/ssl/certs/slime-host-ca.crt
    docker import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' --change "LABEL slime.standin=$UBUNTU_KEY" \
        --change "ENV PIP_CERT=$ca SSL_CERT_FILE=$ca REQUESTS_CA_BUNDLE=$ca CURL_CA_BUNDLE=$ca UV_NATIVE_TLS=1" \
        "$UBUNTU_TAR" "$UBUNTU_IMAGE" >/dev/null ||
        { log "docker import $UBUNTU_TAR failed"; exit 4; }
    say SLIME_UBUNTU_IMAGE "$UBUNTU_IMAGE"
}

case "${1:-start}" in
    ubuntu)
        answers || { log "no daemon answers on $DOCKER_HOST: run '$0 start' first"; exit 3; }
        build_ubuntu_image
        ;;
    start)
        install_missing
        say SLIME_DOCKER_DIR "$DIR"; say DOCKER_HOST "$DOCKER_HOST"
        start_daemon
        build_image
        ;;
    stop)
        stop_daemon
        ;;
    status)
        pid=$(daemon_pid)
        if [ -n "$pid" ] && answers; then
            say SLIME_DOCKER_DIR "$DIR"; say DOCKER_HOST "$DOCKER_HOST"; say DOCKERD_PID "$pid"
        else
            log "not running"
            exit 1
        fi
        ;;
    env)
        say SLIME_DOCKER_DIR "$DIR"; say DOCKER_HOST "$DOCKER_HOST"
        ;;
    *)
        echo "usage: $0 [start|stop|status|env|ubuntu]" >&2
        exit 64
        ;;
esac
