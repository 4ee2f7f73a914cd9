#!/usr/bin/env bash
# lib/pyclient.sh: shared body of the Python clients' run.sh (see README.md, "The client's run.sh contract").
#   pyclient.sh pypi|debian kafka-python|confluent-kafka CLIENT_NAME BOOTSTRAP MODE RESULT_JSON
# pypi:   a venv at compat-tests/.cache/clients/py with the pinned PyPI versions below (created on first use).
# debian: /usr/bin/python3 with Debian's python3-kafka / python3-confluent-kafka (apt-get install on first
#         use; needs root or sudo), the older versions.
# On an install failure writes a result.json with install_error and exits 0.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$here/../../.." && pwd)
src=$1 kind=$2 client=$3 B=$4 mode=$5 out=$6
PYPI_PKGS=('kafka-python==3.0.12' 'confluent-kafka==2.16.1' 'lz4==4.4.5' 'zstandard==0.25.0' 'python-snappy==0.7.3' 'cramjam==2.14.0')
install_error() {
    python3 - "$out" "$client" "$1" <<'PY'
import json, sys
json.dump({"client": sys.argv[2], "version": None, "language": "Python", "install_error": sys.argv[3], "steps": []},
          open(sys.argv[1], "w"))
PY
    echo "$client: not installed: $1"
    exit 0
}
mod=${kind//-/_}; [ "$kind" = kafka-python ] && mod=kafka
if [ "$src" = pypi ]; then
    venv=$REPO/compat-tests/.cache/clients/py
    if ! "$venv/bin/python" -c "import kafka, confluent_kafka, lz4, zstandard, snappy" 2>/dev/null; then
        mkdir -p "$(dirname "$venv")"
        { python3 -m venv "$venv" && "$venv/bin/pip" install -q "${PYPI_PKGS[@]}"; } >"$venv.install.log" 2>&1 ||
            install_error "pip install into a venv failed: $(tail -2 "$venv.install.log" | tr '\n' ' ')"
    fi
    py=("$venv/bin/python")
else
    pkg=python3-${kind}; [ "$kind" = kafka-python ] && pkg=python3-kafka
    # Only Debian's packages: no site-packages from pip (/usr/local/lib/python3*/dist-packages, where the admin
    # suite's `pip install --break-system-packages` puts kafka-python 3 and would shadow Debian's 2.0.2).
    export PYTHONPATH=/usr/lib/python3/dist-packages
    py=(/usr/bin/python3 -s -S)
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo -n"
        { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
            "$pkg" python3-lz4 python3-snappy python3-zstandard; } >/tmp/gregor-apt-$client.log 2>&1 ||
            install_error "apt-get install $pkg failed: $(tail -2 /tmp/gregor-apt-$client.log | tr '\n' ' ')"
    fi
fi
"${py[@]}" -c "import $mod" 2>/tmp/gregor-import-$client.log ||
    install_error "import $mod with ${py[*]}: $(tail -1 /tmp/gregor-import-$client.log)"
if [ "$src" = debian ]; then # the module imported must be the Debian package's
    where=$("${py[@]}" -c "import $mod; print($mod.__file__)")
    case "$where" in /usr/lib/python3/dist-packages/*) ;; *) install_error "$mod imports from $where, not from $pkg" ;; esac
fi
exec "${py[@]}" "$here/scenario.py" "$kind" "$client" "$B" "$mode" "$out"
