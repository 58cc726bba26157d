/*
 * One connection to an origin through its life: resolving the name,
 * connecting per Happy Eyeballs (RFC 8305), the TLS handshake for https,
 * carrying exchanges one at a time, and waiting idle, watched for the
 * origin's close.
 *
 * It knows nothing of who uses it. What becomes of it (connected, failed,
 * gone, short of a descriptor) goes to the owner through the ops in its
 * context; while busy, readiness goes to the exchange reading its source.
 * Which request it serves, whether it is pooled, and when its memory is
 * freed are the owner's business (dispatch.c).
 */
#ifndef KP_UPSTREAM_H
#define KP_UPSTREAM_H

#include <stdbool.h>
#include <stdint.h>

#include <ev.h>

#include "kp/config.h"
#include "kp/dns.h"
#include "kp/policy.h"
#include "kp/source.h"

struct upstream;
struct tls;
struct parent;

/* Where a connection goes: its origin, and the parent proxy on the way, if any. */
struct upstream_target {
	const char *host;          /* the origin's name or address, as the request named it */
	uint16_t port;
	/*
	 * The pool key it is opened for, also the TLS session's: the owner's
	 * string, which must outlive the connection.
	 */
	const char *key;
	bool tls;                  /* https: a verified TLS handshake with host follows */
	bool restricted;           /* for clients beyond this machine: destination rules apply */
	struct parent *parent;     /* NULL: direct */
	/*
	 * Through an HTTP parent, plain requests go to the parent in absolute
	 * form: the connection is to the parent itself, and any origin's
	 * request may ride it. False: a path to host:port is opened through
	 * the parent (SOCKS5, or CONNECT).
	 */
	bool forward;
};

enum upstream_state {
	UPSTREAM_RESOLVING,   /* waiting for the resolver thread */
	UPSTREAM_CONNECTING,  /* one or more connect attempts in flight */
	UPSTREAM_PARENTING,   /* connected to the parent; asking it for a path to the origin */
	UPSTREAM_HANDSHAKING, /* connected; the TLS handshake with the origin is under way */
	UPSTREAM_BUSY,        /* connected and the owner's: carrying an exchange, or about to */
	UPSTREAM_IDLE,        /* waiting for the next exchange, watched for EOF */
	UPSTREAM_CLOSED,      /* fd closed; the owner frees it at a known point */
};

/* What a connection tells its owner. Each is the last thing the connection does in a call. */
struct upstream_ops {
	/* Connected, and the TLS handshake done: BUSY now, free for a request. */
	void (*ready)(struct upstream *up);
	/* No connection will come of it: the status to answer (403, 502, 504) and why. */
	void (*failed)(struct upstream *up, int status, const char *why);
	/* It is closed, for whatever reason: the owner forgets it and frees it later. */
	void (*gone)(struct upstream *up);
	/* Descriptors ran out: the owner closes one it can spare; false when it has none. */
	bool (*need_descriptor)(struct upstream *up);
};

/* What every upstream connection shares: set up once by the daemon. */
struct upstream_context {
	struct ev_loop *loop;
	const struct kp_config *cfg;
	struct tls *tls;                    /* for https origins; NULL: none */
	const struct own_addresses *own;    /* this machine's, for the destination rules */
	const struct upstream_ops *ops;
};

struct upstream_setup;

struct upstream {
	struct source src;           /* what an exchange reads: the end, its buffer, its facts */
	enum upstream_state state;
	const struct upstream_context *ctx;
	/*
	 * What only getting connected needs (the name, its addresses, the
	 * attempts, the handshake's deadline): freed once the connection is
	 * ready or closed, so an idle one does not keep it. NULL then.
	 */
	struct upstream_setup *setup;
	bool restricted;             /* for clients beyond this machine: destination rules apply */
	bool tls;                    /* https: a verified TLS handshake follows the connect */
	bool forward;                /* to an HTTP parent as is (upstream_target.forward) */
	uint16_t port;
	struct parent *parent;       /* reached through it; NULL: direct */
	unsigned exchanges;          /* completed on this connection */
	/*
	 * The pool key it was opened for, also the TLS session's: the owner's
	 * string, which must outlive the connection.
	 */
	const char *key;
};

/*
 * Sets up a connection to t, not started yet: it is ready once connected,
 * the parent's path opened and the TLS handshake done, as t asks. t->key
 * is kept, not copied; the rest is copied. -1 when memory is exhausted
 * (nothing to close then).
 */
int upstream_init(struct upstream *up, const struct upstream_context *ctx,
                  const struct upstream_target *t);
/* Resolves and connects. The outcome may reach the owner before this returns. */
void upstream_connect(struct upstream *up);

/* A new exchange begins on it: fresh facts, no watcher yet. */
void upstream_begin(struct upstream *up);
/*
 * The next exchange begins on it, its request pipelined behind the one just
 * over: the bytes already read and what the socket said (EOF, reset) stay,
 * since they are that exchange's answer.
 */
void upstream_continue(struct upstream *up);
/*
 * The exchange on it is over and left it clean (nothing unread behind the
 * response): true, and it waits for the owner's next word. False: close it.
 */
bool upstream_end(struct upstream *up);
/* Waits for the next exchange, watched for the origin's close or unasked bytes; the owner keeps time. */
void upstream_idle(struct upstream *up);
/* Is the idle connection fit for a request now? (A peek; counted when it is not.) */
bool upstream_usable(struct upstream *up);

/* Closes up whatever its state; the owner hears of it through gone. */
void upstream_close(struct upstream *up);

/*
 * Reorders addresses for Happy Eyeballs (RFC 8305 4): IPv6 first, then the
 * families alternate, each family keeping the resolver's order.
 */
void upstream_order_addrs(struct dns_addrs *a);

#endif
