#!/usr/bin/env bash
# java-latest/run.sh: the Java scenario (../java) with the newest kafka-clients 4.x on Maven Central, so the
# matrix also covers a client newer than the java row's 4.1.1 (newer request versions are negotiated down through
# ApiVersions). Raise the version here when a newer 4.x is released.
KAFKA_CLIENTS_VERSION=${KAFKA_CLIENTS_VERSION:-4.4.0} CLIENT_NAME=java-latest \
    exec "$(cd "$(dirname "$0")" && pwd)/../java/run.sh" "$@"
