# Builds librdkafka's test runner (tests/test-runner) from the Debian source
# package against the SYSTEM librdkafka (-lrdkafka -lrdkafka++), not against
# a librdkafka built from the source tree: the library under test is the one
# the project's users have installed (librdkafka1 2.0.2 from Debian bookworm).
#
# Invariants: objects and the binary go to $(OUT), the source tree is only read
# (apart from config.h / Makefile.config written by its ./configure).
# Everything links: the internals the suite calls (mock cluster, unit tests)
# are exported by librdkafka.so as rd_kafka_* symbols; the few private helpers
# it needs (tinycthread, rdlist) are compiled in from src/, as upstream does.
# Usage: make -f runner.mk SRC=<librdkafka-2.0.2> OUT=<dir> -j2
# Read next: build.sh (drives this), run.sh.

SRC ?= $(error SRC=<librdkafka source dir> required)
OUT ?= $(error OUT=<build dir> required)
T := $(SRC)/tests

# Test programs: every [08]nnn-*.c / .cpp, as in the suite's own Makefile.
TEST_C   := $(notdir $(wildcard $(T)/[08]*-*.c))
TEST_CXX := $(notdir $(wildcard $(T)/[08]*-*.cpp))

OBJS := $(TEST_C:%.c=$(OUT)/%.o) $(TEST_CXX:%.cpp=$(OUT)/%.o) \
        $(OUT)/test.o $(OUT)/rusage.o $(OUT)/testcpp.o $(OUT)/sockem.o \
        $(OUT)/sockem_ctrl.o $(OUT)/tinycthread.o $(OUT)/tinycthread_extra.o \
        $(OUT)/rdlist.o

# The system headers first (rdkafka.h, rdkafkacpp.h, rdkafka_mock.h of the
# installed library), then src/ for the private helpers the suite includes
# (rd.h, rdlist.h, tinycthread.h, ../config.h).
# -fmacro-prefix-map: some tests name topics after __FILE__ (0114), which
# must be the bare file name as in upstream's in-directory build, not a path.
CPPFLAGS := -I/usr/include/librdkafka -I$(SRC)/src -I$(SRC)/src-cpp -I$(T) \
            -fmacro-prefix-map=$(T)/= -fmacro-prefix-map=$(SRC)/src/= \
            -g -O1 -fPIC -w
CFLAGS   := -std=gnu99
CXXFLAGS := -std=gnu++11
LIBS     := -lrdkafka++ -lrdkafka -lssl -lcrypto -lz -llz4 -lzstd -lm -ldl -lpthread -lrt

$(OUT)/test-runner: $(OBJS)
	$(CXX) -rdynamic -o $@ $(OBJS) $(LIBS)

# Objects also depend on this file and on config.h: changed flags or a
# re-configure (e.g. RapidJSON found) rebuild everything.
DEPS := $(lastword $(MAKEFILE_LIST)) $(SRC)/config.h

$(OUT)/%.o: $(T)/%.c $(DEPS)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@
$(OUT)/%.o: $(T)/%.cpp $(DEPS)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@
$(OUT)/%.o: $(SRC)/src/%.c $(DEPS)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@
