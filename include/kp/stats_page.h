/*
 * The stats page: a second listening socket (--stats-listen) in the same
 * loop, answering GET /metrics (Prometheus text format) and GET /stats
 * (JSON) with the counters of stats.h, those per host (hoststats.h) and
 * the last minutes of them (history.h), GET / with the dashboard when it
 * is built in, 404 for anything else, and 403 for clients outside
 * --allow. One request per connection; nothing it does touches the
 * proxy's own clients or upstream connections.
 */
#ifndef KP_STATS_PAGE_H
#define KP_STATS_PAGE_H

#include <ev.h>

#include "kp/env.h"
#include "kp/list.h"

struct history;

struct stats_page {
	const struct proxy_env *env;
	int listen_fd;                 /* -1: off */
	ev_io accept_watcher;
	struct kp_list conns;          /* open connections, newest first, for shutdown */
	struct history *history;       /* the samples /stats gives for the chart; NULL: off */
};

/* Listens when the config asks for it; -1 with a message logged on failure. */
int stats_page_init(struct stats_page *sp, const struct proxy_env *env);
void stats_page_shutdown(struct stats_page *sp);

#endif
