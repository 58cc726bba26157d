/*
 * Pipelining: fetches ahead written on a busy connection, behind the
 * request in progress, and answered in order (RFC 9112 9.3.2): behind
 * another fetch ahead, or on a connection whose origin has answered one
 * right. What a connection that ends leaves unanswered goes back to its
 * host's queue. Dispatch's other jobs are dispatch.c's.
 */
#include "kp/dispatch.h"

#include "kp/log.h"
#include "kp/stats.h"

#include "dispatch_priv.h"

/* ---- the requests pipelined on a connection ------------------------------- */

/* Takes w off the list of requests pipelined on its connection. */
static void
unlink_piped(struct dispatch_waiter *w)
{
	struct dispatch_conn *dc = w->piped_on;

	kp_list_unlink(&w->link);
	w->piped_on = NULL;
	dc->piped--;
}

static struct dispatch_waiter *
unpipe_oldest(struct dispatch_conn *dc)
{
	struct dispatch_waiter *w = oldest_in(&dc->pipelined);

	if (w)
		unlink_piped(w);
	return w;
}

/* w no longer wants the answer written for it: the connection cannot be reused after it. */
void
unpipe(struct dispatch_waiter *w)
{
	struct dispatch_conn *dc = w->piped_on;

	unlink_piped(w);
	dc->spoiled = true;
}

/*
 * Their answers will never come on dc: each goes back to its host's queue,
 * oldest first, to be sent again on another connection (a GET never
 * answered may be asked again); without a host, it fails.
 */
void
requeue_piped(struct dispatch_conn *dc, struct dispatch_host *h)
{
	struct dispatch_waiter *w;

	while ((w = unpipe_oldest(dc)) != NULL) {
		if (!h) {
			w->failed(w, 502, "the connection closed before a pipelined request was answered");
			continue;
		}
		/* One a client joined meanwhile is a client's request now: it may connect. */
		enqueue(h, w, w->background);
		schedule_check(h);
	}
}

/* ---- writing one behind the request in progress --------------------------- */

/*
 * May a fetch ahead be written on dc now, behind the request in progress?
 * Only on a connection whose origin has answered a pipelined request
 * correctly, or, to find that out, behind another fetch ahead: a client
 * request never shares a connection with a first try. At most
 * --read-ahead-depth behind one in progress.
 */
static bool
can_pipeline(const struct dispatch_conn *dc)
{
	const struct conn *c = &dc->up.src.conn;

	/* One the origin closed is still busy while its exchange finds out: not that one. */
	return dc->host && dc->up.state == UPSTREAM_BUSY && dc->sent && !dc->spoiled &&
	       !c->eof && !c->reset && !c->write_failed &&
	       dc->piped < dc->d->cfg->read_ahead_depth && (dc->pipelines || dc->background);
}

/*
 * Writes w's request on dc. True when it went out whole; false when the
 * socket took none of it (try elsewhere or later). A request cut short
 * spoils the connection and fails w.
 */
static bool
pipeline_onto(struct dispatch_conn *dc, struct dispatch_waiter *w)
{
	ssize_t n = conn_send_two(&dc->up.src.conn, w->request, w->request_len, NULL, 0);

	if (n == 0) {
		/*
		 * TLS may have taken the record and queued it even so: it would go
		 * out in front of whatever is written next, so nothing is.
		 */
		if (dc->up.tls)
			dc->spoiled = true;
		return false;
	}
	if (w->host)
		dequeue(w);
	if (n != (ssize_t)w->request_len) {
		dc->spoiled = true;
		w->failed(w, 502, "a pipelined request could not be written whole");
		return true;
	}
	kp_stats.bytes_to_upstreams += (uint64_t)n;
	w->piped_on = dc;
	w->background = true;
	kp_list_insert_tail(&dc->pipelined, &w->link);
	dc->piped++;
	kp_stats.upstream_pipelined++;
	log_debug("upstream %s fd %d: request pipelined (%u behind the one in progress)",
	          dc->up.key, dc->up.src.conn.fd, dc->piped);
	return true;
}

/* A new fetch ahead: on a busy connection of its host that may take it, if there is one. */
bool
pipeline_somewhere(struct dispatch_host *h, struct dispatch_waiter *w)
{
	if (!w->request)
		return false;
	KP_LIST_EACH(dc, &h->d->live, struct dispatch_conn, link)
		if (dc->host == h && can_pipeline(dc))
			return pipeline_onto(dc, w);
	return false;
}

/* dc's request went out: the fetches ahead waiting for its host may follow it. */
void
pipeline_waiting(struct dispatch_conn *dc)
{
	struct dispatch_host *h = dc->host;

	if (!h)
		return;
	KP_LIST_EACH_SAFE(w, next, &h->bg_queue, struct dispatch_waiter, link) {
		if (!can_pipeline(dc) || (w->request && !pipeline_onto(dc, w)))
			break;
	}
}

/* ---- answering them ------------------------------------------------------- */

/*
 * The exchange in progress is over and requests were pipelined behind it:
 * the oldest gets the connection as it is, with whatever of its answer
 * was already read. If the one before did not end cleanly, no answer
 * behind it can be trusted.
 */
void
serve_piped(struct dispatch_conn *dc, bool reusable)
{
	struct dispatch_waiter *w;

	upstream_end(&dc->up);
	if (!reusable || dc->spoiled) {
		upstream_close(&dc->up);   /* the pipelined ones go back to the queue */
		return;
	}
	w = unpipe_oldest(dc);
	if (w->background && dc->host) {
		dc->background = true;
		dc->host->background_busy++;
	}
	/* Its request is written already: the next fetch may follow it at once. */
	dc->sent = dc->from_pipeline = true;
	upstream_continue(&dc->up);
	w->source = DISPATCH_FROM_PIPELINE;
	log_debug("upstream %s fd %d: pipelined (exchange %u)", dc->up.key, dc->up.src.conn.fd,
	          dc->up.exchanges + 1);
	w->ready(w, &dc->up.src);
	if (dc->up.state == UPSTREAM_BUSY && dc->host && dc->sent)
		pipeline_waiting(dc);
}
