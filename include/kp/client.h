/*
 * A client connection and the exchange it is carrying: parsing its request
 * heads, forwarding the request to an upstream connection and the response
 * back, keep-alive and pipelining, and the responses the proxy makes itself.
 */
#ifndef KP_CLIENT_H
#define KP_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include <ev.h>

#include "kp/buf.h"
#include "kp/dns.h"
#include "kp/framing.h"
#include "kp/http.h"
#include "kp/splice.h"
#include "kp/tunnel.h"

struct server;
struct upstream;

enum client_state {
	CLIENT_READING_HEAD,     /* between requests, or part of a head read */
	CLIENT_WAITING_UPSTREAM, /* head parsed; resolving or connecting */
	CLIENT_EXCHANGING,       /* request and response flowing through an upstream */
	CLIENT_TUNNEL,           /* CONNECT or upgrade: raw bytes both ways */
	CLIENT_SENDING_LOCAL,    /* writing a response the proxy made itself */
	CLIENT_LINGERING,        /* last response sent, writes shut; draining to EOF */
	CLIENT_CLOSED,           /* fd closed; freed at the end of the loop iteration */
};

enum request_phase {
	REQ_SENDING,   /* head and/or body still going upstream */
	REQ_DONE,      /* the whole request was written */
};

enum response_phase {
	RESP_HEAD,     /* waiting for the final response head */
	RESP_BODY,     /* forwarding the body */
	RESP_DONE,     /* the whole response reached the client */
};

/* One request and its response. Reset between requests; never freed on its own. */
struct exchange {
	enum request_phase req;
	enum response_phase resp;
	struct upstream *up;          /* carrying this exchange, once ready */
	struct upstream *connecting;  /* on its way, until ready or failed */
	struct http_target target;
	struct buf *req_head;         /* rewritten head, kept for a replay until the response starts */
	size_t req_head_sent;
	struct framer req_body;
	size_t req_pending;           /* framed body bytes at the front of the client's buffer */
	uint64_t req_body_sent;
	struct framer resp_body;
	size_t resp_pending;          /* framed bytes at the front of the upstream's buffer */
	struct mover resp_mover;      /* response payload spliced past user space */
	bool copy_body;               /* no splice for this response (flag or EINVAL) */
	uint64_t resp_received;       /* bytes read from the upstream for this exchange */
	uint64_t resp_sent;
	bool dechunk;                 /* HTTP/1.0 client: send payload only, then close */
	bool upstream_reusable;       /* framing and the origin allow pooling afterwards */
	bool client_keep_alive;       /* the client may send another request afterwards */
	bool upstream_write_failed;   /* stop sending; let the read side decide */
	bool upstream_eof;            /* the origin closed; act once the buffer is drained */
	bool upstream_reset;          /* ... and it was an error, not a clean FIN */
	bool upstream_readable;       /* readiness seen and not yet read to EAGAIN */
	bool connect;                 /* a CONNECT: becomes a tunnel once connected */
	bool upgrade;                 /* asked the origin to switch protocols */
	struct tunnel tunnel;         /* in CLIENT_TUNNEL */
	uint8_t method;
	uint8_t client_minor;
	unsigned retries;
	uint16_t status;
	ev_tstamp started;
};

struct client {
	enum client_state state;
	int fd;
	ev_io rio, wio;
	ev_timer timer;               /* one deadline, recomputed from last_activity */
	ev_tstamp last_activity;
	struct server *srv;
	struct client *prev, *next;   /* the server's live list */
	struct client *dead_next;
	struct buf *in;               /* bytes from the client; NULL when idle */
	struct buf *out;              /* a response head or local response to send */
	bool peer_eof;                /* the client shut its sending side */
	bool processing_input;        /* process_input() is on the stack */
	struct http_parser parser;
	struct http_head head;
	struct exchange ex;
	union dns_addr peer;
};

/* Takes over an accepted socket. Returns NULL (and closes fd) on failure. */
struct client *client_new(struct server *srv, int fd, const union dns_addr *peer);
/* Closes at once, whatever is in flight (shutdown). */
void client_close(struct client *c);
void client_reap(struct server *srv);

/* Answers to upstream_acquire(). */
void client_upstream_ready(struct client *c, struct upstream *up);
void client_upstream_failed(struct client *c, int status, const char *why);
/* The upstream carrying c's exchange is readable or writable. */
void client_upstream_event(struct client *c, int revents);

#endif
