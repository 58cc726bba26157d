/*
 * The round trip to an origin, measured once: how long a TCP connect to a
 * URL's host and port takes (the SYN out, the SYN-ACK back). For
 * --check-host, which runs instead of the event loop, so it blocks, bounded
 * by a timeout. It never logs.
 */
#ifndef KP_PROBE_H
#define KP_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "kp/config.h"

/* Where a URL points: what the probe connects to. */
struct probe_target {
	char host[256];     /* name or address, IPv6 without brackets */
	uint16_t port;      /* given, else 80 for http://, 443 for https:// */
};

/* "http://host[:port]/..." or "https://..." into t; 0, or -1 with the reason in why. */
int probe_parse_url(const char *url, struct probe_target *t, char *why, size_t whylen);

/*
 * Resolves the URL's host and connects to its addresses in turn, tuned as
 * upstream sockets are (cfg), until one answers within timeout seconds in
 * all. *rtt_ms gets that connect's time. 0, or -1 with the reason in why.
 */
int probe_rtt(const char *url, const struct kp_config *cfg, double timeout, double *rtt_ms,
              char *why, size_t whylen);

struct parent;

/* What a probe through a parent found, in milliseconds. */
struct probe_via {
	double parent_ms;     /* a TCP connect to the parent */
	double open_ms;       /* asking it for the path to the URL's host, until it was open */
	double beyond_ms;     /* of that, the parent's own connect to the origin, about */
	double path_ms;       /* the round trip a download through it sees: parent_ms + beyond_ms */
};

/*
 * The same through the parent p: a TCP connect to it, then a path to the
 * URL's host and port opened through it (the name sent, for the parent to
 * resolve). The time the last exchange took beyond a round trip to the
 * parent is the parent's connect to the origin. 0, or -1 with the reason.
 */
int probe_rtt_via(const char *url, const struct kp_config *cfg, const struct parent *p,
                  double timeout, struct probe_via *via, char *why, size_t whylen);

#endif
