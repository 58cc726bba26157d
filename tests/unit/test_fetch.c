/*
 * Requests the proxy makes itself, end to end in one process: an exchange
 * whose downstream end is memory fetches from an origin through dispatch,
 * the store keeps the response in canonical form, and client exchanges
 * read it later as from an origin, after it ended or while it still
 * arrives. Split downloads (ra_split.h) run here on the same exchanges and
 * dispatch: a client's GET served through the hook, its pieces pipelined
 * on one connection, or backed off from a second one the origin refuses.
 * The modules are the daemon's own, on a real libev loop; the origin is
 * the test's, on loopback (a thread per connection, blocking sockets,
 * answers scripted by path), and records each request head with the
 * connection it came on and how many answers had ended there. Every wait
 * ends with an event (the origin's threads wake the loop) or the test's
 * deadline; a held answer waits for the test or for the next request, not
 * for a clock.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "kp/budget.h"
#include "kp/buf.h"
#include "kp/clock.h"
#include "kp/config.h"
#include "kp/dispatch.h"
#include "kp/dns.h"
#include "kp/env.h"
#include "kp/evglue.h"
#include "kp/exchange.h"
#include "kp/http.h"
#include "kp/memconn.h"
#include "kp/policy.h"
#include "kp/ra_fetch.h"
#include "kp/ra_split.h"
#include "kp/splice.h"
#include "kp/stats.h"

#define DEADLINE_SECONDS 5.0
#define STORE_BOUND (1u << 20)
#define BODY_LEN 100000
#define FIRST_PART 30000          /* what /slow sends before it waits the first time */
#define SECOND_PART 60000         /* ... and the second time */

/*
 * Split downloads: pieces of --split-size; an object of four and a short
 * fifth, and one of three and a short fourth (as many pieces as a download
 * on two connections asks before its client reads into the second); the
 * ETag of their one version.
 */
#define SPLIT_PIECE 65536u
#define SPLIT_OBJECT (4 * SPLIT_PIECE + 10000)
#define SPLIT_PIECES 5u
#define SPLIT_SHORT (3 * SPLIT_PIECE + 10000)
#define SPLIT_ETAG "\"v1\""

#define ORIGIN_MAX_CONNS 8
#define ORIGIN_MAX_REQUESTS 32
#define ORIGIN_HEAD_MAX 2048

/* What the origin sends for /chunk and /slow: hop-by-hop fields among the others. */
#define RANGE_HEAD_SENT \
	"HTTP/1.1 206 Partial Content\r\n" \
	"Content-Type: application/octet-stream\r\n" \
	"Connection: keep-alive, X-Hop\r\n" \
	"X-Hop: per-connection\r\n" \
	"Content-Range: bytes 0-99999/100000\r\n" \
	"Keep-Alive: timeout=30\r\n" \
	"Content-Length: 100000\r\n" \
	"Via: 1.1 origin-cache\r\n" \
	"\r\n"

/* The same in memory: hop-by-hop gone, the origin's Via kept, none of ours. */
#define RANGE_HEAD_STORED \
	"HTTP/1.1 206 Partial Content\r\n" \
	"Content-Type: application/octet-stream\r\n" \
	"Content-Range: bytes 0-99999/100000\r\n" \
	"Content-Length: 100000\r\n" \
	"Via: 1.1 origin-cache\r\n" \
	"\r\n"

/* ... and as a client gets it from memory: the reader adds its Via. */
#define RANGE_HEAD_SERVED(connection) \
	"HTTP/1.1 206 Partial Content\r\n" \
	"Content-Type: application/octet-stream\r\n" \
	"Content-Range: bytes 0-99999/100000\r\n" \
	"Content-Length: 100000\r\n" \
	"Via: 1.1 origin-cache\r\n" \
	"Via: 1.1 keepalive-proxy\r\n" connection "\r\n"

static const char chunked_sent[] = "HTTP/1.1 200 OK\r\n"
                                   "Transfer-Encoding: chunked\r\n"
                                   "X-Kind: chunked\r\n"
                                   "\r\n"
                                   "5\r\nhello\r\n"
                                   "6;ext=1\r\n world\r\n"
                                   "0\r\n\r\n";
static const char chunked_stored[] = "HTTP/1.1 200 OK\r\n"
                                     "X-Kind: chunked\r\n"
                                     "\r\n"
                                     "hello world";

static const char interim_sent[] = "HTTP/1.1 100 Continue\r\n\r\n"
                                   "HTTP/1.1 103 Early Hints\r\n"
                                   "Link: </style.css>; rel=preload\r\n"
                                   "\r\n"
                                   "HTTP/1.1 200 OK\r\n"
                                   "Content-Length: 5\r\n"
                                   "\r\n"
                                   "final";
static const char interim_stored[] = "HTTP/1.1 200 OK\r\n"
                                     "Content-Length: 5\r\n"
                                     "\r\n"
                                     "final";

/*
 * The 206's payload (its first BODY_LEN bytes) and the split object: no
 * short period, so a byte out of place shows.
 */
static char body[SPLIT_OBJECT];

/* ---- the origin ----------------------------------------------------------- */

struct origin;

struct origin_conn {
	struct origin *o;
	int fd;
	unsigned no;               /* 1-based accept order */
	pthread_t thread;
	/* Its thread's alone: bytes read and not yet answered, a head at their start. */
	char buf[ORIGIN_HEAD_MAX];
	size_t len;
	size_t recorded;           /* bytes of buf whose heads are recorded */
	/* Under the origin's lock. */
	unsigned requests;         /* request heads that came whole on it */
	unsigned answered;         /* answers sent whole on it */
	bool closed;               /* it read the end: the proxy closed it (or the test stops) */
};

struct origin_seen {
	unsigned conn;             /* the connection it came on */
	unsigned nth;              /* its place among that connection's requests, from 1 */
	/*
	 * Answers sent whole on that connection when its head came: fewer than
	 * nth - 1, it was written before the answer to the one before it ended.
	 */
	unsigned answered;
	size_t len;
	char head[ORIGIN_HEAD_MAX + 1];   /* NUL-ended */
};

struct origin {
	int listen_fd;
	int wake[2];               /* a byte here ends the accept thread */
	uint16_t port;
	pthread_t acceptor;
	bool started;
	/* The test's loop, woken through news whenever what the origin saw changes. */
	struct ev_loop *loop;
	ev_async *news;
	pthread_mutex_t lock;      /* guards everything below */
	pthread_cond_t changed;
	bool stopping;             /* every wait ends */
	struct origin_conn conns[ORIGIN_MAX_CONNS];
	unsigned connections;
	unsigned requests;
	struct origin_seen seen[ORIGIN_MAX_REQUESTS];
	unsigned releases;         /* how far /slow and /hold may go on */
	bool dropped;              /* /drop-once was dropped already */
	unsigned first_piece_conn; /* /split/refused: the connection its first piece came on */
};

/* What the origin saw changed: its threads and the test's loop look again. Under the lock. */
static void
origin_changed(struct origin *o)
{
	pthread_cond_broadcast(&o->changed);
	ev_async_send(o->loop, o->news);
}

static int
send_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int
send_text(int fd, const char *s)
{
	return send_all(fd, s, strlen(s));
}

/* Waits until the test released the origin n times; false when the origin stops first. */
static bool
origin_wait_release(struct origin *o, unsigned n)
{
	bool released;

	pthread_mutex_lock(&o->lock);
	while (o->releases < n && !o->stopping)
		pthread_cond_wait(&o->changed, &o->lock);
	released = o->releases >= n;
	pthread_mutex_unlock(&o->lock);
	return released;
}

static void
origin_release_all(struct origin *o, unsigned n)
{
	pthread_mutex_lock(&o->lock);
	o->releases += n;
	origin_changed(o);
	pthread_mutex_unlock(&o->lock);
}

/* One held answer, or one held part of an answer, may go out. */
static void
origin_release(struct origin *o)
{
	origin_release_all(o, 1);
}

/* Records every whole request head in c's buffer not recorded yet, as come now. */
static void
origin_record_heads(struct origin_conn *c)
{
	struct origin *o = c->o;
	char *end;

	while ((end = memmem(c->buf + c->recorded, c->len - c->recorded, "\r\n\r\n", 4))) {
		size_t len = (size_t)(end + 4 - (c->buf + c->recorded));

		pthread_mutex_lock(&o->lock);
		c->requests++;
		if (o->requests < ORIGIN_MAX_REQUESTS) {
			struct origin_seen *s = &o->seen[o->requests];

			s->conn = c->no;
			s->nth = c->requests;
			s->answered = c->answered;
			s->len = len;
			memcpy(s->head, c->buf + c->recorded, len);
			s->head[len] = '\0';
		}
		o->requests++;
		origin_changed(o);
		pthread_mutex_unlock(&o->lock);
		c->recorded += len;
	}
}

/*
 * Reads until a whole request head starts c's buffer: its length, or 0
 * once the connection is gone (closed, reset, or a head longer than the
 * buffer). Every head is recorded as it comes, the ones behind it too.
 */
static size_t
origin_read_head(struct origin_conn *c)
{
	struct origin *o = c->o;

	for (;;) {
		char *end;
		ssize_t n;

		origin_record_heads(c);
		if ((end = memmem(c->buf, c->len, "\r\n\r\n", 4)))
			return (size_t)(end + 4 - c->buf);
		if (c->len == sizeof(c->buf))
			return 0;
		n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			pthread_mutex_lock(&o->lock);
			c->closed = true;
			origin_changed(o);
			pthread_mutex_unlock(&o->lock);
			return 0;
		}
		c->len += (size_t)n;
	}
}

static bool
path_is(const char *path, size_t len, const char *want)
{
	return len == strlen(want) && memcmp(path, want, len) == 0;
}

/* The bytes a bounded Range of the head asks for; false without one. */
static bool
range_asked(const char *head, uint64_t *first, uint64_t *last)
{
	const char *r = strstr(head, "\r\nRange: bytes=");
	unsigned long long f, l;

	if (!r || sscanf(r, "\r\nRange: bytes=%llu-%llu", &f, &l) != 2 || f > l)
		return false;
	*first = f;
	*last = l;
	return true;
}

/* The length of the split object at path: SPLIT_SHORT for names ending in "-short". */
static uint64_t
split_length(const char *path, size_t plen)
{
	return plen > 6 && memcmp(path + plen - 6, "-short", 6) == 0 ? SPLIT_SHORT : SPLIT_OBJECT;
}

/*
 * The split object's answer to a request under /split/ (head, NUL-ended):
 * a 206 of the bounded range asked, with the ETag If-Range names.
 *
 * /split/pipelined: a later piece's answer (its request carries If-Range)
 * that does not reach the object's end stops after half its body until
 * the next request has come on its connection: only a request written
 * before the answer ended lets it go on.
 *
 * /split/refused...: an origin that allows a client one connection, the
 * first piece's. Every request on any other connection is refused with a
 * 403, kept alive. The first piece's answer stops after half its body
 * until the test releases it.
 */
static int
split_answer(struct origin_conn *c, const char *head, const char *path, size_t plen)
{
	struct origin *o = c->o;
	uint64_t complete = split_length(path, plen);
	bool later = strstr(head, "\r\nIf-Range: ") != NULL, hold = false;
	uint64_t first, last, length;
	char h[512];

	if (!range_asked(head, &first, &last) || first >= complete)
		return send_text(c->fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
	if (last >= complete)
		last = complete - 1;
	length = last - first + 1;
	if (plen >= 14 && memcmp(path, "/split/refused", 14) == 0) {
		bool refuse;

		pthread_mutex_lock(&o->lock);
		if (!later && first == 0 && !o->first_piece_conn) {
			o->first_piece_conn = c->no;
			hold = true;
		}
		refuse = c->no != o->first_piece_conn;
		pthread_mutex_unlock(&o->lock);
		if (refuse)
			return send_text(c->fd,
			                 "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
	}
	snprintf(h, sizeof(h),
	         "HTTP/1.1 206 Partial Content\r\n"
	         "Content-Type: application/octet-stream\r\n"
	         "ETag: " SPLIT_ETAG "\r\n"
	         "Content-Range: bytes %llu-%llu/%llu\r\n"
	         "Content-Length: %llu\r\n"
	         "\r\n",
	         (unsigned long long)first, (unsigned long long)last,
	         (unsigned long long)complete, (unsigned long long)length);
	if (send_text(c->fd, h))
		return -1;
	if (path_is(path, plen, "/split/pipelined") && later && last < complete - 1) {
		if (send_all(c->fd, body + first, length / 2) || !origin_read_head(c))
			return -1;
		return send_all(c->fd, body + first + length / 2, length - length / 2);
	}
	if (hold) {
		if (send_all(c->fd, body + first, length / 2) || !origin_wait_release(o, 1))
			return -1;
		return send_all(c->fd, body + first + length / 2, length - length / 2);
	}
	return send_all(c->fd, body + first, length);
}

/* Answers one request (head, NUL-ended) by its path; -1 when the connection is gone. */
static int
origin_answer(struct origin_conn *c, const char *head, size_t len)
{
	const char *sp = memchr(head, ' ', len), *path, *end;
	size_t plen;
	char small[256];

	if (!sp)
		return -1;
	path = sp + 1;
	end = memchr(path, ' ', len - (size_t)(path - head));
	if (!end)
		return -1;
	plen = (size_t)(end - path);
	if (plen > 7 && memcmp(path, "/split/", 7) == 0)
		return split_answer(c, head, path, plen);
	if (path_is(path, plen, "/chunk"))
		return send_text(c->fd, RANGE_HEAD_SENT) || send_all(c->fd, body, BODY_LEN) ? -1 : 0;
	if (path_is(path, plen, "/slow")) {
		if (send_text(c->fd, RANGE_HEAD_SENT) || send_all(c->fd, body, FIRST_PART) ||
		    !origin_wait_release(c->o, 1) ||
		    send_all(c->fd, body + FIRST_PART, SECOND_PART - FIRST_PART) ||
		    !origin_wait_release(c->o, 2))
			return -1;
		return send_all(c->fd, body + SECOND_PART, BODY_LEN - SECOND_PART);
	}
	if (path_is(path, plen, "/chunked"))
		return send_text(c->fd, chunked_sent);
	if (path_is(path, plen, "/continue"))
		return send_text(c->fd, interim_sent);
	if (path_is(path, plen, "/hold") && !origin_wait_release(c->o, 1))
		return -1;
	if (path_is(path, plen, "/drop-once")) {
		bool drop;

		pthread_mutex_lock(&c->o->lock);
		drop = !c->o->dropped;
		c->o->dropped = true;
		pthread_mutex_unlock(&c->o->lock);
		/* Closed unanswered, as an origin does with a connection it timed out. */
		if (drop) {
			shutdown(c->fd, SHUT_RDWR);
			return -1;
		}
	}
	/* Anything else: 200 with the path as its body, to tell answers apart. */
	snprintf(small, sizeof(small), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%.*s", plen,
	         (int)plen, path);
	return send_text(c->fd, small);
}

static void *
origin_serve(void *arg)
{
	struct origin_conn *c = arg;
	struct origin *o = c->o;

	for (;;) {
		char head[ORIGIN_HEAD_MAX + 1];
		size_t len = origin_read_head(c);

		if (!len)
			return NULL;
		memcpy(head, c->buf, len);
		head[len] = '\0';
		c->len -= len;
		c->recorded -= len;
		memmove(c->buf, c->buf + len, c->len);
		if (origin_answer(c, head, len) < 0)
			return NULL;
		pthread_mutex_lock(&o->lock);
		c->answered++;
		origin_changed(o);
		pthread_mutex_unlock(&o->lock);
	}
}

static void *
origin_accept(void *arg)
{
	struct origin *o = arg;
	struct pollfd pfd[2] = {{o->listen_fd, POLLIN, 0}, {o->wake[0], POLLIN, 0}};

	for (;;) {
		struct origin_conn *c;
		int fd;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		if (pfd[1].revents)
			return NULL;
		if ((fd = accept4(o->listen_fd, NULL, NULL, SOCK_CLOEXEC)) < 0)
			continue;
		pthread_mutex_lock(&o->lock);
		if (o->connections == ORIGIN_MAX_CONNS) {
			pthread_mutex_unlock(&o->lock);
			close(fd);
			continue;
		}
		c = &o->conns[o->connections];
		c->o = o;
		c->fd = fd;
		c->no = o->connections + 1;
		if (pthread_create(&c->thread, NULL, origin_serve, c) == 0)
			o->connections++;
		else
			close(fd);
		origin_changed(o);
		pthread_mutex_unlock(&o->lock);
	}
}

/* Listens on loopback; news on loop hears of every change in what it saw. */
static int
origin_start(struct origin *o, struct ev_loop *loop, ev_async *news)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t slen = sizeof(sin);

	memset(o, 0, sizeof(*o));
	o->wake[0] = o->wake[1] = -1;
	o->loop = loop;
	o->news = news;
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->changed, NULL);
	o->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (o->listen_fd < 0 || bind(o->listen_fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(o->listen_fd, 16) < 0 ||
	    getsockname(o->listen_fd, (struct sockaddr *)&sin, &slen) < 0 ||
	    pipe2(o->wake, O_CLOEXEC) < 0)
		return -1;
	o->port = ntohs(sin.sin_port);
	if (pthread_create(&o->acceptor, NULL, origin_accept, o) != 0)
		return -1;
	o->started = true;
	return 0;
}

static void
origin_stop(struct origin *o)
{
	if (o->started) {
		ssize_t n = write(o->wake[1], "x", 1);

		(void)n;
		pthread_join(o->acceptor, NULL);
	}
	/* Held answers give up; then every thread sees its connection end. */
	pthread_mutex_lock(&o->lock);
	o->stopping = true;
	pthread_cond_broadcast(&o->changed);
	pthread_mutex_unlock(&o->lock);
	for (unsigned i = 0; i < o->connections; i++) {
		shutdown(o->conns[i].fd, SHUT_RDWR);
		pthread_join(o->conns[i].thread, NULL);
		close(o->conns[i].fd);
	}
	if (o->listen_fd >= 0)
		close(o->listen_fd);
	if (o->wake[0] >= 0) {
		close(o->wake[0]);
		close(o->wake[1]);
	}
	pthread_cond_destroy(&o->changed);
	pthread_mutex_destroy(&o->lock);
}

static unsigned
origin_connections(struct origin *o)
{
	unsigned n;

	pthread_mutex_lock(&o->lock);
	n = o->connections;
	pthread_mutex_unlock(&o->lock);
	return n;
}

static unsigned
origin_requests(struct origin *o)
{
	unsigned n;

	pthread_mutex_lock(&o->lock);
	n = o->requests;
	pthread_mutex_unlock(&o->lock);
	return n;
}

/* A copy of the i-th request the origin saw (i below origin_requests()). */
static struct origin_seen
origin_seen_at(struct origin *o, unsigned i)
{
	struct origin_seen s;

	assert_true(i < ORIGIN_MAX_REQUESTS);
	pthread_mutex_lock(&o->lock);
	s = o->seen[i];
	pthread_mutex_unlock(&o->lock);
	return s;
}

/* The i-th request head the origin got is exactly want, on connection conn. */
static void
assert_origin_saw(struct origin *o, unsigned i, unsigned conn, const char *want)
{
	struct origin_seen s = origin_seen_at(o, i);

	assert_int_equal(s.conn, conn);
	assert_int_equal(s.len, strlen(want));
	assert_memory_equal(s.head, want, s.len);
}

/* Did the origin read the end of its connection no (1-based)? */
static bool
origin_conn_closed(struct origin *o, unsigned no)
{
	bool closed;

	pthread_mutex_lock(&o->lock);
	closed = no >= 1 && no <= o->connections && o->conns[no - 1].closed;
	pthread_mutex_unlock(&o->lock);
	return closed;
}

/* ---- an owner's fetch into memory ------------------------------------------ */

struct fetch {
	struct memstore store;
	struct exchange ex;
	struct buf *in, *out;      /* the exchange's downstream buffers */
	char request[512];         /* the head composed for the origin */
	size_t want;               /* body bytes a wait is for */
	bool used;                 /* store and exchange are set up */
	unsigned finished;
	int reply_status;          /* the exchange gave up with this status */
	bool aborted;
};

static struct fetch *
fetch_of(struct exchange *ex)
{
	return container_of(ex, struct fetch, ex);
}

static void
fetch_wait(struct exchange *ex)
{
	bool rd, wr;

	exchange_watch(ex, &rd, &wr);
	conn_watch(&fetch_of(ex)->store.writer, rd, wr);
}

static void
fetch_reply(struct exchange *ex, int status, const char *why, bool keep_alive)
{
	struct fetch *f = fetch_of(ex);

	(void)why;
	(void)keep_alive;
	f->reply_status = status;
	exchange_release(ex);
	memstore_fail(&f->store);
}

static void
fetch_abort(struct exchange *ex, const char *why)
{
	struct fetch *f = fetch_of(ex);

	(void)why;
	f->aborted = true;
	exchange_release(ex);
	memstore_fail(&f->store);
}

static void
fetch_finished(struct exchange *ex)
{
	struct fetch *f = fetch_of(ex);

	f->finished++;
	/* The store ends: readers at its last byte see EOF. */
	conn_shutdown_write(&f->store.writer);
}

static void
fetch_tunnel_opened(struct exchange *ex)
{
	fetch_abort(ex, "a tunnel into memory");
}

static const struct exchange_ops fetch_ops = {
	.reply = fetch_reply,
	.abort = fetch_abort,
	.finished = fetch_finished,
	.tunnel_opened = fetch_tunnel_opened,
	.wait = fetch_wait,
};

static void
fetch_io(struct conn *c, int revents)
{
	struct memstore *s = container_of(c, struct memstore, writer);

	(void)revents;
	exchange_run(&container_of(s, struct fetch, store)->ex);
}

/* ---- a client, on one end of a socket pair --------------------------------- */

struct reader {
	struct conn conn;          /* the proxy's end */
	struct exchange ex;
	struct buf *in, *out;
	struct http_parser parser;
	struct http_head head;
	struct memsource m;        /* where the response comes from, when from memory */
	bool m_open;
	bool used;
	int peer;                  /* the client's end */
	ev_io peer_io;
	char *got;                 /* what the client received */
	size_t got_len, got_cap;
	size_t want;               /* body bytes a wait is for */
	bool peer_eof;
	unsigned finished;
	int reply_status;
	bool aborted;
};

static struct reader *
reader_of(struct exchange *ex)
{
	return container_of(ex, struct reader, ex);
}

static void
reader_wait(struct exchange *ex)
{
	struct reader *r = reader_of(ex);
	bool rd, wr;

	exchange_watch(ex, &rd, &wr);
	conn_watch(&r->conn, !r->conn.eof && rd, wr);
}

static void
reader_reply(struct exchange *ex, int status, const char *why, bool keep_alive)
{
	(void)why;
	(void)keep_alive;
	reader_of(ex)->reply_status = status;
	exchange_release(ex);
}

static void
reader_abort(struct exchange *ex, const char *why)
{
	(void)why;
	reader_of(ex)->aborted = true;
	exchange_release(ex);
}

static void
reader_finished(struct exchange *ex)
{
	struct reader *r = reader_of(ex);

	r->finished++;
	/* A close-delimited response ends with the connection's sending side. */
	if (!ex->priv.client_keep_alive)
		conn_shutdown_write(&r->conn);
}

static void
reader_tunnel_opened(struct exchange *ex)
{
	reader_abort(ex, "a tunnel");
}

static const struct exchange_ops reader_ops = {
	.reply = reader_reply,
	.abort = reader_abort,
	.finished = reader_finished,
	.tunnel_opened = reader_tunnel_opened,
	.wait = reader_wait,
};

static void
reader_io(struct conn *c, int revents)
{
	struct reader *r = container_of(c, struct reader, conn);
	size_t got;

	if ((revents & EV_READ) && !c->eof) {
		if (!r->in && !(r->in = buf_get()))
			return;
		if (conn_fill(c, r->in, &got) == MOVE_ERROR) {
			reader_abort(&r->ex, "client reset");
			return;
		}
	}
	exchange_run(&r->ex);
}

/* The client reads whatever arrived, so the proxy's end never stays full. */
static void
peer_drain(struct reader *r)
{
	for (;;) {
		ssize_t n;

		if (r->got_cap - r->got_len < 16384) {
			size_t cap = r->got_cap ? r->got_cap * 2 : 65536;
			char *p = realloc(r->got, cap);

			if (!p)
				return;
			r->got = p;
			r->got_cap = cap;
		}
		n = recv(r->peer, r->got + r->got_len, r->got_cap - r->got_len, 0);
		if (n > 0) {
			r->got_len += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		r->peer_eof = true;
		ev_io_stop(r->conn.loop, &r->peer_io);
		return;
	}
}

static void
peer_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	peer_drain(container_of(w, struct reader, peer_io));
}

/* Bytes of the response head the client got, 0 while it is incomplete. */
static size_t
got_head_len(const struct reader *r)
{
	const char *end = r->got ? memmem(r->got, r->got_len, "\r\n\r\n", 4) : NULL;

	return end ? (size_t)(end + 4 - r->got) : 0;
}

/* ---- the fixture ----------------------------------------------------------- */

struct fixture {
	struct origin origin;
	struct ev_loop *loop;
	struct kp_config cfg;
	struct clock clock;
	struct fd_budget fds;
	struct own_addresses own;
	struct dispatch dispatch;
	bool dispatch_up, dns_up;
	struct proxy_env env;
	ev_timer deadline;         /* ends a wait that would otherwise never end */
	bool expired;
	ev_async origin_news;      /* the origin's threads wake the loop: what it saw changed */
	struct fetch fetch[2];
	struct reader reader[2];
	/* Split cases: the fetch engine and the module, and the hook they serve clients through. */
	struct ra_fetcher *fetcher;
	struct ra_split *split;
	struct exchange_hooks hooks;
	struct sockaddr_in client; /* the address a split download's client asks from */
};

static void
deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	container_of(w, struct fixture, deadline)->expired = true;
}

/* Nothing to do: waking the loop is enough for run_until() to look again. */
static void
origin_news_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
}

/* As the daemon sets itself up, with max_per_host connections per host (0: no cap). */
static int
setup_with(void **state, unsigned max_per_host)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	if (!fx)
		return -1;
	*state = fx;
	for (unsigned i = 0; i < 2; i++)
		fx->reader[i].peer = -1;
	if (!(fx->loop = ev_loop_new(EVFLAG_AUTO)))
		return -1;
	ev_async_init(&fx->origin_news, origin_news_cb);
	ev_async_start(fx->loop, &fx->origin_news);
	if (origin_start(&fx->origin, fx->loop, &fx->origin_news) < 0)
		return -1;
	memset(&kp_stats, 0, sizeof(kp_stats));
	config_defaults(&fx->cfg);
	fx->cfg.max_conns_per_host = max_per_host;
	buf_init(fx->cfg.max_header_bytes + 1024);
	pipes_init(fx->cfg.pipe_size, 16, &fx->fds);
	if (dns_init(fx->loop, &fx->cfg) < 0)
		return -1;
	fx->dns_up = true;
	clock_init(&fx->clock, fx->loop);
	fx->fds.limit = 1u << 20;
	fx->own.count = 0;
	if (dispatch_init(&fx->dispatch, fx->loop, &fx->clock, &fx->cfg, NULL, &fx->own,
	                  &fx->fds) < 0)
		return -1;
	fx->dispatch_up = true;
	fx->env.loop = fx->loop;
	fx->env.clock = &fx->clock;
	fx->env.cfg = &fx->cfg;
	fx->env.dispatch = &fx->dispatch;
	fx->env.fds = &fx->fds;
	ev_init(&fx->deadline, deadline_cb);
	return 0;
}

static int
setup(void **state)
{
	return setup_with(state, 0);
}

static int
setup_capped(void **state)
{
	return setup_with(state, 1);
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;

	if (!fx)
		return 0;
	for (unsigned i = 0; i < 2; i++) {
		struct reader *r = &fx->reader[i];

		if (r->used) {
			exchange_release(&r->ex);
			if (r->m_open)
				memsource_close(&r->m);
			conn_close(&r->conn);
			ev_io_stop(fx->loop, &r->peer_io);
			buf_put(r->in);
			buf_put(r->out);
		}
		if (r->peer >= 0)
			close(r->peer);
		free(r->got);
	}
	for (unsigned i = 0; i < 2; i++) {
		struct fetch *f = &fx->fetch[i];

		if (f->used) {
			exchange_release(&f->ex);
			memstore_free(&f->store);
			buf_put(f->in);
			buf_put(f->out);
		}
	}
	/* Every download ended with its client's exchange; the fetcher frees the pieces dropped. */
	ra_split_free(fx->split);
	ra_fetcher_free(fx->fetcher);
	if (fx->dispatch_up)
		dispatch_shutdown(&fx->dispatch);
	if (fx->loop)
		origin_stop(&fx->origin);
	if (fx->dns_up)
		dns_shutdown();
	pipes_shutdown();
	buf_drain_free_list();
	if (fx->loop) {
		ev_timer_stop(fx->loop, &fx->deadline);
		ev_async_stop(fx->loop, &fx->origin_news);
		ev_loop_destroy(fx->loop);
	}
	free(fx);
	return 0;
}

/* Runs the loop until done(arg) holds or the deadline passes; whether it holds. */
static bool
run_until(struct fixture *fx, bool (*done)(const void *arg), const void *arg)
{
	ev_now_update(fx->loop);
	fx->expired = false;
	ev_timer_set(&fx->deadline, DEADLINE_SECONDS, 0.);
	ev_timer_start(fx->loop, &fx->deadline);
	while (!done(arg) && !fx->expired)
		ev_run(fx->loop, EVRUN_ONCE);
	ev_timer_stop(fx->loop, &fx->deadline);
	return done(arg);
}

/* A few turns of the loop that wait for nothing. */
static void
spin(struct fixture *fx, unsigned turns)
{
	while (turns--)
		ev_run(fx->loop, EVRUN_NOWAIT);
}

static bool
store_over(const void *arg)
{
	return ((const struct fetch *)arg)->store.state != MEMSTORE_OPEN;
}

/* The exchange lost its connection and tried again, or it is over. */
static bool
fetch_retried(const void *arg)
{
	const struct fetch *f = arg;

	return f->ex.priv.retries > 0 || store_over(arg);
}

static bool
reader_over(const void *arg)
{
	const struct reader *r = arg;

	return r->finished || r->aborted || r->reply_status;
}

/* The store holds a head and at least want bytes of body. */
static bool
store_holds_want(const void *arg)
{
	const struct fetch *f = arg;
	const struct memstore *s = &f->store;
	const char *end = s->data ? memmem(s->data, s->len, "\r\n\r\n", 4) : NULL;

	return end && s->len - (size_t)(end + 4 - s->data) >= f->want;
}

/* The client got a head and at least want bytes of body. */
static bool
client_got_want(const void *arg)
{
	const struct reader *r = arg;
	size_t head = got_head_len(r);

	return head && r->got_len - head >= r->want;
}

static void
target_of(const struct fixture *fx, const char *path, struct http_target *t)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->host, sizeof(t->host), "127.0.0.1");
	snprintf(t->authority, sizeof(t->authority), "127.0.0.1:%u", fx->origin.port);
	snprintf(t->key, sizeof(t->key), "127.0.0.1:%u", fx->origin.port);
	t->path = path;
	t->path_len = strlen(path);
	t->port = fx->origin.port;
}

/* The owner's own GET of path into f's store; extra: more fields, each ending in CRLF. */
static void
fetch_start(struct fixture *fx, struct fetch *f, const char *path, const char *extra,
            enum dispatch_how how)
{
	struct http_target t;
	int n;

	memstore_init(&f->store, fx->loop, STORE_BOUND, fetch_io);
	exchange_init(&f->ex, &fx->env, &f->store.writer, &f->in, &f->out, &fetch_ops, true);
	f->used = true;
	n = snprintf(f->request, sizeof(f->request),
	             "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n%sConnection: keep-alive\r\n\r\n",
	             path, fx->origin.port, extra);
	assert_true(n > 0 && (size_t)n < sizeof(f->request));
	target_of(fx, path, &t);
	assert_int_equal(exchange_start(&f->ex, &t, f->request, (size_t)n, how), 0);
	if (exchange_waiting(&f->ex))
		fetch_wait(&f->ex);
}

/*
 * A client's request (the whole head, absolute-form) as the client module
 * would admit it, forwarded to from's stored response, or through dispatch
 * when from is NULL. A client with an address (peer) is shown to the hooks
 * (env.hooks), which may serve it instead, as the client module's are.
 */
static void
reader_start_from(struct fixture *fx, struct reader *r, const char *request,
                  struct memstore *from, const struct sockaddr *peer)
{
	const char *why = NULL;
	size_t len = strlen(request);
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	r->peer = sv[1];
	conn_init(&r->conn, fx->loop, sv[0], &conn_tcp_ops, reader_io);
	exchange_init(&r->ex, &fx->env, &r->conn, &r->in, &r->out, &reader_ops, false);
	r->ex.owner.peer = peer;
	r->used = true;
	ev_io_init(&r->peer_io, peer_readable, r->peer, EV_READ);
	ev_io_start(fx->loop, &r->peer_io);
	assert_non_null(r->in = buf_get());
	assert_true(len <= buf_room(r->in));
	memcpy(buf_tail(r->in), request, len);
	r->in->end += len;
	http_parser_init(&r->parser, HTTP_REQUEST, fx->cfg.max_header_bytes,
	                 fx->cfg.max_url_bytes);
	http_parser_start(&r->parser, &r->head);
	assert_int_equal(http_parse_head(&r->parser, buf_head(r->in), buf_len(r->in)),
	                 HTTP_PARSE_DONE);
	assert_int_equal(http_parse_target(buf_head(r->in) + r->head.url.off, r->head.url.len,
	                                   &r->ex.target),
	                 0);
	exchange_open(&r->ex, &r->head, buf_head(r->in), NULL);
	if (from) {
		memsource_open(&r->m, from);
		r->m_open = true;
	}
	assert_int_equal(exchange_forward(&r->ex, &r->head, from ? &r->m.src : NULL, &why), 0);
	if (exchange_waiting(&r->ex))
		reader_wait(&r->ex);
}

static void
reader_start(struct fixture *fx, struct reader *r, const char *request, struct memstore *from)
{
	reader_start_from(fx, r, request, from, NULL);
}

/* Runs r to its end and reads what is left; the response is then in r->got. */
static void
reader_complete(struct fixture *fx, struct reader *r)
{
	assert_true(run_until(fx, reader_over, r));
	assert_int_equal(r->finished, 1);
	assert_false(r->aborted);
	assert_int_equal(r->reply_status, 0);
	peer_drain(r);
}

/* The client got exactly head and then the 206's whole body. */
static void
assert_got_range(const struct reader *r, const char *head)
{
	size_t hl = strlen(head);

	assert_int_equal(r->got_len, hl + BODY_LEN);
	assert_memory_equal(r->got, head, hl);
	assert_memory_equal(r->got + hl, body, BODY_LEN);
}

static void
fetch_range_into(struct fixture *fx, struct fetch *f, const char *path)
{
	fetch_start(fx, f, path, "Range: bytes=0-99999\r\n", DISPATCH_ANY);
	assert_true(run_until(fx, store_over, f));
	assert_int_equal(f->finished, 1);
	assert_int_equal(f->reply_status, 0);
	assert_false(f->aborted);
}

/* ---- split downloads ------------------------------------------------------- */

/* The daemon's serve hook (readahead.c) with split alone: the client as its fetches ask for it. */
static struct source *
split_serve(void *ctx, const struct exchange_view *v, const struct http_head *h, const char *base)
{
	struct fixture *fx = ctx;
	struct ra_ask ask = {
		.client = v->client,
		.dispatch_key = v->key,
		.target = v->target,
		.https = v->https,
		.restricted = v->restricted,
	};

	return ra_split_serve(fx->split, &ask, h, base);
}

/*
 * --split 127.0.0.1 --split-size SPLIT_PIECE --split-connections
 * connections: the fetch engine and the module on the fixture's dispatch,
 * serving client exchanges through the hook.
 */
static void
split_setup(struct fixture *fx, unsigned connections)
{
	fx->cfg.split[0] = "127.0.0.1";
	fx->cfg.nsplit = 1;
	fx->cfg.split_size = SPLIT_PIECE;
	fx->cfg.split_connections = connections;
	assert_non_null(fx->fetcher = ra_fetcher_new(&fx->env));
	assert_non_null(fx->split = ra_split_new(&fx->env, fx->fetcher));
	fx->hooks = (struct exchange_hooks){.ctx = fx, .serve = split_serve};
	fx->env.hooks = &fx->hooks;
	fx->client.sin_family = AF_INET;
	fx->client.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fx->client.sin_port = htons(40000);
}

/*
 * Prints what the origin saw, a line a request (its connection, Range, and
 * whether it had If-Range), and the connections the proxy closed: what a
 * failing split case shows before its message.
 */
static void
origin_print_saw(struct origin *o)
{
	unsigned n = origin_requests(o);

	print_error("the origin saw:\n");
	for (unsigned i = 0; i < n && i < ORIGIN_MAX_REQUESTS; i++) {
		struct origin_seen s = origin_seen_at(o, i);
		const char *range = strstr(s.head, "\r\nRange: ");
		int len = range ? (int)strcspn(range + 2, "\r") : 8;

		print_error("  connection %u, request %u (%u answers before): %.*s%s\n", s.conn,
		            s.nth, s.answered, len, range ? range + 2 : "no Range",
		            strstr(s.head, "\r\nIf-Range: ") ? ", If-Range" : "");
	}
	print_error("  connections closed by the proxy:");
	for (unsigned c = 1; c <= origin_connections(o); c++)
		if (origin_conn_closed(o, c))
			print_error(" %u", c);
	print_error("\n");
}

/* The client's GET of the whole object at path from the split host: its exchange starts. */
static void
split_client_start(struct fixture *fx, struct reader *r, const char *path)
{
	char req[256];

	snprintf(req, sizeof(req),
	         "GET http://127.0.0.1:%u%s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n",
	         fx->origin.port, path, fx->origin.port);
	reader_start_from(fx, r, req, NULL, (const struct sockaddr *)&fx->client);
}

/* The client's exchange ends, the whole object in hand; else what the origin saw, and why not. */
static void
split_client_complete(struct fixture *fx, struct reader *r)
{
	if (!run_until(fx, reader_over, r) || r->aborted || r->reply_status) {
		peer_drain(r);
		origin_print_saw(&fx->origin);
		fail_msg("the client's download did not end whole (%s) after %zu bytes",
		         r->aborted ? "cut off" : r->reply_status ? "answered by the proxy"
		                                                   : "still waiting",
		         r->got_len);
	}
	reader_complete(fx, r);
}

/* The client got a 200 of the whole object of length bytes, every byte in place. */
static void
assert_got_object(const struct reader *r, uint64_t length)
{
	size_t hl = got_head_len(r);
	char field[64];

	assert_true(hl > 0);
	assert_memory_equal(r->got, "HTTP/1.1 200 ", 13);
	snprintf(field, sizeof(field), "\r\nContent-Length: %llu\r\n", (unsigned long long)length);
	assert_non_null(memmem(r->got, hl, field, strlen(field)));
	assert_null(memmem(r->got, hl, "Content-Range", 13));
	assert_int_equal(r->got_len - hl, length);
	assert_memory_equal(r->got + hl, body, length);
}

/* The nth request (from 1) the origin saw on connection conn; fails when there was none. */
static struct origin_seen
seen_on(struct fixture *fx, unsigned conn, unsigned nth)
{
	unsigned n = origin_requests(&fx->origin);

	for (unsigned i = 0; i < n && i < ORIGIN_MAX_REQUESTS; i++) {
		struct origin_seen s = origin_seen_at(&fx->origin, i);

		if (s.conn == conn && s.nth == nth)
			return s;
	}
	origin_print_saw(&fx->origin);
	fail_msg("the origin saw no request %u on connection %u", nth, conn);
	return (struct origin_seen){0};
}

/*
 * Request s asked for piece k's bytes (from 0) of an object of complete
 * bytes, with a bounded Range, and with If-Range naming the first version's
 * ETag, or none at all (if_range false).
 */
static void
assert_asks_piece(struct fixture *fx, const struct origin_seen *s, unsigned k, uint64_t complete,
                  bool if_range)
{
	unsigned long long first = (unsigned long long)k * SPLIT_PIECE;
	unsigned long long last = first + SPLIT_PIECE - 1 < complete ? first + SPLIT_PIECE - 1
	                                                              : complete - 1;
	char want[128];

	snprintf(want, sizeof(want), "\r\nRange: bytes=%llu-%llu\r\n", first, last);
	if (!strstr(s->head, want) ||
	    (strstr(s->head, "\r\nIf-Range: " SPLIT_ETAG "\r\n") != NULL) != if_range ||
	    (!if_range && strstr(s->head, "\r\nIf-Range:"))) {
		origin_print_saw(&fx->origin);
		fail_msg("request %u on connection %u was not bytes %llu-%llu %s If-Range", s->nth,
		         s->conn, first, last, if_range ? "with" : "without");
	}
}

struct origin_and_fixture {
	struct fixture *fx;
	unsigned conn;               /* a connection of the origin's, 1-based */
};

static bool
origin_saw_close(const void *arg)
{
	const struct origin_and_fixture *a = arg;

	return origin_conn_closed(&a->fx->origin, a->conn);
}

/* /split/refused: how many requests came on connections other than the first piece's. */
static unsigned
refused_requests(struct origin *o)
{
	unsigned n = 0;

	pthread_mutex_lock(&o->lock);
	for (unsigned i = 0; i < o->connections; i++)
		if (o->first_piece_conn && o->conns[i].no != o->first_piece_conn)
			n += o->conns[i].requests;
	pthread_mutex_unlock(&o->lock);
	return n;
}

/* Three pieces were refused, the last refusal is read: the refusing connection idles. */
static bool
three_refused_and_idle(const void *arg)
{
	struct fixture *fx = (struct fixture *)arg;

	return refused_requests(&fx->origin) == 3 && fx->dispatch.idle == 1;
}

/*
 * A download of the object at path (/split/refused...) on two connections:
 * the first piece comes on one (the origin holds the second half of its
 * answer), and the second, asked at once, on the other, which the origin
 * refuses; so are the third and fourth, which take the same connection
 * once it is free (the first is busy). The first piece's answer ends after
 * the last refusal: the refusing connection has idled longer. The client
 * then reads on, into the refused second piece.
 */
static void
refused_download(struct fixture *fx, struct reader *r, const char *path, unsigned *good,
                 unsigned *refusing)
{
	split_setup(fx, 2);
	split_client_start(fx, r, path);
	if (!run_until(fx, three_refused_and_idle, fx)) {
		origin_print_saw(&fx->origin);
		fail_msg("the origin did not refuse three pieces on one connection");
	}
	pthread_mutex_lock(&fx->origin.lock);
	*good = fx->origin.first_piece_conn;
	pthread_mutex_unlock(&fx->origin.lock);
	*refusing = *good == 1 ? 2 : 1;
	assert_int_equal(origin_connections(&fx->origin), 2);
	/* Asked before the first piece's head was known, the second is bare; the later ones not. */
	for (unsigned k = 1; k <= 3; k++) {
		struct origin_seen s = seen_on(fx, *refusing, k);

		assert_asks_piece(fx, &s, k, split_length(path, strlen(path)), k > 1);
	}
	assert_int_equal(kp_stats.split_backoffs, 0);
	origin_release(&fx->origin);
	split_client_complete(fx, r);
}

/* ---- the cases ------------------------------------------------------------- */

/* An owner's GET: the origin gets the composed head as it is; memory gets the canonical form. */
static void
test_owner_get_in_canonical_form(void **state)
{
	struct fixture *fx = *state;
	struct fetch *f = &fx->fetch[0];
	size_t hl = strlen(RANGE_HEAD_STORED);

	fetch_range_into(fx, f, "/chunk");
	assert_int_equal(f->store.state, MEMSTORE_ENDED);
	assert_int_equal(f->store.len, hl + BODY_LEN);
	assert_memory_equal(f->store.data, RANGE_HEAD_STORED, hl);
	assert_memory_equal(f->store.data + hl, body, BODY_LEN);
	assert_int_equal(origin_connections(&fx->origin), 1);
	assert_int_equal(origin_requests(&fx->origin), 1);
	assert_origin_saw(&fx->origin, 0, 1, f->request);
	/* Clean and reusable: the connection went back to the pool. */
	assert_int_equal(fx->dispatch.idle, 1);
}

/* A chunked response is kept de-chunked: no Transfer-Encoding, the payload, then the end. */
static void
test_chunked_dechunked_in_memory(void **state)
{
	struct fixture *fx = *state;
	struct fetch *f = &fx->fetch[0];

	fetch_start(fx, f, "/chunked", "", DISPATCH_ANY);
	assert_true(run_until(fx, store_over, f));
	assert_int_equal(f->finished, 1);
	assert_int_equal(f->store.state, MEMSTORE_ENDED);
	assert_int_equal(f->store.len, sizeof(chunked_stored) - 1);
	assert_memory_equal(f->store.data, chunked_stored, f->store.len);
}

/* 100 Continue and 103 Early Hints before the final response never reach memory. */
static void
test_interim_responses_dropped(void **state)
{
	struct fixture *fx = *state;
	struct fetch *f = &fx->fetch[0];

	fetch_start(fx, f, "/continue", "", DISPATCH_ANY);
	assert_true(run_until(fx, store_over, f));
	assert_int_equal(f->finished, 1);
	assert_int_equal(f->store.state, MEMSTORE_ENDED);
	assert_int_equal(f->store.len, sizeof(interim_stored) - 1);
	assert_memory_equal(f->store.data, interim_stored, f->store.len);
}

/*
 * Two clients read one stored response, each with the reader's Via; the
 * HTTP/1.0 one is told the connection closes. The origin hears nothing more.
 */
static void
test_clients_served_from_memory(void **state)
{
	struct fixture *fx = *state;
	struct fetch *f = &fx->fetch[0];
	char req11[256], req10[256];
	unsigned port = fx->origin.port;

	fetch_range_into(fx, f, "/chunk");
	snprintf(req11, sizeof(req11),
	         "GET http://127.0.0.1:%u/chunk HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
	         "Range: bytes=0-99999\r\n\r\n",
	         port, port);
	snprintf(req10, sizeof(req10),
	         "GET http://127.0.0.1:%u/chunk HTTP/1.0\r\nHost: 127.0.0.1:%u\r\n"
	         "Range: bytes=0-99999\r\n\r\n",
	         port, port);
	reader_start(fx, &fx->reader[0], req11, &f->store);
	reader_start(fx, &fx->reader[1], req10, &f->store);
	reader_complete(fx, &fx->reader[0]);
	reader_complete(fx, &fx->reader[1]);
	assert_got_range(&fx->reader[0], RANGE_HEAD_SERVED(""));
	assert_true(fx->reader[0].ex.priv.client_keep_alive);
	assert_got_range(&fx->reader[1], RANGE_HEAD_SERVED("Connection: close\r\n"));
	assert_true(fx->reader[1].peer_eof);
	assert_int_equal(origin_requests(&fx->origin), 1);
	assert_int_equal(origin_connections(&fx->origin), 1);
	/* Both readers let go of the store. */
	assert_true(kp_list_empty(&f->store.readers));
}

/* A de-chunked store reaches an HTTP/1.0 client as a body delimited by the close. */
static void
test_http10_client_from_dechunked_store(void **state)
{
	struct fixture *fx = *state;
	struct fetch *f = &fx->fetch[0];
	struct reader *r = &fx->reader[0];
	static const char served[] = "HTTP/1.1 200 OK\r\n"
	                             "X-Kind: chunked\r\n"
	                             "Via: 1.1 keepalive-proxy\r\n"
	                             "Connection: close\r\n"
	                             "\r\n"
	                             "hello world";
	char req[256];

	fetch_start(fx, f, "/chunked", "", DISPATCH_ANY);
	assert_true(run_until(fx, store_over, f));
	assert_int_equal(f->store.state, MEMSTORE_ENDED);
	snprintf(req, sizeof(req),
	         "GET http://127.0.0.1:%u/chunked HTTP/1.0\r\nHost: 127.0.0.1:%u\r\n\r\n",
	         fx->origin.port, fx->origin.port);
	reader_start(fx, r, req, &f->store);
	reader_complete(fx, r);
	assert_true(r->peer_eof);
	assert_int_equal(r->got_len, sizeof(served) - 1);
	assert_memory_equal(r->got, served, r->got_len);
	assert_int_equal(origin_requests(&fx->origin), 1);
}

/*
 * A reader that joins while the body still arrives gets every part as the
 * store gets it, not only once the store ended, and all of it in order.
 */
static void
test_reader_joins_while_arriving(void **state)
{
	struct fixture *fx = *state;
	struct fetch *f = &fx->fetch[0];
	struct reader *r = &fx->reader[0];
	size_t hl = strlen(RANGE_HEAD_STORED), served = strlen(RANGE_HEAD_SERVED(""));
	char req[256];

	fetch_start(fx, f, "/slow", "", DISPATCH_ANY);
	f->want = FIRST_PART;
	assert_true(run_until(fx, store_holds_want, f));
	/* The origin waits for the test: this is all there is for now. */
	assert_int_equal(f->store.state, MEMSTORE_OPEN);
	assert_int_equal(f->store.len, hl + FIRST_PART);
	snprintf(req, sizeof(req),
	         "GET http://127.0.0.1:%u/slow HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n",
	         fx->origin.port, fx->origin.port);
	reader_start(fx, r, req, &f->store);
	r->want = FIRST_PART;
	assert_true(run_until(fx, client_got_want, r));
	assert_int_equal(r->got_len, served + FIRST_PART);

	/* The next part reaches the reader while the store is still open. */
	origin_release(&fx->origin);
	r->want = SECOND_PART;
	assert_true(run_until(fx, client_got_want, r));
	assert_int_equal(f->store.state, MEMSTORE_OPEN);
	assert_int_equal(f->store.len, hl + SECOND_PART);
	assert_int_equal(r->got_len, served + SECOND_PART);
	assert_int_equal(r->finished, 0);

	origin_release(&fx->origin);
	reader_complete(fx, r);
	assert_int_equal(f->finished, 1);
	assert_int_equal(f->store.state, MEMSTORE_ENDED);
	assert_got_range(r, RANGE_HEAD_SERVED(""));
	assert_int_equal(origin_requests(&fx->origin), 1);
}

/*
 * A background GET opens no connection of its own: it waits until a client
 * request's connection is free, and then takes that one.
 */
static void
test_background_takes_a_freed_connection(void **state)
{
	struct fixture *fx = *state;
	struct fetch *bg = &fx->fetch[0], *first = &fx->fetch[1];
	static const char bg_stored[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n/bg";
	static const char first_stored[] = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n/first";

	fetch_start(fx, bg, "/bg", "", DISPATCH_BACKGROUND);
	spin(fx, 10);
	assert_true(exchange_waiting(&bg->ex));
	assert_null(bg->ex.priv.waiter.connect);
	assert_int_equal(fx->dispatch.open, 0);
	assert_int_equal(origin_connections(&fx->origin), 0);

	fetch_start(fx, first, "/first", "", DISPATCH_ANY);
	assert_true(run_until(fx, store_over, first));
	assert_true(run_until(fx, store_over, bg));
	assert_int_equal(first->finished, 1);
	assert_int_equal(bg->finished, 1);
	assert_int_equal(bg->ex.priv.waiter.source, DISPATCH_FROM_FREED);
	assert_int_equal(first->store.len, sizeof(first_stored) - 1);
	assert_memory_equal(first->store.data, first_stored, first->store.len);
	assert_int_equal(bg->store.len, sizeof(bg_stored) - 1);
	assert_memory_equal(bg->store.data, bg_stored, bg->store.len);
	/* One connection carried both, the background GET second. */
	assert_int_equal(origin_connections(&fx->origin), 1);
	assert_int_equal(origin_requests(&fx->origin), 2);
	assert_origin_saw(&fx->origin, 0, 1, first->request);
	assert_origin_saw(&fx->origin, 1, 1, bg->request);
}

/*
 * A background GET a client now waits for is promoted: it no longer waits
 * for a connection nobody else wants, and connects as the client would.
 */
static void
test_promoted_background_connects(void **state)
{
	struct fixture *fx = *state;
	struct fetch *bg = &fx->fetch[0];
	static const char bg_stored[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n/bg";

	fetch_start(fx, bg, "/bg", "", DISPATCH_BACKGROUND);
	spin(fx, 10);
	assert_true(exchange_waiting(&bg->ex));
	assert_int_equal(fx->dispatch.open, 0);
	exchange_promote(&bg->ex);
	assert_int_equal(bg->ex.priv.how, DISPATCH_ANY);
	assert_true(run_until(fx, store_over, bg));
	assert_int_equal(bg->finished, 1);
	assert_int_equal(bg->ex.priv.waiter.source, DISPATCH_FROM_CONNECT);
	assert_int_equal(bg->store.len, sizeof(bg_stored) - 1);
	assert_memory_equal(bg->store.data, bg_stored, bg->store.len);
	assert_int_equal(origin_connections(&fx->origin), 1);
}

/*
 * --max-conns-per-host 1: a connection busy with a background GET (the
 * origin holds its answer) does not count against the cap, so a client's
 * request gets a second connection at once and is answered meanwhile.
 */
static void
test_background_leaves_the_cap_to_clients(void **state)
{
	struct fixture *fx = *state;
	struct fetch *first = &fx->fetch[0], *bg = &fx->fetch[1];
	struct reader *r = &fx->reader[0];
	static const char served[] = "HTTP/1.1 200 OK\r\n"
	                             "Content-Length: 7\r\n"
	                             "Via: 1.1 keepalive-proxy\r\n"
	                             "\r\n"
	                             "/second";
	static const char held[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n/hold";
	char req[256];

	/* A pooled connection is the only kind a background GET may take. */
	fetch_start(fx, first, "/first", "", DISPATCH_ANY);
	assert_true(run_until(fx, store_over, first));
	assert_int_equal(fx->dispatch.idle, 1);
	fetch_start(fx, bg, "/hold", "", DISPATCH_BACKGROUND);
	assert_non_null(bg->ex.priv.src);
	assert_int_equal(bg->ex.priv.waiter.source, DISPATCH_FROM_POOL);
	assert_int_equal(fx->dispatch.open, 1);

	snprintf(req, sizeof(req),
	         "GET http://127.0.0.1:%u/second HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n",
	         fx->origin.port, fx->origin.port);
	reader_start(fx, r, req, NULL);
	/* Not queued behind the cap: a connect of its own is on its way already. */
	assert_true(r->ex.priv.waiter.connect != NULL || r->ex.priv.src != NULL);
	assert_int_equal(fx->dispatch.open, 2);
	reader_complete(fx, r);
	assert_int_equal(r->got_len, sizeof(served) - 1);
	assert_memory_equal(r->got, served, r->got_len);
	assert_int_equal(origin_connections(&fx->origin), 2);
	/* The background answer is still held. */
	assert_int_equal(bg->store.state, MEMSTORE_OPEN);
	assert_int_equal(bg->store.len, 0);

	origin_release(&fx->origin);
	assert_true(run_until(fx, store_over, bg));
	assert_int_equal(bg->finished, 1);
	assert_int_equal(bg->store.len, sizeof(held) - 1);
	assert_memory_equal(bg->store.data, held, bg->store.len);
	assert_int_equal(origin_requests(&fx->origin), 3);
}

/*
 * A background GET whose pooled connection turns out dead is tried again
 * as what it is: it starts no connect of its own (dispatch.h), so under
 * --max-conns-per-host 1 a client's request still gets a connection at once.
 */
static void
test_background_retry_stays_background(void **state)
{
	struct fixture *fx = *state;
	struct fetch *first = &fx->fetch[0], *bg = &fx->fetch[1];
	struct reader *r = &fx->reader[0];
	static const char served[] = "HTTP/1.1 200 OK\r\n"
	                             "Content-Length: 7\r\n"
	                             "Via: 1.1 keepalive-proxy\r\n"
	                             "\r\n"
	                             "/second";
	char req[256];

	fetch_start(fx, first, "/first", "", DISPATCH_ANY);
	assert_true(run_until(fx, store_over, first));
	assert_int_equal(fx->dispatch.idle, 1);
	/* The origin closes the pooled connection under the background GET. */
	fetch_start(fx, bg, "/drop-once", "", DISPATCH_BACKGROUND);
	assert_non_null(bg->ex.priv.src);
	assert_true(run_until(fx, fetch_retried, bg));
	assert_null(bg->ex.priv.waiter.connect);
	assert_null(bg->ex.priv.src);
	assert_int_equal(fx->dispatch.open, 0);

	snprintf(req, sizeof(req),
	         "GET http://127.0.0.1:%u/second HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n",
	         fx->origin.port, fx->origin.port);
	reader_start(fx, r, req, NULL);
	assert_true(r->ex.priv.waiter.connect != NULL || r->ex.priv.src != NULL);
	reader_complete(fx, r);
	assert_int_equal(r->got_len, sizeof(served) - 1);
	assert_memory_equal(r->got, served, r->got_len);
	/* Whatever became of the background GET, it never had a connection of its own. */
	assert_true(run_until(fx, store_over, bg));
	assert_int_equal(origin_connections(&fx->origin), 2);
}

/*
 * --split-connections 1, an object of five pieces: all on one connection,
 * each a bounded Range of its bytes, with If-Range from the second on. The
 * second is asked on the connection the first's answer freed (a client's
 * request is never pipelined behind); from the third on, each is written
 * behind the one before it while that one's answer still arrives: the
 * origin holds every later answer halfway until the next request comes on
 * its connection, so the download ends only if they are pipelined. The
 * client gets the object byte for byte.
 */
static void
test_split_pieces_pipelined_on_one_connection(void **state)
{
	struct fixture *fx = *state;
	struct reader *r = &fx->reader[0];

	split_setup(fx, 1);
	split_client_start(fx, r, "/split/pipelined");
	split_client_complete(fx, r);
	assert_got_object(r, SPLIT_OBJECT);
	assert_int_equal(origin_connections(&fx->origin), 1);
	assert_int_equal(origin_requests(&fx->origin), SPLIT_PIECES);
	for (unsigned k = 0; k < SPLIT_PIECES; k++) {
		struct origin_seen s = seen_on(fx, 1, k + 1);
		/* Answers still to end on the connection when it came: none, then one. */
		unsigned behind = k >= 2 ? 1 : 0;

		assert_asks_piece(fx, &s, k, SPLIT_OBJECT, k > 0);
		if (s.answered + behind != k) {
			origin_print_saw(&fx->origin);
			fail_msg("piece %u came after %u answers had ended, not %u: %s", k + 1,
			         s.answered, k - behind,
			         behind ? "not pipelined" : "pipelined behind a client's request");
		}
	}
	assert_int_equal(kp_stats.upstream_pipelined, SPLIT_PIECES - 2);
	assert_int_equal(kp_stats.split_pieces, SPLIT_PIECES);
	assert_int_equal(kp_stats.split_resumes, 0);
	assert_int_equal(kp_stats.split_backoffs, 0);
}

/*
 * --split-connections 2, an object of four pieces, from an origin that
 * refuses every request on a connection but the first piece's (403, kept
 * alive). Three pieces are refused there before the client reads into the
 * second: the host backs off to one connection, the refusing one is closed
 * (the origin sees it end), and the second piece is asked again with
 * If-Range on the first piece's connection, then the third and fourth
 * there too. The client gets every byte.
 */
static void
test_split_refused_second_connection_backs_off(void **state)
{
	struct fixture *fx = *state;
	struct reader *r = &fx->reader[0];
	struct origin_and_fixture closed;
	unsigned good, refusing;

	refused_download(fx, r, "/split/refused-short", &good, &refusing);
	assert_int_equal(kp_stats.split_backoffs, 1);
	for (unsigned k = 0; k < 4; k++) {
		struct origin_seen s = seen_on(fx, good, k + 1);

		assert_asks_piece(fx, &s, k, SPLIT_SHORT, k > 0);
	}
	closed = (struct origin_and_fixture){fx, refusing};
	if (!run_until(fx, origin_saw_close, &closed)) {
		origin_print_saw(&fx->origin);
		fail_msg("the refusing connection (%u) was not closed", refusing);
	}
	assert_false(origin_conn_closed(&fx->origin, good));
	assert_int_equal(origin_connections(&fx->origin), 2);
	assert_int_equal(origin_requests(&fx->origin), 7);
	assert_got_object(r, SPLIT_SHORT);
	assert_int_equal(kp_stats.split_resumes, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_owner_get_in_canonical_form, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunked_dechunked_in_memory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_interim_responses_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_clients_served_from_memory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_http10_client_from_dechunked_store, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_reader_joins_while_arriving, setup, teardown),
		cmocka_unit_test_setup_teardown(test_background_takes_a_freed_connection, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_promoted_background_connects, setup, teardown),
		cmocka_unit_test_setup_teardown(test_background_leaves_the_cap_to_clients,
		                                setup_capped, teardown),
		cmocka_unit_test_setup_teardown(test_background_retry_stays_background,
		                                setup_capped, teardown),
		cmocka_unit_test_setup_teardown(test_split_pieces_pipelined_on_one_connection,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(test_split_refused_second_connection_backs_off,
		                                setup, teardown),
	};

	for (size_t i = 0; i < SPLIT_OBJECT; i++)
		body[i] = "0123456789abcdefghijklmnopqrstuvwxyz"[(i * 7 + i / 1000) % 36];
	/* A peer that closed first must be an error return, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
