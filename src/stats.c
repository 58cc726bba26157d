#include "kp/stats.h"

#include <inttypes.h>

#include "kp/log.h"

struct kp_stats kp_stats;

void
stats_log_summary(void)
{
	log_info("clients %" PRIu64 ", requests %" PRIu64 ", upstream connects %" PRIu64
	         ", reuses %" PRIu64 ", retries %" PRIu64 ", stale %" PRIu64
	         ", local responses %" PRIu64,
	         kp_stats.clients_accepted, kp_stats.requests, kp_stats.upstream_connects,
	         kp_stats.upstream_reuses, kp_stats.upstream_retries, kp_stats.upstream_stale,
	         kp_stats.responses_local);
}
