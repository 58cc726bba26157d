/*
 * Parent proxies: which one, if any, an origin is reached through.
 *
 * --parent URL is for every origin; --parent-for PATTERN URL and --direct
 * PATTERN choose per origin, the first that matches winning. A URL is
 * socks5h://, socks5:// or http://, with user:password@ optional; the
 * credentials may also come from --parent-credentials FILE, so that no
 * password shows in ps(1).
 *
 * A parent's words (its label) never carry its credentials: the label is
 * what logs, errors, pool keys and the stats page show.
 */
#ifndef KP_PARENT_H
#define KP_PARENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kp/cidr.h"
#include "kp/config.h"
#include "kp/parent_handshake.h"
#include "kp/parent_url.h"

/* Different parents at most: a router's config names a few. */
#define PARENT_MAX 16

/* What /metrics and the stats page count per parent. */
struct parent_counts {
	uint64_t connects;                        /* connections opened to it */
	uint64_t outcomes[PARENT_OUTCOMES];       /* handshakes by how they ended */
	uint64_t unreachable;                     /* TCP connects to it that failed */
	uint64_t requests;                        /* requests sent through it */
	uint64_t reused;                          /* requests on a connection already open */
	double rtt;                               /* the TCP round trip to it at the last connect, s */
};

struct parent {
	struct parent_url where;     /* kind, host, port, credentials, as configured */
	struct parent_hop hop;       /* what a handshake needs, pointing into where */
	char label[300];             /* scheme://host:port, no credentials */
	unsigned id;                 /* its place in the table: what pool keys name it by */
	/* For an HTTP parent: "Proxy-Authorization: Basic ...\r\n", or "" without credentials. */
	char authorization[720];
	struct parent_counts counts;
};

/* A --parent-for or --direct rule: hosts matching pattern go through parent, or direct (NULL). */
struct parent_rule {
	const char *pattern;         /* host, *.domain, IP literal or CIDR, as given */
	struct parent *parent;
	/*
	 * The pattern read once, so that a request's host is matched without
	 * parsing addresses again: an address or a range matches only hosts
	 * named by an address, a name or *.domain only names.
	 */
	bool by_address;
	struct cidr range;           /* by_address: an IP literal is its own /32 or /128 */
};

struct parents {
	struct parent list[PARENT_MAX];
	unsigned count;
	struct parent_rule rules[KP_MAX_PARENT_RULES];
	unsigned nrules;
	struct parent *fallback;   /* --parent: for what no rule matched; NULL: direct */
	/*
	 * The last host routed and its way: a downloader asks one host again
	 * and again, and a string compare is cheaper than the rules.
	 */
	char last_host[256];
	struct parent *last_route;
};

/*
 * Builds the table from the config's --parent, --parent-for, --direct and
 * --parent-credentials. false with the reason in why (why_len bytes),
 * e.g. a credentials file that cannot be read.
 */
bool parents_init(struct parents *ps, const struct kp_config *cfg, char *why, size_t why_len);

/* The parent host is reached through, or NULL for directly (also when ps is NULL: none set). */
struct parent *parents_route(struct parents *ps, const char *host);

struct stats_text;
/* Per parent, labelled by its label: the Prometheus lines, and a JSON array for /stats. */
void parents_prometheus(const struct parents *ps, struct stats_text *t);
void parents_json(const struct parents *ps, struct stats_text *t);

/*
 * Does a plain http:// request through p go to it as a request in absolute
 * form (an HTTP parent), rather than through a tunnel it opens?
 */
static inline bool
parent_forwards(const struct parent *p)
{
	return p && p->hop.kind == PARENT_HTTP;
}

#endif
