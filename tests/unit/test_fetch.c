/*
 * Requests the proxy makes itself, end to end in one process: an exchange
 * whose downstream end is memory fetches from an origin through dispatch,
 * the store keeps the response in canonical form, and client exchanges
 * read it later as from an origin, after it ended or while it still
 * arrives. The modules are the daemon's own, on a real libev loop; the
 * origin is the test's, on loopback (a thread per connection, blocking
 * sockets, answers scripted by path). Every wait ends with an event or the
 * test's deadline; a held answer waits for the test, not for a clock.
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
#include "kp/splice.h"

#define DEADLINE_SECONDS 5.0
#define STORE_BOUND (1u << 20)
#define BODY_LEN 100000
#define FIRST_PART 30000          /* what /slow sends before it waits the first time */
#define SECOND_PART 60000         /* ... and the second time */

#define ORIGIN_MAX_CONNS 8
#define ORIGIN_MAX_REQUESTS 16
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

/* The 206's payload: no short period, so a byte out of place shows. */
static char body[BODY_LEN];

/* ---- the origin ----------------------------------------------------------- */

struct origin;

struct origin_conn {
	struct origin *o;
	int fd;
	unsigned no;               /* 1-based accept order */
	pthread_t thread;
};

struct origin_seen {
	unsigned conn;             /* the connection it came on */
	size_t len;
	char head[ORIGIN_HEAD_MAX];
};

struct origin {
	int listen_fd;
	int wake[2];               /* a byte here ends the accept thread */
	uint16_t port;
	pthread_t acceptor;
	bool started;
	pthread_mutex_t lock;      /* guards everything below */
	pthread_cond_t changed;
	struct origin_conn conns[ORIGIN_MAX_CONNS];
	unsigned connections;
	unsigned requests;
	struct origin_seen seen[ORIGIN_MAX_REQUESTS];
	unsigned releases;         /* how far /slow and /hold may go on */
	bool dropped;              /* /drop-once was dropped already */
};

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

/* Waits until the test released the origin n times. */
static void
origin_wait_release(struct origin *o, unsigned n)
{
	pthread_mutex_lock(&o->lock);
	while (o->releases < n)
		pthread_cond_wait(&o->changed, &o->lock);
	pthread_mutex_unlock(&o->lock);
}

static void
origin_release_all(struct origin *o, unsigned n)
{
	pthread_mutex_lock(&o->lock);
	o->releases += n;
	pthread_cond_broadcast(&o->changed);
	pthread_mutex_unlock(&o->lock);
}

/* One held answer, or one held part of an answer, may go out. */
static void
origin_release(struct origin *o)
{
	origin_release_all(o, 1);
}

static bool
path_is(const char *path, size_t len, const char *want)
{
	return len == strlen(want) && memcmp(path, want, len) == 0;
}

/* Answers one request by its path; -1 when the connection is gone. */
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
	if (path_is(path, plen, "/chunk"))
		return send_text(c->fd, RANGE_HEAD_SENT) || send_all(c->fd, body, BODY_LEN) ? -1 : 0;
	if (path_is(path, plen, "/slow")) {
		if (send_text(c->fd, RANGE_HEAD_SENT) || send_all(c->fd, body, FIRST_PART))
			return -1;
		origin_wait_release(c->o, 1);
		if (send_all(c->fd, body + FIRST_PART, SECOND_PART - FIRST_PART))
			return -1;
		origin_wait_release(c->o, 2);
		return send_all(c->fd, body + SECOND_PART, BODY_LEN - SECOND_PART);
	}
	if (path_is(path, plen, "/chunked"))
		return send_text(c->fd, chunked_sent);
	if (path_is(path, plen, "/continue"))
		return send_text(c->fd, interim_sent);
	if (path_is(path, plen, "/hold"))
		origin_wait_release(c->o, 1);
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
	char buf[ORIGIN_HEAD_MAX];
	size_t len = 0;

	for (;;) {
		char *end;
		size_t head_len;

		while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
			ssize_t n;

			if (len == sizeof(buf))
				return NULL;
			n = recv(c->fd, buf + len, sizeof(buf) - len, 0);
			if (n <= 0)
				return NULL;
			len += (size_t)n;
		}
		head_len = (size_t)(end + 4 - buf);
		pthread_mutex_lock(&o->lock);
		if (o->requests < ORIGIN_MAX_REQUESTS) {
			struct origin_seen *s = &o->seen[o->requests];

			s->conn = c->no;
			s->len = head_len;
			memcpy(s->head, buf, head_len);
		}
		o->requests++;
		pthread_mutex_unlock(&o->lock);
		if (origin_answer(c, buf, head_len) < 0)
			return NULL;
		memmove(buf, buf + head_len, len - head_len);
		len -= head_len;
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
		pthread_mutex_unlock(&o->lock);
	}
}

static int
origin_start(struct origin *o)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t slen = sizeof(sin);

	memset(o, 0, sizeof(*o));
	o->wake[0] = o->wake[1] = -1;
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
	/* Held answers go out to closed sockets; then every thread sees its end. */
	origin_release_all(o, 2);
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

/* The i-th request head the origin got is exactly want, on connection conn. */
static void
assert_origin_saw(struct origin *o, unsigned i, unsigned conn, const char *want)
{
	struct origin_seen s;

	pthread_mutex_lock(&o->lock);
	s = o->seen[i];
	pthread_mutex_unlock(&o->lock);
	assert_int_equal(s.conn, conn);
	assert_int_equal(s.len, strlen(want));
	assert_memory_equal(s.head, want, s.len);
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
	struct fetch fetch[2];
	struct reader reader[2];
};

static void
deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	container_of(w, struct fixture, deadline)->expired = true;
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
	if (origin_start(&fx->origin) < 0 || !(fx->loop = ev_loop_new(EVFLAG_AUTO)))
		return -1;
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
	if (fx->dispatch_up)
		dispatch_shutdown(&fx->dispatch);
	origin_stop(&fx->origin);
	if (fx->dns_up)
		dns_shutdown();
	pipes_shutdown();
	buf_drain_free_list();
	if (fx->loop) {
		ev_timer_stop(fx->loop, &fx->deadline);
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
 * when from is NULL.
 */
static void
reader_start(struct fixture *fx, struct reader *r, const char *request, struct memstore *from)
{
	const char *why = NULL;
	size_t len = strlen(request);
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	r->peer = sv[1];
	conn_init(&r->conn, fx->loop, sv[0], &conn_tcp_ops, reader_io);
	exchange_init(&r->ex, &fx->env, &r->conn, &r->in, &r->out, &reader_ops, false);
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
	};

	for (size_t i = 0; i < BODY_LEN; i++)
		body[i] = "0123456789abcdefghijklmnopqrstuvwxyz"[(i * 7 + i / 1000) % 36];
	/* A peer that closed first must be an error return, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
