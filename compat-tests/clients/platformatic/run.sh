#!/usr/bin/env bash
# platformatic/run.sh BOOTSTRAP quick|full RESULT_JSON: the platformatic row of the client matrix (issue #9); the scenario and the
# install steps are shared by the JavaScript clients in ../js/ (run-client.sh, scenario.mjs, platformatic.mjs).
exec "$(dirname "$0")/../js/run-client.sh" platformatic "$@"
