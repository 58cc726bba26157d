#include "kp/plan.h"

struct plan
plan_response(const struct plan_request *req, const struct http_head *h)
{
	struct plan p = {.action = PLAN_FINAL, .body = BODY_NONE};

	/*
	 * Our own version towards the asker whatever it spoke (RFC 9110 6.2);
	 * the framing below is what suits its version.
	 */
	p.write.client_minor = req->canonical ? 1 : req->minor;
	p.write.no_via = req->canonical;
	if (h->status == 101) {
		/* A switch nobody asked for, or before the request was whole, cannot be relayed. */
		if (!req->upgrade || !req->request_sent) {
			p.action = PLAN_REFUSE;
			p.why = "the origin switched protocols unasked";
			return p;
		}
		p.action = PLAN_SWITCH;
		p.write.upgrade = true;
		return p;
	}
	if (h->status < 200) {
		/* HTTP/1.0 does not know 1xx (RFC 9110 15.2); memory keeps final responses only. */
		p.action = req->canonical || req->minor == 0 ? PLAN_INTERIM_DROPPED : PLAN_INTERIM;
		p.write.client_keep_alive = true;
		return p;
	}
	p.body = http_response_body_kind(h, req->method);
	/*
	 * A transfer coding besides chunked (RFC 9112 6.1) may go only to an
	 * HTTP/1.1 client, coding and field together: an HTTP/1.0 client
	 * knows no Transfer-Encoding, and memory keeps payloads, which pieces,
	 * ranges and split answers are cut from. De-chunked with the field
	 * dropped, the coded bytes would pass for the payload.
	 */
	if (h->transfer_coded && p.body != BODY_NONE && (req->canonical || req->minor == 0)) {
		p.action = PLAN_REFUSE;
		p.why = req->canonical ? "the origin sent a transfer coding besides chunked"
		                       : "the origin sent a transfer coding besides chunked, "
		                         "which HTTP/1.0 cannot carry";
		return p;
	}
	/* After asking for an upgrade, the connection's state is the origin's guess. */
	p.upstream_reusable = http_head_keeps_alive(h) && p.body != BODY_UNTIL_CLOSE && !req->upgrade;
	/*
	 * HTTP/1.0 knows no chunked coding, and memory keeps bodies whole: the
	 * payload alone goes, and its end is the end of the stream.
	 */
	p.write.dechunk = p.body == BODY_CHUNKED && (req->canonical || req->minor == 0);
	/* Memory has no connection to keep: its head says nothing of one. */
	p.write.client_keep_alive =
	        req->canonical ||
	        plan_keeps_asker(req, !p.write.dechunk && p.body != BODY_UNTIL_CLOSE);
	return p;
}
