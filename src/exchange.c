/*
 * An exchange's life and its request side: the deadlines of every wait,
 * opening a request and forwarding it, dispatch's answers, the request body
 * on its way, the switch to a tunnel, and the replay of a request whose
 * source was lost. What comes back (heads, framing, the pump towards the
 * asker, the end) is exchange_response.c's.
 */
#include "kp/exchange.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kp/access_log.h"
#include "kp/config.h"
#include "kp/evglue.h"
#include "kp/hoststats.h"
#include "kp/log.h"
#include "kp/parent.h"
#include "kp/plan.h"
#include "kp/retry.h"
#include "kp/stats.h"

#include "exchange_priv.h"

/* Every dispatch key fits a per-host counter's slot. */
_Static_assert(sizeof(((struct exchange *)0)->priv.key_buf) <= HOSTSTATS_KEY,
               "a dispatch key longer than hoststats keeps");

static void ready(struct dispatch_waiter *w, struct source *src);
static int frame_request(struct exchange *ex);
static void failed(struct dispatch_waiter *w, int status, const char *why);
static void source_event(struct source_reader *r, int revents);
static void timer_fired(struct clock_timer *t);

/* ---- deadlines ------------------------------------------------------------ */

/* A day: a pipelined request's own deadline is only a backstop. */
#define PIPELINED_WAIT (24.0 * 3600)

/* How long the exchange may make no progress in what it waits for now. */
static double
wait_timeout(const struct exchange *ex)
{
	const struct kp_config *cfg = ex->priv.env->cfg;
	double limit;

	if (ex->priv.mode == MODE_TUNNEL)
		return cfg->tunnel_timeout;
	/*
	 * Pipelined: its answer comes after the one in progress, however long
	 * that takes; the exchange in progress keeps the time, and when it
	 * fails, so does this one.
	 */
	if (!ex->priv.src && dispatch_piped(&ex->priv.waiter))
		return PIPELINED_WAIT;
	/* No source yet: waiting for a connection (the wait starts before dispatch hears of it). */
	if (!ex->priv.src)
		return cfg->queue_timeout < cfg->response_timeout ? cfg->queue_timeout
		                                                  : cfg->response_timeout;
	limit = exchange_awaits_response(ex) ? cfg->response_timeout : cfg->io_timeout;
	if (ex->owner.stall_timeout > 0 && ex->owner.stall_timeout < limit)
		limit = ex->owner.stall_timeout;
	return limit;
}

/* Another kind of wait began: its own timeout, from now. */
void
rearm(struct exchange *ex)
{
	progress(ex);
	clock_timer_start(&ex->priv.timer, wait_timeout(ex));
}

/* Which answer a wait that ran out gets, and what it is counted as. */
static void
timed_out(struct exchange *ex)
{
	char why[96];

	if (ex->priv.mode == MODE_TUNNEL) {
		kp_stats.errors[KP_ERR_TIMEOUT]++;
		ex->priv.ops->abort(ex, "tunnel idle past --tunnel-timeout");
	} else if (dispatch_queued_for_others(&ex->priv.waiter)) {
		/* The counters count clients' waits; the owner of a background one hears the 503. */
		if (ex->priv.how == DISPATCH_ANY) {
			kp_stats.queue_timeouts++;
			kp_stats.errors[KP_ERR_QUEUE_TIMEOUT]++;
		}
		snprintf(why, sizeof(why), "no connection to the origin became free within %g s",
		         ex->priv.env->cfg->queue_timeout);
		ex->priv.ops->reply(ex, 503, why, false);
	} else if (exchange_waiting(ex)) {
		ex->priv.ops->reply(ex, 504, "the origin could not be reached in time", false);
	} else if (ex->priv.resp == RESP_HEAD && ex->priv.resp_received == 0) {
		ex->priv.ops->reply(ex, 504, "the origin did not answer in time", false);
	} else {
		kp_stats.errors[KP_ERR_TIMEOUT]++;
		ex->priv.ops->abort(ex, "no progress before the I/O timeout");
	}
}

static void
timer_fired(struct clock_timer *t)
{
	struct exchange *ex = container_of(t, struct exchange, priv.timer);
	double left = clock_deadline_left(ex->priv.last_activity + wait_timeout(ex),
	                                  clock_now(ex->priv.env->clock));

	if (left > 0) {
		clock_timer_start(t, left);
		return;
	}
	timed_out(ex);
}

/* ---- life ----------------------------------------------------------------- */

void
exchange_init(struct exchange *ex, const struct proxy_env *env, struct conn *down,
              struct buf **in, struct buf **out, const struct exchange_ops *ops, bool to_memory)
{
	memset(ex, 0, sizeof(*ex));
	ex->priv.env = env;
	ex->priv.down = down;
	ex->priv.down_in = in;
	ex->priv.down_out = out;
	ex->priv.ops = ops;
	ex->priv.to_memory = to_memory;
	clock_timer_init(&ex->priv.timer, env->clock, timer_fired);
	ex->priv.reader.event = source_event;
	http_parser_init(&ex->priv.resp_parser, HTTP_RESPONSE, env->cfg->max_header_bytes,
	                 env->cfg->max_header_bytes);
	exchange_reset(ex);
}

/* The response the hook watched ended, whole or not. */
void
end_hook(struct exchange *ex, bool complete)
{
	void *state = ex->priv.hook_state;
	struct exchange_view v;

	if (!state)
		return;
	ex->priv.hook_state = NULL;
	v = view_of(ex);
	ex->priv.env->hooks->ended(state, &v, complete);
}

/* The head as it goes on the wire. */
static struct buf *
wire_head(const struct exchange *ex)
{
	return ex->priv.wire_head ? ex->priv.wire_head : ex->priv.req_head;
}

static void
drop_heads(struct exchange *ex)
{
	buf_put(ex->priv.req_head);
	ex->priv.req_head = NULL;
	buf_put(ex->priv.wire_head);
	ex->priv.wire_head = NULL;
}

void
exchange_release(struct exchange *ex)
{
	end_hook(ex, false);
	clock_timer_stop(&ex->priv.timer);
	if (ex->priv.mode == MODE_TUNNEL) {
		kp_stats.tunnels_open--;
		ex->priv.mode = MODE_RELAY;
	}
	dispatch_cancel(&ex->priv.waiter);
	if (ex->priv.src) {
		ex->priv.src->ops->close(ex->priv.src);
		ex->priv.src = NULL;
	}
	drop_heads(ex);
	mover_release(&ex->priv.resp_mover);
	tunnel_release(&ex->priv.tunnel);
}

void
exchange_reset(struct exchange *ex)
{
	size_t keep = offsetof(struct exchange_private, waiter);
	bool no_splice = ex->priv.env->cfg->no_splice;

	exchange_release(ex);
	memset((char *)&ex->priv + keep, 0, sizeof(ex->priv) - keep);
	memset(&ex->target, 0, sizeof(ex->target));
	ex->priv.waiter.ready = ready;
	ex->priv.waiter.failed = failed;
	mover_init(&ex->priv.resp_mover, no_splice);
	tunnel_init(&ex->priv.tunnel, no_splice);
	ex->priv.copy_body = no_splice;
	framer_init(&ex->priv.req_body, BODY_NONE, 0);
	framer_init(&ex->priv.resp_body, BODY_NONE, 0);
}

void
exchange_rebind(struct exchange *ex, struct conn *down, struct buf **in, struct buf **out)
{
	ex->priv.down = down;
	ex->priv.down_in = in;
	ex->priv.down_out = out;
}

void
exchange_open(struct exchange *ex, const struct http_head *h, const char *base,
              const char *url_prefix)
{
	ex->priv.started = clock_now(ex->priv.env->clock);
	ex->priv.method = h->method;
	ex->priv.client_minor = h->minor;
	ex->priv.client_keep_alive = http_head_keeps_alive(h) && !ex->priv.down->eof;
	ex->priv.req = REQ_SENDING;
	ex->priv.resp = RESP_HEAD;
	ex->priv.mode = h->method == HTTP_CONNECT ? MODE_CONNECT : MODE_RELAY;
	framer_init(&ex->priv.req_body,
	            ex->priv.mode == MODE_CONNECT ? BODY_NONE : http_request_body_kind(h),
	            h->content_length);
	if (ex->priv.env->cfg->access_log) {
		/* The head's bytes are gone by the time the line is written. */
		int n = url_prefix ? snprintf(ex->priv.url, sizeof(ex->priv.url), "%s", url_prefix) : 0;
		size_t room, len;

		if (n < 0 || (size_t)n >= sizeof(ex->priv.url))
			n = 0;
		room = sizeof(ex->priv.url) - (size_t)n;
		len = h->url.len < room ? h->url.len : room;
		memcpy(ex->priv.url + n, base + h->url.off, len);
		ex->priv.url_len = (uint16_t)((size_t)n + len);
	}
}

/* ---- what the owner learns ----------------------------------------------- */

bool
exchange_response_begun(const struct exchange *ex)
{
	return ex->priv.resp != RESP_HEAD;
}

bool
exchange_keeps_asker(const struct exchange *ex)
{
	return ex->priv.client_keep_alive;
}

uint16_t
exchange_status(const struct exchange *ex)
{
	return ex->priv.status;
}

struct conn_path
exchange_path(const struct exchange *ex)
{
	return ex->priv.src ? conn_path_figures(&ex->priv.src->conn) : (struct conn_path){0, 0};
}

bool
exchange_answer_locally(struct exchange *ex, int status, bool keep_alive)
{
	struct plan_request asked = {
		.keep_alive = ex->priv.client_keep_alive && !ex->priv.down->eof,
		.draining = ex->priv.env->draining,
	};

	/*
	 * The rule relayed responses follow (RFC 9112 9.6): keep the connection
	 * only if the client asked to, the rest of the request is not still to
	 * come, and the proxy is not stopping; the head then says which.
	 */
	keep_alive = keep_alive && plan_keeps_asker(&asked, framer_done(&ex->priv.req_body));
	if (keep_alive && ex->priv.req_pending) {
		buf_consume(*ex->priv.down_in, ex->priv.req_pending);
		ex->priv.req_pending = 0;
	}
	ex->priv.client_keep_alive = keep_alive;
	ex->priv.status = (uint16_t)status;
	return keep_alive;
}

/* Which connection served the exchange, in the access log's words. */
static const char *
served_by(const struct exchange *ex)
{
	if (ex->priv.mode == MODE_TUNNEL || ex->priv.mode == MODE_CONNECT)
		return "tunnel";
	if (ex->priv.src && ex->priv.src->served_as)
		return ex->priv.src->served_as;
	if (ex->priv.served_as[0])
		return ex->priv.served_as;
	if (ex->priv.held)
		return "read-ahead";
	return dispatch_source_name(&ex->priv.waiter);
}

void
exchange_log(struct exchange *ex, int status, uint64_t bytes, const char *how)
{
	struct access_entry e;

	if (!ex->priv.env->cfg->access_log || ex->priv.logged || ex->priv.started == 0 ||
	    !ex->owner.peer)
		return;
	ex->priv.logged = true;
	e.client = ex->owner.peer;
	e.method = llhttp_method_name((llhttp_method_t)ex->priv.method);
	e.target = ex->priv.url;
	e.target_len = ex->priv.url_len;
	e.status = status;
	e.bytes = bytes;
	e.seconds = clock_now(ex->priv.env->clock) - ex->priv.started;
	e.upstream = how;
	e.via = ex->priv.parent ? ex->priv.parent->label : NULL;
	access_log_write(&e);
}

void
exchange_log_relayed(struct exchange *ex)
{
	bool tunnel = ex->priv.mode == MODE_TUNNEL;

	exchange_log(ex, tunnel || ex->priv.resp != RESP_HEAD ? ex->priv.status : 0,
	             tunnel ? ex->priv.tunnel.to_client.bytes : ex->priv.resp_sent, served_by(ex));
}

/* Where dispatch should find a connection for this exchange. */
static struct dispatch_target
dispatch_target_of(const struct exchange *ex)
{
	struct dispatch_target t = {
		.host = ex->target.host,
		.port = ex->target.port,
		.key = ex->priv.key,
		.tls = ex->owner.https,
		.restricted = ex->owner.restricted,
		.parent = ex->priv.parent,
		.forward = ex->priv.forward,
	};

	return t;
}

/*
 * Through an HTTP parent the request line names the origin (absolute
 * form, RFC 9112 3.2.2; "OPTIONS *" as the bare authority, 3.2.4), and
 * the parent's own credentials go with it: the client's never do, since
 * the head was written without any Proxy-Authorization. -1: no room.
 */
static int
write_forward_head(struct exchange *ex)
{
	const struct buf *req = ex->priv.req_head;
	const char *head = buf_head((struct buf *)req), *end = head + buf_len((struct buf *)req);
	const char *target = memchr(head, ' ', buf_len((struct buf *)req));
	const char *version = target ? memchr(target + 1, ' ', (size_t)(end - target - 1)) : NULL;
	const char *auth = ex->priv.parent->authorization;
	struct buf *out;
	bool asterisk;
	int n;

	/* The head ends in an empty line: the credentials go just before it. */
	if (!version || end - head < 4 || memcmp(end - 4, "\r\n\r\n", 4) != 0)
		return -1;
	target++;
	asterisk = version - target == 1 && *target == '*';
	if (!(out = buf_get()))
		return -1;
	n = snprintf(buf_tail(out), buf_room(out), "%.*shttp://%s%.*s%.*s%s\r\n",
	             (int)(target - head), head, ex->target.authority,
	             asterisk ? 0 : (int)(version - target), target,
	             (int)(end - 2 - version), version, auth);
	if (n < 0 || (size_t)n >= buf_room(out)) {
		buf_put(out);
		return -1;
	}
	out->end = (size_t)n;
	ex->priv.wire_head = out;
	return 0;
}

/*
 * The dispatch key of the request in hand (dispatch_key_compose). An
 * intercepted client's key is the same for all its requests, and its owner
 * made it once; a plain local request's is its host:port as it stands.
 */
static void
choose_key(struct exchange *ex)
{
	ex->priv.parent = parents_route(ex->priv.env->parents, ex->target.host);
	ex->priv.forward = parent_forwards(ex->priv.parent) && !ex->owner.https &&
	                   ex->priv.mode != MODE_CONNECT;
	if (ex->owner.fixed_key)
		ex->priv.key = ex->owner.fixed_key;
	else if (!ex->owner.restricted && !ex->owner.https && !ex->priv.parent)
		ex->priv.key = ex->target.key;
	else
		ex->priv.key = dispatch_key_compose(ex->priv.key_buf, ex->target.key,
		                                    ex->owner.https, ex->owner.restricted,
		                                    ex->priv.parent, ex->priv.forward);
}

void
exchange_promote(struct exchange *ex)
{
	struct dispatch_target t;

	if (ex->priv.how == DISPATCH_ANY)
		return;
	ex->priv.how = DISPATCH_ANY;
	/* Pipelined: its answer is next but for those ahead; it stays. */
	if (dispatch_piped(&ex->priv.waiter)) {
		dispatch_piped_promote(&ex->priv.waiter);
		return;
	}
	/* On a connection: it is as fast as it will get. */
	if (!dispatch_waiting(&ex->priv.waiter))
		return;
	dispatch_cancel(&ex->priv.waiter);
	t = dispatch_target_of(ex);
	dispatch_request(ex->priv.env->dispatch, &ex->priv.waiter, &t, DISPATCH_ANY);
}

/* A request head goes to src, or to whichever connection dispatch finds. */
static void
dispatch_or_serve(struct exchange *ex, struct source *src, enum dispatch_how how)
{
	struct dispatch_target t = dispatch_target_of(ex);

	/* Before asking: the answer may come before dispatch_request() returns. */
	rearm(ex);
	if (src)
		ready(&ex->priv.waiter, src);
	else
		dispatch_request(ex->priv.env->dispatch, &ex->priv.waiter, &t, how);
}

int
exchange_forward(struct exchange *ex, const struct http_head *h, struct source *src,
                 const char **why)
{
	struct buf *in = *ex->priv.down_in;
	ssize_t n;

	choose_key(ex);
	if (ex->priv.mode == MODE_CONNECT) {
		/* A tunnel is raw TCP to host:port: a pooled HTTP connection will not do. */
		buf_consume(in, h->head_len);
		dispatch_or_serve(ex, NULL, DISPATCH_TUNNEL);
		return 0;
	}
	if (http_wants_upgrade(h))
		ex->priv.mode = MODE_UPGRADE;
	if (!(ex->priv.req_head = buf_get())) {
		*why = "out of memory";
		return 503;
	}
	n = http_write_request_head(buf_tail(ex->priv.req_head), buf_room(ex->priv.req_head), h,
	                            buf_head(in), &ex->target, ex->priv.mode == MODE_UPGRADE);
	if (n < 0) {
		*why = "request head too large to forward";
		return 431;
	}
	ex->priv.req_head->end = (size_t)n;
	if (ex->priv.forward && write_forward_head(ex) < 0) {
		*why = "request head too large to forward";
		return 431;
	}
	/* A response held for exactly this request is served from there. */
	if (!src && hooks_of(ex) && hooks_of(ex)->serve) {
		struct exchange_view v = view_of(ex);

		src = hooks_of(ex)->serve(hooks_of(ex)->ctx, &v, h, buf_head(in));
	}
	buf_consume(in, h->head_len);
	/* Body framing already here is checked before any origin hears of the request. */
	if (frame_request(ex) < 0)
		return 0;
	dispatch_or_serve(ex, src, DISPATCH_ANY);
	return 0;
}

int
exchange_start(struct exchange *ex, const struct http_target *target, const char *head,
               size_t len, enum dispatch_how how)
{
	ex->priv.started = clock_now(ex->priv.env->clock);
	ex->priv.method = HTTP_GET;
	ex->priv.client_minor = 1;
	ex->priv.req = REQ_SENDING;
	ex->priv.resp = RESP_HEAD;
	ex->target = *target;
	ex->priv.how = how;
	if (len > buf_capacity() || !(ex->priv.req_head = buf_get()))
		return -1;
	memcpy(buf_tail(ex->priv.req_head), head, len);
	ex->priv.req_head->end = len;
	choose_key(ex);
	if (ex->priv.forward && write_forward_head(ex) < 0)
		return -1;
	/* Sent as it is (no body follows): dispatch may write it on a busy connection. */
	ex->priv.waiter.request = how == DISPATCH_AHEAD ? buf_head(wire_head(ex)) : NULL;
	ex->priv.waiter.request_len = how == DISPATCH_AHEAD ? buf_len(wire_head(ex)) : 0;
	dispatch_or_serve(ex, NULL, how);
	return 0;
}

/* ---- watchers ------------------------------------------------------------- */

/*
 * Which readiness to wait for follows from the state and the buffers alone,
 * so every event handler ends here instead of toggling watchers ad hoc.
 * A full buffer stops reading its source: that is the back-pressure.
 */
void
exchange_watch(struct exchange *ex, bool *down_read, bool *down_write)
{
	struct buf *out = *ex->priv.down_out;
	struct source *src = ex->priv.src;

	if (!src) {
		*down_read = has_room(*ex->priv.down_in);
		*down_write = false;
		return;
	}
	if (ex->priv.mode == MODE_TUNNEL) {
		struct tunnel_interest w = tunnel_wants(&ex->priv.tunnel);

		*down_read = w.client_read;
		*down_write = w.client_write;
		conn_watch(&src->conn, w.origin_read, w.origin_write);
		return;
	}
	*down_read = has_room(*ex->priv.down_in);
	*down_write = (out && buf_len(out)) || ex->priv.resp_pending || mover_held(&ex->priv.resp_mover);
	conn_watch(&src->conn, response_can_pull(ex),
	           ex->priv.req == REQ_SENDING && !src->conn.write_failed &&
	                   (ex->priv.req_head_sent < buf_len(wire_head(ex)) || ex->priv.req_pending));
}

/* ---- tunnels -------------------------------------------------------------- */

static void
tunnel_run(struct exchange *ex)
{
	uint64_t moved;

	switch (tunnel_pump(&ex->priv.tunnel, ex->priv.down, &ex->priv.src->conn, &moved)) {
	case TUNNEL_FAILED:
		ex->priv.ops->abort(ex, "tunnel closed by an error");
		return;
	case TUNNEL_FINISHED:
		log_debug("client fd %d: tunnel to %s done, %" PRIu64 " bytes up, %" PRIu64
		          " bytes down", ex->priv.down->fd, ex->target.key, ex->priv.tunnel.to_origin.bytes,
		          ex->priv.tunnel.to_client.bytes);
		ex->priv.ops->abort(ex, NULL);
		return;
	case TUNNEL_OPEN:
		break;
	}
	if (moved)
		progress(ex);
	ex->priv.ops->wait(ex);
}

/*
 * From here on bytes pass untouched both ways. Whatever either side sent
 * before the switch (the 200 or 101 head, early data read along with a head)
 * goes out first. Two plain sockets are spliced; a TLS end (an upgrade inside
 * an intercepted connection) is copied through its own operations.
 */
void
begin_tunnel(struct exchange *ex)
{
	struct source *src = ex->priv.src;
	struct tunnel *t = &ex->priv.tunnel;
	bool fits;

	kp_stats.tunnels++;
	kp_stats.tunnels_open++;
	drop_heads(ex);
	mover_release(&ex->priv.resp_mover);
	tunnel_init(t, ex->priv.env->cfg->no_splice || !conn_pair_splices(&src->conn, ex->priv.down));
	fits = mover_preload(&t->to_client.mover, *ex->priv.down_out);
	fits = mover_preload(&t->to_client.mover, src->in) && fits;
	fits = mover_preload(&t->to_origin.mover, *ex->priv.down_in) && fits;
	*ex->priv.down_out = *ex->priv.down_in = src->in = NULL;
	/* Counted open from here: exchange_release() counts the close. */
	ex->priv.mode = MODE_TUNNEL;
	if (!fits) {
		ex->priv.ops->abort(ex, "too many bytes before the protocol switch");
		return;
	}
	if (ex->priv.down->eof)
		t->to_origin.state = TUNNEL_DRAINING;
	if (src->conn.eof)
		t->to_client.state = TUNNEL_DRAINING;
	/* A tunnel is never pooled: it stops counting against the host's cap. */
	src->ops->detach(src);
	log_debug("client fd %d: tunnel to %s open", ex->priv.down->fd, ex->target.key);
	rearm(ex);
	ex->priv.ops->tunnel_opened(ex);
	tunnel_run(ex);
}

/* ---- answers from dispatch ------------------------------------------------ */

static void
ready(struct dispatch_waiter *w, struct source *src)
{
	struct exchange *ex = container_of(w, struct exchange, priv.waiter);

	ex->priv.src = src;
	src->reader = &ex->priv.reader;
	/* Each source's answer is parsed from its start: a retry's, or a pipelined one's. */
	http_parser_start(&ex->priv.resp_parser, &ex->priv.resp_head);
	ex->priv.held = src->held;
	ex->priv.resp_received = 0;
	/* Dispatch wrote the request behind another's: only its answer is left. */
	if (w->source == DISPATCH_FROM_PIPELINE) {
		ex->priv.req_head_sent = buf_len(wire_head(ex));
		ex->priv.req = REQ_DONE;
	}
	/* Splice needs both ends to be plain sockets. */
	if (!conn_pair_splices(&src->conn, ex->priv.down))
		ex->priv.copy_body = true;
	if (ex->priv.mode == MODE_CONNECT) {
		static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
		struct buf **out = ex->priv.down_out;

		ex->priv.status = 200;
		if (!*out && !(*out = buf_get())) {
			ex->priv.ops->abort(ex, "out of memory");
			return;
		}
		memcpy(buf_tail(*out), established, sizeof(established) - 1);
		(*out)->end += sizeof(established) - 1;
		begin_tunnel(ex);
		return;
	}
	rearm(ex);
	exchange_run(ex);
}

static void
failed(struct dispatch_waiter *w, int status, const char *why)
{
	struct exchange *ex = container_of(w, struct exchange, priv.waiter);

	ex->priv.ops->reply(ex, status, why, true);
}

static void
source_event(struct source_reader *r, int revents)
{
	struct exchange *ex = container_of(r, struct exchange, priv.reader);

	(void)revents;
	if (ex->priv.mode == MODE_TUNNEL)
		tunnel_run(ex);
	else
		exchange_run(ex);
}

/* ---- requests ------------------------------------------------------------- */

/* The request goes out again, from its first byte, on whatever how finds. */
static void
redispatch(struct exchange *ex, enum dispatch_how how)
{
	struct source *dead = ex->priv.src;
	struct dispatch_target t;

	ex->priv.src = NULL;
	ex->priv.req = REQ_SENDING;
	ex->priv.req_head_sent = 0;
	rearm(ex);
	/* The new connect takes the dead one's place under the host's cap before it goes. */
	t = dispatch_target_of(ex);
	dispatch_request(ex->priv.env->dispatch, &ex->priv.waiter, &t, how);
	dead->ops->close(dead);
}

/*
 * A source that ended before answering. A held response goes to the
 * origin instead, as if it had never been held; a pooled connection that
 * died is replayed on a fresh one when that is safe; else 502.
 */
void
source_lost(struct exchange *ex, const char *why)
{
	struct source *dead = ex->priv.src;
	struct retry_facts facts = {
		.reused_connection = dead->reused,
		.response_started = ex->priv.resp_received > 0,
		.idempotent = http_method_is_idempotent(ex->priv.method),
		.request_complete = ex->priv.req == REQ_DONE,
		.body_bytes_sent = ex->priv.req_body_sent,
		.retries = ex->priv.retries,
	};

	if (dead->held && !facts.response_started) {
		log_debug("client fd %d: %s: the response held in memory cannot be served; asking "
		          "the origin",
		          ex->priv.down->fd, ex->target.key);
		redispatch(ex, ex->priv.how);
		return;
	}
	if (!retry_allowed(&facts)) {
		kp_stats.errors[KP_ERR_RESET]++;
		ex->priv.ops->reply(ex, 502, why, true);
		return;
	}
	log_debug("client fd %d: %s: pooled connection %s, retrying on a new one", ex->priv.down->fd,
	          ex->target.key, why);
	kp_stats.upstream_retries++;
	ex->priv.retries++;
	/* A background request never takes a fresh connection: it asks as it did the first time. */
	redispatch(ex, ex->priv.how == DISPATCH_ANY ? DISPATCH_FRESH : ex->priv.how);
}

/* Frames what the client has sent so far into req_pending. -1: the exchange ended. */
static int
frame_request(struct exchange *ex)
{
	struct buf *in = *ex->priv.down_in;
	size_t avail = in ? buf_len(in) : 0;
	enum span_kind kind;
	ssize_t n;

	while (ex->priv.req_pending < avail && !framer_done(&ex->priv.req_body)) {
		n = framer_next(&ex->priv.req_body, buf_head(in) + ex->priv.req_pending,
		                avail - ex->priv.req_pending, &kind);
		if (n < 0) {
			ex->priv.ops->reply(ex, 400, "malformed chunked request body", false);
			return -1;
		}
		if (n == 0)
			break;
		ex->priv.req_pending += (size_t)n;
	}
	return 0;
}

/* Moves request bytes from the client to the upstream. -1: the exchange ended. */
static int
pump_request(struct exchange *ex)
{
	struct conn *upc = &ex->priv.src->conn;
	ssize_t n;

	while (ex->priv.req == REQ_SENDING && !upc->write_failed) {
		struct buf *head = wire_head(ex);
		size_t head_left = buf_len(head) - ex->priv.req_head_sent;
		struct buf *in;

		if (!ex->priv.req_pending && frame_request(ex) < 0)
			return -1;
		in = *ex->priv.down_in;
		if (head_left || ex->priv.req_pending) {
			n = conn_send_two(upc, buf_head(head) + ex->priv.req_head_sent, head_left,
			                  ex->priv.req_pending ? buf_head(in) : NULL, ex->priv.req_pending);
			if (n < 0) {
				/* The origin may have answered and closed; the response side decides. */
				log_debug("client fd %d: %s: sending request: %s", ex->priv.down->fd,
				          ex->target.key, strerror(errno));
				upc->write_failed = true;
				return 0;
			}
			if (n == 0)
				return 0;
			kp_stats.bytes_to_upstreams += (uint64_t)n;
			progress(ex);
			if ((size_t)n <= head_left) {
				ex->priv.req_head_sent += (size_t)n;
				continue;
			}
			ex->priv.req_head_sent += head_left;
			n -= (ssize_t)head_left;
			buf_consume(in, (size_t)n);
			ex->priv.req_pending -= (size_t)n;
			ex->priv.req_body_sent += (uint64_t)n;
			continue;
		}
		if (framer_done(&ex->priv.req_body)) {
			ex->priv.req = REQ_DONE;
			rearm(ex);
			/* What follows an upgrade may not be HTTP: nothing is pipelined behind it. */
			if (ex->priv.src->ops->sent && ex->priv.mode != MODE_UPGRADE)
				ex->priv.src->ops->sent(ex->priv.src);
			break;
		}
		if (ex->priv.down->eof) {
			ex->priv.ops->abort(ex, "client closed before its request body ended");
			return -1;
		}
		return 0;   /* wait for more from the client */
	}
	return 0;
}

/* ---- running -------------------------------------------------------------- */

/* The request goes out as far as it can, then the response comes back as far as it can. */
void
exchange_run(struct exchange *ex)
{
	if (!ex->priv.src) {
		ex->priv.ops->wait(ex);   /* still waiting for a connection */
		return;
	}
	if (ex->priv.mode == MODE_TUNNEL) {
		tunnel_run(ex);
		return;
	}
	if (pump_request(ex) < 0 || pump_response(ex) < 0)
		return;
	if (ex->priv.resp == RESP_DONE) {
		finish(ex);
		return;
	}
	ex->priv.ops->wait(ex);
}
