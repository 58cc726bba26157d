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

#include "kp/buf.h"
#include "kp/conn.h"
#include "kp/dns.h"
#include "kp/exchange.h"
#include "kp/http.h"

struct server;
struct tls_session;

enum client_state {
	CLIENT_READING_HEAD,     /* between requests, or part of a head read */
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
	ev_timer timer;               /* one deadline, recomputed from last_activity */
	ev_tstamp last_activity;
	ev_tstamp head_started;       /* first byte of the head being read; 0: none yet */
	struct server *srv;
	struct client *prev, *next;   /* the server's live list */
	struct client *dead_next;
	struct buf *in;               /* bytes from the client; NULL when idle */
	struct buf *out;              /* a response head or local response to send */
	bool processing_input;        /* process_input() is on the stack */
	struct http_parser parser;
	struct http_head head;
	struct exchange ex;
	union dns_addr peer;
	/*
	 * Intercepted (--intercept): the CONNECT's host and port, where every
	 * request inside goes; NULL for a plain client.
	 */
	struct http_target *origin;
	struct tls_session *handshake;   /* made for the client, in use once the 200 is sent */
};

/* Takes over an accepted socket. Returns NULL (and closes fd) on failure. */
struct client *client_new(struct server *srv, int fd, const union dns_addr *peer);
/* Closes at once, whatever is in flight (shutdown). */
void client_close(struct client *c);
/* Stopping: closes c if no request is in flight; otherwise it closes after its response. */
void client_stop_if_idle(struct client *c);
void client_reap(struct server *srv);

#endif
