/*
 * admin_http.h: the admin HTTP listener (gregor.admin.listeners, issue #22): /metrics (server/metrics.h),
 * /v1/status/live, /v1/status/ready and /v1/groups/<group>/lag (server/metrics_groups.h).
 *
 * HTTP is libmicrohttpd's, driven from the broker's libev loop without a thread of its own: an ev_io on
 * MHD's epoll descriptor and an ev_timer on MHD_get_timeout call MHD_run. GET and HEAD only (405 with an
 * Allow header otherwise), 404 for other paths, 431 when the request's header fields pass 8 KiB, at most 16
 * connections (a 17th is closed at once), idle ones closed after 30 s (gregor.admin.connections.max.idle.ms);
 * a body leaves in blocks of at most 64 KiB. /metrics is produced block by block as it is sent (chunked;
 * server/metrics_page.h), one step per libmicrohttpd content-reader call; a step that fails (out of memory)
 * ends the response without its last chunk, so the scrape fails rather than reading as a shorter page; HEAD
 * renders nothing and is answered close-delimited (libmicrohttpd 0.9.75 would write the last chunk of an
 * empty chunked body after a HEAD's headers). /metrics answers 503 until the log directory is open (a
 * cluster-mode broker resolving its cluster id with etcd runs the loop before that).
 * Read next: server/metrics.c.
 */
#ifndef GR_ADMIN_HTTP_H
#define GR_ADMIN_HTTP_H

struct gr_broker;
struct gr_admin_http;

#define GR_ADMIN_CONNECTIONS_MAX 16
#define GR_ADMIN_BLOCK_BYTES (64 * 1024)
/* Largest header section answered: the sum over fields of name, ": ", value and CRLF (issue #22: 431 above).
   Headers that do not fit the connection's memory pool (GR_ADMIN_POOL_BYTES) get libmicrohttpd's own 431. */
#define GR_ADMIN_HEADER_BYTES (8 * 1024)
#define GR_ADMIN_POOL_BYTES (16 * 1024)

/* Binds gregor.admin.listeners ("http://host:port", port 0: a free one; empty: disabled, *out NULL) and
   writes the bound host:port to gregor.admin.listener.file when set. Returns 0, or -1 after printing a
   message naming the key (a bad value, a busy port, an unwritable file): the broker then exits with 2. */
int gr_admin_http_start(struct gr_broker *b, struct gr_admin_http **out);
/* Stops serving and frees; NULL ignored. */
void gr_admin_http_stop(struct gr_admin_http *a);

#endif
