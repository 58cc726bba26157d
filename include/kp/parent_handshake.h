/*
 * Opening a path to an origin through a parent proxy, on a TCP connection
 * to the parent that is already up: a SOCKS5 session (RFC 1928, with
 * username/password per RFC 1929) or an HTTP CONNECT. When it succeeds,
 * the connection carries the origin's bytes exactly as a direct one would,
 * so TLS, pooling and everything after know nothing of the parent.
 *
 * Not a byte past the parent's reply is read: an origin that speaks first
 * (a banner behind a client's CONNECT) loses nothing.
 */
#ifndef KP_PARENT_HANDSHAKE_H
#define KP_PARENT_HANDSHAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ev.h>

#include "kp/parent_wire.h"

enum parent_kind {
	PARENT_SOCKS5,    /* socks5://: the proxy resolves the origin's name and sends the address */
	PARENT_SOCKS5H,   /* socks5h://: the name goes to the parent, which resolves it */
	PARENT_HTTP,      /* http://: an HTTP proxy (CONNECT here; plain requests in absolute form) */
};

/* What the handshake needs of the parent; the strings are the caller's and outlive it. */
struct parent_hop {
	enum parent_kind kind;
	const char *label;       /* "socks5h://10.0.0.5:1080": never credentials; for the words */
	const char *user;        /* NULL: no credentials */
	const char *password;
};

/* How a handshake ended: the kinds /metrics counts. */
enum parent_outcome {
	PARENT_OPEN,                 /* the path to the origin is open */
	PARENT_REFUSED,              /* the parent refused it (rules, HTTP 403, any other refusal) */
	PARENT_AUTH_FAILED,          /* credentials wrong, missing or not a method it takes (407) */
	PARENT_ORIGIN_UNREACHABLE,   /* the parent could not reach the origin (host/net down, 502) */
	PARENT_BAD_REPLY,            /* malformed, short or oversized */
	PARENT_TIMEOUT,              /* no complete reply within the deadline */
	PARENT_CLOSED,               /* the parent closed or reset the connection */
	PARENT_OUTCOMES
};

/* "refused", "auth", ...: the /metrics label of an outcome. */
const char *parent_outcome_name(enum parent_outcome o);

struct parent_handshake;

/*
 * The end, reached once and as the last thing the handshake does (h may be
 * freed in it). status: 0 when open, else what the client is answered
 * (502, or 504 on a timeout: ours, or an HTTP parent's own 504, which says
 * the time ran out further on); why: words a person can act on, naming
 * the hop ("parent socks5h://10.0.0.5:1080 refused example.com:443:
 * connection not allowed by ruleset") and never its credentials, valid
 * during the call.
 */
typedef void (*parent_handshake_done)(struct parent_handshake *h, enum parent_outcome outcome,
                                      int status, const char *why);

/* Room for what is sent in one go: RFC 1929's longest request, a CONNECT with credentials. */
#define PARENT_SEND_MAX 1400

struct parent_handshake {
	struct ev_loop *loop;
	ev_io io;                        /* fd: writable while a request goes out, then readable */
	ev_timer timer;                  /* the whole handshake's deadline */
	int fd;                          /* connected to the parent; the caller's, never closed */
	const struct parent_hop *hop;
	const char *host;                /* the origin, as the client named it */
	uint16_t port;
	struct sockaddr_storage addr;    /* socks5: the origin's address, resolved here */
	bool has_addr;                   /* addr holds one */
	int phase;                       /* parent_handshake.c's own */
	char out[PARENT_SEND_MAX];       /* the request going out now */
	size_t out_len, out_sent;        /* its length, and how much of it the socket took */
	double timeout;                  /* seconds, as started with: for the words */
	uint8_t in[PARENT_SOCKS5_REPLY_MAX];   /* the SOCKS reply read so far */
	size_t in_len;                   /* bytes of it */
	struct parent_http_reply http;   /* what is kept of the HTTP answer's head */
	parent_handshake_done done;
};

/*
 * Starts the handshake on fd, connected to the parent: to reach host:port
 * (for PARENT_SOCKS5, addr is the origin's address and is what is sent,
 * needed unless host is an IP literal; ignored otherwise). timeout:
 * seconds for the whole of it. The outcome may come before this returns:
 * what cannot be asked (a name over SOCKS5's 255 bytes, credentials over
 * RFC 1929's) ends it before a byte is sent. fd stays the caller's, open
 * either way; once the path is open it holds nothing of the parent's reply.
 */
void parent_handshake_start(struct parent_handshake *h, struct ev_loop *loop, int fd,
                            const struct parent_hop *hop, const char *host, uint16_t port,
                            const struct sockaddr *addr, double timeout,
                            parent_handshake_done done);

/*
 * Stops it with nothing reported; safe when it already ended, or never
 * started on a zeroed struct.
 */
void parent_handshake_cancel(struct parent_handshake *h);

#endif
