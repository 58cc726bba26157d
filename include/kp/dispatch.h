/*
 * Which request gets which upstream connection.
 *
 * A request for host:port takes the freshest live idle connection if there
 * is one. Otherwise it joins that host's queue and, if the per-host limit
 * allows, a connect is started; the connect is not bound to the request.
 * Whenever a connection for the host becomes free (an exchange finished and
 * left it reusable, or a connect completed), the oldest waiting request gets
 * it at once, and only with nobody waiting does it go to the idle pool. So a
 * request is served by whichever connection is ready first, and a connect
 * that lost the race to a freed connection is not wasted: it lands in the
 * pool for the next request.
 *
 * CONNECT tunnels and retries after a stale pooled connection skip all of
 * that: they get a fresh connection of their own (DISPATCH_FRESH).
 *
 * Answers come through the waiter embedded in the requester, possibly before
 * dispatch_request() returns. A connect failure goes to the request whose
 * arrival started it, if that one is still waiting; a request that leaves
 * (dispatch_cancel) disturbs nobody else.
 */
#ifndef KP_DISPATCH_H
#define KP_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>

#include <ev.h>

#include "kp/table.h"

struct server;
struct upstream;
struct dispatch_host;

struct upstream_waiter {
	/* A connection is now the waiter's: BUSY, to use and give back. */
	void (*ready)(struct upstream_waiter *w, struct upstream *up);
	/* No connection will come: answer the client with status. */
	void (*failed)(struct upstream_waiter *w, int status, const char *why);
	/* The connection it holds is readable or writable (EV_READ/EV_WRITE). */
	void (*event)(struct upstream_waiter *w, int revents);

	/* Dispatch's own, while waiting. */
	struct dispatch_host *host;          /* queued here, or NULL */
	struct upstream_waiter *prev, *next; /* the host's queue, oldest first */
	struct upstream *connect;            /* a connect started for it, still on its way */
	ev_tstamp since;                     /* when it started waiting */
	int source;                          /* enum dispatch_source of the last answer */
};

enum dispatch_how {
	DISPATCH_ANY,     /* a pooled, freed or new connection, whichever is first */
	DISPATCH_FRESH,   /* a new connection of its own, never pooled before */
	DISPATCH_TUNNEL,  /* the same, and never to be pooled: not counted per host */
};

/* How a request ended up with its connection, for the counters and logs. */
extern const char *const dispatch_source_names[3];
enum dispatch_source {
	DISPATCH_FROM_POOL,    /* idle in the pool when it asked */
	DISPATCH_FROM_CONNECT, /* a connect completed */
	DISPATCH_FROM_FREED,   /* an exchange ended while it waited */
};

struct dispatch {
	struct server *srv;
	struct table hosts;                  /* struct dispatch_host by key */
	struct dispatch_host *to_check;      /* hosts whose queue may want new connects */
	ev_prepare checker;                  /* runs them once per loop iteration */
	unsigned max_per_host;               /* connections per host:port, 0: no cap */
	bool race;                           /* false: a request waits only for its own connect */
};

int dispatch_init(struct dispatch *d, struct server *srv);
/* Fails every waiter (503) and frees the hosts; connections are the caller's. */
void dispatch_shutdown(struct dispatch *d);

/* Where a request goes, and which connections may carry it. */
struct dispatch_target {
	const char *host;
	uint16_t port;
	/*
	 * The pool and queue key: requests with equal keys may share a
	 * connection, so it differs whenever any of scheme, host, port, server
	 * name or restriction does.
	 */
	const char *key;
	bool tls;          /* https: TLS to host, which is also the server name sent and checked */
	/*
	 * The requester is a client beyond this machine, held to the
	 * destination rules (policy_dest_allowed); its key must differ from an
	 * unrestricted requester's, so that the two never share a connection.
	 */
	bool restricted;
};

void dispatch_request(struct dispatch *d, struct upstream_waiter *w,
                      const struct dispatch_target *t, enum dispatch_how how);
/* w no longer wants a connection: leaves the queue; its connect goes on unbound. */
void dispatch_cancel(struct upstream_waiter *w);

static inline bool
dispatch_waiting(const struct upstream_waiter *w)
{
	return w->host != NULL || w->connect != NULL;
}

/* Is w in a host's queue (as opposed to waiting for a connect of its own)? */
static inline bool
dispatch_queued(const struct upstream_waiter *w)
{
	return w->host != NULL;
}

/*
 * The upward interface of upstream.c, the only calls it makes by name: a
 * connection is free for the next request (a connect completed, or an
 * exchange finished and left it reusable); a connect failed for good; a
 * counted connection is gone (closed, or turned into a tunnel).
 */
void dispatch_connection_free(struct upstream *up);
void dispatch_connect_failed(struct upstream *up, int status, const char *why);
void dispatch_connection_gone(struct upstream *up);

#endif
