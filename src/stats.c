#include "kp/stats.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp/log.h"

struct kp_stats kp_stats;

const char *const kp_error_names[KP_ERR_KINDS] = {
	[KP_ERR_REFUSED] = "refused",
	[KP_ERR_UNAUTHORIZED] = "unauthorized",
	[KP_ERR_BAD_REQUEST] = "bad_request",
	[KP_ERR_TIMEOUT] = "timeout",
	[KP_ERR_UNRESOLVED] = "unresolved",
	[KP_ERR_CONNECT] = "connect",
	[KP_ERR_RESET] = "reset",
	[KP_ERR_BAD_RESPONSE] = "bad_response",
	[KP_ERR_QUEUE_TIMEOUT] = "queue_timeout",
	[KP_ERR_TLS] = "tls",
};

void
stats_log_summary(void)
{
	const struct kp_stats *s = &kp_stats;

	log_info("clients %" PRIu64 ", requests %" PRIu64 " (on reused %" PRIu64 ", new %" PRIu64
	         ", freed-up %" PRIu64 "), connects %" PRIu64 " (won %" PRIu64 ", unused %" PRIu64
	         ", tcp attempts %" PRIu64 ", failed %" PRIu64 "), queued %" PRIu64 ", queue waits %" PRIu64
	         " (%.3f s), queue timeouts %" PRIu64 ", retries %" PRIu64 ", stale %" PRIu64
	         ", local responses %" PRIu64 ", idle %" PRIu64 ", open %" PRIu64
	         ", intercepted %" PRIu64 ", refused %" PRIu64 ", tls upstream %" PRIu64
	         " (resumed %" PRIu64 ", unverified %" PRIu64 "), leaves minted %" PRIu64
	         " (cached %" PRIu64 "), read-ahead %" PRIu64 " (hits %" PRIu64 ", joins %" PRIu64
	         ", misses %" PRIu64 ", wasted %" PRIu64 " bytes, unsafe %" PRIu64
	         ", throttled %" PRIu64 ", failed %" PRIu64 ", cut %" PRIu64 ", held %" PRIu64
	         " bytes, records %" PRIu64 " bytes), pipelined %" PRIu64 ", split %" PRIu64 " (declined %" PRIu64
	         ", pieces %" PRIu64 ", resumes %" PRIu64 ", mismatches %" PRIu64 ", back-offs %" PRIu64
	         ")",
	         s->clients_accepted, s->requests, s->requests_on_reused, s->requests_on_new,
	         s->requests_on_freed, s->connects_started, s->connects_won, s->connects_unused,
	         s->upstream_connects, s->upstream_connect_failures, s->queued, s->queue_waits,
	         s->queue_wait_seconds, s->queue_timeouts, s->upstream_retries, s->upstream_stale,
	         s->responses_local, s->pool_idle, s->upstreams_open, s->intercepted,
	         s->intercept_refused, s->tls_upstream_handshakes, s->tls_upstream_resumed,
	         s->tls_verify_failures, s->tls_leaves_minted, s->tls_leaves_in_cache,
	         s->readahead_predicted, s->readahead_hits, s->readahead_joins, s->readahead_misses,
	         s->readahead_wasted_bytes, s->readahead_unsafe, s->readahead_throttled,
	         s->readahead_failed, s->readahead_cut, s->fetch_memory_bytes,
	         s->fetch_records_bytes, s->upstream_pipelined, s->split_downloads, s->split_declined, s->split_pieces,
	         s->split_resumes, s->split_mismatches, s->split_backoffs);
}

void
stats_printf(struct stats_text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->failed)
		return;
	for (;;) {
		size_t room = t->cap - t->len;

		va_start(ap, fmt);
		n = vsnprintf(t->data ? t->data + t->len : NULL, t->data ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->failed = true;
			return;
		}
		if (t->data && (size_t)n < room) {
			t->len += (size_t)n;
			return;
		}
		{
			size_t cap = t->cap ? t->cap * 2 : 4096;
			char *grown;

			while (cap - t->len <= (size_t)n)
				cap *= 2;
			if (!(grown = realloc(t->data, cap))) {
				t->failed = true;
				return;
			}
			t->data = grown;
			t->cap = cap;
		}
	}
}

/* One metric: name, type, help, and the value. */
struct metric {
	const char *name, *type, *help;
	const uint64_t *value;
};

static const struct metric metrics[] = {
	{"requests_total", "counter", "Request heads parsed.", &kp_stats.requests},
	{"upstream_connects_total", "counter", "Upstream connections opened.",
	 &kp_stats.connects_started},
	{"upstream_connect_attempts_total", "counter",
	 "TCP connects attempted (each Happy Eyeballs attempt).", &kp_stats.upstream_connects},
	{"upstream_reused_total", "counter", "Requests served on a connection used before.",
	 &kp_stats.upstream_reuses},
	{"requests_on_freed_connection_total", "counter",
	 "Requests served by a connection that freed up while a connect for them was on its way.",
	 &kp_stats.requests_on_freed},
	{"requests_on_new_connection_total", "counter",
	 "Requests served on a connection that had just connected.", &kp_stats.requests_on_new},
	{"upstream_connects_unused_total", "counter",
	 "Connects that completed with nobody waiting and went into the pool.",
	 &kp_stats.connects_unused},
	{"retries_total", "counter", "Requests sent again after a stale pooled connection.",
	 &kp_stats.upstream_retries},
	{"local_responses_total", "counter", "Responses the proxy made itself.",
	 &kp_stats.responses_local},
	{"clients_accepted_total", "counter", "Client connections accepted.",
	 &kp_stats.clients_accepted},
	{"bytes_spliced_total", "counter", "Bytes moved with splice(2).", &kp_stats.bytes_spliced},
	{"bytes_copied_total", "counter", "Response and tunnel bytes copied through user space.",
	 &kp_stats.bytes_copied},
	{"bytes_to_clients_total", "counter", "Bytes sent to clients.", &kp_stats.bytes_to_clients},
	{"bytes_to_upstreams_total", "counter", "Bytes sent to origins.",
	 &kp_stats.bytes_to_upstreams},
	{"pool_expired_total", "counter", "Idle connections closed by the idle timeout.",
	 &kp_stats.pool_expired},
	{"pool_evicted_total", "counter", "Idle connections closed to honour a cap.",
	 &kp_stats.pool_evicted},
	{"queue_waits_total", "counter", "Requests that waited for a connection.",
	 &kp_stats.queue_waits},
	{"idle_upstream_connections", "gauge", "Idle upstream connections in the pool.",
	 &kp_stats.pool_idle},
	{"upstream_connections", "gauge", "Upstream connections open, busy or idle.",
	 &kp_stats.upstreams_open},
	{"clients", "gauge", "Client connections open.", &kp_stats.clients_active},
	{"tunnels", "gauge", "CONNECT and upgrade tunnels open.", &kp_stats.tunnels_open},
	{"queued_requests", "gauge", "Requests waiting for a connection.", &kp_stats.queued},
	{"intercepted_total", "counter", "CONNECTs intercepted (--intercept).",
	 &kp_stats.intercepted},
	{"intercept_refused_total", "counter",
	 "Intercepted clients that refused the proxy's certificate.", &kp_stats.intercept_refused},
	{"intercept_tunnelled_total", "counter",
	 "CONNECTs to an intercepted host tunnelled because that client refused before.",
	 &kp_stats.intercept_skipped},
	{"tls_client_handshakes_total", "counter", "TLS handshakes completed with clients.",
	 &kp_stats.tls_client_handshakes},
	{"tls_upstream_handshakes_total", "counter", "TLS handshakes completed with origins.",
	 &kp_stats.tls_upstream_handshakes},
	{"tls_upstream_resumed_total", "counter", "Origin TLS handshakes that resumed a session.",
	 &kp_stats.tls_upstream_resumed},
	{"tls_verify_failures_total", "counter", "Origin certificates that did not verify.",
	 &kp_stats.tls_verify_failures},
	{"tls_leaves_minted_total", "counter", "Leaf certificates minted.",
	 &kp_stats.tls_leaves_minted},
	{"readahead_predicted_total", "counter", "Pieces fetched ahead of a client (--read-ahead).",
	 &kp_stats.readahead_predicted},
	{"readahead_hits_total", "counter", "Client requests served from a piece held whole.",
	 &kp_stats.readahead_hits},
	{"readahead_joins_total", "counter", "Client requests served from a piece still arriving.",
	 &kp_stats.readahead_joins},
	{"readahead_misses_total", "counter",
	 "Requests of a client for a URL with pieces held that matched none of them.",
	 &kp_stats.readahead_misses},
	{"readahead_wasted_bytes_total", "counter", "Bytes fetched ahead and never served.",
	 &kp_stats.readahead_wasted_bytes},
	{"readahead_unsafe_total", "counter",
	 "Pieces refused: not the piece asked for, private, or another object.",
	 &kp_stats.readahead_unsafe},
	{"readahead_throttled_total", "counter",
	 "Predictions not made because --fetch-memory or a client's share of it was reached.",
	 &kp_stats.readahead_throttled},
	{"readahead_failed_total", "counter", "Fetches ahead that failed.",
	 &kp_stats.readahead_failed},
	{"readahead_cut_total", "counter",
	 "Fetches ahead ended far from done: their client asked for something else.",
	 &kp_stats.readahead_cut},
	{"split_downloads_total", "counter", "Downloads fetched as more than one piece (--split).",
	 &kp_stats.split_downloads},
	{"split_declined_total", "counter",
	 "Requests to split hosts the origin answered itself: no ranges, no validator, an error.",
	 &kp_stats.split_declined},
	{"split_pieces_total", "counter", "Pieces asked for split downloads, resumes included.",
	 &kp_stats.split_pieces},
	{"split_resumes_total", "counter", "Pieces asked again from where a broken fetch stopped.",
	 &kp_stats.split_resumes},
	{"split_mismatches_total", "counter",
	 "Pieces not as asked (another version or range, refused on one connection): their "
	 "client was cut off there.",
	 &kp_stats.split_mismatches},
	{"split_backoffs_total", "counter",
	 "Second connections refused (401, 403, 429, 503): the host got one for 10 minutes.",
	 &kp_stats.split_backoffs},
	{"split_connections_total", "counter",
	 "The most connections each split download used at once, summed.",
	 &kp_stats.split_connections_used},
	{"pipelined_total", "counter",
	 "Requests written on a busy origin connection, behind the one in progress.",
	 &kp_stats.upstream_pipelined},
	{"fetch_memory_bytes", "gauge",
	 "Memory counted for pieces held or arriving, for read-ahead and split downloads.",
	 &kp_stats.fetch_memory_bytes},
	{"fetch_records_bytes", "gauge",
	 "Memory counted for what is kept about those pieces, URLs and playlists.",
	 &kp_stats.fetch_records_bytes},
	{"fetch_throttled_total", "counter",
	 "Fetches for read-ahead or split downloads not made: --fetch-memory or a client's "
	 "share of it was full.",
	 &kp_stats.fetch_throttled},
	{"tls_leaves_cached", "gauge", "Leaf certificates in the cache.",
	 &kp_stats.tls_leaves_in_cache},
	{"auth_hash_checks_total", "counter", "Proxy passwords checked against a crypt(3) hash.",
	 &kp_stats.auth_hash_checks},
	{"auth_cache_hits_total", "counter",
	 "Proxy credentials taken because they passed a check within the last minute.",
	 &kp_stats.auth_cache_hits},
	{"auth_limited_total", "counter",
	 "Proxy credentials refused unchecked: their address sent too many wrong ones or waits "
	 "for too many checks.",
	 &kp_stats.auth_limited},
	{"auth_busy_total", "counter",
	 "Proxy credentials refused unchecked: too many hash checks were waiting.",
	 &kp_stats.auth_busy},
	{"auth_hash_jobs", "gauge", "Hash checks waiting or running.", &kp_stats.auth_jobs},
	{"auth_hash_jobs_peak", "gauge", "Most hash checks waiting or running at once.",
	 &kp_stats.auth_jobs_peak},
};

/* The initial window of RFC 6928 and the segment size of a 1500-byte path. */
#define COLD_WINDOW_SEGMENTS 10
#define SEGMENT_BYTES 1448

double
stats_reuse_saving(double rtt, uint64_t bytes, bool tls)
{
	uint64_t segments = (bytes + SEGMENT_BYTES - 1) / SEGMENT_BYTES, sent = 0, window;
	unsigned rounds = 0;

	if (rtt <= 0)
		return 0;
	for (window = COLD_WINDOW_SEGMENTS; sent < segments && rounds < 64; window *= 2) {
		sent += window;
		rounds++;
	}
	return rtt * ((tls ? 2 : 1) + (rounds > 1 ? rounds - 1 : 0));
}

void
stats_render_prometheus(struct stats_text *t)
{
	for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++) {
		const struct metric *m = &metrics[i];

		stats_printf(t, "# HELP keepalive_proxy_%s %s\n# TYPE keepalive_proxy_%s %s\n"
		                "keepalive_proxy_%s %" PRIu64 "\n",
		             m->name, m->help, m->name, m->type, m->name, *m->value);
	}
	stats_printf(t, "# HELP keepalive_proxy_queue_wait_seconds_total Time requests waited for a "
	                "connection.\n# TYPE keepalive_proxy_queue_wait_seconds_total counter\n"
	                "keepalive_proxy_queue_wait_seconds_total %.6f\n",
	             kp_stats.queue_wait_seconds);
	stats_printf(t, "# HELP keepalive_proxy_saved_seconds_total Time reused connections saved "
	                "clients, estimated (handshakes and slow start skipped).\n"
	                "# TYPE keepalive_proxy_saved_seconds_total counter\n"
	                "keepalive_proxy_saved_seconds_total %.6f\n",
	             kp_stats.saved_seconds);
	stats_printf(t, "# HELP keepalive_proxy_errors_total Failures, by kind.\n"
	                "# TYPE keepalive_proxy_errors_total counter\n");
	for (int k = 0; k < KP_ERR_KINDS; k++)
		stats_printf(t, "keepalive_proxy_errors_total{kind=\"%s\"} %" PRIu64 "\n",
		             kp_error_names[k], kp_stats.errors[k]);
}

void
stats_json_key(struct stats_text *t, const char *key)
{
	/*
	 * Keys are counter names or dispatch keys (host:port from parsed URLs,
	 * a scheme before, a marker after): no quote or backslash is in them.
	 */
	stats_printf(t, "%s\"%s\": ", t->len && t->data[t->len - 1] == '{' ? "" : ", ", key);
}

void
stats_render_json(struct stats_text *t)
{
	stats_printf(t, "{");
	for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++)
		stats_printf(t, "\"%s\": %" PRIu64 ", ", metrics[i].name, *metrics[i].value);
	stats_printf(t, "\"queue_wait_seconds_total\": %.6f, \"saved_seconds_total\": %.6f, "
	                "\"errors_total\": {",
	             kp_stats.queue_wait_seconds, kp_stats.saved_seconds);
	for (int k = 0; k < KP_ERR_KINDS; k++) {
		stats_json_key(t, kp_error_names[k]);
		stats_printf(t, "%" PRIu64, kp_stats.errors[k]);
	}
	stats_printf(t, "}");
}
