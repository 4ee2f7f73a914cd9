#!/usr/bin/env bash
# codegen-check.sh: regenerates the message codec from protocol/schema into a temporary directory and fails
# when it differs from the committed protocol/gen (someone edited generated code or forgot to regenerate).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 tools/gen_codec.py protocol/schema "$tmp"
fail=0
for f in messages.h messages.c messages_test.c; do
    if ! cmp -s "$tmp/$f" "protocol/gen/$f"; then
        echo "codegen-check: protocol/gen/$f differs from what tools/gen_codec.py generates"
        fail=1
    fi
done
if [ $fail -eq 0 ]; then echo "codegen-check: 1 passed, 0 failed"; else echo "codegen-check: 0 passed, 1 failed"; exit 1; fi
