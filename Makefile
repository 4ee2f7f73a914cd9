# Gregor: top-level entry points. `make run` and `make test` are the README's quick start.
# Everything builds into build/ through CMake; see README.md for the stages and their time budgets.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo
# The tests' Python modules (python3-confluent-kafka, python3-kafka, ...) come from Debian's packages, which
# install for Debian's /usr/bin/python3: a directory holding only a python3 link to it goes first on PATH, so
# a python3 from pyenv or a venv earlier on PATH (one without those modules) does not shadow it, and nothing
# else on PATH (node, java, go) changes.
ifneq ($(wildcard /usr/bin/python3),)
PYSHIM := $(CURDIR)/$(BUILD)/python-shim
$(shell mkdir -p $(PYSHIM) && ln -sf /usr/bin/python3 $(PYSHIM)/python3)
export PATH := $(PYSHIM):$(PATH)
endif

.PHONY: all build deps test-deps run test lint unit cluster-check oracle codegen-check compat compat-full compat-eos compat-librdkafka compat-librdkafka-extended bench docker-test clean sanitize sanitize-check test-dashboard test-cluster test-faults test-txn-faults

all: build

deps:
	@scripts/install-deps.sh build

test-deps:
	@scripts/install-deps.sh test

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

# Starts the broker in the foreground with its embedded defaults (PLAINTEXT://127.0.0.1:9092, data/).
run: build
	$(BUILD)/bin/gregor $(ARGS)

# Every test stage that fits the 45-minute budget; ends with one summary line per stage.
test: test-deps build lint codegen-check unit cluster-check sanitize-check oracle compat bench-quick

# Guards: clang-format-14 over hand-written C, and includes pointing down the layer order (scripts/lint.py).
lint:
	@scripts/lint.py

codegen-check:
	@scripts/codegen-check.sh

unit:
	@cd $(BUILD) && { ctest --output-on-failure -j$(JOBS) >ctest.out 2>&1; rc=$$?; cat ctest.out; \
	t=$$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' ctest.out); \
	f=$$(sed -n 's/.*, \([0-9]*\) tests failed out of.*/\1/p' ctest.out); \
	echo "unit: $$(( $${t:-0} - $${f:-1} )) passed, $${f:-1} failed"; exit $$rc; }

# The etcd client (cluster/etcd.h) against a real etcd started on free loopback ports; under a minute.
cluster-check:
	@cluster/tests/etcd-tests.sh $(BUILD)

# The codec against Apache Kafka's own message classes, both directions (needs Java 17 and Maven).
oracle:
	@scripts/oracle-check.sh $(BUILD) 30

compat:
	@if [ -x compat-tests/run.sh ]; then compat-tests/run.sh $(BUILD); else echo "compat: no suites yet"; fi

# Longer client runs that do not fit make test's budget: five kill -9 rounds of 1,000,000 records; the
# idempotent producer with 200,000 records through a connection-cutting proxy and three kill -9; the full
# stock client matrix (10,000 records, every codec; writes compat-tests/clients/matrix.md); the differential
# suite against Apache Kafka 4.4.0 (also in make test; writes compat-tests/differential/results.md).
# Every suite runs even when an earlier one failed; each ends with its own "N passed, N failed" line.
compat-full: test-deps build
	@GREGOR_BIN=$(BUILD)/bin/gregor compat-tests/e2e/full.sh; e=$$?; \
	GREGOR_BIN=$(BUILD)/bin/gregor compat-tests/idempotence/full.sh; i=$$?; \
	GREGOR_BIN=$(BUILD)/bin/gregor compat-tests/clients/run.sh --full $(BUILD); c=$$?; \
	REPO=$(CURDIR) RESULTS=$(CURDIR)/compat-tests/differential/results.md GREGOR_BIN=$(abspath $(BUILD))/bin/gregor compat-tests/differential/run.sh; d=$$?; \
	[ $$e -eq 0 ] && [ $$i -eq 0 ] && [ $$c -eq 0 ] && [ $$d -eq 0 ]

# Exactly-once with kill -9 (issue #21, the transaction switch on): Kafka Streams 4.4.0 exactly_once_v2 word count
# and a Java read-process-write pipeline, each killed mid-run and restarted (compat-tests/streams/run.sh; env SEED).
compat-eos: test-deps build
	@GREGOR_BIN=$(BUILD)/bin/gregor compat-tests/streams/run.sh

# Every broker test of librdkafka 2.0.2's own suite, one per process; writes compat-tests/librdkafka/results.md.
compat-librdkafka: test-deps build
	@GREGOR_BIN=$(BUILD)/bin/gregor compat-tests/librdkafka/run.sh --all

# librdkafka's must-pass entries marked `extended` (0077 and the -P re-runs), left out of make test for time.
compat-librdkafka-extended: test-deps build
	@GREGOR_BIN=$(BUILD)/bin/gregor compat-tests/librdkafka/run.sh --extended \
	    $$(awk '$$2 == "extended" {print $$1}' compat-tests/librdkafka/must-pass.txt)

# Stock clients against a 3-broker cluster with etcd: librdkafka's whole suite (results-cluster.md) and the
# Java and franz-go rows of the client matrix (compat-tests/cluster/test-cluster.sh).
# Every panel of the Grafana dashboard (docker/grafana/dashboards/gregor.json) queried on Debian's prometheus
# scraping a broker under a load where a slow group falls behind retention; not in make test yet. Under 2 min.
test-dashboard: test-deps build
	@GREGOR_BIN=$(BUILD)/bin/gregor python3 compat-tests/dashboard/run.py $(BUILD)

test-cluster: test-deps build
	@compat-tests/cluster/test-cluster.sh $(BUILD)

# The replication fault runs at length (compat-tests/cluster/jepsen.py, issue #20): ten seeds x (300 s of
# faults + 20 s drain) at replication factor 3 (min.insync.replicas 2), three brokers and etcd in network
# namespaces; make test runs three seeds x 60 s, also at replication factor 3 (under its network-thread
# audit), through compat-tests/cluster/run.sh. Every nemesis (issue #24 added etcd member loss, a full log
# dir and a broker restarted on an empty log dir): odd-numbered seeds with one etcd member (etcd faults take
# it away whole), even-numbered ones with three (they take one member away); first the case the wipe
# nemesis does not reach one fault at a time (compat-tests/cluster/wipe_last_isr.py, about 20 s). About an
# hour; needs root.
test-faults: test-deps build
	@REPO=$(CURDIR) GREGOR_BIN=$(CURDIR)/$(BUILD)/bin/gregor python3 compat-tests/cluster/wipe_last_isr.py
	@REPO=$(CURDIR) GREGOR_BIN=$(CURDIR)/$(BUILD)/bin/gregor python3 compat-tests/cluster/jepsen.py \
		--seeds 1,2,3,4,5,6,7,8,9,10 --duration 300 --drain 20 --rf 3 --nemeses all --etcd-members 1,3

# The exactly-once fault runs at length (compat-tests/txn/faults.sh, issue #21, one node): every transaction
# failpoint once, then the confluent-kafka read-process-write pipeline under a seeded schedule of kill -9 (of
# itself, of the broker, and the broker's failpoints) for seeds 1-5, 3000 records and 60 s of faults each;
# make test's txn suite runs the failpoints and one 15 s seed. About 8 minutes.
test-txn-faults: test-deps build
	@REPO=$(CURDIR) GREGOR_BIN=$(CURDIR)/$(BUILD)/bin/gregor compat-tests/txn/faults.sh

sanitize:
	@$(MAKE) BUILD=build-asan CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Debug -DGREGOR_SANITIZE=ON" build unit

# make test's sanitizer stage: in the ASan + UBSan build (build-asan, only the targets it runs), the protocol
# malformed-input and timestamp tests and 60 s of the fuzz corpus and its mutants, UBSan aborting on any finding.
sanitize-check: deps
	@scripts/sanitize-check.sh build-asan 60

clean:
	rm -rf $(BUILD) build-asan

# Benchmarks (bench/, issue #10). `make bench`: Gregor against Apache Kafka 4.4.0 side by side, 3 alternating
# rounds, about 25 minutes on 2 cores; writes bench/results.md. `make bench-quick`: Gregor alone for a few
# seconds, a check that the harness works; ends with "bench-quick: N passed, N failed".
.PHONY: bench bench-quick
# Single broker (bench/run.py, bench/results.md), then the cluster section: three Gregor brokers against
# three Kafka 4.4.0 nodes at RF 3 (bench/cluster.py, bench/results-cluster.md; also alone: make bench-cluster).
bench: test-deps
	@python3 bench/run.py && python3 bench/cluster.py

bench-quick: test-deps
	@python3 bench/run.py --quick

# `make bench-cluster`: replication at RF 3, three Gregor brokers + etcd against three Kafka 4.4.0 brokers
# (bench/cluster.py): throughput, latency, CPU per GB, failover time, replication traffic; about 15 minutes;
# writes bench/results-cluster.md.
.PHONY: bench-cluster
bench-cluster: test-deps
	@python3 bench/cluster.py

# `make bench-metrics`: what /metrics costs (issue #22): ApiVersions p50/p99/p99.9 and broker CPU per GB with and
# without a scrape every second, scrape time and size, on 1,000 partitions and 100 groups with commits
# (bench/metrics_cost.py, about 3 minutes); writes bench/results-metrics.md.
.PHONY: bench-metrics
bench-metrics: test-deps
	@python3 bench/metrics_cost.py

# `make bench-security`: what TLS and SASL cost (issue #23): produce and consume MB/s, broker CPU per GB over
# PLAINTEXT, SSL and SASL_SSL (PLAIN), Gregor against Kafka 4.4.0 side by side, and TLS handshakes per second
# (bench/security.py, about 10 minutes); writes bench/results-security.md.
.PHONY: bench-security
bench-security: test-deps
	@python3 bench/security.py

# `make bench-txn`: transactions on one node, Gregor (switch on; page cache and fsync) against Kafka 4.4.0:
# EndTxn latency, transactional vs idempotent throughput, CPU per GB (bench/txn.py, about 20 minutes); writes
# bench/results-txn.md and results.md's Transactions section. bench-quick runs its client once (a few seconds).
.PHONY: bench-txn
bench-txn: test-deps
	@python3 bench/txn.py

# `make bench-txn-tv2`: transaction version 2 against 1 (issue #25), Gregor (page cache) against Kafka 4.4.0,
# each at levels 2 and 1, with the Java 4.4 client (compat-tests/streams TxnBench): EndTxn latency and 100-record
# transactions' throughput (bench/txn_tv2.py, 3 rounds, about 10 minutes); writes its section of bench/results-txn.md.
.PHONY: bench-txn-tv2
bench-txn-tv2: test-deps
	@python3 bench/txn_tv2.py

# Gregor before/after (issue #18's reshape): the release broker at BEFORE against the working tree, ROUNDS
# alternating rounds, no Kafka; writes bench/before-after.md (bench/compare.py). About 13 minutes for 5 rounds.
BEFORE ?= 5a4c1fd
ROUNDS ?= 5
.PHONY: bench-compare
bench-compare: test-deps
	@python3 bench/run.py --compare-before $(BEFORE) --rounds $(ROUNDS) --callgrind

# Docker image smoke test (docker/, issue #12): builds a debian:bookworm-slim base with debootstrap (cached in
# docker/.cache/), builds docker/Dockerfile with podman, runs the broker with buildah, produces and consumes
# with kcat, checks the healthcheck and a clean SIGTERM stop; then builds docker/etcd.Dockerfile and runs etcd plus
# three cluster-mode brokers the same way (a 6-partition topic led by the three), and checks both compose files
# against the compose-spec schema (docker/check-compose.py). Needs root; ends with "docker-test: N passed, N failed".
docker-test:
	@docker/smoke-test.sh
