# Gregor: top-level entry points. `make run` and `make test` are the README's quick start.
# Everything builds into build/ through CMake; see README.md for the stages and their time budgets.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: all build deps test-deps run test unit oracle codegen-check compat compat-full compat-librdkafka bench docker-test clean sanitize

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
test: test-deps build codegen-check unit oracle compat

codegen-check:
	@scripts/codegen-check.sh

unit:
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# The codec against Apache Kafka's own message classes, both directions (needs Java 17 and Maven).
oracle:
	@scripts/oracle-check.sh $(BUILD) 30

compat:
	@if [ -x compat-tests/run.sh ]; then compat-tests/run.sh $(BUILD); else echo "compat: no suites yet"; fi

sanitize:
	@$(MAKE) BUILD=build-asan CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Debug -DGREGOR_SANITIZE=ON" build unit

clean:
	rm -rf $(BUILD) build-asan
