#include "kp/client.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "kp/evglue.h"
#include "kp/log.h"
#include "kp/net.h"
#include "kp/policy.h"
#include "kp/retry.h"
#include "kp/server.h"
#include "kp/stats.h"
#include "kp/upstream.h"

/*
 * After the last response, wait this long for the client's EOF before
 * closing: closing with unread bytes would send a reset that can destroy the
 * response still in flight (RFC 9112 9.6).
 */
#define LINGER_SECONDS 2.0


static void process_input(struct client *c);
static void exchange_run(struct client *c);
static void reply_local(struct client *c, int status, const char *why, bool keep_alive);
static void linger_close(struct client *c);

/* ---- state, timer, watchers ----------------------------------------------- */

static double
state_timeout(const struct client *c)
{
	const struct kp_config *cfg = c->srv->cfg;

	switch (c->state) {
	case CLIENT_READING_HEAD:
		return cfg->client_idle_timeout;
	case CLIENT_WAITING_UPSTREAM:
		return cfg->response_timeout;
	case CLIENT_EXCHANGING:
		if (c->ex.req == REQ_DONE && c->ex.resp == RESP_HEAD)
			return cfg->response_timeout;
		return cfg->io_timeout;
	case CLIENT_SENDING_LOCAL:
		return cfg->io_timeout;
	case CLIENT_TUNNEL:
		return cfg->tunnel_timeout;
	case CLIENT_LINGERING:
	case CLIENT_CLOSED:
		break;
	}
	return LINGER_SECONDS;
}

static void
touch(struct client *c)
{
	c->last_activity = ev_now(c->srv->loop);
}

/* The deadline moved to another kind of wait: count it from now. */
static void
rearm(struct client *c)
{
	touch(c);
	c->timer.repeat = state_timeout(c);
	ev_timer_again(c->srv->loop, &c->timer);
}

static const char *const state_names[] = {
	[CLIENT_READING_HEAD] = "reading-head",
	[CLIENT_WAITING_UPSTREAM] = "waiting-upstream",
	[CLIENT_EXCHANGING] = "exchanging",
	[CLIENT_TUNNEL] = "tunnel",
	[CLIENT_SENDING_LOCAL] = "sending-local",
	[CLIENT_LINGERING] = "lingering",
	[CLIENT_CLOSED] = "closed",
};

static void
set_state(struct client *c, enum client_state next)
{
	log_trace("client fd %d: %s -> %s", c->fd, state_names[c->state], state_names[next]);
	c->state = next;
	if (next != CLIENT_CLOSED)
		rearm(c);
}

static void
watch(struct client *c, bool readable, bool writable)
{
	io_watch(c->srv->loop, &c->rio, &c->wio, readable, writable);
}

static bool
has_room(const struct buf *b)
{
	return !b || buf_len(b) < buf_capacity();
}

/*
 * Response payload goes past user space when nothing read into the buffer is
 * still waiting (relayd's rule: splice only from a clean state) and the
 * framer says payload comes next; the splice is bounded by what is left.
 */
static bool
response_splices(const struct exchange *ex)
{
	return !ex->copy_body && ex->resp == RESP_BODY && ex->resp_pending == 0 &&
	       (!ex->up->in || buf_len(ex->up->in) == 0) &&
	       (ex->resp_body.left > 0 || ex->resp_body.left == FRAME_UNTIL_CLOSE);
}

/* Is there somewhere to put more response bytes from the origin? */
static bool
response_can_pull(const struct exchange *ex)
{
	if (ex->resp == RESP_DONE || ex->upstream_eof)
		return false;
	if (response_splices(ex))
		return mover_has_room(&ex->resp_mover);
	return has_room(ex->up->in);
}

/*
 * Which readiness to wait for follows from the state and the buffers alone,
 * so every event handler ends here instead of toggling watchers ad hoc.
 * A full buffer stops reading its source: that is the back-pressure.
 */
static void
sync_watchers(struct client *c)
{
	struct exchange *ex = &c->ex;
	bool out_pending = c->out && buf_len(c->out);

	switch (c->state) {
	case CLIENT_READING_HEAD:
	case CLIENT_WAITING_UPSTREAM:
		watch(c, !c->peer_eof && has_room(c->in), false);
		break;
	case CLIENT_EXCHANGING:
		watch(c, !c->peer_eof && has_room(c->in),
		      out_pending || ex->resp_pending || mover_held(&ex->resp_mover));
		upstream_watch(ex->up, response_can_pull(ex),
		               ex->req == REQ_SENDING && !ex->upstream_write_failed &&
		                       (ex->req_head_sent < buf_len(ex->req_head) || ex->req_pending));
		break;
	case CLIENT_TUNNEL: {
		struct tunnel_interest w = tunnel_wants(&ex->tunnel);

		watch(c, w.client_read, w.client_write);
		upstream_watch(ex->up, w.origin_read, w.origin_write);
		break;
	}
	case CLIENT_SENDING_LOCAL:
		watch(c, false, true);
		break;
	case CLIENT_LINGERING:
		watch(c, true, false);
		break;
	case CLIENT_CLOSED:
		break;
	}
}

/* ---- I/O primitives ------------------------------------------------------- */

static enum move_status
fill(int fd, struct buf *b, ssize_t *got)
{
	ssize_t n;

	if (buf_room(b) == 0)
		buf_compact(b);
	if (buf_room(b) == 0)
		return MOVE_FULL;
	n = recv(fd, buf_tail(b), buf_room(b), 0);
	if (n > 0) {
		b->end += (size_t)n;
		*got = n;
		return MOVE_OK;
	}
	if (n == 0)
		return MOVE_EOF;
	if (net_would_block())
		return MOVE_AGAIN;
	return MOVE_ERROR;
}

static enum move_status
client_fill(struct client *c)
{
	enum move_status r;
	ssize_t got = 0;

	if (c->peer_eof)
		return MOVE_EOF;
	if (!c->in && !(c->in = buf_get()))
		return MOVE_ERROR;
	r = fill(c->fd, c->in, &got);
	if (r == MOVE_OK)
		touch(c);
	else if (r == MOVE_EOF)
		c->peer_eof = true;
	return r;
}

/*
 * Sends a, then b behind it, in one call: a small response leaves in one
 * segment instead of two. Returns bytes sent, 0 when the socket is full, -1
 * on error (errno set). Either part may be empty.
 */
static ssize_t
send_two(int fd, const char *a, size_t alen, const char *b, size_t blen)
{
	struct iovec iov[2] = {{(void *)a, alen}, {(void *)b, blen}};
	struct msghdr msg = {.msg_iov = alen ? iov : iov + 1,
	                     .msg_iovlen = (alen ? 1 : 0) + (blen ? 1 : 0)};
	ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL);

	if (w >= 0)
		return w;
	if (net_would_block())
		return 0;
	return -1;
}

/* ---- life and death ------------------------------------------------------- */

static void
drop_upstream(struct client *c)
{
	if (c->ex.connecting) {
		upstream_close(c->ex.connecting);
		c->ex.connecting = NULL;
	}
	if (c->ex.up) {
		upstream_close(c->ex.up);
		c->ex.up = NULL;
	}
}

/* Gives back everything the exchange holds besides its upstream. */
static void
release_exchange(struct client *c)
{
	buf_put(c->ex.req_head);
	c->ex.req_head = NULL;
	mover_release(&c->ex.resp_mover);
	tunnel_release(&c->ex.tunnel);
}

static void
reset_exchange(struct client *c)
{
	release_exchange(c);
	memset(&c->ex, 0, sizeof(c->ex));
	mover_init(&c->ex.resp_mover, c->srv->cfg->no_splice);
	tunnel_init(&c->ex.tunnel, c->srv->cfg->no_splice);
	c->ex.copy_body = c->srv->cfg->no_splice;
	framer_init(&c->ex.req_body, BODY_NONE, 0);
	framer_init(&c->ex.resp_body, BODY_NONE, 0);
	http_parser_start(&c->parser, &c->head);
}

void
client_close(struct client *c)
{
	struct server *srv = c->srv;

	if (c->state == CLIENT_CLOSED)
		return;
	drop_upstream(c);
	ev_io_stop(srv->loop, &c->rio);
	ev_io_stop(srv->loop, &c->wio);
	ev_timer_stop(srv->loop, &c->timer);
	net_close(&c->fd);
	buf_put(c->in);
	buf_put(c->out);
	c->in = c->out = NULL;
	release_exchange(c);
	set_state(c, CLIENT_CLOSED);
	if (c->prev)
		c->prev->next = c->next;
	else
		srv->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	srv->nclients--;
	kp_stats.clients_active--;
	/* Freed at the end of the iteration: callers up the stack still hold c. */
	c->dead_next = srv->dead_clients;
	srv->dead_clients = c;
	server_client_closed(srv);
}

void
client_reap(struct server *srv)
{
	while (srv->dead_clients) {
		struct client *c = srv->dead_clients;

		srv->dead_clients = c->dead_next;
		free(c);
	}
}

/* Something went wrong after the response began: all that is left is to close. */
static void
abort_exchange(struct client *c, const char *why)
{
	char peer[64];

	log_debug("client %s: %s%s%s: closing", net_addr_text(&c->peer.sa, peer, sizeof(peer)),
	          c->ex.target.key, c->ex.target.key[0] ? ": " : "", why);
	client_close(c);
}

static void
linger_close(struct client *c)
{
	drop_upstream(c);
	buf_put(c->out);
	c->out = NULL;
	if (c->peer_eof || shutdown(c->fd, SHUT_WR) < 0) {
		client_close(c);
		return;
	}
	set_state(c, CLIENT_LINGERING);
	sync_watchers(c);
}

static void
linger_drain(struct client *c)
{
	char scratch[4096];
	ssize_t n;

	while ((n = recv(c->fd, scratch, sizeof(scratch), 0)) > 0)
		;
	if (n == 0 || !net_would_block())
		client_close(c);
}

/* ---- responses the proxy makes itself ------------------------------------ */

static void
flush_local(struct client *c)
{
	while (c->out && buf_len(c->out)) {
		ssize_t n = send_two(c->fd, buf_head(c->out), buf_len(c->out), NULL, 0);

		if (n < 0) {
			client_close(c);
			return;
		}
		if (n == 0) {
			sync_watchers(c);
			return;
		}
		buf_consume(c->out, (size_t)n);
		touch(c);
	}
	buf_put(c->out);
	c->out = NULL;
	if (!c->ex.client_keep_alive) {
		linger_close(c);
		return;
	}
	reset_exchange(c);
	set_state(c, CLIENT_READING_HEAD);
	process_input(c);
}

static void
reply_local(struct client *c, int status, const char *why, bool keep_alive)
{
	struct exchange *ex = &c->ex;
	char peer[64];
	ssize_t n;

	kp_stats.responses_local++;
	log_info("client %s: %s%s%d %s", net_addr_text(&c->peer.sa, peer, sizeof(peer)),
	         ex->target.key, ex->target.key[0] ? " " : "", status, why);
	drop_upstream(c);
	/* A final response already began: the only honest signal left is the close. */
	if (ex->resp != RESP_HEAD) {
		client_close(c);
		return;
	}
	/* Keep the connection only if the rest of the request is not still to come. */
	if (keep_alive && framer_done(&ex->req_body) && !c->peer_eof) {
		if (ex->req_pending)
			buf_consume(c->in, ex->req_pending);
		ex->req_pending = 0;
	} else {
		keep_alive = false;
	}
	ex->client_keep_alive = keep_alive;
	ex->status = (uint16_t)status;
	if (!c->out && !(c->out = buf_get())) {
		client_close(c);
		return;
	}
	buf_compact(c->out);
	n = http_write_local_response(buf_tail(c->out), buf_room(c->out), status, why, keep_alive,
	                              ex->client_minor);
	if (n < 0) {
		client_close(c);
		return;
	}
	c->out->end += (size_t)n;
	set_state(c, CLIENT_SENDING_LOCAL);
	flush_local(c);
}

/* ---- requests ------------------------------------------------------------- */

/* Answers a request whose head is parsed but not forwarded; the head is dropped. */
static void
refuse(struct client *c, int status, const char *why, bool keep_alive)
{
	buf_consume(c->in, c->head.head_len);
	reply_local(c, status, why, keep_alive);
}

static void
start_exchange(struct client *c)
{
	struct exchange *ex = &c->ex;
	const struct http_head *h = &c->head;
	const char *base = buf_head(c->in);
	struct policy_request pr;
	struct policy_verdict verdict;
	struct upstream *pending;
	ssize_t n;
	int status = 0;

	kp_stats.requests++;
	ex->started = ev_now(c->srv->loop);
	ex->method = h->method;
	ex->client_minor = h->minor;
	ex->client_keep_alive = http_head_keeps_alive(h) && !c->peer_eof;
	ex->req = REQ_SENDING;
	ex->resp = RESP_HEAD;
	ex->connect = h->method == HTTP_CONNECT;
	framer_init(&ex->req_body, ex->connect ? BODY_NONE : http_request_body_kind(h),
	            h->content_length);
	log_debug("client fd %d: %s %.*s HTTP/%u.%u", c->fd,
	          llhttp_method_name((llhttp_method_t)h->method), (int)h->url.len,
	          base + h->url.off, h->major, h->minor);
	if (h->major != 1) {
		refuse(c, 505, "only HTTP/1.x is spoken here", false);
		return;
	}
	if (ex->connect) {
		/* What follows the head belongs to the tunnel: never keep-alive here. */
		if (http_parse_authority(base + h->url.off, h->url.len, &ex->target)) {
			refuse(c, 400, "CONNECT needs host:port", false);
			return;
		}
	} else {
		status = http_parse_target(base + h->url.off, h->url.len, &ex->target);
	}
	if (status) {
		refuse(c, status,
		       status == 501 ? "only http:// URLs are proxied"
		                     : "the request-target must be an absolute http:// URL",
		       true);
		return;
	}
	pr.head = h;
	pr.base = base;
	pr.target = &ex->target;
	pr.client = &c->peer.sa;
	verdict = policy_check(c->srv->cfg, &pr);
	if (verdict.status) {
		refuse(c, verdict.status, verdict.why, !ex->connect);
		return;
	}
	if (ex->connect) {
		/* A tunnel is raw TCP to host:port: a pooled HTTP connection will not do. */
		buf_consume(c->in, h->head_len);
		set_state(c, CLIENT_WAITING_UPSTREAM);
		pending = upstream_acquire(c->srv, c, ex->target.host, ex->target.port,
		                           ex->target.key, false);
		if (pending)
			ex->connecting = pending;
		else if (c->state == CLIENT_WAITING_UPSTREAM)
			sync_watchers(c);
		return;
	}
	ex->upgrade = http_wants_upgrade(h);
	if (!(ex->req_head = buf_get())) {
		refuse(c, 503, "out of memory", false);
		return;
	}
	n = http_write_request_head(buf_tail(ex->req_head), buf_room(ex->req_head), h, base,
	                            &ex->target, ex->upgrade);
	if (n < 0) {
		refuse(c, 431, "request head too large to forward", false);
		return;
	}
	ex->req_head->end = (size_t)n;
	buf_consume(c->in, h->head_len);
	set_state(c, CLIENT_WAITING_UPSTREAM);
	pending = upstream_acquire(c->srv, c, ex->target.host, ex->target.port, ex->target.key,
	                           true);
	/* Non-NULL means nothing was answered yet, so c is still waiting for it. */
	if (pending)
		ex->connecting = pending;
	else if (c->state == CLIENT_WAITING_UPSTREAM)
		sync_watchers(c);
}

static int
head_error_status(const struct http_parser *p)
{
	switch (p->error) {
	case HTTP_HEAD_URL_TOO_LONG:
		return 414;
	case HTTP_HEAD_TOO_LARGE:
		return 431;
	default:
		return 400;
	}
}

/*
 * Reads request heads out of c->in, one after another while each is answered
 * at once (a local error with keep-alive, say). A nested call, from an
 * exchange that finished inside this loop, only returns: the loop carries on,
 * so a long pipeline never deepens the stack.
 */
static void
process_input(struct client *c)
{
	if (c->processing_input)
		return;
	c->processing_input = true;
	while (c->state == CLIENT_READING_HEAD) {
		if (!c->in || buf_len(c->in) == 0) {
			if (c->peer_eof) {
				client_close(c);
				break;
			}
			/* An idle client holds no buffer. */
			buf_put(c->in);
			c->in = NULL;
			sync_watchers(c);
			break;
		}
		switch (http_parse_head(&c->parser, buf_head(c->in), buf_len(c->in))) {
		case HTTP_PARSE_MORE:
			if (c->peer_eof)
				client_close(c);
			else
				sync_watchers(c);
			c->processing_input = false;
			return;
		case HTTP_PARSE_ERROR:
			reply_local(c, head_error_status(&c->parser),
			            http_parser_error_text(&c->parser), false);
			break;
		case HTTP_PARSE_DONE:
			start_exchange(c);
			break;
		}
	}
	c->processing_input = false;
}

/* ---- the exchange --------------------------------------------------------- */

static void
tunnel_run(struct client *c)
{
	struct exchange *ex = &c->ex;
	uint64_t moved;

	switch (tunnel_pump(&ex->tunnel, c->fd, ex->up->fd, &moved)) {
	case TUNNEL_FAILED:
		abort_exchange(c, "tunnel closed by an error");
		return;
	case TUNNEL_FINISHED:
		log_debug("client fd %d: tunnel to %s done, %" PRIu64 " bytes up, %" PRIu64
		          " bytes down", c->fd, ex->target.key, ex->tunnel.to_origin.bytes,
		          ex->tunnel.to_client.bytes);
		client_close(c);
		return;
	case TUNNEL_OPEN:
		break;
	}
	if (moved)
		touch(c);
	sync_watchers(c);
}

/*
 * From here on bytes pass untouched both ways. Whatever either side sent
 * before the switch (the 200 or 101 head, early data read along with a head)
 * goes out first.
 */
static void
begin_tunnel(struct client *c)
{
	struct exchange *ex = &c->ex;
	struct upstream *up = ex->up;
	struct tunnel *t = &ex->tunnel;
	bool fits;

	kp_stats.tunnels++;
	buf_put(ex->req_head);
	ex->req_head = NULL;
	mover_release(&ex->resp_mover);
	fits = mover_preload(&t->to_client.mover, c->out);
	fits = mover_preload(&t->to_client.mover, up->in) && fits;
	fits = mover_preload(&t->to_origin.mover, c->in) && fits;
	c->out = c->in = up->in = NULL;
	if (!fits) {
		abort_exchange(c, "too many bytes before the protocol switch");
		return;
	}
	if (c->peer_eof)
		t->to_origin.state = TUNNEL_DRAINING;
	if (ex->upstream_eof)
		t->to_client.state = TUNNEL_DRAINING;
	log_debug("client fd %d: tunnel to %s open", c->fd, ex->target.key);
	set_state(c, CLIENT_TUNNEL);
	tunnel_run(c);
}

void
client_upstream_ready(struct client *c, struct upstream *up)
{
	c->ex.connecting = NULL;
	c->ex.up = up;
	/* What the previous connection did (on a retry) says nothing about this one. */
	c->ex.upstream_eof = false;
	c->ex.upstream_reset = false;
	c->ex.upstream_write_failed = false;
	/*
	 * A request not yet sent has no answer waiting: reading now would only
	 * cost a recv() that says EAGAIN. Readiness (or a pooled connection's
	 * EOF) arrives as an event, which sets this.
	 */
	c->ex.upstream_readable = false;
	c->ex.resp_received = 0;
	up->owner = c;
	http_parser_start(&up->parser, &up->head);
	if (c->ex.connect) {
		static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";

		if (!c->out && !(c->out = buf_get())) {
			abort_exchange(c, "out of memory");
			return;
		}
		memcpy(buf_tail(c->out), established, sizeof(established) - 1);
		c->out->end += sizeof(established) - 1;
		begin_tunnel(c);
		return;
	}
	set_state(c, CLIENT_EXCHANGING);
	exchange_run(c);
}

void
client_upstream_failed(struct client *c, int status, const char *why)
{
	c->ex.connecting = NULL;
	reply_local(c, status, why, true);
}

/* A connection that died before answering: replay on a fresh one, or 502. */
static void
upstream_lost(struct client *c, const char *why)
{
	struct exchange *ex = &c->ex;
	struct retry_facts facts = {
		.reused_connection = ex->up->reused,
		.response_started = ex->resp_received > 0,
		.idempotent = http_method_is_idempotent(ex->method),
		.request_complete = ex->req == REQ_DONE,
		.body_bytes_sent = ex->req_body_sent,
		.retries = ex->retries,
	};
	struct upstream *pending;

	if (!retry_allowed(&facts)) {
		reply_local(c, 502, why, true);
		return;
	}
	log_debug("client fd %d: %s: pooled connection %s, retrying on a new one", c->fd,
	          ex->target.key, why);
	kp_stats.upstream_retries++;
	upstream_close(ex->up);
	ex->up = NULL;
	ex->retries++;
	ex->req = REQ_SENDING;
	ex->req_head_sent = 0;
	set_state(c, CLIENT_WAITING_UPSTREAM);
	pending = upstream_acquire(c->srv, c, ex->target.host, ex->target.port, ex->target.key,
	                           false);
	if (pending)
		ex->connecting = pending;
	else if (c->state == CLIENT_WAITING_UPSTREAM)
		sync_watchers(c);
}

/* Frames what the client has sent so far into req_pending. -1: the exchange ended. */
static int
frame_request(struct client *c)
{
	struct exchange *ex = &c->ex;
	size_t avail = c->in ? buf_len(c->in) : 0;
	enum span_kind kind;
	ssize_t n;

	while (ex->req_pending < avail && !framer_done(&ex->req_body)) {
		n = framer_next(&ex->req_body, buf_head(c->in) + ex->req_pending,
		                avail - ex->req_pending, &kind);
		if (n < 0) {
			reply_local(c, 400, "malformed chunked request body", false);
			return -1;
		}
		if (n == 0)
			break;
		ex->req_pending += (size_t)n;
	}
	return 0;
}

/* Moves request bytes from the client to the upstream. -1: the exchange ended. */
static int
pump_request(struct client *c)
{
	struct exchange *ex = &c->ex;
	ssize_t n;

	while (ex->req == REQ_SENDING && !ex->upstream_write_failed) {
		size_t head_left = buf_len(ex->req_head) - ex->req_head_sent;

		if (!ex->req_pending && frame_request(c) < 0)
			return -1;
		if (head_left || ex->req_pending) {
			n = send_two(ex->up->fd, buf_head(ex->req_head) + ex->req_head_sent, head_left,
			             ex->req_pending ? buf_head(c->in) : NULL, ex->req_pending);
			if (n < 0) {
				/* The origin may have answered and closed; the response side decides. */
				log_debug("client fd %d: %s: sending request: %s", c->fd,
				          ex->target.key, strerror(errno));
				ex->upstream_write_failed = true;
				return 0;
			}
			if (n == 0)
				return 0;
			kp_stats.bytes_to_upstreams += (uint64_t)n;
			touch(c);
			if ((size_t)n <= head_left) {
				ex->req_head_sent += (size_t)n;
				continue;
			}
			ex->req_head_sent += head_left;
			n -= (ssize_t)head_left;
			buf_consume(c->in, (size_t)n);
			ex->req_pending -= (size_t)n;
			ex->req_body_sent += (uint64_t)n;
			continue;
		}
		if (framer_done(&ex->req_body)) {
			ex->req = REQ_DONE;
			rearm(c);
			break;
		}
		if (c->peer_eof) {
			abort_exchange(c, "client closed before its request body ended");
			return -1;
		}
		return 0;   /* wait for more from the client */
	}
	return 0;
}

static int
response_head(struct client *c)
{
	struct exchange *ex = &c->ex;
	struct upstream *up = ex->up;
	const struct http_head *h = &up->head;
	struct response_plan plan;
	enum body_kind kind;
	const char *base;
	ssize_t n;

	switch (http_parse_head(&up->parser, buf_head(up->in), buf_len(up->in))) {
	case HTTP_PARSE_MORE:
		return 0;
	case HTTP_PARSE_ERROR:
		log_info("upstream %s: bad response head: %s", ex->target.key,
		         http_parser_error_text(&up->parser));
		reply_local(c, 502,
		            up->parser.error == HTTP_HEAD_TOO_LARGE ? "response head too large"
		                                                    : "malformed response from the origin",
		            false);
		return -1;
	case HTTP_PARSE_DONE:
		break;
	}
	base = buf_head(up->in);
	if (!c->out && !(c->out = buf_get())) {
		abort_exchange(c, "out of memory");
		return -1;
	}
	buf_compact(c->out);
	plan.client_minor = ex->client_minor;
	plan.dechunk = false;
	if (h->status == 101) {
		if (!ex->upgrade || ex->req != REQ_DONE) {
			reply_local(c, 502, "the origin switched protocols unasked", false);
			return -1;
		}
		plan.upgrade = true;
		plan.client_keep_alive = false;
		n = http_write_response_head(buf_tail(c->out), buf_room(c->out), h, base, &plan);
		if (n < 0) {
			reply_local(c, 502, "101 response head too large", false);
			return -1;
		}
		c->out->end += (size_t)n;
		ex->status = 101;
		buf_consume(up->in, h->head_len);
		begin_tunnel(c);
		return -1;   /* no longer an exchange */
	}
	plan.upgrade = false;
	if (h->status < 200) {
		/* HTTP/1.0 clients do not know interim responses (RFC 9110 15.2). */
		if (ex->client_minor >= 1) {
			plan.client_keep_alive = true;
			n = http_write_response_head(buf_tail(c->out), buf_room(c->out), h, base, &plan);
			if (n < 0) {
				reply_local(c, 502, "interim response head too large", false);
				return -1;
			}
			c->out->end += (size_t)n;
		}
		buf_consume(up->in, h->head_len);
		http_parser_start(&up->parser, &up->head);
		return 1;
	}
	kind = http_response_body_kind(h, ex->method);
	ex->status = h->status;
	/* After asking for an upgrade the connection's state is the origin's guess. */
	ex->upstream_reusable = http_head_keeps_alive(h) && kind != BODY_UNTIL_CLOSE && !ex->upgrade;
	up->keep_alive_hint = (double)http_keep_alive_timeout(h, base);
	ex->dechunk = kind == BODY_CHUNKED && ex->client_minor == 0;
	ex->client_keep_alive = ex->client_keep_alive && !ex->dechunk &&
	                        kind != BODY_UNTIL_CLOSE && !c->peer_eof;
	plan.dechunk = ex->dechunk;
	plan.client_keep_alive = ex->client_keep_alive;
	n = http_write_response_head(buf_tail(c->out), buf_room(c->out), h, base, &plan);
	if (n < 0) {
		reply_local(c, 502, "response head too large to forward", false);
		return -1;
	}
	c->out->end += (size_t)n;
	buf_consume(up->in, h->head_len);
	framer_init(&ex->resp_body, kind, h->content_length);
	ex->resp = RESP_BODY;
	rearm(c);
	return 1;
}

/* Frames buffered response bytes; 1 if something can move, 0 if not, -1 ended. */
static int
frame_response(struct client *c)
{
	struct exchange *ex = &c->ex;
	struct buf *in = ex->up->in;
	size_t avail = buf_len(in);
	enum span_kind kind;
	ssize_t n = 0;

	/* A malformed span after good ones is found again once those are sent. */
	if (ex->dechunk) {
		/* Only payload goes to an HTTP/1.0 client; framing is dropped here. */
		n = framer_next(&ex->resp_body, buf_head(in), avail, &kind);
		if (n > 0 && kind == SPAN_FRAMING)
			buf_consume(in, (size_t)n);
		else if (n > 0)
			ex->resp_pending = (size_t)n;
	} else {
		/* Chunked framing passes through untouched: one send for many spans. */
		while (ex->resp_pending < avail && !framer_done(&ex->resp_body)) {
			n = framer_next(&ex->resp_body, buf_head(in) + ex->resp_pending,
			                avail - ex->resp_pending, &kind);
			if (n <= 0)
				break;
			ex->resp_pending += (size_t)n;
		}
		n = ex->resp_pending || framer_done(&ex->resp_body) ? 1 : n;
	}
	if (n < 0) {
		abort_exchange(c, "malformed chunked response body");
		return -1;
	}
	return n > 0 || framer_done(&ex->resp_body);
}

/* The origin closed (or reset) with nothing left to forward. */
static int
upstream_ended(struct client *c, bool reset)
{
	struct exchange *ex = &c->ex;

	if (ex->resp == RESP_BODY && ex->resp_body.left == FRAME_UNTIL_CLOSE && !reset) {
		ex->resp_body.left = FRAME_DONE;
		ex->upstream_reusable = false;
		return 1;
	}
	if (ex->resp == RESP_HEAD && ex->resp_received == 0) {
		upstream_lost(c, reset ? "connection reset by the origin"
		                       : "the origin closed the connection without answering");
		return -1;
	}
	if (ex->resp == RESP_HEAD) {
		reply_local(c, 502, "incomplete response head from the origin", false);
		return -1;
	}
	abort_exchange(c, reset ? "origin reset the connection mid-response"
	                        : "origin closed the connection mid-response");
	return -1;
}

/*
 * Takes more response bytes from the origin: spliced into the pipe when the
 * state is clean and payload comes next, else read into the buffer (heads,
 * chunk-size lines, and everything on the copy path). 1: something changed.
 */
static int
pull_response(struct client *c)
{
	struct exchange *ex = &c->ex;
	struct upstream *up = ex->up;
	enum move_status r;
	ssize_t got = 0;

	if (response_splices(ex)) {
		uint64_t left = framer_payload_left(&ex->resp_body);
		size_t moved = 0;

		r = mover_pull(&ex->resp_mover, up->fd, left ? left : SIZE_MAX, &moved);
		if (r == MOVE_OK)
			framer_payload_moved(&ex->resp_body, moved);
		got = (ssize_t)moved;
		/* The mover fell back to copying (EINVAL): so does this response. */
		if (r == MOVE_FULL && ex->resp_mover.copy) {
			ex->copy_body = true;
			return 1;
		}
	} else if (!up->in && !(up->in = buf_get())) {
		r = MOVE_ERROR;
	} else {
		r = fill(up->fd, up->in, &got);
	}
	switch (r) {
	case MOVE_OK:
		ex->resp_received += (uint64_t)got;
		if (ex->copy_body)
			kp_stats.bytes_copied += (uint64_t)got;
		touch(c);
		return 1;
	case MOVE_EOF:
		ex->upstream_eof = true;
		return 1;
	case MOVE_ERROR:
		ex->upstream_eof = ex->upstream_reset = true;
		return 1;
	case MOVE_AGAIN:
		ex->upstream_readable = false;
		break;
	case MOVE_FULL:
		break;
	}
	return 0;
}

/* Bytes one response may read per call before yielding to other connections. */
#define RESPONSE_BUDGET (1u << 20)

/*
 * Moves response bytes from the upstream to the client, in stream order:
 * heads the proxy wrote, then payload in the pipe, then buffered bytes.
 * A client that takes nothing more stops the flushing, not the pulling:
 * while there is room the origin is still read (what sync_watchers() asks
 * readiness for, the pump must act on, or the loop would spin).
 * -1: the exchange ended.
 */
static int
pump_response(struct client *c)
{
	struct exchange *ex = &c->ex;
	struct upstream *up = ex->up;
	uint64_t budget = RESPONSE_BUDGET;
	bool client_blocked = false;
	ssize_t n;
	int r;

	for (;;) {
		size_t out_len = c->out ? buf_len(c->out) : 0;
		size_t in_pipe = mover_held(&ex->resp_mover);
		bool body_done = ex->resp == RESP_BODY && framer_done(&ex->resp_body);

		/* Parse and frame first, so a head and its body can leave together. */
		if (!ex->resp_pending && ex->resp != RESP_DONE && !body_done && up->in &&
		    buf_len(up->in)) {
			r = ex->resp == RESP_HEAD ? response_head(c) : frame_response(c);
			if (r < 0)
				return -1;
			if (r > 0)
				continue;
		}
		if (!client_blocked && in_pipe && !out_len) {
			size_t moved;

			switch (mover_push(&ex->resp_mover, c->fd, &moved)) {
			case MOVE_OK:
				ex->resp_sent += moved;
				kp_stats.bytes_to_clients += moved;
				budget = moved < budget ? budget - moved : 0;
				touch(c);
				continue;
			case MOVE_AGAIN:
			case MOVE_FULL:
				client_blocked = true;
				break;
			case MOVE_EOF:
			case MOVE_ERROR:
				abort_exchange(c, "client went away");
				return -1;
			}
		}
		if (!client_blocked && (out_len || ex->resp_pending)) {
			size_t body = in_pipe ? 0 : ex->resp_pending;

			n = send_two(c->fd, out_len ? buf_head(c->out) : NULL, out_len,
			             body ? buf_head(up->in) : NULL, body);
			if (n < 0) {
				abort_exchange(c, "client went away");
				return -1;
			}
			if (n > 0) {
				kp_stats.bytes_to_clients += (uint64_t)n;
				budget = (uint64_t)n < budget ? budget - (uint64_t)n : 0;
				touch(c);
				if (out_len) {
					size_t from_out = (size_t)n < out_len ? (size_t)n : out_len;

					buf_consume(c->out, from_out);
					n -= (ssize_t)from_out;
					if (!buf_len(c->out)) {
						buf_put(c->out);
						c->out = NULL;
					}
				}
				if (n) {
					buf_consume(up->in, (size_t)n);
					ex->resp_pending -= (size_t)n;
					ex->resp_sent += (uint64_t)n;
				}
				continue;
			}
			client_blocked = true;
		}
		if (!client_blocked) {
			/* Nothing left to send: the end, or more to come from the origin. */
			if (body_done)
				ex->resp = RESP_DONE;
			if (ex->resp == RESP_DONE)
				return 0;
			if (ex->upstream_eof) {
				if (upstream_ended(c, ex->upstream_reset) < 0)
					return -1;
				continue;
			}
			if (up->in && !has_room(up->in)) {
				/* Full and still undecided: a head or a framing line too long. */
				if (ex->resp == RESP_HEAD)
					reply_local(c, 502, "response head too large", false);
				else
					abort_exchange(c, "chunk framing line too long");
				return -1;
			}
		}
		/*
		 * The budget only stops reading: bytes already read are always
		 * framed and flushed, because once both sockets are quiet no event
		 * would come back for them. Unread bytes keep the origin readable.
		 */
		if (budget == 0 || !ex->upstream_readable || !response_can_pull(ex) ||
		    !pull_response(c))
			return 0;
	}
}

static void
finish_exchange(struct client *c)
{
	struct exchange *ex = &c->ex;
	bool reusable = ex->upstream_reusable && ex->req == REQ_DONE && !ex->upstream_write_failed;
	bool keep = ex->client_keep_alive && ex->req == REQ_DONE;
	struct upstream *up = ex->up;

	log_debug("client fd %d: %s -> %u, %" PRIu64 " bytes, %s upstream, %.1f ms", c->fd,
	          ex->target.key, ex->status, ex->resp_sent, up->reused ? "reused" : "new",
	          (ev_now(c->srv->loop) - ex->started) * 1000);
	ex->up = NULL;
	upstream_release(up, reusable);
	if (!keep) {
		linger_close(c);
		return;
	}
	reset_exchange(c);
	set_state(c, CLIENT_READING_HEAD);
	process_input(c);
}

static void
exchange_run(struct client *c)
{
	if (pump_request(c) < 0 || pump_response(c) < 0)
		return;
	if (c->ex.resp == RESP_DONE) {
		finish_exchange(c);
		return;
	}
	sync_watchers(c);
}

void
client_upstream_event(struct client *c, int revents)
{
	if (revents & EV_READ)
		c->ex.upstream_readable = true;
	if (c->state == CLIENT_TUNNEL)
		tunnel_run(c);
	else
		exchange_run(c);
}

/* ---- watchers ------------------------------------------------------------- */

static void
client_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct client *c = container_of(w, struct client, rio);

	(void)loop;
	(void)revents;
	if (c->state == CLIENT_LINGERING) {
		linger_drain(c);
		return;
	}
	if (c->state == CLIENT_TUNNEL) {
		tunnel_run(c);
		return;
	}
	if (client_fill(c) == MOVE_ERROR) {
		abort_exchange(c, strerror(errno));
		return;
	}
	switch (c->state) {
	case CLIENT_READING_HEAD:
		process_input(c);
		break;
	case CLIENT_WAITING_UPSTREAM:
		sync_watchers(c);
		break;
	case CLIENT_EXCHANGING:
		exchange_run(c);
		break;
	case CLIENT_SENDING_LOCAL:
	case CLIENT_TUNNEL:
	case CLIENT_LINGERING:
	case CLIENT_CLOSED:
		break;
	}
}

static void
client_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct client *c = container_of(w, struct client, wio);

	(void)loop;
	(void)revents;
	if (c->state == CLIENT_EXCHANGING)
		exchange_run(c);
	else if (c->state == CLIENT_TUNNEL)
		tunnel_run(c);
	else if (c->state == CLIENT_SENDING_LOCAL)
		flush_local(c);
	else
		sync_watchers(c);
}

static void
timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct client *c = container_of(w, struct client, timer);
	ev_tstamp left = c->last_activity + state_timeout(c) - ev_now(loop);

	(void)revents;
	if (left > 0.001) {
		w->repeat = left;
		ev_timer_again(loop, w);
		return;
	}
	switch (c->state) {
	case CLIENT_READING_HEAD:
		if (c->in && buf_len(c->in))
			reply_local(c, 408, "request head not received in time", false);
		else
			client_close(c);
		break;
	case CLIENT_WAITING_UPSTREAM:
		reply_local(c, 504, "the origin could not be reached in time", false);
		break;
	case CLIENT_EXCHANGING:
		if (c->ex.resp == RESP_HEAD && c->ex.resp_received == 0)
			reply_local(c, 504, "the origin did not answer in time", false);
		else
			abort_exchange(c, "no progress before the I/O timeout");
		break;
	case CLIENT_TUNNEL:
		abort_exchange(c, "tunnel idle past --tunnel-timeout");
		break;
	case CLIENT_SENDING_LOCAL:
	case CLIENT_LINGERING:
	case CLIENT_CLOSED:
		client_close(c);
		break;
	}
}

struct client *
client_new(struct server *srv, int fd, const union dns_addr *peer)
{
	struct client *c = calloc(1, sizeof(*c));

	if (!c) {
		close(fd);
		return NULL;
	}
	c->srv = srv;
	c->fd = fd;
	c->peer = *peer;
	ev_io_init(&c->rio, client_read_cb, fd, EV_READ);
	ev_io_init(&c->wio, client_write_cb, fd, EV_WRITE);
	ev_init(&c->timer, timer_cb);
	http_parser_init(&c->parser, HTTP_REQUEST, srv->cfg->max_header_bytes,
	                 srv->cfg->max_url_bytes);
	reset_exchange(c);
	c->next = srv->clients;
	if (srv->clients)
		srv->clients->prev = c;
	srv->clients = c;
	srv->nclients++;
	kp_stats.clients_accepted++;
	kp_stats.clients_active++;
	c->state = CLIENT_READING_HEAD;
	rearm(c);
	sync_watchers(c);
	return c;
}
