# etcd.Dockerfile: the etcd image a Gregor cluster keeps its metadata in (issue #19), built like Gregor's own
# image: debian:bookworm-slim plus Debian's etcd-server (etcd 3.4) and etcd-client (etcdctl, for the
# healthcheck). One member by default; every setting comes from the environment as etcd reads it
# (ETCD_<FLAG> for --<flag>, e.g. ETCD_ADVERTISE_CLIENT_URLS for --advertise-client-urls).
#
# Build (any context works, the build copies no file; compose-cluster.yml uses the repository root):
#   docker build -f docker/etcd.Dockerfile -t gregor-etcd .
# Invariants: etcd runs as the unprivileged user `etcd` (uid/gid 1001), keeps its data in the volume
# /var/lib/etcd, and is PID 1 (no shell above it): etcd exits 0 by itself on `docker stop`'s SIGTERM when it
# is PID 1. The HEALTHCHECK is `etcdctl endpoint health` against ETCDCTL_ENDPOINTS (the client URL on the
# container's loopback): set that variable too when ETCD_LISTEN_CLIENT_URLS moves the client port.
# Read next: docker/compose-cluster.yml (etcd with three brokers), docker/README.md ("A cluster with etcd"),
# docker/smoke-test.sh (`make docker-test` runs this image).

ARG DEBIAN_IMAGE=debian:bookworm-slim
FROM ${DEBIAN_IMAGE}

# The user first, with a fixed uid, so the package's postinst keeps it; policy-rc.d stops the postinst from
# starting the service inside the build.
RUN groupadd --gid 1001 etcd \
 && useradd --uid 1001 --gid etcd --home-dir /var/lib/etcd --no-create-home --shell /usr/sbin/nologin etcd \
 && printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends etcd-server etcd-client \
 && rm -f /usr/sbin/policy-rc.d /etc/init.d/etcd /lib/systemd/system/etcd.service /etc/default/etcd \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
 && install -d -o etcd -g etcd -m 0700 /var/lib/etcd \
 && etcd --version && etcdctl version

# One member named `etcd` listening for clients and peers on every interface of the container. A compose
# file or `docker run -e` overrides these: ETCD_ADVERTISE_CLIENT_URLS must be the address clients (the
# brokers) reach it at. Auto-compaction keeps one hour of history (Gregor's watches re-read the prefix when
# their start revision was compacted, so any retention is safe for it). Logs: zap (JSON lines on stderr),
# etcd 3.5's default; 3.4's capnslog default is deprecated and says so at every start.
ENV ETCD_NAME=etcd \
    ETCD_DATA_DIR=/var/lib/etcd \
    ETCD_LISTEN_CLIENT_URLS=http://0.0.0.0:2379 \
    ETCD_ADVERTISE_CLIENT_URLS=http://localhost:2379 \
    ETCD_LISTEN_PEER_URLS=http://0.0.0.0:2380 \
    ETCD_INITIAL_ADVERTISE_PEER_URLS=http://localhost:2380 \
    ETCD_INITIAL_CLUSTER=etcd=http://localhost:2380 \
    ETCD_INITIAL_CLUSTER_STATE=new \
    ETCD_AUTO_COMPACTION_MODE=periodic \
    ETCD_AUTO_COMPACTION_RETENTION=1h \
    ETCD_LOGGER=zap \
    ETCDCTL_API=3 \
    ETCDCTL_ENDPOINTS=http://127.0.0.1:2379

USER etcd
WORKDIR /var/lib/etcd
VOLUME /var/lib/etcd
EXPOSE 2379 2380
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["etcdctl", "--dial-timeout=2s", "--command-timeout=3s", "endpoint", "health"]
ENTRYPOINT ["etcd"]
