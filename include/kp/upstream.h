/*
 * One connection to an origin through its life: resolving the name,
 * connecting per Happy Eyeballs (RFC 8305), carrying exchanges one at a
 * time, and waiting idle in the pool watched for the origin's close.
 *
 * Which request a connection serves is dispatch.c's business; this module
 * reports upward only through dispatch_connection_free(),
 * dispatch_connect_failed() and dispatch_connection_gone(), and to the
 * exchange holding it only through that exchange's waiter.
 */
#ifndef KP_UPSTREAM_H
#define KP_UPSTREAM_H

#include <stdbool.h>
#include <stdint.h>

#include <ev.h>

#include "kp/buf.h"
#include "kp/conn.h"
#include "kp/dns.h"
#include "kp/http.h"
#include "kp/pool.h"

struct server;
struct upstream_waiter;
struct dispatch_host;

enum upstream_state {
	UPSTREAM_RESOLVING,   /* waiting for the resolver thread */
	UPSTREAM_CONNECTING,  /* one or more connect attempts in flight */
	UPSTREAM_HANDSHAKING, /* connected; the TLS handshake with the origin is under way */
	UPSTREAM_BUSY,        /* carrying the exchange of `user` */
	UPSTREAM_IDLE,        /* in the pool, watched for EOF */
	UPSTREAM_CLOSED,      /* fd closed; freed at the end of the loop iteration */
};

/*
 * A TCP handshake with one address. Several run at once when the earlier
 * ones are slow: RFC 8305 starts the next address every 250 ms.
 */
struct connect_attempt {
	int fd;                      /* -1: slot free */
	ev_io wio;                   /* writable: the handshake ended, either way */
	ev_tstamp deadline;          /* --connect-timeout after it started */
	unsigned addr;               /* index into addrs */
	struct upstream *up;
};

/* Attempts in flight at once; more addresses wait for a slot. */
#define UPSTREAM_MAX_ATTEMPTS 4

struct upstream {
	enum upstream_state state;
	struct conn conn;            /* the socket, once an attempt won */
	struct connect_attempt attempts[UPSTREAM_MAX_ATTEMPTS];
	unsigned attempts_open;      /* in flight */
	ev_timer connect_timer;      /* next stagger or the earliest attempt deadline */
	ev_tstamp next_attempt_at;   /* when the next address may start */
	struct pool_entry idle;      /* pool membership and idle expiry */
	struct dns_waiter dns;
	struct dns_addrs addrs;      /* in Happy Eyeballs order: families alternate, IPv6 first */
	unsigned next_addr;          /* index of the address to try next */
	int last_error;              /* errno of the last failed attempt, for the 502 text */
	struct server *srv;
	struct upstream_waiter *user;     /* BUSY: the exchange using it */
	struct upstream_waiter *trigger;  /* RESOLVING/CONNECTING: whose arrival started it */
	struct dispatch_host *host;  /* counted against this host's cap; NULL: not counted */
	bool bound;                  /* the connect belongs to trigger alone (fresh, tunnel) */
	bool restricted;             /* for clients beyond this machine: destination rules apply */
	bool tls;                    /* https: a TLS handshake follows the connect */
	unsigned refused;            /* addresses the destination rules refused */
	struct buf *in;              /* response bytes not yet forwarded; NULL when idle */
	struct http_parser parser;   /* response heads */
	struct http_head head;
	bool reused;                 /* the current exchange is not its first */
	double keep_alive_hint;      /* origin's Keep-Alive timeout, < 0 if none */
	unsigned exchanges;          /* completed on this connection */
	uint16_t port;
	char host_name[256];
	char key[272];               /* pool and dispatch key: host:port */
	struct upstream *prev, *next;   /* the server's live list, for shutdown */
	struct upstream *dead_next;  /* server's list of connections to free */
};

/*
 * A connection to host:port, not started yet; NULL when memory is exhausted.
 * tls: it is ready only once a verified TLS handshake with host is done.
 */
struct upstream *upstream_open(struct server *srv, const char *host, uint16_t port,
                               const char *key, bool tls);
/*
 * Resolves and connects. The outcome goes to dispatch, possibly before this
 * returns (a cached name that cannot be reached), so the caller sets up its
 * bookkeeping first.
 */
void upstream_connect(struct upstream *up);

/* The freshest pooled connection for key that still looks alive, now BUSY; or NULL. */
struct upstream *upstream_take_pooled(struct server *srv, const char *key);

/* Makes up the busy connection of w, with fresh facts; no watcher yet. */
void upstream_hand_to(struct upstream *up, struct upstream_waiter *w);

/*
 * The exchange on up is over. A reusable connection goes to dispatch as
 * free (the next waiter, else the pool); any other is closed.
 */
void upstream_release(struct upstream *up, bool reusable);

/* Puts a free connection in the idle pool; closes it if the pool will not keep it. */
void upstream_park(struct upstream *up);

/* Closes up whatever its state. */
void upstream_close(struct upstream *up);

/* Which readiness the user's exchange needs now. */
void upstream_watch(struct upstream *up, bool readable, bool writable);

/* Frees connections closed during this loop iteration. */
void upstream_reap(struct server *srv);

/* The pool's on_drop: close what it let go of. */
void upstream_pool_dropped(struct pool_entry *e, enum pool_drop_reason why);

/*
 * Reorders addresses for Happy Eyeballs (RFC 8305 4): IPv6 first, then the
 * families alternate, each family keeping the resolver's order.
 */
void upstream_order_addrs(struct dns_addrs *a);

#endif
