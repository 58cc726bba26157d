/*
 * The client module's insides, shared by its two files and nothing else:
 * client.c, the connection's state machine, and client_intercept.c, the
 * steps of an intercepted CONNECT (built only with TLS). Kept beside them
 * in src/ rather than in include/kp/, so no other module can reach for
 * what the client keeps to itself.
 *
 * Each side calls the other only through what is declared here: the
 * interception steps drive the client with a handful of its transitions,
 * and the client asks the steps whether and how to intercept.
 */
#ifndef KP_CLIENT_PRIV_H
#define KP_CLIENT_PRIV_H

#include <stdbool.h>

#include "kp/client.h"
#include "kp/dispatch.h"
#include "kp/http.h"

/* An intercepted CONNECT's: where every request inside goes. */
struct intercepted {
	struct http_target origin;   /* the CONNECT's host and port */
	char key[DISPATCH_KEY_MAX];  /* the dispatch key of every request inside, made once */
	char url_prefix[8 + sizeof(((struct http_target *)0)->key)]; /* "https://host:port", for
	                              * the access log of requests in origin-form */
};

/*
 * What only a request in flight needs, most of a client's memory: kept
 * apart so that a keep-alive connection waiting for its next request
 * holds none of it.
 */
struct client_request {
	struct client *client;        /* whose request it is */
	struct client_request *next;  /* the spare list's link */
	struct http_parser parser;
	struct http_head head;
	struct exchange ex;
	struct auth_waiter auth;      /* told whether the request's credentials passed a hash */
};

/* ---- client.c: the transitions the interception steps take ---------------- */

/* Moves c to next, with that state's deadline counted from now. */
void client_set_state(struct client *c, enum client_state next);
/*
 * Sends what c->out holds, a response the proxy made. True once all of it
 * is out (the buffer is given back); false when the socket is full (the
 * watchers wait for it) or the client is gone (closed).
 */
bool client_send_out(struct client *c);
/* Answers with a response of the proxy's own; keep_alive: the client may ask again. */
void client_reply_local(struct client *c, int status, const char *why, bool keep_alive);
/* The same for a request whose head is parsed but not forwarded; the head is dropped. */
void client_refuse(struct client *c, int status, const char *why, bool keep_alive);
/* Ready for the client's next request, and reads it if it is here already. */
void client_read_next(struct client *c);

/* ---- client_intercept.c: interception (--intercept) ----------------------- */

#if KP_TLS
/*
 * Is the CONNECT c holds (parsed, admitted) one to answer with our own
 * TLS? Its host must match --intercept, the client must not have refused
 * our certificate for it lately, and nothing may have followed the head.
 */
bool client_intercept_wanted(struct client *c);
/* Answers the CONNECT with 200 and begins our handshake (CLIENT_INTERCEPTING). */
void client_intercept_start(struct client *c);
/* The socket took more: sends the rest of the 200, then hands over to TLS. */
void client_intercept_flush(struct client *c);
/* The socket is ready for the handshake's next step. */
void client_intercept_handshake(struct client *c);
/* A request inside the intercepted CONNECT goes to its origin; false: refused. */
bool client_intercept_admit(struct client *c);
/* Frees what interception gave c (its handshake, its origin); the client is closing. */
void client_intercept_release(struct client *c);
#else
/*
 * Built without TLS: no CONNECT is intercepted, so no client ever reaches
 * CLIENT_INTERCEPTING or holds an intercepted origin; these only let the
 * state machine read the same in both builds.
 */
static inline bool
client_intercept_wanted(struct client *c)
{
	(void)c;
	return false;
}

static inline void
client_intercept_start(struct client *c)
{
	(void)c;
}

static inline void
client_intercept_flush(struct client *c)
{
	(void)c;
}

static inline void
client_intercept_handshake(struct client *c)
{
	(void)c;
}

static inline bool
client_intercept_admit(struct client *c)
{
	(void)c;
	return false;
}

static inline void
client_intercept_release(struct client *c)
{
	(void)c;
}
#endif

#endif
