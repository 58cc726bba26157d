/*
 * The access log (--access-log FILE or syslog): one line per request, for
 * the operator. Lines are gathered in memory and written at most once a
 * second or when the buffer fills, so a slow disk costs the loop one
 * write(2) a second, not one per request. The file is opened again on
 * SIGHUP, for logrotate.
 */
#ifndef KP_ACCESS_LOG_H
#define KP_ACCESS_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ev.h>

struct access_entry {
	const struct sockaddr *client;
	const char *method;
	const char *target;       /* as the client wrote it */
	uint32_t target_len;
	int status;               /* 0: no status was sent (the client went away) */
	uint64_t bytes;           /* sent to the client */
	double seconds;           /* from the request head to the end */
	const char *upstream;     /* "new", "pooled", "freed-up", "local", "tunnel", "read-ahead",
	                           * or "intercepted" */
	const char *via;          /* the parent proxy's label, written after it; NULL: direct */
};

/* 0, or -1 with errno (the file cannot be opened). */
int access_log_open(struct ev_loop *loop, const char *where, bool with_query);
void access_log_write(const struct access_entry *e);
/* SIGHUP: write what is pending, open the file again. */
void access_log_reopen(void);
void access_log_close(void);

#endif
