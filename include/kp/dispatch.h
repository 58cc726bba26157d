/*
 * The proxy's connections to origins: which request gets which connection,
 * the idle pool, and every connection's life from open to free.
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
 * that: they get a fresh connection of their own (DISPATCH_FRESH). Requests
 * the proxy makes on its own behalf (DISPATCH_BACKGROUND) come last: they
 * take only a connection no client request wants, never start a connect,
 * and never hold a connection against the per-host cap when a client
 * request needs one.
 *
 * A fetch ahead (DISPATCH_AHEAD) may also be pipelined (RFC 9112 9.3.2):
 * written on a busy connection of its host once the request in progress
 * there is all sent, so that its answer follows the one in progress
 * without the round trip a free connection would cost. Only behind
 * another fetch ahead until the origin has answered a pipelined request
 * on that connection correctly, never behind a client request before
 * that, and at most --read-ahead-depth behind the one in progress. A
 * client request is never pipelined. When the exchange in progress does
 * not end cleanly, every request pipelined behind it goes back to its
 * host's queue to be asked again elsewhere; one whose request could not
 * be written whole fails.
 *
 * Answers come through the waiter embedded in the requester, possibly before
 * dispatch_request() returns: a connection as a source (source.h), given
 * back through the source's own operations. A connect failure goes to the
 * request whose arrival started it, if that one is still waiting; a request
 * that leaves (dispatch_cancel) disturbs nobody else.
 *
 * Connections are the pool's (upstream.h): it hears what becomes of each
 * through the ops it gave it, never the other way round. A closed
 * connection is freed once per loop iteration, so no caller up the stack
 * holds a freed one.
 */
#ifndef KP_DISPATCH_H
#define KP_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>

#include "kp/budget.h"
#include "kp/clock.h"
#include "kp/config.h"
#include "kp/http.h"
#include "kp/list.h"
#include "kp/slab.h"
#include "kp/source.h"
#include "kp/table.h"
#include "kp/upstream.h"

struct dispatch_host;
struct dispatch_conn;
struct pool;

struct dispatch_waiter {
	/* A connection is now the waiter's: BUSY, to use and give back through src->ops. */
	void (*ready)(struct dispatch_waiter *w, struct source *src);
	/* No connection will come: answer with status. */
	void (*failed)(struct dispatch_waiter *w, int status, const char *why);

	/* Dispatch's own, while waiting. */
	struct dispatch_host *host;          /* queued here, or NULL */
	/*
	 * In the host's queue or background queue (host set), or in the list
	 * of requests pipelined on a connection (piped_on set); each oldest first.
	 */
	struct kp_list link;
	struct dispatch_conn *connect;       /* a connect started for it, still on its way */
	ev_tstamp since;                     /* when it started waiting */
	int source;                          /* enum dispatch_source of the last answer */
	bool background;                     /* in the host's background queue */
	struct dispatch_conn *piped_on;      /* its request is written on this busy connection */

	/* The requester's, for DISPATCH_AHEAD: the whole request, to pipeline. */
	const char *request;
	size_t request_len;
};

enum dispatch_how {
	DISPATCH_ANY,        /* a pooled, freed or new connection, whichever is first */
	DISPATCH_FRESH,      /* a new connection of its own, never pooled before */
	DISPATCH_TUNNEL,     /* the same, and never to be pooled: not counted per host */
	DISPATCH_BACKGROUND, /* the proxy's own request: a pooled or freed one nobody else wants */
	DISPATCH_AHEAD,      /* the same, or pipelined on a busy one (see below) */
};

/* How a request ended up with its connection, for the counters and logs. */
extern const char *const dispatch_source_names[4];
enum dispatch_source {
	DISPATCH_FROM_POOL,     /* idle in the pool when it asked */
	DISPATCH_FROM_CONNECT,  /* a connect completed */
	DISPATCH_FROM_FREED,    /* an exchange ended while it waited */
	DISPATCH_FROM_PIPELINE, /* its request was written already: the answer is next */
};

struct dispatch {
	struct upstream_context up_ctx;      /* what its connections share; their ops are dispatch's */
	struct clock *clock;
	const struct kp_config *cfg;
	struct fd_budget *fds;               /* its idle count is kept here */
	struct pool *pool;                   /* idle connections */
	struct table hosts;                  /* struct dispatch_host by key */
	struct dispatch_host *to_check;      /* hosts whose queue may want new connects */
	ev_prepare checker;                  /* once per loop iteration: those hosts, then the dead */
	unsigned max_per_host;               /* connections per host:port, 0: no cap */
	bool race;                           /* false: a request waits only for its own connect */
	struct kp_list live;                 /* every open connection, newest first, for shutdown */
	struct kp_list dead;                 /* closed this iteration, freed by the checker */
	struct slab conns;                   /* where connections live, packed together */
	unsigned open;                       /* connections open: connecting, busy or idle */
	unsigned idle;                       /* ... of those, idle in the pool */
};

/*
 * Starts the pool. own: this machine's addresses for the destination rules;
 * tls: for https origins (NULL: none). -1 when memory is exhausted.
 */
int dispatch_init(struct dispatch *d, struct ev_loop *loop, struct clock *clock,
                  const struct kp_config *cfg, struct tls *tls, const struct own_addresses *own,
                  struct fd_budget *fds);
/* Fails every waiter (503), closes every connection and frees them. */
void dispatch_shutdown(struct dispatch *d);

/* Room for any dispatch key: "https://", a host:port key, " (lan)", " via parent 15". */
#define DISPATCH_KEY_MAX HTTP_CONN_KEY_MAX

/*
 * The one composer of dispatch keys: requests share a connection only if
 * they agree on scheme, host and port (the server name is the host) and on
 * whether the client is beyond this machine (those never share with local
 * ones), and on the parent proxy on the way: through an HTTP parent, plain
 * requests of every origin share the connections to it. host_port is the
 * target's "host:port" (http_target.key); out holds DISPATCH_KEY_MAX
 * bytes. Returns out.
 */
const char *dispatch_key_compose(char *out, const char *host_port, bool tls, bool restricted,
                                 const struct parent *parent, bool forward);

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
	struct parent *parent;   /* the parent proxy on the way (parents_route); NULL: direct */
	bool forward;            /* to an HTTP parent in absolute form (upstream_target.forward) */
};

void dispatch_request(struct dispatch *d, struct dispatch_waiter *w,
                      const struct dispatch_target *t, enum dispatch_how how);
/* w no longer wants a connection: leaves the queue; its connect goes on unbound. */
void dispatch_cancel(struct dispatch_waiter *w);

static inline bool
dispatch_waiting(const struct dispatch_waiter *w)
{
	return w->host != NULL || w->connect != NULL || w->piped_on != NULL;
}

/* Is w's request written on a busy connection, its answer to follow the one in progress? */
static inline bool
dispatch_piped(const struct dispatch_waiter *w)
{
	return w->piped_on != NULL;
}

/*
 * A client now waits for the pipelined w: it stays where it is, and should
 * its connection fail before the answer, it is asked again as a client's
 * request, not as a background one.
 */
static inline void
dispatch_piped_promote(struct dispatch_waiter *w)
{
	w->background = false;
}

/* Is w in a host's queue (as opposed to waiting for a connect of its own)? */
static inline bool
dispatch_queued(const struct dispatch_waiter *w)
{
	return w->host != NULL;
}

/* Is w queued with no connect of its own on the way: waiting for others' connections to free? */
static inline bool
dispatch_queued_for_others(const struct dispatch_waiter *w)
{
	return w->host != NULL && w->connect == NULL;
}

/* How w's last connection came to it, in the access log's words (dispatch_source_names). */
static inline const char *
dispatch_source_name(const struct dispatch_waiter *w)
{
	return dispatch_source_names[w->source];
}

/*
 * Descriptors ran out (EMFILE or ENFILE): closes the oldest idle pooled
 * connection, since a client or a busy exchange needs the descriptor more.
 * False when none was idle.
 */
bool dispatch_free_descriptor(struct dispatch *d);

/*
 * The origin behind key refused more connections than it allows (a split
 * download backing off, ra_split.h): its idle connections are closed, the
 * least recently used first, until at most keep of its connections are
 * open; until then no connection to it opens, and a busy one closes when
 * its exchange ends rather than going idle.
 */
void dispatch_shrink_host(struct dispatch *d, const char *key, unsigned keep);

/* Idle connections kept for key. */
size_t dispatch_idle_count(const struct dispatch *d, const char *key);
/* Calls fn for every host with idle connections: its key and how many. */
void dispatch_each_idle_host(const struct dispatch *d,
                             void (*fn)(const char *key, size_t idle, void *arg), void *arg);

#endif
