#!/usr/bin/env bash
# kafkajs/run.sh BOOTSTRAP quick|full RESULT_JSON: the kafkajs row of the client matrix (issue #9); the scenario and the
# install steps are shared by the JavaScript clients in ../js/ (run-client.sh, scenario.mjs, kafkajs.mjs).
exec "$(dirname "$0")/../js/run-client.sh" kafkajs "$@"
