/*
 * healthcheck.c: `gregor --healthcheck`: connects to the configured listener (or the address in
 * gregor.listener.file when the listener port is 0), sends ApiVersions v0 and exits 0 when a response
 * with the same correlation id arrives within 5 seconds, 1 otherwise. When the first listener's security
 * protocol is SSL (listener.security.protocol.map) it speaks TLS, without checking the broker's certificate
 * (a liveness check of its own broker) and without a client certificate (a listener with
 * ssl.client.auth=required refuses it: put another listener first).
 */
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "server/config.h"

int gr_healthcheck(struct gr_config *cfg);

static int read_full(int fd, uint8_t *p, size_t n)
{
    while (n) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 5000) <= 0) return -1;
        ssize_t r = read(fd, p, n);
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Whether the first listener of `listeners` is mapped to SSL in listener.security.protocol.map. */
static bool first_listener_ssl(const char *listeners, const char *map)
{
    const char *sep = strstr(listeners, "://");
    if (!sep || !map) return false;
    while (*listeners == ' ')
        listeners++;
    size_t n = (size_t)(sep - listeners);
    for (const char *p = map; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t len = strcspn(p, ",");
        if (len > n && !strncmp(p, listeners, n) && p[n] == ':')
            return len - n - 1 == 3 && !strncmp(p + n + 1, "SSL", 3);
        p += len;
    }
    return false;
}

/* Sends `req` and reads `n` answer bytes through TLS on the connected `fd` (5 s socket timeouts bound
 * every call). Returns 0 or -1. */
static int tls_exchange(int fd, const uint8_t *req, size_t req_len, uint8_t *out, size_t n)
{
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl = ctx ? SSL_new(ctx) : NULL;
    int rc = -1;
    size_t done = 0, got;
    if (!ssl || SSL_set_fd(ssl, fd) != 1 || SSL_connect(ssl) != 1) {
        fprintf(stderr, "healthcheck: TLS handshake failed\n");
        goto out;
    }
    if (SSL_write_ex(ssl, req, req_len, &got) != 1 || got != req_len) goto out;
    while (done < n && SSL_read_ex(ssl, out + done, n - done, &got) == 1)
        done += got;
    rc = done == n ? 0 : -1;
out:
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return rc;
}

int gr_healthcheck(struct gr_config *cfg)
{
    char addr[300] = "";
    const char *lf = gr_config_str(cfg, "gregor.listener.file");
    const char *spec = gr_config_str(cfg, "listeners");
    bool tls = first_listener_ssl(spec, gr_config_str(cfg, "listener.security.protocol.map"));
    const char *p = strstr(spec, "://");
    snprintf(addr, sizeof addr, "%s", p ? p + 3 : spec);
    char *comma = strchr(addr, ',');
    if (comma) *comma = 0;
    if (lf) {
        FILE *f = fopen(lf, "r");
        if (f) {
            if (!fgets(addr, sizeof addr, f)) addr[0] = 0;
            fclose(f);
            addr[strcspn(addr, "\r\n")] = 0;
        }
    }
    char *colon = strrchr(addr, ':');
    if (!colon) {
        fprintf(stderr, "healthcheck: cannot parse listener '%s'\n", addr);
        return 1;
    }
    *colon = 0;
    const char *host = addr[0] && strcmp(addr, "0.0.0.0") ? addr : "127.0.0.1";
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, colon + 1, &hints, &ai)) {
        fprintf(stderr, "healthcheck: cannot resolve %s\n", host);
        return 1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen)) {
        fprintf(stderr, "healthcheck: cannot connect to %s:%s\n", host, colon + 1);
        freeaddrinfo(ai);
        return 1;
    }
    freeaddrinfo(ai);
    /* size 10: api key 18, version 0, correlation id 0x6772, client id "" */
    static const uint8_t req[] = {0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0x67, 0x72, 0, 0};
    uint8_t hdr[8];
    if (tls) {
        if (tls_exchange(fd, req, sizeof req, hdr, sizeof hdr)) {
            close(fd);
            fprintf(stderr, "healthcheck: no answer over TLS\n");
            return 1;
        }
    } else if (write(fd, req, sizeof req) != (ssize_t)sizeof req) {
        close(fd);
        return 1;
    } else if (read_full(fd, hdr, sizeof hdr)) {
        fprintf(stderr, "healthcheck: no answer\n");
        return 1;
    }
    close(fd);
    if (hdr[4] != 0 || hdr[5] != 0 || hdr[6] != 0x67 || hdr[7] != 0x72) {
        fprintf(stderr, "healthcheck: unexpected answer\n");
        return 1;
    }
    printf("healthcheck: ok\n");
    return 0;
}
