/*
 * jwks_fetch.c: the JWKS refresher (see jwks_fetch.h). One thread per fetcher with a blocking libcurl easy
 * handle: the libev loop only ever takes the fetcher's mutex to raise the expedite flag. The thread sleeps on
 * a monotonic condition variable until the next scheduled refresh, an expedite or stop; a transfer checks the
 * stop flag in curl's progress callback so that stopping never waits out a timeout.
 */
#include "server/jwks_fetch.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "common/log.h"
#include "common/time.h"

int64_t gr_jwks_retry_wait_ms(int attempt, int64_t backoff_ms, int64_t backoff_max_ms, int64_t elapsed_ms)
{
    if (attempt < 1) attempt = 1;
    int64_t wait = backoff_ms;
    for (int i = 1; i < attempt && wait < backoff_max_ms; i++)
        wait *= 2; /* stops doubling once past the cap: no overflow */
    int64_t left = backoff_max_ms - elapsed_ms;
    if (wait > left) wait = left;
    return wait > 0 ? wait : -1;
}

int gr_jwks_missing_ask(struct gr_jwks_missing *m, const char *kid, int64_t now_ms)
{
    size_t kl = strlen(kid);
    if (kl > GR_JWKS_MISSING_KID_MAX) return 0;
    int slot = -1;
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->e[i].kid, kid)) slot = i;
    if (slot >= 0) {
        m->e[slot].used = ++m->clock; /* an access-ordered map: a lookup refreshes recency */
        if (m->e[slot].next_ms > now_ms) return 0;
    } else if (m->n < GR_JWKS_MISSING_MAX) {
        slot = m->n++;
    } else { /* the least recently used entry goes */
        slot = 0;
        for (int i = 1; i < m->n; i++)
            if (m->e[i].used < m->e[slot].used) slot = i;
    }
    memcpy(m->e[slot].kid, kid, kl + 1);
    m->e[slot].next_ms = now_ms + GR_JWKS_MISSING_MS;
    m->e[slot].used = ++m->clock;
    return 1;
}

void gr_jwks_missing_forget(struct gr_jwks_missing *m, const char *kid)
{
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->e[i].kid, kid)) {
            m->e[i] = m->e[--m->n];
            return;
        }
}

struct gr_jwks_fetcher {
    char *url, *ca_file, *ca_pem;
    int64_t refresh_ms, backoff_ms, backoff_max_ms;
    gr_jwks_apply_fn apply;
    void *arg;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, expedite; /* under mu; stop is also read unlocked by the progress callback */
};

struct body {
    char *buf;
    size_t len;
    int too_big;
};

static size_t on_data(char *p, size_t sz, size_t n, void *arg)
{
    struct body *b = arg;
    size_t add = sz * n;
    if (add > GR_JWKS_BODY_MAX - b->len) {
        b->too_big = 1;
        return 0; /* curl: CURLE_WRITE_ERROR */
    }
    memcpy(b->buf + b->len, p, add);
    b->len += add;
    return add;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    return __atomic_load_n(&((struct gr_jwks_fetcher *)arg)->stop, __ATOMIC_RELAXED) ? 1 : 0;
}

/* One GET of the URL and apply. Returns 0, or -1 with `err` set. */
static int fetch_once(struct gr_jwks_fetcher *f, char *err, size_t cap)
{
    struct body b = {.buf = malloc(GR_JWKS_BODY_MAX)};
    CURL *c = curl_easy_init();
    if (!b.buf || !c) {
        free(b.buf);
        curl_easy_cleanup(c);
        snprintf(err, cap, "out of memory");
        return -1;
    }
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, f->url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)GR_JWKS_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (f->ca_file) curl_easy_setopt(c, CURLOPT_CAINFO, f->ca_file);
    if (f->ca_pem) {
        struct curl_blob blob = {.data = f->ca_pem, .len = strlen(f->ca_pem), .flags = CURL_BLOB_COPY};
        curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, f);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    int ret = -1;
    if (b.too_big)
        snprintf(err, cap, "the response is larger than %d bytes", GR_JWKS_BODY_MAX);
    else if (rc != CURLE_OK)
        snprintf(err, cap, "%s", cerr[0] ? cerr : curl_easy_strerror(rc));
    else if (status != 200)
        snprintf(err, cap, "HTTP status %ld", status);
    else
        ret = f->apply(f->arg, b.buf, b.len, err, cap);
    free(b.buf);
    return ret;
}

/* Waits on the condition variable until monotonic `until_ms` or a stop (or an expedite, when `wake`).
 * Called with mu held. */
static void wait_until(struct gr_jwks_fetcher *f, int64_t until_ms, int wake)
{
    while (!f->stop && !(wake && f->expedite)) {
        int64_t now = gr_time_mono_ms();
        if (now >= until_ms) return;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t ns = ts.tv_nsec + (until_ms - now) % 1000 * 1000000;
        ts.tv_sec += (until_ms - now) / 1000 + ns / 1000000000;
        ts.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&f->cv, &f->mu, &ts);
    }
}

/* One refresh with Kafka's Retry; the keys in use stay unless apply took a body. */
static void refresh(struct gr_jwks_fetcher *f)
{
    int64_t t0 = gr_time_mono_ms();
    GR_INFO("OAuth JWKS refresh of %s starting", f->url);
    char err[300];
    for (int attempt = 1;; attempt++) {
        if (!fetch_once(f, err, sizeof err)) {
            GR_INFO("OAuth JWKS refresh of %s complete", f->url);
            return;
        }
        int64_t wait =
            gr_jwks_retry_wait_ms(attempt, f->backoff_ms, f->backoff_max_ms, gr_time_mono_ms() - t0);
        if (wait < 0 || __atomic_load_n(&f->stop, __ATOMIC_RELAXED)) break;
        GR_INFO("OAuth JWKS refresh of %s: attempt %d failed (%s); retrying in %lld ms", f->url, attempt, err,
                (long long)wait);
        pthread_mutex_lock(&f->mu);
        wait_until(f, gr_time_mono_ms() + wait, 0);
        int stop = f->stop;
        pthread_mutex_unlock(&f->mu);
        if (stop) return;
    }
    GR_WARN("OAuth JWKS refresh of %s encountered an error (%s); not updating the local JWKS cache", f->url,
            err);
}

static void *fetch_main(void *arg)
{
    struct gr_jwks_fetcher *f = arg;
    int64_t next = gr_time_mono_ms() + f->refresh_ms;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        wait_until(f, next, 1);
        if (f->stop) break;
        int64_t now = gr_time_mono_ms();
        if (now >= next) next += f->refresh_ms * ((now - next) / f->refresh_ms + 1); /* fixed rate */
        f->expedite = 0;
        pthread_mutex_unlock(&f->mu);
        refresh(f);
        pthread_mutex_lock(&f->mu);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static void fetcher_free(struct gr_jwks_fetcher *f)
{
    free(f->url);
    free(f->ca_file);
    free(f->ca_pem);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

struct gr_jwks_fetcher *gr_jwks_fetcher_start(const struct gr_jwks_fetch_opts *o, gr_jwks_apply_fn apply,
                                              void *arg, char *err, size_t cap)
{
    static const char key[] = "sasl.oauthbearer.jwks.endpoint.url";
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, cap, "%s: libcurl failed to initialise", key);
        return NULL;
    }
    struct gr_jwks_fetcher *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&f->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&f->mu, NULL);
    f->url = strdup(o->url);
    f->ca_file = o->ca_file ? strdup(o->ca_file) : NULL;
    f->ca_pem = o->ca_pem ? strdup(o->ca_pem) : NULL;
    f->refresh_ms = o->refresh_ms > 0 ? o->refresh_ms : 1;
    f->backoff_ms = o->backoff_ms;
    f->backoff_max_ms = o->backoff_max_ms;
    f->apply = apply;
    f->arg = arg;
    char why[300];
    if (!f->url || (o->ca_file && !f->ca_file) || (o->ca_pem && !f->ca_pem)) {
        snprintf(err, cap, "out of memory");
        fetcher_free(f);
        return NULL;
    }
    if (fetch_once(f, why, sizeof why)) { /* Kafka: "Could not refresh JWKS" stops the broker */
        snprintf(err, cap, "%s: could not fetch the JWKS from %.200s: %s", key, o->url, why);
        fetcher_free(f);
        return NULL;
    }
    int e = pthread_create(&f->thread, NULL, fetch_main, f);
    if (e) {
        snprintf(err, cap, "%s: cannot start the JWKS refresh thread: %s", key, strerror(e));
        fetcher_free(f);
        return NULL;
    }
    f->started = 1;
    GR_INFO("JWKS validation key refresh thread started for %s with a refresh interval of %lld ms", f->url,
            (long long)f->refresh_ms);
    return f;
}

void gr_jwks_fetcher_expedite(struct gr_jwks_fetcher *f)
{
    pthread_mutex_lock(&f->mu);
    f->expedite = 1;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

void gr_jwks_fetcher_stop(struct gr_jwks_fetcher *f)
{
    if (!f) return;
    pthread_mutex_lock(&f->mu);
    __atomic_store_n(&f->stop, 1, __ATOMIC_RELAXED);
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
    if (f->started) pthread_join(f->thread, NULL);
    fetcher_free(f);
}
