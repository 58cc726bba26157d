/*
 * Connections to origins: resolving, connecting (each address in turn),
 * carrying one exchange at a time for a client, and waiting idle in the pool.
 *
 * A client gets a connection only through upstream_acquire(), and a
 * connection that finishes an exchange goes back only through
 * upstream_release(): later a per-host request queue hooks into exactly those
 * two points.
 */
#ifndef KP_UPSTREAM_H
#define KP_UPSTREAM_H

#include <stdbool.h>

#include <ev.h>

#include "kp/buf.h"
#include "kp/dns.h"
#include "kp/http.h"
#include "kp/pool.h"

struct client;
struct server;

enum upstream_state {
	UPSTREAM_RESOLVING,   /* waiting for the resolver thread */
	UPSTREAM_CONNECTING,  /* TCP handshake with addrs.addr[next_addr - 1] */
	UPSTREAM_BUSY,        /* carrying its owner's exchange */
	UPSTREAM_IDLE,        /* in the pool, watched for EOF */
	UPSTREAM_CLOSED,      /* fd closed; freed at the end of the loop iteration */
};

struct upstream {
	enum upstream_state state;
	int fd;
	ev_io rio;                   /* readable: response bytes, or EOF while idle */
	ev_io wio;                   /* writable: request bytes, or connect done */
	ev_timer connect_timer;      /* per address */
	struct pool_entry idle;      /* pool membership and idle expiry */
	struct dns_waiter dns;
	struct dns_addrs addrs;
	unsigned next_addr;          /* index of the address to try next */
	int last_error;              /* errno of the last failed connect, for the 502 text */
	struct server *srv;
	struct client *owner;        /* while RESOLVING, CONNECTING or BUSY */
	struct buf *in;              /* response bytes not yet forwarded; NULL when idle */
	struct http_parser parser;   /* response heads */
	struct http_head head;
	bool reused;                 /* the current exchange took it from the pool */
	double keep_alive_hint;      /* origin's Keep-Alive timeout, < 0 if none */
	unsigned exchanges;          /* completed on this connection */
	uint16_t port;
	char host[256];
	char key[272];               /* pool key: host:port */
	struct upstream *dead_next;  /* server's list of connections to free */
};

/*
 * The one way a client gets a connection for key: the freshest live idle one
 * (when allow_pooled), else a new one. The answer comes through
 * client_upstream_ready() or client_upstream_failed(), possibly before this
 * returns; in that case the result is NULL. Otherwise it is the connection
 * still on its way, which the client closes if it gives up waiting.
 */
struct upstream *upstream_acquire(struct server *srv, struct client *c, const char *host, uint16_t port,
                      const char *key, bool allow_pooled);

/*
 * The exchange on up is over. A reusable connection becomes free (today: it
 * goes to the pool); any other is closed.
 */
void upstream_release(struct upstream *up, bool reusable);

/* Closes up whatever its state (the client went away, or it failed). */
void upstream_close(struct upstream *up);

/* Which readiness the owner's exchange needs now. */
void upstream_watch(struct upstream *up, bool readable, bool writable);

/* Frees connections closed during this loop iteration. */
void upstream_reap(struct server *srv);

/* The pool's on_drop: close what it let go of. */
void upstream_pool_dropped(struct pool_entry *e, enum pool_drop_reason why);

#endif
