#!/usr/bin/env bash
# smoke-test.sh: `make docker-test`. Proves docker/Dockerfile builds and the image runs, without a Docker
# engine or an image registry: it makes a local debian:bookworm-slim base with `debootstrap
# --variant=minbase` from the machine's own apt mirror (cached as a tarball in docker/.cache/), imports it
# with `podman import`, builds the image with `podman build --isolation=chroot`, starts the broker in it
# with `buildah run --isolation=chroot` (which shares the host's loopback) on a free port, produces and
# consumes with kcat from outside, runs the image's HEALTHCHECK command inside, stops the broker with
# SIGTERM and restarts it on the same volume. Every check prints `ok` or `FAIL`; the run ends with
# `docker-test: N passed, N failed` and exits non-zero on any failure, including missing tools.
#
# Needs root (debootstrap, rootful podman) on Debian bookworm; installs podman, buildah, debootstrap,
# uidmap, fuse-overlayfs and kcat with apt-get when they are missing.
# Environment: GREGOR_DOCKER_CACHE (default docker/.cache) holds the base rootfs tarball;
# GREGOR_DOCKER_REBASE=1 rebuilds it. Logs of a failed run stay in the printed work directory.
# Read next: docker/Dockerfile, docker/entrypoint.sh.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${GREGOR_DOCKER_CACHE:-$ROOT/docker/.cache}
BASE_IMAGE=docker.io/library/debian:bookworm-slim
BASE_TARBALL=$CACHE/debian-bookworm-slim-rootfs.tar.gz
IMAGE=localhost/gregor:docker-test
SIZE_GOAL_BYTES=$((40 * 1000 * 1000)) # compressed runtime image, issue #12
MESSAGES=200
WORK=$(mktemp -d /tmp/gregor-docker-test.XXXXXX)
exec 2>&1 # one stream, so that reasons print in order with the ok/FAIL lines
passed=0
failed=0
ctr=""
broker_pid=""
t_start=$(date +%s)

ok() { echo "  ok   $*"; passed=$((passed + 1)); }
bad() { echo "  FAIL $*"; failed=$((failed + 1)); }
check() { # check DESCRIPTION COMMAND...: ok when COMMAND succeeds
    local what=$1
    shift
    if "$@"; then ok "$what"; else bad "$what"; fi
}
step() { echo "== $* ($(($(date +%s) - t_start)) s)"; }

finish() {
    [ -n "$broker_pid" ] && stop_broker KILL >/dev/null 2>&1
    [ -n "$ctr" ] && buildah rm "$ctr" >/dev/null 2>&1
    echo "docker-test: total $(($(date +%s) - t_start)) s"
    if [ "$failed" -eq 0 ]; then
        rm -rf "$WORK"
    else
        echo "docker-test: logs kept in $WORK"
    fi
    echo "docker-test: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
trap 'finish; exit $?' EXIT
trap 'echo "docker-test: interrupted"; failed=$((failed + 1)); exit 1' INT TERM

# abort WHAT: a step that the rest depends on failed; count it and stop with the reason.
abort() {
    local what=$1
    shift
    [ $# -gt 0 ] && printf 'docker-test: %s\n' "$@"
    bad "$what"
    exit 1
}

# ---------------------------------------------------------------------------------------------------
step "tools"
[ "$(id -u)" -eq 0 ] || abort "running as root" "this test needs root (debootstrap builds the base image, podman runs rootful)"
need=()
for tool in podman:podman buildah:buildah debootstrap:debootstrap kcat:kcat newuidmap:uidmap fuse-overlayfs:fuse-overlayfs; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || need+=("${tool#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "docker-test: installing ${need[*]} with apt-get"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"; } >"$WORK/apt.log" 2>&1; then
        tail -n 20 "$WORK/apt.log" >&2
        abort "tools installed" "apt-get could not install ${need[*]} (log: $WORK/apt.log)"
    fi
fi
for tool in podman buildah debootstrap kcat python3 gzip tar; do
    command -v "$tool" >/dev/null 2>&1 || abort "tools present" "$tool is missing"
done
if ! podman info >"$WORK/podman-info.log" 2>&1; then
    tail -n 20 "$WORK/podman-info.log" >&2
    abort "podman usable" "podman is installed but 'podman info' fails: see above"
fi
ok "tools present and usable ($(podman --version), $(buildah --version | cut -d' ' -f1-3), storage $(podman info --format '{{.Store.GraphDriverName}}'))"

# ---------------------------------------------------------------------------------------------------
# apt_uri SUITE: the repository URI the machine's apt uses for SUITE (deb822 or one-line sources alike).
apt_uri() {
    # shellcheck disable=SC2016 # $(RELEASE) and $(REPO_URI) are apt's format fields, not shell
    apt-get indextargets --format '$(RELEASE) $(REPO_URI)' 'Created-By: Packages' 2>/dev/null \
        | awk -v s="$1" '$1 == s { print $2; exit }'
}

# unmount_below DIR: unmounts everything mounted at or below DIR (debootstrap and our chroot mount proc,
# sys, dev/pts), retrying while busy; fails if something is still mounted, so that nothing deletes or
# archives through a mount.
unmount_below() {
    local dir m mp _
    dir=$(realpath "$1")
    for _ in $(seq 1 20); do
        m=$(awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r)
        [ -z "$m" ] && return 0
        for mp in $m; do umount "$mp" 2>/dev/null; done
        sleep 0.5
    done
    for mp in $m; do umount -l "$mp" 2>/dev/null; done
    m=$(awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts)
    [ -z "$m" ]
}

# build_base_rootfs: debootstrap minbase bookworm, slimmed the way Debian's docker images are, as a tarball.
build_base_rootfs() {
    local mirror sec upd rootfs=$CACHE/rootfs.tmp
    mirror=$(apt_uri bookworm)
    sec=$(apt_uri bookworm-security)
    upd=$(apt_uri bookworm-updates)
    mirror=${mirror:-http://deb.debian.org/debian/}
    echo "  debootstrap --variant=minbase bookworm from $mirror"
    mkdir -p "$CACHE"
    if [ -e "$rootfs" ]; then
        unmount_below "$rootfs" || { echo "docker-test: cannot unmount below $rootfs" >&2; return 1; }
        rm -rf --one-file-system "$rootfs"
    fi
    if ! debootstrap --variant=minbase --arch="$(dpkg --print-architecture)" bookworm "$rootfs" "$mirror" >"$WORK/debootstrap.log" 2>&1; then
        tail -n 20 "$WORK/debootstrap.log" >&2
        unmount_below "$rootfs"
        return 1
    fi
    unmount_below "$rootfs" || return 1
    # apt sources as the official image has them (deb822), on this machine's mirrors
    rm -f "$rootfs/etc/apt/sources.list"
    {
        printf 'Types: deb\nURIs: %s\nSuites: bookworm%s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
            "$mirror" "${upd:+ bookworm-updates}"
        [ -n "$sec" ] && printf '\nTypes: deb\nURIs: %s\nSuites: bookworm-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$sec"
    } >"$rootfs/etc/apt/sources.list.d/debian.sources"
    # container image conventions: no docs/man/locales, no apt caches, no language indexes
    cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
    cat >"$rootfs/etc/apt/apt.conf.d/docker-slim" <<'EOF'
APT::AutoRemove::SuggestsImportant "false";
APT::Install-Recommends "false";
Acquire::Languages "none";
Acquire::GzipIndexes "true";
Acquire::CompressionTypes::Order:: "gz";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
    # bring the base up to date with bookworm-updates and bookworm-security, as the official image is
    local rc=0
    cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
    mount -t proc proc "$rootfs/proc" || rc=1
    if [ $rc -eq 0 ]; then
        { chroot "$rootfs" apt-get update -qq && DEBIAN_FRONTEND=noninteractive chroot "$rootfs" apt-get -y -qq dist-upgrade; } \
            >>"$WORK/debootstrap.log" 2>&1 || rc=1
    fi
    unmount_below "$rootfs" || { echo "docker-test: $rootfs still has mounts below it; not touching it" >&2; return 1; }
    [ $rc -eq 0 ] || { tail -n 20 "$WORK/debootstrap.log" >&2; return 1; }
    find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null
    find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null
    rm -rf "$rootfs"/usr/share/{groff,info,linda,locale,man}/* "$rootfs"/usr/share/lintian/overrides/* \
        "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
        "$rootfs"/var/cache/ldconfig/aux-cache "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/* \
        "$rootfs"/tmp/* "$rootfs"/var/tmp/* "$rootfs/etc/resolv.conf"
    : >"$rootfs/etc/machine-id"
    echo localhost >"$rootfs/etc/hostname"
    tar --numeric-owner --one-file-system -C "$rootfs" -cf - . | gzip -n >"$BASE_TARBALL.tmp" && mv "$BASE_TARBALL.tmp" "$BASE_TARBALL"
    local rc2=$?
    rm -rf --one-file-system "$rootfs"
    return $rc2
}

step "base image $BASE_IMAGE"
if [ "${GREGOR_DOCKER_REBASE:-0}" = 1 ]; then
    rm -f "$BASE_TARBALL"
    podman rmi -f "$BASE_IMAGE" >/dev/null 2>&1
fi
if [ ! -s "$BASE_TARBALL" ]; then
    build_base_rootfs || abort "base rootfs built with debootstrap" "debootstrap failed (log: $WORK/debootstrap.log)"
    podman rmi -f "$BASE_IMAGE" >/dev/null 2>&1
fi
if ! podman image exists "$BASE_IMAGE"; then
    podman import --change 'CMD ["bash"]' "$BASE_TARBALL" "$BASE_IMAGE" >"$WORK/import.log" 2>&1 \
        || abort "base image imported" "podman import failed: $(tail -n 3 "$WORK/import.log")"
fi
ok "base image $BASE_IMAGE ($(du -h "$BASE_TARBALL" | cut -f1) tarball in ${BASE_TARBALL#"$ROOT"/})"

# ---------------------------------------------------------------------------------------------------
inspect_id() { podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null; }
step "podman build"
t0=$(date +%s)
old_image_id=$(inspect_id)
if ! podman build --isolation=chroot --cgroup-manager=cgroupfs --pull=never --format docker \
    -f "$ROOT/docker/Dockerfile" -t "$IMAGE" "$ROOT" >"$WORK/build.log" 2>&1; then
    tail -n 30 "$WORK/build.log" >&2
    abort "image built" "podman build failed (log: $WORK/build.log)"
fi
ok "image built in $(($(date +%s) - t0)) s"
# the previous test image is now untagged: remove it (by id, nothing else) so storage does not grow per run
if [ -n "$old_image_id" ] && [ "$old_image_id" != "$(inspect_id)" ]; then
    podman rmi "$old_image_id" >/dev/null 2>&1
fi

inspect() { podman image inspect --format "$1" "$IMAGE"; }
check "runs as user gregor" [ "$(inspect '{{.Config.User}}')" = gregor ]
check "exposes 9092/tcp" grep -q '9092/tcp' <<<"$(inspect '{{json .Config.ExposedPorts}}')"
check "volume /var/lib/gregor" grep -q '"/var/lib/gregor"' <<<"$(inspect '{{json .Config.Volumes}}')"
healthcheck_json=$(inspect '{{json .HealthCheck}}' 2>/dev/null)
check "HEALTHCHECK runs gregor --healthcheck" grep -q -- '--healthcheck' <<<"$healthcheck_json"

unpacked_bytes=$(inspect '{{.Size}}')
compressed_bytes=$(podman save --format docker-archive "$IMAGE" 2>/dev/null | gzip -6 | wc -c)
echo "  image size: $((unpacked_bytes / 1000)) kB unpacked, $((compressed_bytes / 1000)) kB compressed (podman save | gzip -6)"
check "compressed image under $((SIZE_GOAL_BYTES / 1000000)) MB" [ "$compressed_bytes" -gt 0 -a "$compressed_bytes" -lt "$SIZE_GOAL_BYTES" ]

# ---------------------------------------------------------------------------------------------------
# The image's own ENTRYPOINT + CMD, one argument per line.
image_argv() {
    podman image inspect --format '{{json .Config.Entrypoint}}|{{json .Config.Cmd}}' "$IMAGE" \
        | python3 -c 'import json,sys; e,c=sys.stdin.read().strip().split("|",1); [print(a) for a in (json.loads(e) or [])+(json.loads(c) or [])]'
}
# The HEALTHCHECK's command, one argument per line (docker format: ["CMD", args...]).
health_argv() {
    python3 -c 'import json,sys; t=(json.loads(sys.argv[1]) or {}).get("Test") or []; assert t[:1]==["CMD"]; [print(a) for a in t[1:]]' "$healthcheck_json"
}
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
descendants() { # descendants PID: every process below PID
    local c
    for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        echo "$c"
        descendants "$c"
    done
}
gregor_pid() { # the gregor process started under buildah run
    local p
    for p in $(descendants "$broker_pid"); do
        [ "$(readlink "/proc/$p/exe" 2>/dev/null)" ] && case "$(readlink "/proc/$p/exe")" in */usr/local/bin/gregor) echo "$p"; return 0 ;; esac
    done
    return 1
}
stop_broker() { # stop_broker SIGNAL: signal gregor (not buildah) and wait for buildah run to return
    [ -n "$broker_pid" ] || return 0
    local gp
    gp=$(gregor_pid) && kill -s "$1" "$gp"
    for _ in $(seq 1 150); do
        kill -0 "$broker_pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$broker_pid" 2>/dev/null; then
        gp=$(gregor_pid) && kill -s KILL "$gp"
        kill -s KILL "$broker_pid" 2>/dev/null
    fi
    wait "$broker_pid"
    broker_rc=$?
    broker_pid=""
    return 0
}
# start_broker LOG: starts the image's entrypoint+cmd in the working container on a free port.
start_broker() {
    local log=$1 _try
    mapfile -t argv < <(image_argv)
    for _try in 1 2 3; do
        port=$(free_port)
        buildah run --isolation=chroot --network=host -v "$WORK/data:/var/lib/gregor" \
            -e GREGOR_CFG_LISTENERS="PLAINTEXT://127.0.0.1:$port" \
            -e GREGOR_CFG_ADVERTISED_LISTENERS="PLAINTEXT://127.0.0.1:$port" \
            -e GREGOR_CFG_NUM_PARTITIONS=1 \
            "$ctr" -- "${argv[@]}" >"$log" 2>&1 &
        broker_pid=$!
        for _ in $(seq 1 200); do
            grep -q 'started in' "$log" 2>/dev/null && return 0
            kill -0 "$broker_pid" 2>/dev/null || break
            sleep 0.1
        done
        stop_broker KILL
        grep -q 'cannot listen' "$log" || break # not a port race: no point retrying
    done
    tail -n 20 "$log" >&2
    return 1
}

step "run the broker (buildah run --isolation=chroot)"
ctr=$(buildah from --pull=never "$IMAGE" 2>"$WORK/from.log") || abort "working container created" "$(cat "$WORK/from.log")"
mkdir -p "$WORK/data"
chown 1000:1000 "$WORK/data"

rendered=$(buildah run --isolation=chroot -e GREGOR_ADVERTISED_HOST=broker.example \
    -e GREGOR_CFG_LOG_RETENTION_HOURS=24 -e GREGOR_CFG_SOME__UNDER___DASH=x \
    "$ctr" -- docker-entrypoint.sh render-config 2>&1)
check "entrypoint renders GREGOR_ADVERTISED_HOST" grep -qx 'advertised.listeners=PLAINTEXT://broker.example:9092' <<<"$rendered"
check "entrypoint maps GREGOR_CFG_LOG_RETENTION_HOURS" grep -qx 'log.retention.hours=24' <<<"$rendered"
check "entrypoint maps __ to _ and ___ to -" grep -qx 'some_under-dash=x' <<<"$rendered"
check "default config listens on 0.0.0.0:9092" grep -qx 'listeners=PLAINTEXT://0.0.0.0:9092' <<<"$rendered"

start_broker "$WORK/broker.log" || abort "broker started" "the broker did not start (log: $WORK/broker.log)"
ok "broker started on 127.0.0.1:$port"
gp=$(gregor_pid)
check "gregor runs as uid 1000, not root" [ "$(awk '/^Uid:/ { print $2 }' "/proc/$gp/status" 2>/dev/null)" = 1000 ]
parent_comm=$(ps -o comm= -p "$(ps -o ppid= -p "$gp" 2>/dev/null | tr -d ' ')" 2>/dev/null)
check "entrypoint execs gregor (parent is '$parent_comm', not a shell)" \
    [ -n "$parent_comm" -a "$parent_comm" != sh -a "$parent_comm" != dash -a "$parent_comm" != bash ]

mapfile -t hargv < <(health_argv)
run_healthcheck() { buildah run --isolation=chroot "$ctr" -- "${hargv[@]}" >"$WORK/health.log" 2>&1; }
check "HEALTHCHECK command (${hargv[*]}) succeeds inside the container" run_healthcheck

B=127.0.0.1:$port
seq 1 "$MESSAGES" | sed 's/^/docker-smoke message /' >"$WORK/sent.txt"
check "kcat produces $MESSAGES messages" timeout 30 kcat -P -b "$B" -t docker-smoke -l "$WORK/sent.txt"
timeout 30 kcat -C -b "$B" -t docker-smoke -o beginning -e -c "$MESSAGES" -q >"$WORK/got.txt" 2>"$WORK/consume.log"
check "kcat consumes the same $MESSAGES messages" cmp -s "$WORK/sent.txt" "$WORK/got.txt"
check "metadata advertises 127.0.0.1:$port" grep -q "at 127.0.0.1:$port" <<<"$(timeout 30 kcat -L -b "$B" -t docker-smoke 2>&1)"

stop_broker TERM
check "SIGTERM stops gregor with exit code 0" [ "$broker_rc" -eq 0 ]
check "log says it stopped cleanly" grep -q 'stopped cleanly' "$WORK/broker.log"
check "segment written to the volume as uid 1000" \
    [ -s "$WORK/data/docker-smoke-0/00000000000000000000.log" -a "$(stat -c %u "$WORK/data/docker-smoke-0/00000000000000000000.log" 2>/dev/null)" = 1000 ]
check "HEALTHCHECK fails when the broker is down" eval '! run_healthcheck' 

step "restart on the same volume"
if start_broker "$WORK/broker2.log"; then
    timeout 30 kcat -C -b "127.0.0.1:$port" -t docker-smoke -o beginning -e -c "$MESSAGES" -q >"$WORK/got2.txt" 2>"$WORK/consume2.log"
    check "messages survive a restart" cmp -s "$WORK/sent.txt" "$WORK/got2.txt"
    stop_broker TERM
    check "second SIGTERM stop is clean too" grep -q 'stopped cleanly' "$WORK/broker2.log"
else
    bad "broker restarted on its volume"
fi
