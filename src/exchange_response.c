/*
 * The response side of an exchange: the head (parsed, planned, written for
 * the asker, shown to the hooks), the body's framing, the pump that moves
 * bytes from the source to the asker by splice or copy under back-pressure,
 * and the end (counted, the source given back). Its request side and its
 * life are exchange.c's; exchange_priv.h is what the two share.
 */
#include "kp/exchange.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kp/hoststats.h"
#include "kp/log.h"
#include "kp/parent.h"
#include "kp/plan.h"
#include "kp/stats.h"

#include "exchange_priv.h"

/* Bytes one response may read per call before yielding to other connections. */
#define RESPONSE_BUDGET (1u << 20)

/* ---- where the next bytes go ---------------------------------------------- */

/*
 * Response payload goes past user space when nothing read into the buffer is
 * still waiting (relayd's rule: splice only from a clean state) and the
 * framer says payload comes next; the splice is bounded by what is left.
 */
static bool
response_splices(const struct exchange *ex)
{
	return !ex->priv.copy_body && ex->priv.resp == RESP_BODY && ex->priv.resp_pending == 0 &&
	       (!ex->priv.src->in || buf_len(ex->priv.src->in) == 0) &&
	       (ex->priv.resp_body.left > 0 || ex->priv.resp_body.left == FRAME_UNTIL_CLOSE);
}

/* Is there somewhere to put more response bytes from the source? */
bool
response_can_pull(const struct exchange *ex)
{
	if (ex->priv.resp == RESP_DONE || ex->priv.src->conn.eof)
		return false;
	if (response_splices(ex))
		return mover_has_room(&ex->priv.resp_mover);
	return has_room(ex->priv.src->in);
}

/* ---- heads ---------------------------------------------------------------- */

/* Writes the response head for the asker into *down_out; -1 if it does not fit. */
static int
write_head_out(struct exchange *ex, const struct response_plan *plan)
{
	struct buf *out = *ex->priv.down_out;
	ssize_t n = http_write_response_head(buf_tail(out), buf_room(out), &ex->priv.resp_head,
	                                     buf_head(ex->priv.src->in), plan);

	if (n < 0)
		return -1;
	out->end += (size_t)n;
	return 0;
}

/* What the plan needs of the request, now that a response head is here. */
static struct plan_request
request_facts(const struct exchange *ex)
{
	struct plan_request r = {
		.method = ex->priv.method,
		.minor = ex->priv.client_minor,
		.keep_alive = ex->priv.client_keep_alive && !ex->priv.down->eof,
		.upgrade = ex->priv.mode == MODE_UPGRADE,
		.request_sent = ex->priv.req == REQ_DONE,
		.canonical = ex->priv.to_memory,
		.draining = ex->priv.env->draining,
	};

	return r;
}

/* Takes the parsed head out of the buffer; an interim one makes room for the next. */
static void
consume_head(struct exchange *ex, bool another_follows)
{
	buf_consume(ex->priv.src->in, ex->priv.resp_head.head_len);
	if (another_follows)
		http_parser_start(&ex->priv.resp_parser, &ex->priv.resp_head);
}

/* Feeds what came of the head to the parser: 1 whole, 0 more to come, -1 answered 502. */
static int
head_parsed(struct exchange *ex)
{
	struct buf *in = ex->priv.src->in;

	switch (http_parse_head(&ex->priv.resp_parser, buf_head(in), buf_len(in))) {
	case HTTP_PARSE_MORE:
		return 0;
	case HTTP_PARSE_ERROR:
		kp_stats.errors[KP_ERR_BAD_RESPONSE]++;
		log_info("upstream %s: bad response head: %s", ex->target.key,
		         http_parser_error_text(&ex->priv.resp_parser));
		ex->priv.ops->reply(ex, 502,
		               ex->priv.resp_parser.error == HTTP_HEAD_TOO_LARGE
		                       ? "response head too large"
		                       : "malformed response from the origin",
		               false);
		return -1;
	case HTTP_PARSE_DONE:
		break;
	}
	return 1;
}

/* A 101 the client asked for: its head goes out ahead of the tunnel's bytes. -1 always. */
static int
switch_protocols(struct exchange *ex, const struct response_plan *write)
{
	if (write_head_out(ex, write) < 0) {
		ex->priv.ops->reply(ex, 502, "101 response head too large", false);
		return -1;
	}
	ex->priv.status = 101;
	consume_head(ex, false);
	begin_tunnel(ex);
	return -1;   /* no longer an exchange */
}

/* A 1xx: passed on (or dropped, for whom it means nothing); the final head follows. */
static int
interim_head(struct exchange *ex, const struct plan *plan)
{
	if (plan->action == PLAN_INTERIM && write_head_out(ex, &plan->write) < 0) {
		ex->priv.ops->reply(ex, 502, "interim response head too large", false);
		return -1;
	}
	consume_head(ex, true);
	return 1;
}

/* The owner, then the hooks, see the final head before it leaves the buffer. */
static void
show_head(struct exchange *ex)
{
	struct source *src = ex->priv.src;

	if (ex->priv.ops->heard)
		ex->priv.ops->heard(ex);
	if (hooks_of(ex) && hooks_of(ex)->heard) {
		struct exchange_view v = view_of(ex);

		end_hook(ex, false);
		ex->priv.hook_state = hooks_of(ex)->heard(hooks_of(ex)->ctx, &v, ex->priv.req_head,
		                                          &ex->priv.resp_head, buf_head(src->in),
		                                          &src->conn);
	}
	/* Spliced bytes never pass through this process: the hook could not see them. */
	if (ex->priv.hook_state)
		ex->priv.copy_body = true;
}

/* The final head: written for the asker, shown, and its body's framing set. 1, or -1 ended. */
static int
final_head(struct exchange *ex, const struct plan *plan)
{
	struct source *src = ex->priv.src;
	const struct http_head *h = &ex->priv.resp_head;

	ex->priv.status = h->status;
	ex->priv.upstream_reusable = plan->upstream_reusable;
	src->keep_alive_hint = (double)http_keep_alive_timeout(h, buf_head(src->in));
	ex->priv.dechunk = plan->write.dechunk;
	/* Stopping: the head says so, rather than close a connection the client expects to keep. */
	ex->priv.client_keep_alive = plan->write.client_keep_alive && !ex->priv.to_memory;
	if (write_head_out(ex, &plan->write) < 0) {
		ex->priv.ops->reply(ex, 502, "response head too large to forward", false);
		return -1;
	}
	show_head(ex);
	consume_head(ex, false);
	framer_init(&ex->priv.resp_body, plan->body, h->content_length);
	ex->priv.resp = RESP_BODY;
	rearm(ex);
	return 1;
}

/*
 * A 407 from an HTTP parent asks for the proxy's credentials, not the
 * client's: passed on, it would have the client ask its user for a
 * password this proxy never wanted.
 */
static int
parent_refused_credentials(struct exchange *ex)
{
	struct parent *p = ex->priv.parent;
	char why[400];

	p->counts.outcomes[PARENT_AUTH_FAILED]++;
	snprintf(why, sizeof(why), "parent %s %s", p->label,
	         p->hop.user ? "rejected the username and password"
	                     : "wants a username and password (see --parent-credentials)");
	ex->priv.ops->reply(ex, 502, why, false);
	return -1;
}

/*
 * A response head, as far as it came: what to do with it is the plan's
 * (plan.h). 1: parsed and acted on, look again; 0: more to come; -1 ended.
 */
static int
response_head(struct exchange *ex)
{
	struct buf **out = ex->priv.down_out;
	struct plan_request facts;
	struct plan plan;
	int parsed = head_parsed(ex);

	if (parsed <= 0)
		return parsed;
	if (!*out && !(*out = buf_get())) {
		ex->priv.ops->abort(ex, "out of memory");
		return -1;
	}
	buf_compact(*out);
	if (ex->priv.forward && ex->priv.resp_head.status == 407)
		return parent_refused_credentials(ex);
	facts = request_facts(ex);
	plan = plan_response(&facts, &ex->priv.resp_head);
	switch (plan.action) {
	case PLAN_REFUSE:
		ex->priv.ops->reply(ex, 502, plan.why, false);
		return -1;
	case PLAN_SWITCH:
		return switch_protocols(ex, &plan.write);
	case PLAN_INTERIM:
	case PLAN_INTERIM_DROPPED:
		return interim_head(ex, &plan);
	case PLAN_FINAL:
		break;
	}
	return final_head(ex, &plan);
}

/* ---- the body ------------------------------------------------------------- */

/* Frames buffered response bytes; 1 if something can move, 0 if not, -1 ended. */
static int
frame_response(struct exchange *ex)
{
	struct buf *in = ex->priv.src->in;
	size_t avail = buf_len(in);
	enum span_kind kind;
	ssize_t n = 0;

	/* A malformed span after good ones is found again once those are sent. */
	if (ex->priv.dechunk) {
		/* Only payload goes to an HTTP/1.0 client; framing is dropped here. */
		n = framer_next(&ex->priv.resp_body, buf_head(in), avail, &kind);
		if (n > 0 && kind == SPAN_FRAMING)
			buf_consume(in, (size_t)n);
		else if (n > 0)
			ex->priv.resp_pending = (size_t)n;
	} else {
		/* Chunked framing passes through untouched: one send for many spans. */
		while (ex->priv.resp_pending < avail && !framer_done(&ex->priv.resp_body)) {
			n = framer_next(&ex->priv.resp_body, buf_head(in) + ex->priv.resp_pending,
			                avail - ex->priv.resp_pending, &kind);
			if (n <= 0)
				break;
			ex->priv.resp_pending += (size_t)n;
		}
		n = ex->priv.resp_pending || framer_done(&ex->priv.resp_body) ? 1 : n;
	}
	if (n < 0) {
		kp_stats.errors[KP_ERR_BAD_RESPONSE]++;
		ex->priv.ops->abort(ex, "malformed chunked response body");
		return -1;
	}
	return n > 0 || framer_done(&ex->priv.resp_body);
}

/* The source ended (the origin closed or reset) with nothing left to forward. */
static int
source_ended(struct exchange *ex)
{
	bool reset = ex->priv.src->conn.reset;

	if (ex->priv.resp == RESP_BODY && ex->priv.resp_body.left == FRAME_UNTIL_CLOSE && !reset) {
		ex->priv.resp_body.left = FRAME_DONE;
		ex->priv.upstream_reusable = false;
		return 1;
	}
	if (ex->priv.resp == RESP_HEAD && ex->priv.resp_received == 0) {
		source_lost(ex, reset ? "connection reset by the origin"
		                        : "the origin closed the connection without answering");
		return -1;
	}
	kp_stats.errors[KP_ERR_RESET]++;
	if (ex->priv.resp == RESP_HEAD) {
		ex->priv.ops->reply(ex, 502, "incomplete response head from the origin", false);
		return -1;
	}
	ex->priv.ops->abort(ex, reset ? "origin reset the connection mid-response"
	                         : "origin closed the connection mid-response");
	return -1;
}

/*
 * Takes more response bytes from the origin: spliced into the pipe when the
 * state is clean and payload comes next, else read into the buffer (heads,
 * chunk-size lines, and everything on the copy path). 1: something changed.
 */
static int
pull_response(struct exchange *ex)
{
	struct source *src = ex->priv.src;
	enum move_status r;
	size_t got = 0;

	if (response_splices(ex)) {
		uint64_t left = framer_payload_left(&ex->priv.resp_body);

		/* The mover notes EOF, reset and EAGAIN in the end's facts. */
		r = mover_pull(&ex->priv.resp_mover, &src->conn, left ? left : SIZE_MAX, &got);
		if (r == MOVE_OK)
			framer_payload_moved(&ex->priv.resp_body, got);
		/* The mover fell back to copying (EINVAL): so does this response. */
		if (r == MOVE_FULL && ex->priv.resp_mover.copy) {
			ex->priv.copy_body = true;
			return 1;
		}
	} else if (!src->in && !(src->in = buf_get())) {
		src->conn.eof = src->conn.reset = true;
		return 1;
	} else {
		r = conn_fill(&src->conn, src->in, &got);
	}
	switch (r) {
	case MOVE_OK:
		ex->priv.resp_received += got;
		if (ex->priv.copy_body)
			kp_stats.bytes_copied += got;
		progress(ex);
		return 1;
	case MOVE_EOF:
	case MOVE_ERROR:
		return 1;
	case MOVE_AGAIN:
	case MOVE_FULL:
		break;
	}
	return 0;
}

/* Sends what the pipe holds to the client. 1: moved, 0: blocked, -1: ended. */
static int
push_spliced(struct exchange *ex, uint64_t *budget)
{
	size_t moved;

	switch (mover_push(&ex->priv.resp_mover, ex->priv.down, &moved)) {
	case MOVE_OK:
		ex->priv.resp_sent += moved;
		kp_stats.bytes_to_clients += moved;
		*budget = moved < *budget ? *budget - moved : 0;
		progress(ex);
		return 1;
	case MOVE_AGAIN:
	case MOVE_FULL:
		return 0;
	case MOVE_EOF:
	case MOVE_ERROR:
		break;
	}
	ex->priv.ops->abort(ex, "client went away");
	return -1;
}

/*
 * Sends the head the proxy wrote and then buffered payload, in one call
 * where both are there. 1: moved, 0: blocked, -1: ended.
 */
static int
push_buffered(struct exchange *ex, bool pipe_first, uint64_t *budget)
{
	struct buf **out = ex->priv.down_out;
	struct buf *in = ex->priv.src->in;
	size_t out_len = *out ? buf_len(*out) : 0;
	size_t body = pipe_first ? 0 : ex->priv.resp_pending;
	ssize_t n = conn_send_two(ex->priv.down, out_len ? buf_head(*out) : NULL, out_len,
	                          body ? buf_head(in) : NULL, body);

	if (n < 0) {
		ex->priv.ops->abort(ex, "client went away");
		return -1;
	}
	if (n == 0)
		return 0;
	kp_stats.bytes_to_clients += (uint64_t)n;
	*budget = (uint64_t)n < *budget ? *budget - (uint64_t)n : 0;
	progress(ex);
	if (out_len) {
		size_t from_out = (size_t)n < out_len ? (size_t)n : out_len;

		buf_consume(*out, from_out);
		n -= (ssize_t)from_out;
		if (!buf_len(*out)) {
			buf_put(*out);
			*out = NULL;
		}
	}
	if (n) {
		if (ex->priv.hook_state)
			ex->priv.env->hooks->body(ex->priv.hook_state, buf_head(in), (size_t)n);
		buf_consume(in, (size_t)n);
		ex->priv.resp_pending -= (size_t)n;
		ex->priv.resp_sent += (uint64_t)n;
	}
	return 1;
}

/* ---- the pump ------------------------------------------------------------- */

/* What follows once everything read so far was sent. */
enum drained {
	DRAINED_PULL,        /* read more from the origin */
	DRAINED_AGAIN,       /* its EOF was judged and framed something: send that first */
	DRAINED_DONE,        /* the response is complete */
	DRAINED_ENDED,       /* the exchange ended (an error was answered or the client cut) */
};

/*
 * Nothing is left to send now: the response is done, the origin's EOF has
 * to be judged, or a full buffer holds something undecidable.
 */
static enum drained
response_drained(struct exchange *ex, bool body_done)
{
	struct source *src = ex->priv.src;

	if (body_done)
		ex->priv.resp = RESP_DONE;
	if (ex->priv.resp == RESP_DONE)
		return DRAINED_DONE;
	if (src->conn.eof)
		return source_ended(ex) < 0 ? DRAINED_ENDED : DRAINED_AGAIN;
	if (src->in && !has_room(src->in)) {
		/* Full and still undecided: a head or a framing line too long. */
		if (ex->priv.resp == RESP_HEAD)
			ex->priv.ops->reply(ex, 502, "response head too large", false);
		else
			ex->priv.ops->abort(ex, "chunk framing line too long");
		return DRAINED_ENDED;
	}
	return DRAINED_PULL;
}

/*
 * Moves response bytes from the source to the asker, in stream order:
 * heads the proxy wrote, then payload in the pipe, then buffered bytes.
 * A client that takes nothing more stops the flushing, not the pulling:
 * while there is room the origin is still read (what exchange_watch() asks
 * readiness for, the pump must act on, or the loop would spin).
 * -1: the exchange ended.
 */
int
pump_response(struct exchange *ex)
{
	struct source *src = ex->priv.src;
	uint64_t budget = RESPONSE_BUDGET;
	bool client_blocked = false;
	int r;

	for (;;) {
		size_t out_len = *ex->priv.down_out ? buf_len(*ex->priv.down_out) : 0;
		size_t in_pipe = mover_held(&ex->priv.resp_mover);
		bool body_done = ex->priv.resp == RESP_BODY && framer_done(&ex->priv.resp_body);

		/* Parse and frame first, so a head and its body can leave together. */
		if (!ex->priv.resp_pending && ex->priv.resp != RESP_DONE && !body_done && src->in &&
		    buf_len(src->in)) {
			r = ex->priv.resp == RESP_HEAD ? response_head(ex) : frame_response(ex);
			if (r < 0)
				return -1;
			if (r > 0)
				continue;
		}
		if (!client_blocked && in_pipe && !out_len) {
			r = push_spliced(ex, &budget);
			if (r < 0)
				return -1;
			if (r > 0)
				continue;
			client_blocked = true;
		}
		if (!client_blocked && (out_len || ex->priv.resp_pending)) {
			r = push_buffered(ex, in_pipe > 0, &budget);
			if (r < 0)
				return -1;
			if (r > 0)
				continue;
			client_blocked = true;
		}
		if (!client_blocked) {
			switch (response_drained(ex, body_done)) {
			case DRAINED_DONE:
				return 0;
			case DRAINED_ENDED:
				return -1;
			case DRAINED_AGAIN:
				continue;
			case DRAINED_PULL:
				break;
			}
		}
		/*
		 * The budget only stops reading: bytes already read are always
		 * framed and flushed, because once both sockets are quiet no event
		 * would come back for them. Unread bytes keep the origin readable.
		 */
		if (budget == 0 || !src->conn.readable || !response_can_pull(ex) || !pull_response(ex))
			return 0;
	}
}

/* ---- the end -------------------------------------------------------------- */

/* A client's response is complete: its host's counters for the stats page (hoststats.h). */
static void
count_host(const struct exchange *ex, const struct source *src, double saved)
{
	struct host_counts add = {.requests = 1, .saved_seconds = saved};

	if (ex->priv.held) {
		add.readahead = 1;
		add.readahead_bytes = ex->priv.resp_sent;
	} else if (src->reused) {
		add.reused = 1;
	}
	hoststats_count(ex->priv.env->hosts, ex->priv.key, &add);
}

void
finish(struct exchange *ex)
{
	struct source *src = ex->priv.src;
	double saved = 0;
	/* An EOF already read makes the next request on it fail for certain. */
	bool reusable = ex->priv.upstream_reusable && ex->priv.req == REQ_DONE && !src->conn.write_failed &&
	                !src->conn.eof;

	log_debug("client fd %d: %s -> %u, %" PRIu64 " bytes, %s upstream, %.1f ms", ex->priv.down->fd,
	          ex->target.key, ex->priv.status, ex->priv.resp_sent, src->reused ? "reused" : "new",
	          (clock_now(ex->priv.env->clock) - ex->priv.started) * 1000);
	/* A client's answer over a connection used before: what reuse saved it (stats.h). */
	if (src->reused && !ex->priv.to_memory && src->conn.fd >= 0) {
		ev_tstamp now = clock_now(ex->priv.env->clock);

		/* One getsockopt a second per connection, not one per request. */
		if (now - src->rtt_read_at >= 1.0) {
			src->rtt = conn_path_figures(&src->conn).rtt;
			src->rtt_read_at = now;
		}
		saved = stats_reuse_saving(src->rtt, ex->priv.resp_received, ex->owner.https);
		kp_stats.saved_seconds += saved;
	}
	if (ex->priv.env->hosts && !ex->priv.to_memory)
		count_host(ex, src, saved);
	/* The source's word outlives it: the access log line is written after. */
	if (src->served_as)
		snprintf(ex->priv.served_as, sizeof(ex->priv.served_as), "%s", src->served_as);
	ex->priv.src = NULL;
	clock_timer_stop(&ex->priv.timer);
	if (ex->priv.req != REQ_DONE)
		ex->priv.client_keep_alive = false;
	src->ops->release(src, reusable);
	end_hook(ex, true);
	ex->priv.ops->finished(ex);
}
