/*
 * healthcheck.c: `gregor --healthcheck`: connects to the configured listener (or the address in
 * gregor.listener.file when the listener port is 0), sends ApiVersions v0 and exits 0 when a response
 * with the same correlation id arrives within 5 seconds, 1 otherwise.
 */
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

int gr_healthcheck(struct gr_config *cfg)
{
    char addr[300] = "";
    const char *lf = gr_config_str(cfg, "gregor.listener.file");
    const char *spec = gr_config_str(cfg, "listeners");
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
    if (write(fd, req, sizeof req) != (ssize_t)sizeof req) return 1;
    uint8_t hdr[8];
    if (read_full(fd, hdr, sizeof hdr)) {
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
