#include "kp/stats.h"

#include <inttypes.h>

#include "kp/log.h"

struct kp_stats kp_stats;

void
stats_log_summary(void)
{
	const struct kp_stats *s = &kp_stats;

	log_info("clients %" PRIu64 ", requests %" PRIu64 " (on reused %" PRIu64 ", new %" PRIu64
	         ", freed-up %" PRIu64 "), connects %" PRIu64 " (won %" PRIu64 ", unused %" PRIu64
	         ", tcp attempts %" PRIu64 ", failed %" PRIu64 "), queued %" PRIu64 ", queue waits %" PRIu64
	         " (%.3f s), queue timeouts %" PRIu64 ", retries %" PRIu64 ", stale %" PRIu64
	         ", local responses %" PRIu64 ", idle %" PRIu64 ", open %" PRIu64,
	         s->clients_accepted, s->requests, s->requests_on_reused, s->requests_on_new,
	         s->requests_on_freed, s->connects_started, s->connects_won, s->connects_unused,
	         s->upstream_connects, s->upstream_connect_failures, s->queued, s->queue_waits,
	         s->queue_wait_seconds, s->queue_timeouts, s->upstream_retries, s->upstream_stale,
	         s->responses_local, s->pool_idle, s->upstreams_open);
}
