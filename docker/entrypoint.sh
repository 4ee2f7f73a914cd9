#!/bin/sh
# docker-entrypoint.sh: the image's ENTRYPOINT. It renders /etc/gregor/server.properties from the template
# and the environment, then execs the command, so that gregor is PID 1 and receives `docker stop`'s SIGTERM.
#
#   docker-entrypoint.sh gregor [args...]   render the configuration, then exec gregor (no rendering for
#                                           --version, --help, --healthcheck: a running broker's file stays)
#   docker-entrypoint.sh -x ...             same as `gregor /etc/gregor/server.properties -x ...`
#   docker-entrypoint.sh render-config      print the configuration that would be rendered, change nothing
#   docker-entrypoint.sh anything else      exec it unchanged (e.g. `sh`)
#
# Environment (see docker/README.md):
#   GREGOR_ADVERTISED_HOST  replaces ${GREGOR_ADVERTISED_HOST} in the template; default: `uname -n`
#   GREGOR_ADVERTISED_PORT  replaces ${GREGOR_ADVERTISED_PORT}; default: the port of the effective listener
#   GREGOR_CFG_<KEY>=value  appended as `key=value` after the template, so it wins over it. <KEY> follows
#     the Confluent images' rule: lower-cased; a single `_` is `.`, `__` is `_`, `___` is `-`.
#     GREGOR_CFG_LOG_RETENTION_HOURS=24 -> log.retention.hours=24
#     GREGOR_CFG_GREGOR_ACKS_ALL_FSYNC=false -> gregor.acks.all.fsync=false
# Invariant: the rendered file is written whole to a temporary file and renamed, never half-written. When
# /etc/gregor/server.properties cannot be replaced (mounted read-only, or a uid that cannot write
# /etc/gregor), it is used as it is and the settings are passed to gregor as --override arguments instead
# (an advertised.listeners one when GREGOR_ADVERTISED_HOST/PORT is set, then one per GREGOR_CFG_*).
set -eu

TEMPLATE=/etc/gregor/server.properties.template
CONFIG=/etc/gregor/server.properties

die() {
    echo "docker-entrypoint: $*" >&2
    exit 2
}

# cfg_key NAME: the property key of the environment variable NAME (GREGOR_CFG_ prefix included).
# Same order as Confluent's env_to_props: single underscores first, then ___ and __.
cfg_key() {
    # shellcheck disable=SC2018,SC2019 # names are ASCII ([A-Za-z0-9_]), as Confluent's .lower() sees them
    printf '%s\n' "${1#GREGOR_CFG_}" | tr 'A-Z' 'a-z' \
        | sed -e ':a' -e 's/\([^_]\)_\([^_]\)/\1.\2/' -e 'ta' -e 's/___/-/g' -e 's/__/_/g'
}

# cfg_names: the names of the GREGOR_CFG_* variables that are set, sorted.
cfg_names() {
    env | sed -n 's/^\(GREGOR_CFG_[A-Za-z0-9_]*\)=.*/\1/p' | sort -u | while read -r name; do
        if eval "[ \"\${$name+set}\" = set ]"; then printf '%s\n' "$name"; fi
    done
}

# cfg_lines: one `key=value` line per GREGOR_CFG_* variable; fails on a value with a line break.
cfg_lines() {
    for name in $(cfg_names); do
        key=$(cfg_key "$name")
        [ -n "$key" ] || die "$name: empty key"
        value=
        eval "value=\${$name}"
        case "$value" in
        *'
'*) die "$name: the value contains a line break" ;;
        esac
        printf '%s=%s\n' "$key" "$value"
    done
}

# sed_escape STRING: STRING made safe as the replacement of `s|...|...|`.
sed_escape() {
    printf '%s' "$1" | sed -e 's/[\\&|]/\\&/g'
}

# advertised BASEFILE ENV_LINES: sets $host and $port, the advertised address: GREGOR_ADVERTISED_HOST or
# the hostname, GREGOR_ADVERTISED_PORT or the port of the effective listener (the last `listeners` line
# of BASEFILE and ENV_LINES together, first entry).
advertised() {
    listeners=$( { grep -E '^[[:space:]]*listeners[[:space:]]*[=:]' "$1" || true
                   printf '%s\n' "$2" | grep -E '^listeners=' || true; } | tail -n 1 | sed -e 's/^[^=:]*[=:][[:space:]]*//')
    first=${listeners%%,*}
    host=${GREGOR_ADVERTISED_HOST:-$(uname -n)}
    port=${GREGOR_ADVERTISED_PORT:-${first##*:}}
    case "$port" in
    '' | *[!0-9]*) die "advertised port '$port' is not a number (set GREGOR_ADVERTISED_PORT)" ;;
    esac
    case "$host" in
    '' | *[[:space:]]*) die "advertised host '$host' is empty or has spaces (set GREGOR_ADVERTISED_HOST)" ;;
    esac
}

# render: the whole configuration on stdout.
render() {
    [ -r "$TEMPLATE" ] || die "cannot read $TEMPLATE"
    env_lines=$(cfg_lines) || exit 2
    advertised "$TEMPLATE" "$env_lines"
    # substituted outside comment lines only
    sed -e "/^[[:space:]]*[#!]/!s|\${GREGOR_ADVERTISED_HOST}|$(sed_escape "$host")|g" \
        -e "/^[[:space:]]*[#!]/!s|\${GREGOR_ADVERTISED_PORT}|$(sed_escape "$port")|g" "$TEMPLATE"
    if [ -n "$env_lines" ]; then
        printf '\n# from GREGOR_CFG_* environment variables\n%s\n' "$env_lines"
    fi
}

# starts_broker ARGS...: true unless ARGS ask gregor for --version, --help or --healthcheck
starts_broker() {
    for a in "$@"; do
        case "$a" in --version | --help | -h | --healthcheck) return 1 ;; esac
    done
    return 0
}

case "${1:-}" in
-*) set -- gregor "$CONFIG" "$@" ;;
'') set -- gregor "$CONFIG" ;;
esac

if [ "$1" = render-config ]; then
    render
    exit 0
fi

if [ "$1" = gregor ] && starts_broker "$@"; then
    content=$(render) || exit 2
    tmp="$CONFIG.tmp.$$"
    if { printf '%s\n' "$content" >"$tmp" && mv -f "$tmp" "$CONFIG"; } 2>/dev/null; then
        echo "docker-entrypoint: wrote $CONFIG ($(grep -E '^advertised\.listeners=' "$CONFIG" | tail -n 1))" >&2
    elif [ -r "$CONFIG" ]; then
        # e.g. the file is mounted read-only, or the container runs as a uid that cannot write /etc/gregor
        rm -f "$tmp" 2>/dev/null || true
        echo "docker-entrypoint: cannot replace $CONFIG: using it as it is, settings passed as --override" >&2
        env_lines=$(cfg_lines) || exit 2
        if [ -n "${GREGOR_ADVERTISED_HOST:-}${GREGOR_ADVERTISED_PORT:-}" ]; then
            advertised "$CONFIG" "$env_lines"
            set -- "$@" --override "advertised.listeners=PLAINTEXT://$host:$port"
        fi
        # one --override per line, after the user's arguments (values may hold spaces); later ones win
        while IFS= read -r line; do
            if [ -n "$line" ]; then set -- "$@" --override "$line"; fi
        done <<END_OF_LINES
$env_lines
END_OF_LINES
    else
        die "cannot read or write $CONFIG"
    fi
fi

exec "$@"
