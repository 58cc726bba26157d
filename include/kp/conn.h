/*
 * One end of a relayed byte stream, client side or origin side alike: the
 * socket, its two watchers, the operations that move bytes through it, and
 * the facts learnt about it while doing so.
 *
 * The exchange (exchange.h) and the tunnel code only ever talk to ends. A
 * plain TCP end reads and writes its socket and may be spliced; a later TLS
 * end supplies its own operations and says it cannot be spliced, and
 * nothing above it changes. A memory end (memconn.h) has no socket at all:
 * it moves bytes to and from a buffer and raises its own readiness.
 *
 * The facts (EOF, reset, readable, write failed) belong to the end, not to
 * whatever is relaying through it, so a request retried on a fresh
 * connection starts from that connection's facts, not the dead one's.
 */
#ifndef KP_CONN_H
#define KP_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <ev.h>

#include "kp/buf.h"

struct conn;

/* What became of an attempt to move bytes. */
enum move_status {
	MOVE_OK,       /* *moved > 0 bytes moved */
	MOVE_AGAIN,    /* the source has nothing now / the destination takes nothing now */
	MOVE_FULL,     /* nowhere to put more until what is held is delivered */
	MOVE_EOF,      /* the source is at end of stream */
	MOVE_ERROR,    /* errno says why */
};

/* What the owner is told when the socket is ready; revents is EV_READ/EV_WRITE. */
typedef void (*conn_io_fn)(struct conn *c, int revents);

struct conn_ops {
	/* Like recv(2): > 0 bytes, 0 end of stream, -1 with errno. */
	ssize_t (*recv)(struct conn *c, void *p, size_t len);
	/* Like sendmsg(2) without SIGPIPE: bytes taken, -1 with errno. */
	ssize_t (*sendv)(struct conn *c, const struct iovec *iov, int iovcnt);
	/*
	 * Bytes already read from the socket and waiting inside the layer (a
	 * decrypted record only partly taken, records read ahead): no
	 * readiness event will come for them. NULL: none ever.
	 */
	size_t (*pending)(const struct conn *c);
	/*
	 * Is an idle connection still fit for a request: nothing unasked
	 * arrived, no EOF? May consume protocol housekeeping (TLS session
	 * tickets) but never payload.
	 */
	bool (*idle_alive)(struct conn *c);
	/* The last words before SHUT_WR (TLS close_notify); NULL: none. */
	void (*end_writes)(struct conn *c);
	/* Frees what the layer holds; the socket is closed after. NULL: nothing. */
	void (*release)(struct conn *c);
	/*
	 * An end without a socket (memory) says itself when it is ready,
	 * instead of through the two watchers. NULL: the socket's watchers.
	 */
	void (*watch)(struct conn *c, bool readable, bool writable);
	/* Bytes come straight from the socket, so splice(2) may move them. */
	bool can_splice;
};

/* Plain TCP. */
extern const struct conn_ops conn_tcp_ops;

struct tls_session;

struct conn {
	int fd;                      /* -1 when closed, or for an end without a socket */
	ev_io rio, wio;              /* both call on_io; neither runs unless asked for */
	struct ev_loop *loop;
	const struct conn_ops *ops;
	conn_io_fn on_io;
	bool eof;                    /* the peer ended its sending direction */
	bool reset;                  /* ... and it was an error, not a clean FIN */
	bool readable;               /* readiness seen and not yet read to EAGAIN */
	bool write_failed;           /* a send failed; only reading may go on */
	/*
	 * Which socket readiness lets the owner's read (read_on) or write
	 * (write_on) go on: EV_READ and EV_WRITE for TCP; a TLS layer may need
	 * to write before it can read, or read before it can write.
	 */
	short read_on, write_on;
	bool want_read, want_write;  /* what the owner last asked conn_watch() for */
	struct tls_session *tls;     /* the TLS layer's state; NULL for plain TCP */
};

/* Sets c up around fd (which may be -1 for now); no watcher runs yet. */
void conn_init(struct conn *c, struct ev_loop *loop, int fd, const struct conn_ops *ops,
               conn_io_fn on_io);
/* Points c at another fd (a connect attempt that won), with fresh facts. */
void conn_set_fd(struct conn *c, int fd);
/* Forgets what was learnt: a connection handed to a new exchange. */
void conn_clear_facts(struct conn *c);
/* Which readiness the owner waits for now; watchers follow. */
void conn_watch(struct conn *c, bool readable, bool writable);
/* Stops both watchers and closes the socket, once (and frees any layer on it). */
void conn_close(struct conn *c);
/* Sends what the layer owes before a half-close, then shuts writes (a socket's). -1 with errno. */
int conn_shutdown_write(struct conn *c);
/* Is this idle connection still fit for a request? */
static inline bool
conn_idle_alive(struct conn *c)
{
	return c->ops->idle_alive(c);
}

/*
 * Reads at most len bytes into p through the end's operations, learning its
 * facts: MOVE_OK with *got > 0, MOVE_AGAIN (readable cleared), MOVE_FULL
 * (len 0), MOVE_EOF or MOVE_ERROR (EOF and reset set).
 */
enum move_status conn_read(struct conn *c, void *p, size_t len, size_t *got);

/*
 * Reads into b, making room by compacting first. MOVE_OK with *got > 0,
 * MOVE_AGAIN (and readable cleared), MOVE_FULL, MOVE_EOF or MOVE_ERROR (the
 * facts say which).
 */
enum move_status conn_fill(struct conn *c, struct buf *b, size_t *got);

/*
 * Sends a, then b behind it, in one call: a small response leaves in one
 * segment instead of two. Either part may be empty. Returns bytes sent, 0
 * when the socket takes nothing now, -1 on error (errno set).
 */
ssize_t conn_send_two(struct conn *c, const char *a, size_t alen, const char *b, size_t blen);

/*
 * What the kernel measured of the path under a TCP end (TCP_INFO): the
 * smoothed round-trip time, and the rate its latest data was delivered at
 * (Linux 4.9 and later). 0 where it has no figure yet; both 0 for an end
 * without a TCP socket (memory). The one place the project reads them.
 */
struct conn_path {
	double rtt;            /* seconds */
	double delivery_rate;  /* bytes per second */
};
struct conn_path conn_path_figures(const struct conn *c);

/* Can bytes move between these two ends by splice(2)? */
static inline bool
conn_pair_splices(const struct conn *from, const struct conn *to)
{
	return from->ops->can_splice && to->ops->can_splice;
}

#endif
