/*
 * What dispatch's two files share, and nobody else includes: dispatch.c
 * (queues, connections, the idle pool, answers, the checker) and
 * dispatch_pipeline.c (fetches ahead written on a busy connection). The
 * structs are here because both walk them; the test of dispatch includes
 * dispatch.c and sees them too.
 */
#ifndef KP_DISPATCH_PRIV_H
#define KP_DISPATCH_PRIV_H

#include <stdbool.h>

#include "kp/dispatch.h"
#include "kp/list.h"
#include "kp/pool.h"
#include "kp/table.h"

/* Keys up to this long (with the NUL) are kept in the connection itself. */
#define CONN_KEY_INLINE 64

/*
 * Everything dispatch knows about one host:port. It lives while the host
 * has a connection (connecting, busy or idle) or a waiting request, and is
 * freed by the checker once it has neither.
 */
struct dispatch_host {
	struct table_node node;          /* in d->hosts, keyed by key */
	struct dispatch *d;
	struct kp_list queue;            /* client requests waiting, oldest first */
	unsigned queued;
	struct kp_list bg_queue;         /* the proxy's own requests waiting, oldest first */
	unsigned bg_queued;
	unsigned open;                   /* counted connections: connecting, busy or idle */
	unsigned racing;                 /* unbound connects in flight (race mode) */
	unsigned background_busy;        /* connections carrying a background request */
	struct dispatch_host *check_next;
	bool to_check;                   /* on d->to_check */
	uint16_t port;
	bool restricted;                 /* its connections obey the destination rules */
	bool tls;                        /* its connections speak TLS */
	bool forward;                    /* its connections go to an HTTP parent as is */
	struct parent *parent;           /* the parent on the way; NULL: direct */
	/*
	 * The origin refused more connections than it allows: none opens and
	 * none goes idle while more than keep are open (dispatch_shrink_host).
	 */
	bool shrinking;
	unsigned keep;
	char name[256];
};

/* One connection and dispatch's bookkeeping around it. */
struct dispatch_conn {
	struct upstream up;              /* the connection; up.src is what an exchange reads */
	struct dispatch *d;
	struct dispatch_host *host;      /* counted against this host's cap; NULL: not counted */
	struct dispatch_waiter *trigger; /* connecting: whose arrival started it */
	bool bound;                      /* the connect belongs to trigger alone (fresh, tunnel) */
	bool racing;                     /* counted in host->racing */
	bool background;                 /* carrying a background request: counted in
	                                  * host->background_busy */
	/* Requests written behind the one in progress, answered in this order (RFC 9112 9.3.2). */
	struct kp_list pipelined;
	unsigned piped;                  /* how many */
	bool sent;                       /* the request in progress is all written */
	bool from_pipeline;              /* the exchange in progress was pipelined */
	bool pipelines;                  /* it answered a pipelined request correctly */
	bool spoiled;                    /* an answer on its way is nobody's: never reused */
	struct pool_entry idle;          /* pool membership and idle expiry */
	struct kp_list link;             /* in d->live while open, then in d->dead until freed */
	/*
	 * up.key. Connections are all one size, to pack them in a slab (slab.h),
	 * so a key longer than most is allocated apart.
	 */
	char *long_key;                  /* NULL: the key is in key */
	char key[CONN_KEY_INLINE];
};

/* The request that has waited longest in a queue, or NULL. */
static inline struct dispatch_waiter *
oldest_in(const struct kp_list *queue)
{
	return KP_LIST_FIRST(queue, struct dispatch_waiter, link);
}

/* ---- dispatch.c ----------------------------------------------------------- */

/* The checker looks at h at the end of this loop iteration. */
void schedule_check(struct dispatch_host *h);
/* w waits in h's queue for clients, or in its queue of the proxy's own requests. */
void enqueue(struct dispatch_host *h, struct dispatch_waiter *w, bool background);
/* w leaves its host's queue, counted as a wait if it was a client's. */
void dequeue(struct dispatch_waiter *w);

/* ---- dispatch_pipeline.c -------------------------------------------------- */

/* w no longer wants the answer written for it: the connection cannot be reused after it. */
void unpipe(struct dispatch_waiter *w);
/* What was pipelined on dc goes back to h's queues, oldest first; without h, it fails. */
void requeue_piped(struct dispatch_conn *dc, struct dispatch_host *h);
/* A new fetch ahead: written on a busy connection of h that may take it, if there is one. */
bool pipeline_somewhere(struct dispatch_host *h, struct dispatch_waiter *w);
/* dc's request went out: the fetches ahead waiting for its host may follow it. */
void pipeline_waiting(struct dispatch_conn *dc);
/* The exchange on dc is over: the oldest pipelined behind it gets dc, if dc can be trusted. */
void serve_piped(struct dispatch_conn *dc, bool reusable);

#endif
