/*
 * Scriptable origin server for the end-to-end tests; see origin.h.
 */
#include "origin.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/sockios.h>

#include "harness.h"

#define ORIGIN_MAX_CONNS 4096
#define ORIGIN_MAX_REQUESTS 4096
#define ORIGIN_MAX_ERRORS 32
#define ORIGIN_MAX_HEAD (1u << 20)
#define ORIGIN_THREAD_STACK (1u << 20)
#define ORIGIN_SUMMARY_CONNS 32 /* connections listed one by one in a summary */

struct origin_conn {
	struct origin *origin;
	pthread_t thread;
	int fd; /* -1 once closed; changed only by its own thread, under the lock */
	struct wire w;
	unsigned conn_no;
	unsigned nreq;
	bool closed;                /* no more requests on this connection */
	atomic_bool raw;            /* switched to raw bytes: no more requests */
	int idle_close_ms;          /* >= 0: close if idle that long */
	struct origin_request *cur; /* request being handled */
	_Atomic uint64_t raw_in;    /* bytes the raw helpers received */
	_Atomic uint64_t sent;      /* bytes send() accepted */
	atomic_bool done;           /* handled and closed */
};

struct origin {
	origin_handler handler;
	origin_raw_handler raw_handler; /* set for a raw origin instead of handler */
	void *arg;
	int listen_fd;
	int port;
	pthread_t accept_thread;
	pthread_mutex_t lock;
	atomic_bool stopping;
	pthread_mutex_t accept_lock; /* held around each accept; taken to hold accepts */
	bool holding;                /* origin_hold_accepts() is in force */
	int plug_fd;                 /* the connection filling the listen queue while held */

	struct origin_conn *conns[ORIGIN_MAX_CONNS];
	unsigned nconns;
	unsigned peer_closed;
	atomic_uint nclosed;
	_Atomic uint64_t bytes_sent;

	struct origin_request *requests[ORIGIN_MAX_REQUESTS];
	unsigned nrequests;

	char *errors[ORIGIN_MAX_ERRORS];
	unsigned nerrors;
};

static void origin_error(struct origin *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void
origin_error(struct origin *o, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&o->lock);
	if (o->nerrors < ORIGIN_MAX_ERRORS)
		o->errors[o->nerrors] = strdup(buf);
	o->nerrors++;
	pthread_mutex_unlock(&o->lock);
}

static void
request_free(struct origin_request *req)
{
	msg_head_free(&req->head);
	body_free(&req->body);
	headers_free(&req->trailers);
	free(req);
}

/*
 * Recorded for origin_request_at(), the first ORIGIN_MAX_REQUESTS; a request
 * past them stays unpublished, and its connection frees it once handled.
 */
static void
publish(struct origin *o, struct origin_request *req)
{
	if (req->published)
		return;
	pthread_mutex_lock(&o->lock);
	if (o->nrequests < ORIGIN_MAX_REQUESTS) {
		o->requests[o->nrequests++] = req;
		req->published = true;
	}
	pthread_mutex_unlock(&o->lock);
}

/* ---- Connection handling ---- */

static void
conn_close_fd(struct origin_conn *c, bool reset)
{
	struct origin *o = c->origin;

	pthread_mutex_lock(&o->lock);
	if (c->fd >= 0) {
		if (reset) {
			struct linger lg = {1, 0};

			setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		}
		close(c->fd);
		c->fd = -1;
	}
	c->closed = true;
	pthread_mutex_unlock(&o->lock);
}

static void
count_peer_close(struct origin *o)
{
	pthread_mutex_lock(&o->lock);
	o->peer_closed++;
	pthread_mutex_unlock(&o->lock);
}

/* Waits up to ms for the next request; false (and the connection closed) if none came. */
static bool
wait_idle(struct origin_conn *c, int ms)
{
	struct pollfd pfd = {.fd = c->fd, .events = POLLIN};

	if (wire_buffered(&c->w) > 0)
		return true;
	if (poll(&pfd, 1, ms) == 0) {
		conn_close_fd(c, false);
		return false;
	}
	return true;
}

static bool
read_body(struct origin_conn *c, struct origin_request *req, uint64_t length)
{
	char why[256];
	int rc = wire_read_body(&c->w, req->framing, length, &req->body, &req->trailers,
	                        &req->nchunks, why, sizeof(why));

	if (rc != WIRE_OK) {
		if (!c->origin->stopping)
			origin_error(c->origin, "connection %u request %u (%s %s): body: %s%s%s",
			             c->conn_no, req->seq, req->head.method, req->head.target,
			             wire_strerror(rc), why[0] ? ": " : "", why);
		c->closed = true;
		publish(c->origin, req);
		return false;
	}
	req->body_complete = true;
	publish(c->origin, req);
	return true;
}

static uint64_t
body_length(const struct origin_request *req)
{
	enum framing f;
	uint64_t len = 0;

	wire_framing(&req->head, true, false, &f, &len);
	return len;
}

/* The end of a connection's thread: closed, and its buffer no longer needed. */
static void
conn_finish(struct origin_conn *c)
{
	conn_close_fd(c, false);
	wire_free(&c->w);
	atomic_store(&c->done, true);
	atomic_fetch_add(&c->origin->nclosed, 1);
}

static void *
conn_main(void *arg)
{
	struct origin_conn *c = arg;
	struct origin *o = c->origin;

	if (o->raw_handler) {
		c->raw = true;
		o->raw_handler(c, o->arg);
		conn_finish(c);
		return NULL;
	}
	while (!c->closed && !c->raw && !o->stopping) {
		struct origin_request *req;
		char why[256];
		uint64_t len = 0;
		int rc;

		if (c->idle_close_ms >= 0) {
			int ms = c->idle_close_ms;

			c->idle_close_ms = -1;
			if (!wait_idle(c, ms))
				break;
		}
		req = calloc(1, sizeof(*req));
		if (!req)
			break;
		body_init(&req->body, ORIGIN_KEEP_BODY);
		rc = wire_read_head(&c->w, true, ORIGIN_MAX_HEAD, &req->head, why, sizeof(why));
		if (rc != WIRE_OK) {
			if (!o->stopping) {
				if (rc == WIRE_EOF || (rc == WIRE_IO && wire_buffered(&c->w) == 0))
					count_peer_close(o);
				else
					origin_error(o, "connection %u request %u: %s%s%s",
					             c->conn_no, c->nreq + 1, wire_strerror(rc),
					             why[0] ? ": " : "", why);
			}
			request_free(req);
			break;
		}
		req->conn_no = c->conn_no;
		req->seq = ++c->nreq;
		req->expects_continue =
			headers_has_token(&req->head.headers, "Expect", "100-continue");
		if (wire_framing(&req->head, true, false, &req->framing, &len) != WIRE_OK) {
			origin_error(
				o, "connection %u request %u (%s %s): invalid body framing fields",
				c->conn_no, req->seq, req->head.method, req->head.target);
			publish(o, req);
			if (!req->published)
				request_free(req);
			break;
		}
		c->cur = req;
		if (!req->expects_continue && !read_body(c, req, len)) {
			c->cur = NULL;
			if (!req->published)
				request_free(req);
			break;
		}
		o->handler(c, req, o->arg);
		if (!req->body_complete && !c->closed && !c->raw)
			read_body(c, req, len);
		publish(o, req);
		c->cur = NULL;
		if (!req->published)
			request_free(req);
	}
	conn_finish(c);
	return NULL;
}

static void *
accept_main(void *arg)
{
	struct origin *o = arg;
	pthread_attr_t attr;

	/* Small stacks: a test may open a thousand connections. */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, ORIGIN_THREAD_STACK);
	while (!o->stopping) {
		struct pollfd pfd = {.fd = o->listen_fd, .events = POLLIN};
		struct origin_conn *c;
		int fd, one = 1;

		if (poll(&pfd, 1, 20) <= 0)
			continue;
		pthread_mutex_lock(&o->accept_lock);
		fd = o->holding ? -1 : accept4(o->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		pthread_mutex_unlock(&o->accept_lock);
		if (fd < 0) {
			if (o->holding)
				usleep(5000);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->origin = o;
		c->fd = fd;
		c->idle_close_ms = -1;
		wire_init(&c->w, fd);
		pthread_mutex_lock(&o->lock);
		if (o->nconns == ORIGIN_MAX_CONNS) {
			pthread_mutex_unlock(&o->lock);
			origin_error(o, "too many connections");
			wire_free(&c->w);
			free(c);
			close(fd);
			continue;
		}
		c->conn_no = o->nconns + 1;
		o->conns[o->nconns++] = c;
		if (pthread_create(&c->thread, &attr, conn_main, c) != 0) {
			o->nconns--;
			pthread_mutex_unlock(&o->lock);
			origin_error(o, "cannot start a connection thread");
			wire_free(&c->w);
			free(c);
			close(fd);
			continue;
		}
		pthread_mutex_unlock(&o->lock);
	}
	pthread_attr_destroy(&attr);
	return NULL;
}

static void
origin_stop_deferred(void *arg)
{
	origin_stop(arg);
}

static void
origin_summary_hook(void *arg)
{
	origin_print_summary(arg);
}

void
origin_print_summary(struct origin *o)
{
	pthread_mutex_lock(&o->lock);
	fprintf(stderr,
	        "----- %sorigin 127.0.0.1:%d: %u connection(s), %u closed by the proxy, "
	        "%u ended, %u request(s), %llu bytes sent -----\n",
	        o->raw_handler ? "raw " : "", o->port, o->nconns, o->peer_closed,
	        atomic_load(&o->nclosed), o->nrequests,
	        (unsigned long long)atomic_load(&o->bytes_sent));
	for (unsigned i = 0; i < o->nconns && i < ORIGIN_SUMMARY_CONNS; i++) {
		struct origin_conn *c = o->conns[i];

		if (c->raw)
			fprintf(stderr, "  conn %u (raw): %llu bytes in, %llu bytes out, %s\n",
			        c->conn_no, (unsigned long long)atomic_load(&c->raw_in),
			        (unsigned long long)atomic_load(&c->sent),
			        atomic_load(&c->done) ? "closed" : "open");
	}
	for (unsigned i = 0; i < o->nrequests; i++) {
		const struct origin_request *q = o->requests[i];

		fprintf(stderr, "  conn %u #%u: %s %.200s HTTP/%d.%d, body %llu bytes%s\n",
		        q->conn_no, q->seq, q->head.method, q->head.target, q->head.major,
		        q->head.minor, (unsigned long long)q->body.len,
		        q->body_complete ? "" : " (incomplete)");
	}
	for (unsigned i = 0; i < o->nerrors && i < ORIGIN_MAX_ERRORS; i++)
		fprintf(stderr, "  error: %s\n", o->errors[i] ? o->errors[i] : "(out of memory)");
	pthread_mutex_unlock(&o->lock);
}

static struct origin *
start(origin_handler handler, origin_raw_handler raw_handler, void *arg)
{
	struct origin *o = calloc(1, sizeof(*o));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);

	assert_non_null(o);
	o->handler = handler;
	o->raw_handler = raw_handler;
	o->arg = arg;
	pthread_mutex_init(&o->lock, NULL);
	pthread_mutex_init(&o->accept_lock, NULL);
	o->plug_fd = -1;
	o->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(o->listen_fd >= 0);
	if (bind(o->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(o->listen_fd, 128) != 0 ||
	    getsockname(o->listen_fd, (struct sockaddr *)&sa, &len) != 0)
		fail_msg("origin: cannot listen on 127.0.0.1: %s", strerror(errno));
	o->port = ntohs(sa.sin_port);
	if (pthread_create(&o->accept_thread, NULL, accept_main, o) != 0)
		fail_msg("origin: cannot start the accept thread");
	harness_defer(origin_stop_deferred, o);
	harness_on_failure(origin_summary_hook, o);
	return o;
}

void
origin_hold_accepts(struct origin *o)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	                         .sin_port = htons((uint16_t)o->port)};

	pthread_mutex_lock(&o->accept_lock);
	assert_false(o->holding);
	o->holding = true;
	/* Backlog 0 leaves room for one queued connection: the plug takes it. */
	if (listen(o->listen_fd, 0) != 0)
		fail_msg("origin: listen(0): %s", strerror(errno));
	o->plug_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (o->plug_fd < 0 || connect(o->plug_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		fail_msg("origin: cannot plug the listen queue: %s", strerror(errno));
	pthread_mutex_unlock(&o->accept_lock);
}

void
origin_release_accepts(struct origin *o)
{
	int fd;

	pthread_mutex_lock(&o->accept_lock);
	assert_true(o->holding);
	/* The plug is first in the queue: the dropped SYNs never got in. */
	fd = accept4(o->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd >= 0)
		close(fd);
	close(o->plug_fd);
	o->plug_fd = -1;
	if (listen(o->listen_fd, 128) != 0)
		fail_msg("origin: listen(128): %s", strerror(errno));
	o->holding = false;
	pthread_mutex_unlock(&o->accept_lock);
}

struct origin *
origin_start(origin_handler handler, void *arg)
{
	return start(handler, NULL, arg);
}

struct origin *
origin_start_raw(origin_raw_handler handler, void *arg)
{
	return start(NULL, handler, arg);
}

void
origin_stop(struct origin *o)
{
	unsigned n;

	if (!o)
		return;
	harness_cancel(origin_stop_deferred, o);
	harness_cancel_on_failure(origin_summary_hook, o);
	o->stopping = true;
	pthread_join(o->accept_thread, NULL);
	if (o->plug_fd >= 0)
		close(o->plug_fd);
	close(o->listen_fd);
	pthread_mutex_lock(&o->lock);
	for (unsigned i = 0; i < o->nconns; i++)
		if (o->conns[i]->fd >= 0)
			shutdown(o->conns[i]->fd, SHUT_RDWR);
	n = o->nconns;
	pthread_mutex_unlock(&o->lock);
	for (unsigned i = 0; i < n; i++) {
		struct origin_conn *c = o->conns[i];

		pthread_join(c->thread, NULL);
		if (c->cur && !c->cur->published)
			request_free(c->cur);
		wire_free(&c->w);
		free(c);
	}
	for (unsigned i = 0; i < o->nrequests; i++)
		request_free(o->requests[i]);
	for (unsigned i = 0; i < o->nerrors && i < ORIGIN_MAX_ERRORS; i++)
		free(o->errors[i]);
	pthread_mutex_destroy(&o->lock);
	free(o);
}

int
origin_port(const struct origin *o)
{
	return o->port;
}

const char *
origin_url(const struct origin *o, const char *path, char *buf, size_t size)
{
	snprintf(buf, size, "http://127.0.0.1:%d%s", o->port, path);
	return buf;
}

unsigned
origin_connection_count(struct origin *o)
{
	unsigned n;

	pthread_mutex_lock(&o->lock);
	n = o->nconns;
	pthread_mutex_unlock(&o->lock);
	return n;
}

unsigned
origin_open_count(struct origin *o)
{
	unsigned n = 0;

	pthread_mutex_lock(&o->lock);
	for (unsigned i = 0; i < o->nconns && i < ORIGIN_MAX_CONNS; i++) {
		struct pollfd pfd = {.fd = o->conns[i]->fd, .events = POLLIN | POLLRDHUP};

		if (pfd.fd < 0)
			continue;
		/* The peer's FIN or reset is in the socket already: closed, as a server sees it. */
		if (poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)))
			continue;
		n++;
	}
	pthread_mutex_unlock(&o->lock);
	return n;
}

unsigned
origin_closed_count(struct origin *o)
{
	return atomic_load(&o->nclosed);
}

bool
origin_wait_closed(struct origin *o, unsigned n, int timeout_ms)
{
	double deadline = now_s() + timeout_ms / 1000.0;

	while (origin_closed_count(o) < n) {
		if (now_s() >= deadline)
			return false;
		sleep_ms(5);
	}
	return true;
}

uint64_t
origin_bytes_sent(struct origin *o)
{
	return atomic_load(&o->bytes_sent);
}

bool
origin_wait_bytes_sent(struct origin *o, uint64_t n, int timeout_ms)
{
	double deadline = now_s() + timeout_ms / 1000.0;

	while (origin_bytes_sent(o) < n) {
		if (now_s() >= deadline)
			return false;
		sleep_ms(5);
	}
	return true;
}

unsigned
origin_peer_closed_count(struct origin *o)
{
	unsigned n;

	pthread_mutex_lock(&o->lock);
	n = o->peer_closed;
	pthread_mutex_unlock(&o->lock);
	return n;
}

unsigned
origin_request_count(struct origin *o)
{
	unsigned n;

	pthread_mutex_lock(&o->lock);
	n = o->nrequests;
	pthread_mutex_unlock(&o->lock);
	return n;
}

const struct origin_request *
origin_request_at(struct origin *o, unsigned index)
{
	const struct origin_request *r = NULL;

	pthread_mutex_lock(&o->lock);
	if (index < o->nrequests)
		r = o->requests[index];
	pthread_mutex_unlock(&o->lock);
	return r;
}

const struct origin_request *
origin_last_request(struct origin *o)
{
	unsigned n = origin_request_count(o);

	if (n == 0)
		fail_msg("the origin has not received any request");
	return origin_request_at(o, n - 1);
}

unsigned
origin_count_requests(struct origin *o, const char *method, const char *target)
{
	unsigned n = 0;

	pthread_mutex_lock(&o->lock);
	for (unsigned i = 0; i < o->nrequests; i++)
		if (strcmp(o->requests[i]->head.method, method) == 0 &&
		    strcmp(o->requests[i]->head.target, target) == 0)
			n++;
	pthread_mutex_unlock(&o->lock);
	return n;
}

bool
origin_wait_requests(struct origin *o, unsigned n, int timeout_ms)
{
	double deadline = now_s() + timeout_ms / 1000.0;

	while (origin_request_count(o) < n) {
		if (now_s() >= deadline)
			return false;
		sleep_ms(5);
	}
	return true;
}

bool
origin_wait_peer_closed(struct origin *o, unsigned n, int timeout_ms)
{
	double deadline = now_s() + timeout_ms / 1000.0;

	while (origin_peer_closed_count(o) < n) {
		if (now_s() >= deadline)
			return false;
		sleep_ms(5);
	}
	return true;
}

unsigned
origin_error_count(struct origin *o)
{
	unsigned n;

	pthread_mutex_lock(&o->lock);
	n = o->nerrors;
	pthread_mutex_unlock(&o->lock);
	return n;
}

void
origin_assert_clean(struct origin *o, const char *file, int line)
{
	pthread_mutex_lock(&o->lock);
	unsigned n = o->nerrors;
	if (n > 0) {
		print_error("the origin saw %u protocol error(s):\n", n);
		for (unsigned i = 0; i < n && i < ORIGIN_MAX_ERRORS; i++)
			print_error("  %s\n", o->errors[i] ? o->errors[i] : "(out of memory)");
	}
	pthread_mutex_unlock(&o->lock);
	if (n > 0)
		_fail(file, line);
}

/* ---- Handler helpers ---- */

unsigned
origin_conn_no(const struct origin_conn *c)
{
	return c->conn_no;
}

static void
count_sent(struct origin_conn *c, uint64_t n)
{
	atomic_fetch_add(&c->sent, n);
	atomic_fetch_add(&c->origin->bytes_sent, n);
}

bool
origin_send(struct origin_conn *c, const void *data, size_t len)
{
	const char *p = data;

	if (c->fd < 0)
		return false;
	while (len > 0) {
		ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			c->closed = true;
			return false;
		}
		count_sent(c, (uint64_t)n);
		p += n;
		len -= (size_t)n;
	}
	return true;
}

bool
origin_sendf(struct origin_conn *c, const char *fmt, ...)
{
	va_list ap;
	char *buf = NULL;
	int n;
	bool ok;

	va_start(ap, fmt);
	n = vasprintf(&buf, fmt, ap);
	va_end(ap);
	if (n < 0)
		return false;
	ok = origin_send(c, buf, (size_t)n);
	free(buf);
	return ok;
}

bool
origin_send_pattern(struct origin_conn *c, uint64_t off, uint64_t len)
{
	static __thread char block[1 << 16];

	while (len > 0) {
		size_t n = len < sizeof(block) ? (size_t)len : sizeof(block);

		pattern_fill(block, off, n);
		if (!origin_send(c, block, n))
			return false;
		off += n;
		len -= n;
	}
	return true;
}

static const char *
reason_phrase(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 103:
		return "Early Hints";
	case 200:
		return "OK";
	case 201:
		return "Created";
	case 204:
		return "No Content";
	case 206:
		return "Partial Content";
	case 301:
		return "Moved Permanently";
	case 304:
		return "Not Modified";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 417:
		return "Expectation Failed";
	case 500:
		return "Internal Server Error";
	case 503:
		return "Service Unavailable";
	default:
		return "Status";
	}
}

static bool
is_head(const struct origin_conn *c)
{
	return c->cur && strcmp(c->cur->head.method, "HEAD") == 0;
}

bool
origin_reply(struct origin_conn *c, int status, const char *headers, const char *body)
{
	size_t blen = body ? strlen(body) : 0;

	return origin_sendf(c, "HTTP/1.1 %d %s\r\n%sContent-Length: %zu\r\n\r\n%s", status,
	                    reason_phrase(status), headers ? headers : "", blen,
	                    is_head(c) || !body ? "" : body);
}

bool
origin_reply_pattern(struct origin_conn *c, int status, const char *headers, uint64_t len)
{
	if (!origin_sendf(c, "HTTP/1.1 %d %s\r\n%sContent-Length: %llu\r\n\r\n", status,
	                  reason_phrase(status), headers ? headers : "", (unsigned long long)len))
		return false;
	return is_head(c) || origin_send_pattern(c, 0, len);
}

bool
origin_reply_chunked(struct origin_conn *c, int status, const char *headers, const char *body,
                     size_t chunk, const char *trailers)
{
	size_t len = body ? strlen(body) : 0;

	if (!origin_sendf(c, "HTTP/1.1 %d %s\r\n%sTransfer-Encoding: chunked\r\n\r\n", status,
	                  reason_phrase(status), headers ? headers : ""))
		return false;
	if (is_head(c))
		return true;
	for (size_t off = 0; off < len; off += chunk) {
		size_t n = len - off < chunk ? len - off : chunk;

		if (!origin_sendf(c, "%zx\r\n%.*s\r\n", n, (int)n, body + off))
			return false;
	}
	return origin_sendf(c, "0\r\n%s\r\n", trailers ? trailers : "");
}

bool
origin_reply_chunked_pattern(struct origin_conn *c, int status, const char *headers, uint64_t len,
                             size_t chunk, const char *trailers)
{
	if (!origin_sendf(c, "HTTP/1.1 %d %s\r\n%sTransfer-Encoding: chunked\r\n\r\n", status,
	                  reason_phrase(status), headers ? headers : ""))
		return false;
	if (is_head(c))
		return true;
	for (uint64_t off = 0; off < len; off += chunk) {
		uint64_t n = len - off < chunk ? len - off : chunk;

		if (!origin_sendf(c, "%llx\r\n", (unsigned long long)n) ||
		    !origin_send_pattern(c, off, n) || !origin_send(c, "\r\n", 2))
			return false;
	}
	return origin_sendf(c, "0\r\n%s\r\n", trailers ? trailers : "");
}

bool
origin_reply_close_delimited(struct origin_conn *c, int status, const char *headers,
                             const char *body)
{
	bool ok = origin_sendf(c, "HTTP/1.1 %d %s\r\n%s\r\n%s", status, reason_phrase(status),
	                       headers ? headers : "", is_head(c) || !body ? "" : body);

	origin_close(c);
	return ok;
}

bool
origin_send_continue(struct origin_conn *c)
{
	return origin_sendf(c, "HTTP/1.1 100 Continue\r\n\r\n");
}

bool
origin_read_body(struct origin_conn *c, const struct origin_request *req)
{
	struct origin_request *cur = c->cur;

	if (!cur || cur != req)
		return false;
	if (cur->body_complete)
		return true;
	if (c->fd < 0)
		return false;
	return read_body(c, cur, body_length(cur));
}

bool
origin_wait_delivered(struct origin_conn *c, int max_ms)
{
	double deadline = now_s() + max_ms / 1000.0;
	int queued = 0;

	while (c->fd >= 0 && !c->origin->stopping) {
		if (ioctl(c->fd, SIOCOUTQ, &queued) != 0)
			return false;
		if (queued == 0)
			return true;
		if (now_s() >= deadline)
			return false;
		sleep_ms(1);
	}
	return false;
}

void
origin_close(struct origin_conn *c)
{
	conn_close_fd(c, false);
}

void
origin_reset(struct origin_conn *c)
{
	conn_close_fd(c, true);
}

void
origin_close_when_idle(struct origin_conn *c, int ms)
{
	c->idle_close_ms = ms;
}

void
origin_stay_silent(struct origin_conn *c, int max_ms)
{
	double deadline = now_s() + max_ms / 1000.0;
	char scratch[4096];

	while (c->fd >= 0 && !c->origin->stopping && now_s() < deadline) {
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};

		if (poll(&pfd, 1, 20) <= 0)
			continue;
		ssize_t n = recv(c->fd, scratch, sizeof(scratch), 0);
		if (n <= 0) {
			if (!c->origin->stopping)
				count_peer_close(c->origin);
			conn_close_fd(c, false);
			return;
		}
	}
}

void
origin_pause(struct origin_conn *c, int ms)
{
	double deadline = now_s() + ms / 1000.0;

	while (!c->origin->stopping && now_s() < deadline)
		sleep_ms(5);
}

/* ---- Raw bytes ---- */

long
origin_recv(struct origin_conn *c, void *buf, size_t len, int idle_ms)
{
	double deadline = now_s() + idle_ms / 1000.0;
	size_t have = wire_buffered(&c->w);

	c->raw = true;
	if (have > 0) {
		size_t n = have < len ? have : len;

		memcpy(buf, c->w.buf + c->w.rpos, n);
		c->w.rpos += n;
		atomic_fetch_add(&c->raw_in, n);
		return (long)n;
	}
	if (c->fd < 0)
		return WIRE_IO;
	for (;;) {
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		int left = (int)((deadline - now_s()) * 1000.0);
		ssize_t n;

		if (left <= 0)
			return WIRE_TIMEOUT;
		if (poll(&pfd, 1, left < 50 ? left : 50) <= 0) {
			if (c->origin->stopping)
				return WIRE_IO;
			continue;
		}
		n = recv(c->fd, buf, len, MSG_DONTWAIT);
		if (n > 0) {
			atomic_fetch_add(&c->raw_in, (uint64_t)n);
			return (long)n;
		}
		if (n == 0)
			return 0;
		if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
			continue;
		return WIRE_IO;
	}
}

int
origin_recv_exact(struct origin_conn *c, uint64_t len, struct body *b, int idle_ms)
{
	uint64_t before = b->len;
	int rc;

	c->raw = true;
	if (c->fd < 0)
		return WIRE_IO;
	rc = wire_recv_exact(&c->w, len, b, idle_ms);
	atomic_fetch_add(&c->raw_in, b->len - before);
	return rc;
}

int
origin_recv_to_eof(struct origin_conn *c, struct body *b, int idle_ms)
{
	uint64_t before = b->len;
	int rc;

	c->raw = true;
	if (c->fd < 0)
		return WIRE_IO;
	rc = wire_recv_to_eof(&c->w, b, idle_ms);
	atomic_fetch_add(&c->raw_in, b->len - before);
	return rc;
}

void
origin_exchange(struct origin_conn *c, uint64_t send_len, struct body *got, int idle_ms,
                struct exchange *x)
{
	uint64_t before = got->len;

	c->raw = true;
	if (c->fd < 0) {
		memset(x, 0, sizeof(*x));
		x->send_err = EBADF;
		x->recv_rc = WIRE_IO;
		return;
	}
	wire_exchange(&c->w, send_len, got, idle_ms, x);
	atomic_fetch_add(&c->raw_in, got->len - before);
	count_sent(c, x->sent);
}

int
origin_echo(struct origin_conn *c, int idle_ms, uint64_t *echoed)
{
	char *buf = malloc(64 * 1024);
	uint64_t total = 0;
	int rc = WIRE_OK;

	c->raw = true;
	if (!buf)
		return WIRE_IO;
	for (;;) {
		long n = origin_recv(c, buf, 64 * 1024, idle_ms);

		if (n == 0) {
			if (!origin_shutdown_write(c))
				rc = WIRE_IO;
			break;
		}
		if (n < 0) {
			rc = (int)n;
			break;
		}
		if (!origin_send(c, buf, (size_t)n)) {
			rc = WIRE_IO;
			break;
		}
		total += (uint64_t)n;
	}
	free(buf);
	if (echoed)
		*echoed = total;
	return rc;
}

bool
origin_shutdown_write(struct origin_conn *c)
{
	c->raw = true;
	return c->fd >= 0 && shutdown(c->fd, SHUT_WR) == 0;
}

void
origin_handle_ok(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	(void)req;
	(void)arg;
	origin_reply(c, 200, NULL, "ok");
}

void
origin_echo_all(struct origin_conn *c, void *arg)
{
	(void)arg;
	origin_echo(c, 5000, NULL);
}

bool
origin_parse_range(const char *v, uint64_t size, uint64_t *first, uint64_t *last, bool *open)
{
	unsigned long long a, b;
	int n = 0, m = 0;
	bool to_end;

	if (strncmp(v, "bytes=", 6) != 0)
		return false;
	v += 6;
	to_end = false;
	if (*v == '-') {
		if (sscanf(v + 1, "%llu%n", &b, &m) != 1 || v[1 + m] || b == 0)
			return false;
		*first = b >= size ? 0 : size - b;
		*last = size - 1;
	} else {
		if (sscanf(v, "%llu-%n", &a, &n) != 1 || n == 0 || a >= size)
			return false;
		*first = a;
		*last = size - 1;
		to_end = v[n] == '\0';
		if (!to_end) {
			if (sscanf(v + n, "%llu%n", &b, &m) != 1 || v[n + m] || b < a)
				return false;
			if (b < *last)
				*last = b;
		}
	}
	if (open)
		*open = to_end;
	return true;
}
