#include "kp/client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kp/access_log.h"
#include "kp/cidr.h"
#include "kp/config.h"
#include "kp/evglue.h"
#include "kp/log.h"
#include "kp/net.h"
#include "kp/plan.h"
#include "kp/policy.h"
#include "kp/stats.h"

#include "client_priv.h"

/*
 * After the last response, wait this long for the client's EOF before
 * closing: closing with unread bytes would send a reset that can destroy the
 * response still in flight (RFC 9112 9.6).
 */
#define LINGER_SECONDS 2.0

/*
 * Spare request states kept for the next requests: enough that a steady
 * load allocates none, few enough that a burst does not pin its memory
 * until the next trim.
 */
#define CLIENT_SPARES_MAX 256

static void process_input(struct client *c);
static void linger_close(struct client *c);
static void sync_watchers(struct client *c);

/* ---- state, timer, watchers ----------------------------------------------- */

/* The client's own deadline in each state; 0: none (the exchange keeps its own). */
static double
state_timeout(const struct client *c)
{
	const struct kp_config *cfg = c->env->cfg;

	switch (c->state) {
	case CLIENT_READING_HEAD:
		return cfg->client_idle_timeout;
	case CLIENT_SENDING_LOCAL:
		return cfg->io_timeout;
	case CLIENT_INTERCEPTING:
	case CLIENT_AUTHENTICATING:
		return cfg->header_timeout;
	case CLIENT_FORWARDING:
	case CLIENT_TUNNEL:
		return 0;
	case CLIENT_LINGERING:
	case CLIENT_CLOSED:
		break;
	}
	return LINGER_SECONDS;
}

static void
touch(struct client *c)
{
	c->last_activity = clock_now(c->env->clock);
}

/*
 * When the current wait runs out: the state's timeout after the last
 * progress, and while a head is half read, --header-timeout after its
 * first byte, however much trickles in meanwhile.
 */
static ev_tstamp
deadline(const struct client *c)
{
	ev_tstamp at = c->last_activity + state_timeout(c);

	if (c->state == CLIENT_READING_HEAD && c->head_started > 0 &&
	    c->head_started + c->env->cfg->header_timeout < at)
		at = c->head_started + c->env->cfg->header_timeout;
	return at;
}

/*
 * The first bytes of a head arrived: its own deadline starts now, and may
 * fall before the one the timer waits for, so the timer is set for
 * whichever comes first.
 */
static void
head_begins(struct client *c)
{
	if (c->head_started > 0)
		return;
	c->head_started = clock_now(c->env->clock);
	clock_timer_start(&c->timer, clock_deadline_left(deadline(c), c->head_started));
}

/* The deadline moved to another kind of wait: count it from now. */
static void
rearm(struct client *c)
{
	double timeout = state_timeout(c);

	touch(c);
	if (timeout > 0)
		clock_timer_start(&c->timer, timeout);
	else
		clock_timer_stop(&c->timer);
}

static const char *const state_names[] = {
	[CLIENT_READING_HEAD] = "reading-head",
	[CLIENT_AUTHENTICATING] = "authenticating",
	[CLIENT_FORWARDING] = "forwarding",
	[CLIENT_TUNNEL] = "tunnel",
	[CLIENT_INTERCEPTING] = "intercepting",
	[CLIENT_SENDING_LOCAL] = "sending-local",
	[CLIENT_LINGERING] = "lingering",
	[CLIENT_CLOSED] = "closed",
};

void
client_set_state(struct client *c, enum client_state next)
{
	log_trace("client fd %d: %s -> %s", c->conn.fd, state_names[c->state], state_names[next]);
	c->state = next;
	if (next != CLIENT_CLOSED)
		rearm(c);
}

static bool
has_room(const struct buf *b)
{
	return !b || buf_len(b) < buf_capacity();
}

/*
 * Which readiness to wait for follows from the state and the buffers alone,
 * so every event handler ends here instead of toggling watchers ad hoc.
 * A full buffer stops reading its source: that is the back-pressure.
 */
static void
sync_watchers(struct client *c)
{
	bool rd, wr;

	switch (c->state) {
	case CLIENT_READING_HEAD:
		conn_watch(&c->conn, !c->conn.eof && has_room(c->in), false);
		break;
	case CLIENT_FORWARDING:
		exchange_watch(&c->req->ex, &rd, &wr);
		conn_watch(&c->conn, !c->conn.eof && rd, wr);
		break;
	case CLIENT_TUNNEL:
		exchange_watch(&c->req->ex, &rd, &wr);
		conn_watch(&c->conn, rd, wr);
		break;
	case CLIENT_SENDING_LOCAL:
		conn_watch(&c->conn, false, true);
		break;
	case CLIENT_AUTHENTICATING:
		/* Nothing more is read until the request is admitted or refused. */
		conn_watch(&c->conn, false, false);
		break;
	case CLIENT_INTERCEPTING:
		/* Once the 200 is out, the handshake step says what it waits for. */
		if (c->out)
			conn_watch(&c->conn, false, true);
		break;
	case CLIENT_LINGERING:
		conn_watch(&c->conn, true, false);
		break;
	case CLIENT_CLOSED:
		break;
	}
}

/* ---- request states ------------------------------------------------------- */

static const struct exchange_ops client_exchange_ops;
static void authenticated(struct auth_waiter *w, bool granted);

/* A request's first byte came: the state to read it into, a spare one if there is one. */
static struct client_request *
take_request(struct client *c)
{
	struct client_list *list = c->list;
	const struct kp_config *cfg = c->env->cfg;
	struct client_request *r = list->spare;

	if (r) {
		/* Reset when it was put back: only whose it is changes. */
		list->spare = r->next;
		if (--list->nspare < list->spare_low)
			list->spare_low = list->nspare;
		exchange_rebind(&r->ex, &c->conn, &c->in, &c->out);
	} else {
		if (!(r = malloc(sizeof(*r))))
			return NULL;
		http_parser_init(&r->parser, HTTP_REQUEST, cfg->max_header_bytes,
		                 cfg->max_url_bytes);
		http_parser_start(&r->parser, &r->head);
		exchange_init(&r->ex, c->env, &c->conn, &c->in, &c->out, &client_exchange_ops,
		              false);
		memset(&r->auth, 0, sizeof(r->auth));
		r->auth.loop = c->env->loop;
		r->auth.done = authenticated;
	}
	r->client = c;
	r->next = NULL;
	r->ex.owner.restricted = c->restricted;
	r->ex.owner.peer = &c->peer.sa;
	r->ex.owner.https = c->intercepted != NULL;
	r->ex.owner.fixed_key = c->intercepted ? c->intercepted->key : NULL;
	c->req = r;
	return r;
}

/* r is reset (its exchange and parser ready for a request, nothing held). */
static void
put_spare(struct client_list *list, struct client_request *r)
{
	if (list->nspare >= CLIENT_SPARES_MAX) {
		free(r);
		return;
	}
	r->next = list->spare;
	list->spare = r;
	list->nspare++;
}

/*
 * The request is answered and nothing of another is here: its state goes
 * back for whichever client reads a request next. The exchange was reset
 * already, so it holds nothing.
 */
static void
give_back_request(struct client *c)
{
	if (!c->req)
		return;
	put_spare(c->list, c->req);
	c->req = NULL;
}

unsigned
client_trim(struct client_list *list)
{
	unsigned idle = list->spare_low < list->nspare ? list->spare_low : list->nspare;
	unsigned freed = 0;

	for (; freed < idle; freed++) {
		struct client_request *r = list->spare;

		list->spare = r->next;
		free(r);
	}
	list->nspare -= freed;
	list->spare_low = list->nspare;
	return freed;
}

void
client_list_init(struct client_list *list)
{
	memset(list, 0, sizeof(*list));
	kp_list_init(&list->live);
	kp_list_init(&list->dead);
	slab_init(&list->slab, sizeof(struct client));
}

void
client_list_free(struct client_list *list)
{
	while (list->spare) {
		struct client_request *r = list->spare;

		list->spare = r->next;
		free(r);
	}
	list->nspare = list->spare_low = 0;
	slab_drain(&list->slab);
}

void
client_close(struct client *c)
{
	struct client_list *list = c->list;

	if (c->state == CLIENT_CLOSED)
		return;
	/* What it holds goes now; its memory with the client's, once callers are done with it. */
	if (c->req) {
		auth_cancel(&c->req->auth);
		exchange_release(&c->req->ex);
	}
	clock_timer_stop(&c->timer);
	conn_close(&c->conn);
	buf_put(c->in);
	buf_put(c->out);
	c->in = c->out = NULL;
	client_intercept_release(c);
	client_set_state(c, CLIENT_CLOSED);
	kp_list_unlink(&c->link);
	list->count--;
	kp_stats.clients_active--;
	/* Freed at the end of the iteration: callers up the stack still hold c. */
	kp_list_insert_head(&list->dead, &c->link);
}

unsigned
client_reap(struct client_list *list)
{
	unsigned n = 0;
	struct client *c;

	while ((c = KP_LIST_FIRST(&list->dead, struct client, link)) != NULL) {
		kp_list_unlink(&c->link);
		/* Closed mid-request, maybe: reset for whoever takes it next. */
		if (c->req) {
			exchange_reset(&c->req->ex);
			http_parser_start(&c->req->parser, &c->req->head);
			put_spare(list, c->req);
		}
		slab_put(&list->slab, c);
		n++;
	}
	return n;
}

/* Something went wrong after the response began: all that is left is to close. */
static void
abort_client(struct client *c, const char *why)
{
	/* A read may fail between requests, when there is no request to log. */
	struct exchange *ex = c->req ? &c->req->ex : NULL;
	const char *key = ex ? ex->target.key : "";
	char peer[64];

	if (ex)
		exchange_log_relayed(ex);
	if (why)
		log_debug("client %s: %s%s%s: closing",
		          net_addr_text(&c->peer.sa, peer, sizeof(peer)), key, key[0] ? ": " : "",
		          why);
	client_close(c);
}

static void
linger_close(struct client *c)
{
	exchange_release(&c->req->ex);
	buf_put(c->out);
	c->out = NULL;
	if (c->conn.eof || conn_shutdown_write(&c->conn) < 0) {
		client_close(c);
		return;
	}
	client_set_state(c, CLIENT_LINGERING);
	sync_watchers(c);
}

static void
linger_drain(struct client *c)
{
	char scratch[4096];
	ssize_t n;

	while ((n = recv(c->conn.fd, scratch, sizeof(scratch), 0)) > 0)
		;
	if (n == 0 || !net_would_block())
		client_close(c);
}

void
client_stop_if_idle(struct client *c)
{
	if (c->state == CLIENT_READING_HEAD)
		client_close(c);
}

void
client_read_next(struct client *c)
{
	exchange_reset(&c->req->ex);
	http_parser_start(&c->req->parser, &c->req->head);
	client_set_state(c, CLIENT_READING_HEAD);
	process_input(c);
}

/* The exchange is over and the client may send another request. */
static void
next_request(struct client *c)
{
	/* Stopping: no further request, but the one answered went out whole. */
	if (c->env->draining) {
		linger_close(c);
		return;
	}
	client_read_next(c);
}

/* ---- responses the proxy makes itself ------------------------------------ */

/*
 * Statuses that name their own kind of error; a 502's cause (unresolved,
 * connect, reset, bad response) was counted where it was found.
 */
static void
count_refusal(int status)
{
	switch (status) {
	case 403:
		kp_stats.errors[KP_ERR_REFUSED]++;
		break;
	case 407:
	case 429:
		kp_stats.errors[KP_ERR_UNAUTHORIZED]++;
		break;
	case 400:
	case 414:
	case 431:
	case 501:
	case 505:
		kp_stats.errors[KP_ERR_BAD_REQUEST]++;
		break;
	case 408:
	case 504:
		kp_stats.errors[KP_ERR_TIMEOUT]++;
		break;
	default:
		break;
	}
}

bool
client_send_out(struct client *c)
{
	while (c->out && buf_len(c->out)) {
		ssize_t n = conn_send_two(&c->conn, buf_head(c->out), buf_len(c->out), NULL, 0);

		if (n < 0) {
			client_close(c);
			return false;
		}
		if (n == 0) {
			sync_watchers(c);
			return false;
		}
		buf_consume(c->out, (size_t)n);
		touch(c);
	}
	buf_put(c->out);
	c->out = NULL;
	return true;
}

static void
flush_local(struct client *c)
{
	if (!client_send_out(c))
		return;
	if (!exchange_keeps_asker(&c->req->ex)) {
		linger_close(c);
		return;
	}
	next_request(c);
}

void
client_reply_local(struct client *c, int status, const char *why, bool keep_alive)
{
	/* A client sending garbage in a loop must not flood the log. */
	static struct log_limit refusals = LOG_LIMIT(0.1);
	struct exchange *ex = &c->req->ex;
	char peer[64];
	ssize_t n;

	kp_stats.responses_local++;
	count_refusal(status);
	log_limited(&refusals, KP_LOG_INFO, "client %s: %s%s%d %s",
	            net_addr_text(&c->peer.sa, peer, sizeof(peer)), ex->target.key,
	            ex->target.key[0] ? " " : "", status, why);
	exchange_release(ex);
	/* A final response already began: the only honest signal left is the close. */
	if (exchange_response_begun(ex)) {
		exchange_log_relayed(ex);
		client_close(c);
		return;
	}
	keep_alive = exchange_answer_locally(ex, status, keep_alive);
	if (!c->out && !(c->out = buf_get())) {
		client_close(c);
		return;
	}
	buf_compact(c->out);
	n = http_write_local_response(buf_tail(c->out), buf_room(c->out), status, why, keep_alive,
	                              c->req->head.minor);
	if (n < 0) {
		client_close(c);
		return;
	}
	c->out->end += (size_t)n;
	exchange_log(ex, status, (uint64_t)n, "local");
	client_set_state(c, CLIENT_SENDING_LOCAL);
	flush_local(c);
}

/* ---- what the exchange tells the client ----------------------------------- */

static struct client *
client_of(struct exchange *ex)
{
	return container_of(ex, struct client_request, ex)->client;
}

static void
ex_reply(struct exchange *ex, int status, const char *why, bool keep_alive)
{
	client_reply_local(client_of(ex), status, why, keep_alive);
}

static void
ex_abort(struct exchange *ex, const char *why)
{
	abort_client(client_of(ex), why);
}

static void
ex_finished(struct exchange *ex)
{
	struct client *c = client_of(ex);

	exchange_log_relayed(ex);
	if (!exchange_keeps_asker(ex))
		linger_close(c);
	else
		next_request(c);
}

static void
ex_tunnel_opened(struct exchange *ex)
{
	client_set_state(client_of(ex), CLIENT_TUNNEL);
}

static void
ex_wait(struct exchange *ex)
{
	sync_watchers(client_of(ex));
}

static const struct exchange_ops client_exchange_ops = {
	.reply = ex_reply,
	.abort = ex_abort,
	.finished = ex_finished,
	.tunnel_opened = ex_tunnel_opened,
	.wait = ex_wait,
};

/* ---- requests ------------------------------------------------------------- */

void
client_refuse(struct client *c, int status, const char *why, bool keep_alive)
{
	buf_consume(c->in, c->req->head.head_len);
	client_reply_local(c, status, why, keep_alive);
}

/*
 * OPTIONS or TRACE with Max-Forwards 0: the proxy is the final recipient
 * and answers itself (RFC 9110 7.6.2). A request with a body it does not
 * read closes the connection after the answer.
 */
static void
answer_as_final_recipient(struct client *c)
{
	struct exchange *ex = &c->req->ex;
	bool keep_alive = exchange_answer_locally(ex, 200, true);
	ssize_t n;

	if (!c->out && !(c->out = buf_get())) {
		client_close(c);
		return;
	}
	buf_compact(c->out);
	n = http_write_final_answer(buf_tail(c->out), buf_room(c->out), &c->req->head,
	                            buf_head(c->in), keep_alive, c->req->head.minor);
	if (n < 0) {
		client_refuse(c, 431, "request head too large to reflect", false);
		return;
	}
	buf_consume(c->in, c->req->head.head_len);
	c->out->end += (size_t)n;
	exchange_log(ex, 200, (uint64_t)n, "local");
	client_set_state(c, CLIENT_SENDING_LOCAL);
	flush_local(c);
}

/*
 * The policy's verdict on the parsed request. auth: the users its
 * credentials must be one of; NULL inside an intercepted CONNECT, whose
 * client authenticated with the CONNECT, or once they passed.
 */
static void
judge(struct client *c, struct policy_verdict *verdict, const struct auth *auth)
{
	struct policy_request pr = {
		.head = &c->req->head,
		.base = buf_head(c->in),
		.target = &c->req->ex.target,
		.client = &c->peer.sa,
		.auth = auth,
		.now = clock_now(c->env->clock),
		.waiter = &c->req->auth,
	};

	*verdict = policy_check(c->env->cfg, &pr);
}

/* Refuses the request, or answers it here, or hands it to the exchange. */
static void
admit_judged(struct client *c, const struct policy_verdict *verdict)
{
	struct exchange *ex = &c->req->ex;
	const struct http_head *h = &c->req->head;
	const char *why = NULL;
	int status;

	if (verdict->status) {
		client_refuse(c, verdict->status, verdict->why,
		              h->method != HTTP_CONNECT && !verdict->close);
		return;
	}
	if (h->method == HTTP_CONNECT && client_intercept_wanted(c)) {
		client_intercept_start(c);
		return;
	}
	if (http_max_forwards(h, buf_head(c->in)) == 0) {
		answer_as_final_recipient(c);
		return;
	}
	/* Forwarding first: an answer may come before exchange_forward() returns. */
	client_set_state(c, CLIENT_FORWARDING);
	status = exchange_forward(ex, h, NULL, &why);
	if (status)
		client_refuse(c, status, why, false);
	else if (c->state == CLIENT_FORWARDING && exchange_waiting(ex))
		sync_watchers(c);
}

/* Checks a parsed request and hands it to the exchange, or refuses it. */
static void
admit_request(struct client *c)
{
	struct exchange *ex = &c->req->ex;
	const struct http_head *h = &c->req->head;
	const char *base = buf_head(c->in);
	struct policy_verdict verdict;
	int status = 0;

	kp_stats.requests++;
	exchange_open(ex, h, base, c->intercepted ? c->intercepted->url_prefix : NULL);
	log_debug("client fd %d: %s %.*s HTTP/%u.%u", c->conn.fd,
	          llhttp_method_name((llhttp_method_t)h->method), (int)h->url.len,
	          base + h->url.off, h->major, h->minor);
	if (h->major != 1) {
		client_refuse(c, 505, "only HTTP/1.x is spoken here", false);
		return;
	}
	if (c->intercepted) {
		/* Inside an intercepted CONNECT: the origin is the one the tunnel was asked for. */
		if (!client_intercept_admit(c))
			return;
	} else if (c->req->head.method == HTTP_CONNECT) {
		/* What follows the head belongs to the tunnel: never keep-alive here. */
		if (http_parse_authority(base + h->url.off, h->url.len, &ex->target)) {
			client_refuse(c, 400, "CONNECT needs host:port", false);
			return;
		}
	} else {
		status = http_parse_target(base + h->url.off, h->url.len, &ex->target);
	}
	if (status) {
		client_refuse(c, status,
		       status == 501 ? "only http:// URLs are proxied"
		                     : "the request-target must be an absolute http:// URL",
		       true);
		return;
	}
	judge(c, &verdict, c->intercepted ? NULL : c->env->auth);
	if (verdict.pending) {
		client_set_state(c, CLIENT_AUTHENTICATING);
		sync_watchers(c);
		return;
	}
	admit_judged(c, &verdict);
}

/* The hash check is over: refused, or the rest of the policy still to pass. */
static void
authenticated(struct auth_waiter *w, bool granted)
{
	struct client *c = container_of(w, struct client_request, auth)->client;
	struct policy_verdict verdict;

	if (!granted) {
		client_refuse(c, 407, "wrong proxy credentials",
		              c->req->head.method != HTTP_CONNECT);
		return;
	}
	judge(c, &verdict, NULL);
	admit_judged(c, &verdict);
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
			if (c->conn.eof) {
				client_close(c);
				break;
			}
			/* An idle client holds no buffer and no request state. */
			buf_put(c->in);
			c->in = NULL;
			give_back_request(c);
			sync_watchers(c);
			break;
		}
		if (!c->req && !take_request(c)) {
			abort_client(c, "out of memory");
			break;
		}
		switch (http_parse_head(&c->req->parser, buf_head(c->in), buf_len(c->in))) {
		case HTTP_PARSE_MORE:
			if (c->conn.eof) {
				client_close(c);
			} else {
				head_begins(c);
				sync_watchers(c);
			}
			c->processing_input = false;
			return;
		case HTTP_PARSE_ERROR:
			client_reply_local(c, head_error_status(&c->req->parser),
			            http_parser_error_text(&c->req->parser), false);
			break;
		case HTTP_PARSE_DONE:
			c->head_started = 0;
			admit_request(c);
			break;
		}
	}
	c->processing_input = false;
}

/* ---- watchers ------------------------------------------------------------- */

static enum move_status
client_fill(struct client *c)
{
	enum move_status r;
	size_t got = 0;

	if (c->conn.eof)
		return MOVE_EOF;
	if (!c->in && !(c->in = buf_get()))
		return MOVE_ERROR;
	r = conn_fill(&c->conn, c->in, &got);
	if (r == MOVE_OK)
		touch(c);
	return r;
}

static void
client_readable(struct client *c)
{
	if (c->state == CLIENT_LINGERING) {
		linger_drain(c);
		return;
	}
	if (c->state == CLIENT_TUNNEL) {
		exchange_run(&c->req->ex);
		return;
	}
	if (c->state == CLIENT_INTERCEPTING) {
		/* The ClientHello waits in the socket until the 200 is out and TLS is on. */
		if (!c->out)
			client_intercept_handshake(c);
		return;
	}
	if (client_fill(c) == MOVE_ERROR) {
		abort_client(c, strerror(errno));
		return;
	}
	switch (c->state) {
	case CLIENT_READING_HEAD:
		process_input(c);
		break;
	case CLIENT_FORWARDING:
		exchange_run(&c->req->ex);
		break;
	case CLIENT_AUTHENTICATING:
	case CLIENT_SENDING_LOCAL:
	case CLIENT_TUNNEL:
	case CLIENT_INTERCEPTING:
	case CLIENT_LINGERING:
	case CLIENT_CLOSED:
		break;
	}
}

static void
client_writable(struct client *c)
{
	if (c->state == CLIENT_FORWARDING || c->state == CLIENT_TUNNEL)
		exchange_run(&c->req->ex);
	else if (c->state == CLIENT_SENDING_LOCAL)
		flush_local(c);
	else if (c->state == CLIENT_INTERCEPTING && c->out)
		client_intercept_flush(c);
	else if (c->state == CLIENT_INTERCEPTING)
		client_intercept_handshake(c);
	else
		sync_watchers(c);
}

static void
client_io(struct conn *conn, int revents)
{
	struct client *c = container_of(conn, struct client, conn);

	if (revents & EV_READ)
		client_readable(c);
	else
		client_writable(c);
}

/*
 * Bytes moving only note the time (touch), so the timer may fire before
 * the deadline it was set for has moved on: it is then set again for what
 * is left (libev's manual, "Be smart about timeouts").
 */
static void
timer_fired(struct clock_timer *t)
{
	struct client *c = container_of(t, struct client, timer);
	double left = clock_deadline_left(deadline(c), clock_now(c->env->clock));

	if (left > 0) {
		clock_timer_start(t, left);
		return;
	}
	switch (c->state) {
	case CLIENT_READING_HEAD:
		c->head_started = 0;
		if (c->req && c->in && buf_len(c->in))
			client_reply_local(c, 408, "request head not received in time", false);
		else
			client_close(c);
		break;
	case CLIENT_AUTHENTICATING:
		auth_cancel(&c->req->auth);
		client_refuse(c, 503, "proxy credentials not checked in time", false);
		break;
	case CLIENT_FORWARDING:
	case CLIENT_TUNNEL:
		break;   /* the exchange keeps these deadlines */
	case CLIENT_INTERCEPTING:
	case CLIENT_SENDING_LOCAL:
	case CLIENT_LINGERING:
	case CLIENT_CLOSED:
		client_close(c);
		break;
	}
}

struct client *
client_new(const struct proxy_env *env, struct client_list *list, int fd,
           const union net_addr *peer)
{
	struct client *c = slab_get(&list->slab);

	if (!c) {
		close(fd);
		return NULL;
	}
	c->env = env;
	c->list = list;
	c->peer = *peer;
	conn_init(&c->conn, env->loop, fd, &conn_tcp_ops, client_io);
	clock_timer_init(&c->timer, env->clock, timer_fired);
	/* Once per client: its requests never share connections with local ones. */
	c->restricted = !cidr_is_loopback(&c->peer.sa);
	kp_list_insert_head(&list->live, &c->link);
	list->count++;
	kp_stats.clients_accepted++;
	kp_stats.clients_active++;
	c->state = CLIENT_READING_HEAD;
	rearm(c);
	sync_watchers(c);
	return c;
}
