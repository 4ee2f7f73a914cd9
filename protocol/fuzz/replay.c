/*
 * replay.c: runs fuzz_protocol's LLVMFuzzerTestOneInput without libFuzzer, so any compiler (gcc) can run
 * the fuzz corpus under ASan and UBSan: first every input file named on the command line (a directory
 * stands for the files in it, sorted by name), then rounds of deterministic mutations of those inputs
 * (fixed PRNG seed: the same binary replays the same inputs), one mutant per input per round, until
 * `-r ROUNDS` rounds or `-t SECONDS` have passed. Mutations: bit flips, bytes set to edge values, 2/4/8-byte
 * windows set to edge integers (INT64_MIN, INT64_MAX, -1, 0, ... in the timestamp, offset and length
 * fields), truncation, a duplicated chunk; batch-mode inputs (first byte % 3 == 2) also get the
 * "recompute the CRC" flag so that mutations reach the record scan. A finding is an abort: a sanitizer
 * report (UBSAN_OPTIONS=halt_on_error=1) or a failed FUZZ_CHECK. Prints "fuzz-replay: N inputs (S files,
 * M mutants) in T s" on success. With FUZZ_CRASH_FILE=PATH set, a finding also writes the inputs run so far
 * (the last 50,000) to PATH.NNNNNN, in order: replaying them as a directory reproduces a finding that
 * depends on earlier inputs (per-thread state such as the validator's decompressor). Read next:
 * protocol/fuzz/fuzz_protocol.c, scripts/sanitize-check.sh.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Largest input read or mutated (libFuzzer's -max_len in protocol/fuzz/run.sh). */
#define REPLAY_INPUT_BYTES_MAX 65536

struct input {
    uint8_t *data;
    size_t len;
};

static struct input *inputs;
static size_t ninputs, cap_inputs;

static void add_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    uint8_t *buf = malloc(REPLAY_INPUT_BYTES_MAX);
    if (!buf) exit(2);
    size_t n = fread(buf, 1, REPLAY_INPUT_BYTES_MAX, f);
    fclose(f);
    if (ninputs == cap_inputs) {
        cap_inputs = cap_inputs ? 2 * cap_inputs : 256;
        inputs = realloc(inputs, cap_inputs * sizeof *inputs);
        if (!inputs) exit(2);
    }
    inputs[ninputs++] = (struct input){buf, n};
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void add_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        exit(2);
    }
    if (!S_ISDIR(st.st_mode)) {
        add_file(path);
        return;
    }
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        exit(2);
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            names = realloc(names, cap * sizeof *names);
            if (!names) exit(2);
        }
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        snprintf(names[n++], len, "%s/%s", path, e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        add_file(names[i]);
        free(names[i]);
    }
    free(names);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    uint64_t x = rng_state; /* xorshift64 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static void put_be(uint8_t *p, size_t width, uint64_t v)
{
    for (size_t i = 0; i < width; i++)
        p[i] = (uint8_t)(v >> (8 * (width - 1 - i)));
}

/* One mutation of buf[0..*len) in place (capacity REPLAY_INPUT_BYTES_MAX). Byte 0 (the mode) is kept. */
static void mutate_once(uint8_t *buf, size_t *len)
{
    static const uint64_t edges[] = {0,
                                     1,
                                     0xffffffffffffffffull,
                                     0x7fffffffffffffffull,
                                     0x8000000000000000ull,
                                     0x8000000000000001ull,
                                     0x7ffffffffffffffeull,
                                     0x7fffffff,
                                     0x80000000,
                                     0xffffffff,
                                     0x7fff,
                                     0x8000,
                                     0xff,
                                     0x80,
                                     0x7f};
    size_t n = *len;
    if (n < 2) return;
    size_t at = 1 + (size_t)(rnd() % (n - 1));
    switch (rnd() % 6) {
    case 0: /* bit flip */
        buf[at] ^= (uint8_t)(1u << (rnd() % 8));
        break;
    case 1: /* a byte to an edge value */
        buf[at] = (uint8_t)edges[rnd() % (sizeof edges / sizeof edges[0])];
        break;
    case 2:
    case 3: { /* an integer window to an edge value (negated half of the time) */
        static const size_t widths[] = {2, 4, 8, 8};
        size_t w = widths[rnd() % 4];
        if (at + w > n) break;
        uint64_t v = edges[rnd() % (sizeof edges / sizeof edges[0])];
        if (rnd() & 1) v = 0 - v;
        put_be(buf + at, w, v);
        break;
    }
    case 4: /* truncate */
        *len = at;
        break;
    default: { /* duplicate a chunk after itself */
        size_t chunk = 1 + (size_t)(rnd() % 64);
        if (at + chunk > n || n + chunk > REPLAY_INPUT_BYTES_MAX) break;
        memmove(buf + at + chunk, buf + at, n - at);
        *len = n + chunk;
        break;
    }
    }
}

/* The input being run, written to $FUZZ_CRASH_FILE when a check or a sanitizer aborts, so that a finding of
 * the time-bounded mutant rounds can be replayed alone (fuzz_replay FILE). */
static const uint8_t *volatile current;
static volatile size_t current_len;
static const char *crash_file;

static void dump_ring(void);
static void on_abort(int sig)
{
    if (crash_file && current) {
        int fd = open(crash_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            ssize_t w = write(fd, (const void *)current, current_len);
            (void)w;
            close(fd);
        }
    }
    dump_ring();
    signal(sig, SIG_DFL);
    raise(sig);
}

#define RING 50000 /* inputs kept for FUZZ_CRASH_FILE (a state-dependent finding needs its past) */
static uint8_t *ring[RING];
static size_t ring_len[RING];
static unsigned long ring_n;
static void dump_ring(void)
{
    char path[256];
    for (unsigned long i = ring_n > RING ? ring_n - RING : 0; i < ring_n; i++) {
        snprintf(path, sizeof path, "%s.%06lu", crash_file, i);
        FILE *f = fopen(path, "wb");
        if (!f) return;
        fwrite(ring[i % RING], 1, ring_len[i % RING], f);
        fclose(f);
    }
}
static void run_one(const uint8_t *data, size_t len)
{
    if (crash_file) {
        free(ring[ring_n % RING]);
        ring[ring_n % RING] = malloc(len);
        if (!ring[ring_n % RING]) abort();
        memcpy(ring[ring_n % RING], data, len);
        ring_len[ring_n % RING] = len;
        ring_n++;
    }
    current = data;
    current_len = len;
    LLVMFuzzerTestOneInput(data, len);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    long rounds = 100;
    double seconds = 60;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i += 2) {
        if (i + 1 >= argc) break;
        if (strcmp(argv[i], "-r") == 0)
            rounds = strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "-t") == 0)
            seconds = strtod(argv[i + 1], NULL);
        else
            break;
    }
    if (i >= argc) {
        fprintf(stderr, "usage: %s [-r ROUNDS] [-t SECONDS] FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    for (; i < argc; i++)
        add_path(argv[i]);
    crash_file = getenv("FUZZ_CRASH_FILE");
    if (crash_file) signal(SIGABRT, on_abort);
    double t0 = now_s();
    for (size_t k = 0; k < ninputs; k++)
        run_one(inputs[k].data, inputs[k].len);
    uint8_t *buf = malloc(REPLAY_INPUT_BYTES_MAX);
    if (!buf) return 2;
    unsigned long long mutants = 0;
    for (long r = 0; r < rounds && now_s() - t0 < seconds; r++) {
        for (size_t k = 0; k < ninputs; k++) {
            size_t len = inputs[k].len;
            memcpy(buf, inputs[k].data, len);
            int count = 1 + (int)(rnd() % 4);
            for (int m = 0; m < count; m++)
                mutate_once(buf, &len);
            if (len >= 2 && buf[0] % 3 == 2 && (rnd() % 4) != 0) buf[1] |= 4; /* reach the record scan */
            run_one(buf, len);
            mutants++;
        }
    }
    printf("fuzz-replay: %llu inputs (%zu files, %llu mutants) in %.1f s, no finding\n",
           (unsigned long long)ninputs + mutants, ninputs, mutants, now_s() - t0);
    free(buf);
    for (size_t k = 0; k < ninputs; k++)
        free(inputs[k].data);
    free(inputs);
    return 0;
}
