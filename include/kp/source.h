/*
 * Where an exchange reads a response from and sends its request to: an
 * upstream connection that dispatch handed over, or a response held in
 * memory (memconn.h). The exchange parses, frames, de-chunks and relays
 * whatever the source's end yields through the same code either way, and
 * gives the source back through its operations when it is done: the
 * exchange never names the module a source came from.
 */
#ifndef KP_SOURCE_H
#define KP_SOURCE_H

#include <stdbool.h>

#include "kp/buf.h"
#include "kp/conn.h"

struct source;

/* Whoever is using a source: told when its end is ready. Embedded in the user. */
struct source_reader {
	void (*event)(struct source_reader *r, int revents);   /* EV_READ or EV_WRITE */
};

struct source_ops {
	/* The exchange is over; reusable: the framing and the peer allow another on it. */
	void (*release)(struct source *s, bool reusable);
	/* Let go at once, mid-exchange: what it held is abandoned. */
	void (*close)(struct source *s);
	/* It becomes one side of a tunnel: its bytes are no longer HTTP, it is never reused. */
	void (*detach)(struct source *s);
	/* The request is all written (optional): another may be pipelined behind it. */
	void (*sent)(struct source *s);
};

struct source {
	struct conn conn;             /* the end: request bytes go in, response bytes come out */
	struct buf *in;               /* response bytes read and not yet forwarded; NULL when empty */
	bool reused;                  /* it carried an exchange before: a failure may mean it was stale */
	bool held;                    /* a response held in memory: if it fails before its first
	                               * byte, the request goes to the origin as if nothing was held */
	double keep_alive_hint;       /* the last response's Keep-Alive timeout in seconds, < 0: none */
	double rtt;                   /* seconds, from TCP_INFO; 0: not read yet */
	double rtt_read_at;           /* when rtt was read: once a second at most */
	struct source_reader *reader; /* the exchange using it now; NULL when none */
	const char *served_as;        /* what the access log calls it (a split download's
	                               * "split, 2 resumes"); NULL: the usual words */
	const struct source_ops *ops;
};

#endif
