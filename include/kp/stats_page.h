/*
 * The stats page: a second listening socket (--stats-listen) in the same
 * loop, answering GET /metrics (Prometheus text format) and GET /stats
 * (JSON) with the counters of stats.h, those per host (hoststats.h) and
 * the last minutes of them (history.h), GET / with the dashboard when it
 * is built in, and 404 for anything else. A peer outside --allow is
 * closed at once; a request whose Host is a name rather than an address
 * or localhost gets 421 (a web page that rebinds its own name to this
 * machine must not read it); with --auth-file, a request without the
 * credentials of one of its users gets 401, unless --stats-no-auth. One
 * request per connection, PAGE_CONNS_MAX connections at once; nothing it
 * does touches the proxy's own clients or upstream connections.
 */
#ifndef KP_STATS_PAGE_H
#define KP_STATS_PAGE_H

#include <ev.h>

#include "kp/env.h"
#include "kp/list.h"
#include "kp/listener.h"

struct history;

struct stats_page {
	const struct proxy_env *env;
	struct listener listener;      /* its fd is -1: off */
	struct kp_list conns;          /* open connections, newest first, for shutdown */
	unsigned nconns;               /* ... and how many */
	struct history *history;       /* the samples /stats gives for the chart; NULL: off */
};

/* Listens when the config asks for it; -1 with a message logged on failure. */
int stats_page_init(struct stats_page *sp, const struct proxy_env *env);
void stats_page_shutdown(struct stats_page *sp);

#endif
