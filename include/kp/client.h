/*
 * A client connection through its life: reading request heads, admitting
 * or refusing each request, handing it to an exchange (exchange.h) that
 * relays it, keep-alive and pipelining, the responses the proxy makes
 * itself, and the lingering close.
 */
#ifndef KP_CLIENT_H
#define KP_CLIENT_H

#include <stdbool.h>

#include <ev.h>

#include "kp/auth.h"
#include "kp/buf.h"
#include "kp/clock.h"
#include "kp/conn.h"
#include "kp/dns.h"
#include "kp/env.h"
#include "kp/exchange.h"
#include "kp/http.h"
#include "kp/list.h"
#include "kp/slab.h"

struct client;
struct client_request;
struct intercepted;
struct tls_session;

/*
 * The clients of a listener, owned by whoever accepts them: the live ones
 * (for shutdown and draining) and those closed during this loop iteration,
 * freed by client_reap() once every callback of the iteration has returned.
 * Also the request states no client holds now, kept for the next request.
 */
struct client_list {
	struct kp_list live;          /* open clients, newest first */
	struct kp_list dead;          /* closed during this iteration */
	unsigned count;               /* live */
	struct slab slab;             /* where the clients live: idle ones packed together */
	struct client_request *spare; /* request states to take before allocating one */
	unsigned nspare;
	unsigned spare_low;           /* fewest spares since the last client_trim() */
};

enum client_state {
	CLIENT_READING_HEAD,     /* between requests, or part of a head read */
	CLIENT_AUTHENTICATING,   /* a head read whole: its password hash is being checked */
	CLIENT_FORWARDING,       /* the exchange has the request: waiting for a connection, or relaying */
	CLIENT_TUNNEL,           /* CONNECT or upgrade: raw bytes both ways */
	CLIENT_INTERCEPTING,     /* intercepted CONNECT: sending its 200, then our TLS handshake */
	CLIENT_SENDING_LOCAL,    /* writing a response the proxy made itself */
	CLIENT_LINGERING,        /* last response sent, writes shut; draining to EOF */
	CLIENT_CLOSED,           /* fd closed; freed at the end of the loop iteration */
};

struct client {
	enum client_state state;
	struct conn conn;             /* the client's socket; conn.eof: it shut its sending side */
	struct clock_timer timer;     /* one deadline, on env->clock, recomputed from
	                               * last_activity when it fires; off while the exchange
	                               * keeps its own (forwarding, tunnel) */
	ev_tstamp last_activity;
	ev_tstamp head_started;       /* first byte of the head being read; 0: none yet */
	const struct proxy_env *env;
	struct client_list *list;
	struct kp_list link;          /* in list->live while open, then list->dead until reaped */
	struct buf *in;               /* bytes from the client; NULL when idle */
	struct buf *out;              /* a response head or local response to send */
	bool processing_input;        /* process_input() is on the stack */
	bool restricted;              /* beyond this machine: its requests never share
	                               * connections with local ones */
	/*
	 * The request in flight: its parsed head, its exchange, its password
	 * check. Taken when a request's first byte arrives, given back once it
	 * is answered and nothing further waits in in; NULL while idle.
	 */
	struct client_request *req;
	union net_addr peer;
	/*
	 * Intercepted (--intercept): the CONNECT's host and port, where every
	 * request inside goes, and their dispatch key; NULL for a plain client.
	 */
	struct intercepted *intercepted;
	struct tls_session *handshake;   /* made for the client, in use once the 200 is sent */
};

/* An empty list. */
void client_list_init(struct client_list *list);
/* Frees what the list keeps for later clients; every client must be reaped first. */
void client_list_free(struct client_list *list);

/* Takes over an accepted socket. Returns NULL (and closes fd) on failure. */
struct client *client_new(const struct proxy_env *env, struct client_list *list, int fd,
                          const union net_addr *peer);
/* Closes at once, whatever is in flight (shutdown). */
void client_close(struct client *c);
/* Stopping: closes c if no request is in flight; otherwise it closes after its response. */
void client_stop_if_idle(struct client *c);
/* Frees the clients closed since the last call; how many. */
unsigned client_reap(struct client_list *list);

/*
 * Frees the spare request states nobody took since the previous call (the
 * spares' low-water mark), so memory a burst needed goes back while a
 * steady load keeps its working set. Call every few seconds. How many.
 */
unsigned client_trim(struct client_list *list);

#endif
