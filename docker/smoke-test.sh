#!/usr/bin/env bash
# smoke-test.sh: `make docker-test`. Proves docker/Dockerfile builds and the image runs, without a Docker
# engine or an image registry: it makes a local debian:bookworm-slim base with `debootstrap
# --variant=minbase` from the machine's own apt mirror (cached as a tarball in docker/.cache/), imports it
# with `podman import`, builds the image with `podman build --isolation=chroot`, starts the broker in it
# with `buildah run --isolation=chroot` (which shares the host's loopback) on a free port, produces and
# consumes with kcat from outside, runs the image's HEALTHCHECK command inside, stops the broker with
# SIGTERM and restarts it on the same volume. Then the cluster part (issue #19): it builds
# docker/etcd.Dockerfile, starts etcd from it and three brokers from the Gregor image (each in its own
# working container, on free loopback ports, INTERNAL and EXTERNAL listeners), produces and consumes 200
# messages across a 6-partition topic led by the three, and stops everything with SIGTERM. Before any of
# that, docker/check-compose.py checks both compose files against the vendored compose-spec schema. Every
# check prints `ok` or `FAIL`; the run ends with `docker-test: N passed, N failed` and exits non-zero on
# any failure, including missing tools.
#
# Needs root (debootstrap, rootful podman) on Debian bookworm; installs podman, buildah, debootstrap,
# uidmap, fuse-overlayfs, kcat, python3-yaml and python3-jsonschema with apt-get when they are missing.
# Environment: GREGOR_DOCKER_CACHE (default docker/.cache) holds the base rootfs tarball;
# GREGOR_DOCKER_REBASE=1 rebuilds it. Logs of a failed run stay in the printed work directory.
# Read next: docker/Dockerfile, docker/entrypoint.sh, docker/etcd.Dockerfile, docker/compose-cluster.yml.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${GREGOR_DOCKER_CACHE:-$ROOT/docker/.cache}
BASE_IMAGE=docker.io/library/debian:bookworm-slim
BASE_TARBALL=$CACHE/debian-bookworm-slim-rootfs.tar.gz
IMAGE=localhost/gregor:docker-test
ETCD_IMAGE=localhost/gregor-etcd:docker-test
SIZE_GOAL_BYTES=$((40 * 1000 * 1000))      # compressed runtime image, issue #12
ETCD_SIZE_GOAL_BYTES=$((50 * 1000 * 1000)) # compressed etcd image: the base plus etcd and etcdctl (Go binaries)
MESSAGES=200
WORK=$(mktemp -d /tmp/gregor-docker-test.XXXXXX)
exec 2>&1 # one stream, so that reasons print in order with the ok/FAIL lines
passed=0
failed=0
ctr=""
broker_pid=""
declare -A run_pid=() run_ctr=() run_rc=() # the cluster part: name (etcd, broker1..3) -> buildah run pid, container, exit code
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
    local n
    for n in "${!run_pid[@]}"; do stop_run "$n" KILL >/dev/null 2>&1; done
    for n in "${!run_ctr[@]}"; do buildah rm "${run_ctr[$n]}" >/dev/null 2>&1; done
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
# check-compose.py runs on Debian's python3 with Debian's yaml and jsonschema modules
/usr/bin/python3 -c 'import yaml' >/dev/null 2>&1 || need+=(python3-yaml)
/usr/bin/python3 -c 'import jsonschema' >/dev/null 2>&1 || need+=(python3-jsonschema)
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
/usr/bin/python3 -c 'import yaml, jsonschema' || abort "tools present" "Debian's python3-yaml or python3-jsonschema is missing"
if ! podman info >"$WORK/podman-info.log" 2>&1; then
    tail -n 20 "$WORK/podman-info.log" >&2
    abort "podman usable" "podman is installed but 'podman info' fails: see above"
fi
ok "tools present and usable ($(podman --version), $(buildah --version | cut -d' ' -f1-3), storage $(podman info --format '{{.Store.GraphDriverName}}'))"

# ---------------------------------------------------------------------------------------------------
step "compose files against the compose-spec schema"
check "compose.yml and compose-cluster.yml pass docker/check-compose.py" \
    /usr/bin/python3 "$ROOT/docker/check-compose.py" "$ROOT/docker/compose.yml" "$ROOT/docker/compose-cluster.yml"
# the checker can fail: a schema error, and a broker advertising a host port that is not published
sed 's/^      - "9092:9092"$/      - [9092, 9092]/' "$ROOT/docker/compose-cluster.yml" >"$WORK/bad-schema.yml"
check "check-compose.py refuses a port given as a list (the schema's error)" \
    eval '! /usr/bin/python3 "$ROOT/docker/check-compose.py" --base "$ROOT/docker" "$WORK/bad-schema.yml" >"$WORK/bad-schema.log" 2>&1 && grep -q "schema: services/broker1/ports" "$WORK/bad-schema.log"'
sed 's/"9093:9093"/"9095:9093"/' "$ROOT/docker/compose-cluster.yml" >"$WORK/bad-port.yml"
check "check-compose.py refuses broker2 advertising localhost:9093 published as 9095" \
    eval '! /usr/bin/python3 "$ROOT/docker/check-compose.py" --base "$ROOT/docker" "$WORK/bad-port.yml" >"$WORK/bad-port.log" 2>&1 && grep -q "broker2: EXTERNAL is advertised on port 9093" "$WORK/bad-port.log"'

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
# The image's own ENTRYPOINT + CMD (of IMAGE, default $IMAGE), one argument per line.
image_argv() {
    podman image inspect --format '{{json .Config.Entrypoint}}|{{json .Config.Cmd}}' "${1:-$IMAGE}" \
        | python3 -c 'import json,sys; e,c=sys.stdin.read().strip().split("|",1); [print(a) for a in (json.loads(e) or [])+(json.loads(c) or [])]'
}
# The HEALTHCHECK's command (of the JSON given, default the Gregor image's), one argument per line
# (docker format: ["CMD", args...]).
health_argv() {
    python3 -c 'import json,sys; t=(json.loads(sys.argv[1]) or {}).get("Test") or []; assert t[:1]==["CMD"]; [print(a) for a in t[1:]]' "${1:-$healthcheck_json}"
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
            -e GREGOR_CFG_NUM_PARTITIONS=1 -e GREGOR_CFG_GREGOR_ADMIN_LISTENERS=http://127.0.0.1:0 \
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

# ---------------------------------------------------------------------------------------------------
# The cluster part (issue #19): etcd from docker/etcd.Dockerfile and three brokers from the Gregor image,
# each in its own working container (the entrypoint renders /etc/gregor/server.properties inside it, and
# the healthcheck reads that file), all on the host's loopback through `buildah run --network=host`.

# proc_below PID PATTERN: the first process below PID whose executable path matches the glob PATTERN
proc_below() {
    local p exe
    for p in $(descendants "$1"); do
        exe=$(readlink "/proc/$p/exe" 2>/dev/null) || continue
        # shellcheck disable=SC2254 # PATTERN is a glob on purpose
        case "$exe" in $2) echo "$p"; return 0 ;; esac
    done
    return 1
}
declare -A run_exe=()
# start_run NAME LOG PATTERN BUILDAH-RUN-ARGS...: `buildah run` in the background as NAME; PATTERN names
# the executable that stop_run signals (never buildah itself)
start_run() {
    local name=$1 log=$2
    run_exe[$name]=$3
    shift 3
    buildah run --isolation=chroot --network=host "$@" >"$log" 2>&1 &
    run_pid[$name]=$!
}
# stop_run NAME SIGNAL: signals NAME's process, waits at most 15 s for `buildah run` to return (then KILL);
# the exit code goes to run_rc[NAME]
stop_run() {
    local name=$1 pid=${run_pid[$1]:-} p
    [ -n "$pid" ] || return 0
    p=$(proc_below "$pid" "${run_exe[$name]}") && kill -s "$2" "$p"
    for _ in $(seq 1 150); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        p=$(proc_below "$pid" "${run_exe[$name]}") && kill -s KILL "$p"
        kill -s KILL "$pid" 2>/dev/null
    fi
    wait "$pid"
    run_rc[$name]=$?
    unset "run_pid[$name]"
}
running() { [ -n "${run_pid[$1]:-}" ] && kill -0 "${run_pid[$1]}" 2>/dev/null; }
# wait_for SECONDS COMMAND...: true once COMMAND succeeds, retried every 0.2 s
wait_for() {
    local end=$(($(date +%s) + $1))
    shift
    until "$@"; do
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.2
    done
}
# free_ports N: N distinct free loopback ports, one per line (all held open at once while chosen)
free_ports() {
    python3 -c 'import socket,sys
ss=[socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1",0))
print("\n".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

step "etcd image (docker/etcd.Dockerfile)"
einspect_id() { podman image inspect --format '{{.Id}}' "$ETCD_IMAGE" 2>/dev/null; }
t0=$(date +%s)
old_etcd_id=$(einspect_id)
if ! podman build --isolation=chroot --cgroup-manager=cgroupfs --pull=never --format docker \
    -f "$ROOT/docker/etcd.Dockerfile" -t "$ETCD_IMAGE" "$ROOT" >"$WORK/etcd-build.log" 2>&1; then
    tail -n 30 "$WORK/etcd-build.log" >&2
    abort "etcd image built" "podman build of docker/etcd.Dockerfile failed (log: $WORK/etcd-build.log)"
fi
ok "etcd image built in $(($(date +%s) - t0)) s"
if [ -n "$old_etcd_id" ] && [ "$old_etcd_id" != "$(einspect_id)" ]; then
    podman rmi "$old_etcd_id" >/dev/null 2>&1
fi
einspect() { podman image inspect --format "$1" "$ETCD_IMAGE"; }
check "etcd image runs as user etcd" [ "$(einspect '{{.Config.User}}')" = etcd ]
check "etcd image exposes 2379/tcp" grep -q '2379/tcp' <<<"$(einspect '{{json .Config.ExposedPorts}}')"
check "etcd image has the volume /var/lib/etcd" grep -q '"/var/lib/etcd"' <<<"$(einspect '{{json .Config.Volumes}}')"
check "etcd image's environment sets ETCD_DATA_DIR=/var/lib/etcd" grep -q '"ETCD_DATA_DIR=/var/lib/etcd"' <<<"$(einspect '{{json .Config.Env}}')"
etcd_health_json=$(einspect '{{json .HealthCheck}}' 2>/dev/null)
check "etcd HEALTHCHECK runs etcdctl endpoint health" grep -q '"etcdctl".*"endpoint","health"' <<<"$etcd_health_json"
unpacked_bytes=$(einspect '{{.Size}}')
compressed_bytes=$(podman save --format docker-archive "$ETCD_IMAGE" 2>/dev/null | gzip -6 | wc -c)
echo "  etcd image size: $((unpacked_bytes / 1000)) kB unpacked, $((compressed_bytes / 1000)) kB compressed (podman save | gzip -6)"
check "compressed etcd image under $((ETCD_SIZE_GOAL_BYTES / 1000000)) MB" [ "$compressed_bytes" -gt 0 -a "$compressed_bytes" -lt "$ETCD_SIZE_GOAL_BYTES" ]

step "a cluster: etcd and three brokers (buildah run --isolation=chroot)"
run_ctr[etcd]=$(buildah from --pull=never "$ETCD_IMAGE" 2>"$WORK/from-etcd.log") || abort "etcd working container created" "$(cat "$WORK/from-etcd.log")"
for i in 1 2 3; do
    run_ctr[broker$i]=$(buildah from --pull=never "$IMAGE" 2>"$WORK/from-broker$i.log") \
        || abort "broker working container created" "$(cat "$WORK/from-broker$i.log")"
    mkdir -p "$WORK/cluster$i"
    chown 1000:1000 "$WORK/cluster$i"
done
etcd_version=$(buildah run --isolation=chroot "${run_ctr[etcd]}" -- etcd --version 2>&1 | sed -n 's/^etcd Version: //p')
check "the image's etcd is Debian's 3.4 (got '$etcd_version')" grep -q '^3\.4\.' <<<"$etcd_version"
etcd_uid=$(buildah run --isolation=chroot "${run_ctr[etcd]}" -- id -u 2>/dev/null)
check "etcd runs as a non-root uid (got '$etcd_uid')" [ -n "$etcd_uid" -a "$etcd_uid" != 0 ]
mkdir -m 0700 "$WORK/etcd-data"
chown "${etcd_uid:-1001}:${etcd_uid:-1001}" "$WORK/etcd-data"

mapfile -t ports < <(free_ports 8)
etcd_client=${ports[0]} etcd_peer=${ports[1]}
declare -A int_port=([1]=${ports[2]} [2]=${ports[3]} [3]=${ports[4]}) ext_port=([1]=${ports[5]} [2]=${ports[6]} [3]=${ports[7]})
ETCD_URL=http://127.0.0.1:$etcd_client
mapfile -t gargv < <(image_argv "$IMAGE")
mapfile -t eargv < <(image_argv "$ETCD_IMAGE")
mapfile -t ehargv < <(health_argv "$etcd_health_json")

# start_cluster_broker I: broker I (node.id I) from the Gregor image with INTERNAL and EXTERNAL listeners
start_cluster_broker() {
    local i=$1 l
    l="INTERNAL://127.0.0.1:${int_port[$i]},EXTERNAL://127.0.0.1:${ext_port[$i]}"
    start_run "broker$i" "$WORK/cluster-broker$i.log" '*/usr/local/bin/gregor' -v "$WORK/cluster$i:/var/lib/gregor" \
        -e GREGOR_CFG_NODE_ID="$i" -e GREGOR_CFG_LISTENERS="$l" -e GREGOR_CFG_ADVERTISED_LISTENERS="$l" \
        -e GREGOR_CFG_LISTENER_SECURITY_PROTOCOL_MAP=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT \
        -e GREGOR_CFG_INTER_BROKER_LISTENER_NAME=INTERNAL \
        -e GREGOR_CFG_GREGOR_METADATA_ETCD_ENDPOINTS="$ETCD_URL" \
        -e GREGOR_CFG_AUTO_CREATE_TOPICS_ENABLE=true -e GREGOR_CFG_NUM_PARTITIONS=6 \
        -e GREGOR_CFG_GREGOR_ADMIN_LISTENERS=http://127.0.0.1:0 \
        "${run_ctr[broker$i]}" -- "${gargv[@]}"
}
broker_health() { buildah run --isolation=chroot "${run_ctr[broker$1]}" -- "${hargv[@]}" >"$WORK/health-broker$1.log" 2>&1; }
etcd_health() {
    buildah run --isolation=chroot -e ETCDCTL_ENDPOINTS="$ETCD_URL" "${run_ctr[etcd]}" -- "${ehargv[@]}" >"$WORK/health-etcd.log" 2>&1
}
broker_started() { grep -q 'started in' "$WORK/cluster-broker$1.log" 2>/dev/null; }

# broker 1 first, before etcd: it waits for etcd with its listeners closed, so its HEALTHCHECK fails (a
# compose file may start brokers before etcd is healthy; they are healthy only once registered)
start_cluster_broker 1
wait_for 20 grep -q 'docker-entrypoint: wrote' "$WORK/cluster-broker1.log" || abort "broker 1 rendered its configuration" "$(tail -n 5 "$WORK/cluster-broker1.log")"
sleep 2
check "broker 1 keeps waiting while etcd is not up" eval 'running broker1 && ! broker_started 1'
check "broker 1's HEALTHCHECK fails before it could register in etcd" eval '! broker_health 1'

start_run etcd "$WORK/etcd.log" '*/usr/bin/etcd' -v "$WORK/etcd-data:/var/lib/etcd" \
    -e ETCD_LISTEN_CLIENT_URLS="$ETCD_URL" -e ETCD_ADVERTISE_CLIENT_URLS="$ETCD_URL" \
    -e ETCD_LISTEN_PEER_URLS="http://127.0.0.1:$etcd_peer" -e ETCD_INITIAL_ADVERTISE_PEER_URLS="http://127.0.0.1:$etcd_peer" \
    -e ETCD_INITIAL_CLUSTER="etcd=http://127.0.0.1:$etcd_peer" \
    "${run_ctr[etcd]}" -- "${eargv[@]}"
if wait_for 30 etcd_health; then
    ok "etcd started on 127.0.0.1:$etcd_client, its HEALTHCHECK (${ehargv[*]}) passes"
else
    tail -n 20 "$WORK/etcd.log" >&2
    abort "etcd started and healthy" "etcd did not become healthy (log: $WORK/etcd.log)"
fi
check "etcd took its settings from the ETCD_* environment (none unrecognized)" \
    eval '[ "$(grep -c "recognized and used environment variable" "$WORK/etcd.log")" -ge 10 ] && ! grep -q "unrecognized environment variable" "$WORK/etcd.log"' 
if wait_for 30 broker_started 1; then
    ok "broker 1 registered and opened its listeners once etcd was up"
else
    tail -n 20 "$WORK/cluster-broker1.log" >&2
    abort "broker 1 started" "broker 1 did not start (log: $WORK/cluster-broker1.log)"
fi
start_cluster_broker 2
start_cluster_broker 3
for i in 2 3; do
    if ! wait_for 30 broker_started "$i"; then
        tail -n 20 "$WORK/cluster-broker$i.log" >&2
        abort "broker $i started" "broker $i did not start (log: $WORK/cluster-broker$i.log)"
    fi
done
ok "brokers 2 and 3 started"
for i in 1 2 3; do
    check "broker $i's HEALTHCHECK passes inside its container" broker_health "$i"
done
cluster_ids=$(for i in 1 2 3; do sed -n 's/.*started in .* cluster \([^,]*\),.*/\1/p' "$WORK/cluster-broker$i.log"; done | sort -u)
check "the three brokers joined one cluster (id $(echo "$cluster_ids" | tr '\n' ' '))" [ "$(wc -w <<<"$cluster_ids")" -eq 1 ]

seq 1 "$MESSAGES" | sed 's/.*/key-&:docker-cluster message &/' >"$WORK/cluster-sent.txt"
check "kcat produces $MESSAGES keyed messages (acks=all) to the auto-created topic docker-cluster" \
    timeout 60 kcat -P -b "127.0.0.1:${ext_port[1]}" -t docker-cluster -K: -X acks=all -l "$WORK/cluster-sent.txt"
timeout 30 kcat -L -J -b "127.0.0.1:${ext_port[2]}" -t docker-cluster >"$WORK/cluster-metadata.json" 2>"$WORK/cluster-metadata.log"
metadata_verdict=$(python3 - "$WORK/cluster-metadata.json" "${ext_port[1]}" "${ext_port[2]}" "${ext_port[3]}" <<'PY'
import collections, json, sys
md = json.load(open(sys.argv[1]))
want = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(sys.argv[2:5])}
got = {b["id"]: b["name"] for b in md["brokers"]}
parts = md["topics"][0]["partitions"]
leaders = collections.Counter(p["leader"] for p in parts)
print("brokers", "ok" if got == want else f"bad {got}")
print("leaders", "ok" if len(parts) == 6 and leaders == {1: 2, 2: 2, 3: 2} else f"bad {len(parts)} partitions, {dict(leaders)}")
PY
)
check "metadata lists the three brokers at their EXTERNAL addresses" grep -qx 'brokers ok' <<<"$metadata_verdict"
check "docker-cluster has 6 partitions, 2 led by each broker" grep -qx 'leaders ok' <<<"$metadata_verdict"
timeout 60 kcat -C -b "127.0.0.1:${ext_port[3]}" -t docker-cluster -o beginning -e -c "$MESSAGES" -q -f '%p %k:%s\n' \
    >"$WORK/cluster-got.txt" 2>"$WORK/cluster-consume.log"
check "kcat consumes the same $MESSAGES messages from the three leaders" \
    cmp -s <(sort "$WORK/cluster-sent.txt") <(cut -d' ' -f2- "$WORK/cluster-got.txt" | sort)
check "every one of the 6 partitions holds messages" [ "$(cut -d' ' -f1 "$WORK/cluster-got.txt" | sort -u | wc -l)" -eq 6 ]
for i in 1 2 3; do
    n=$(find "$WORK/cluster$i" -maxdepth 1 -type d -name 'docker-cluster-*' | wc -l)
    check "broker $i's volume holds the logs of the 2 partitions it leads (found $n)" [ "$n" -eq 2 ]
done

for i in 1 2 3; do
    stop_run "broker$i" TERM
    check "SIGTERM stops broker $i with exit code 0 and 'stopped cleanly'" \
        [ "${run_rc[broker$i]}" -eq 0 -a -n "$(grep -l 'stopped cleanly' "$WORK/cluster-broker$i.log")" ]
done
stop_run etcd TERM
# etcd shuts down on SIGTERM, then exits 0 when it is PID 1 (in a container) and otherwise re-raises the
# signal, as here under buildah run (which then reports "subprocess exited on terminated", status 1)
check "SIGTERM stops etcd cleanly (it shut down on the signal and was not killed)" eval \
    'grep -q "received signal; shutting down" "$WORK/etcd.log" && { [ "${run_rc[etcd]}" -eq 0 ] || grep -q "exited on terminated" "$WORK/etcd.log"; }' 
check "etcd's data is on its volume, owned by uid $etcd_uid" \
    [ -s "$WORK/etcd-data/member/snap/db" -a "$(stat -c %u "$WORK/etcd-data/member/snap/db" 2>/dev/null)" = "$etcd_uid" ]
