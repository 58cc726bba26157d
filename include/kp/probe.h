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

#endif
