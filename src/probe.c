#include "kp/probe.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#include "kp/list.h"
#include "kp/net.h"
#include "kp/parent.h"

static double
monotonic_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int
bad_url(const char *url, char *why, size_t whylen)
{
	snprintf(why, whylen, "'%s' is not an http:// or https:// URL with a host", url);
	return -1;
}

int
probe_parse_url(const char *url, struct probe_target *t, char *why, size_t whylen)
{
	const char *p, *end, *host, *host_end, *port = NULL;
	unsigned long n = 0;

	memset(t, 0, sizeof(*t));
	if (strncasecmp(url, "http://", 7) == 0) {
		p = url + 7;
		t->port = 80;
	} else if (strncasecmp(url, "https://", 8) == 0) {
		p = url + 8;
		t->port = 443;
	} else {
		return bad_url(url, why, whylen);
	}
	end = p + strcspn(p, "/?#");
	/* Credentials (user:password@) come before the host, and may hold ':'. */
	for (const char *q = p; q < end; q++)
		if (*q == '@')
			p = q + 1;
	if (*p == '[') {
		host = p + 1;
		if (!(host_end = memchr(host, ']', (size_t)(end - host))))
			return bad_url(url, why, whylen);
		if (host_end + 1 < end) {
			if (host_end[1] != ':')
				return bad_url(url, why, whylen);
			port = host_end + 2;
		}
	} else {
		host = p;
		if (!(host_end = memchr(p, ':', (size_t)(end - p))))
			host_end = end;
		else
			port = host_end + 1;
	}
	if (host_end == host || (size_t)(host_end - host) >= sizeof(t->host))
		return bad_url(url, why, whylen);
	memcpy(t->host, host, (size_t)(host_end - host));
	if (port) {
		if (port == end)
			return bad_url(url, why, whylen);
		for (const char *q = port; q < end; q++) {
			if (*q < '0' || *q > '9')
				return bad_url(url, why, whylen);
			if ((n = n * 10 + (unsigned long)(*q - '0')) > 65535)
				return bad_url(url, why, whylen);
		}
		if (n == 0)
			return bad_url(url, why, whylen);
		t->port = (uint16_t)n;
	}
	return 0;
}

/*
 * Waits up to left seconds for a connect in progress; 0 once it is
 * established, else -1 with the reason (timeout: all the probe had).
 */
static int
wait_connected(int fd, double left, double timeout, char *why, size_t whylen)
{
	struct pollfd pfd = {.fd = fd, .events = POLLOUT};
	int n;

	while ((n = poll(&pfd, 1, (int)(left * 1000) + 1)) < 0 && errno == EINTR)
		;
	if (n == 0) {
		snprintf(why, whylen, "no answer within %g s", timeout);
		return -1;
	}
	if (n < 0 || net_connect_finish(fd) < 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * Resolves host and connects to port on its addresses in turn until one
 * answers within timeout seconds in all: the connected socket, its
 * connect's time in *rtt_ms; -1 with the reason in why.
 */
static int
connect_timed(const char *host, uint16_t port, const struct kp_config *cfg, double timeout,
              double *rtt_ms, char *why, size_t whylen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
	double start = monotonic_s();
	char service[8], reason[128] = "no address";
	int rc;

	snprintf(service, sizeof(service), "%u", port);
	if ((rc = getaddrinfo(host, service, &hints, &res)) != 0) {
		snprintf(why, whylen, "%s: %s", host, gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		double begin = monotonic_s(), left = timeout - (begin - start);
		char addr[64];
		int fd;

		net_addr_text(ai->ai_addr, addr, sizeof(addr));
		if (left <= 0) {
			snprintf(reason, sizeof(reason), "no answer within %g s", timeout);
			break;
		}
		if ((fd = net_connect_start(ai->ai_addr, ai->ai_addrlen, cfg)) < 0) {
			snprintf(reason, sizeof(reason), "%s: %s", addr, strerror(errno));
			continue;
		}
		if (wait_connected(fd, left, timeout, why, whylen) == 0) {
			*rtt_ms = (monotonic_s() - begin) * 1000;
			freeaddrinfo(res);
			return fd;
		}
		close(fd);
		snprintf(reason, sizeof(reason), "%s: %s", addr, why);
	}
	freeaddrinfo(res);
	snprintf(why, whylen, "%s", reason);
	return -1;
}

int
probe_rtt(const char *url, const struct kp_config *cfg, double timeout, double *rtt_ms,
          char *why, size_t whylen)
{
	struct probe_target t;
	int fd;

	if (probe_parse_url(url, &t, why, whylen) < 0)
		return -1;
	if ((fd = connect_timed(t.host, t.port, cfg, timeout, rtt_ms, why, whylen)) < 0)
		return -1;
	close(fd);
	return 0;
}

/* ---- through a parent ----------------------------------------------------- */

struct parent_probe {
	struct parent_handshake h;
	enum parent_outcome outcome;
	char why[256];
	bool done;
};

static void
parent_probe_done(struct parent_handshake *h, enum parent_outcome outcome, int status,
                  const char *why)
{
	struct parent_probe *pp = container_of(h, struct parent_probe, h);

	(void)status;
	pp->outcome = outcome;
	snprintf(pp->why, sizeof(pp->why), "%s", why ? why : "");
	pp->done = true;
	ev_break(h->loop, EVBREAK_ALL);
}

/* Round trips to the parent before the one that opens the path: the greeting, the login. */
static unsigned
parent_round_trips_before(const struct parent *p)
{
	if (p->hop.kind == PARENT_HTTP)
		return 0;
	return p->hop.user ? 2 : 1;
}

int
probe_rtt_via(const char *url, const struct kp_config *cfg, const struct parent *p,
              double timeout, struct probe_via *via, char *why, size_t whylen)
{
	struct probe_target t;
	struct parent_probe pp = {.done = false};
	struct ev_loop *loop;
	double begin, last;
	int fd;

	memset(via, 0, sizeof(*via));
	if (probe_parse_url(url, &t, why, whylen) < 0)
		return -1;
	if ((fd = connect_timed(p->where.host, p->where.port, cfg, timeout, &via->parent_ms, why,
	                        whylen)) < 0) {
		char reason[200];

		snprintf(reason, sizeof(reason), "%s", why);
		snprintf(why, whylen, "parent %s unreachable: %s", p->label, reason);
		return -1;
	}
	if (!(loop = ev_loop_new(EVFLAG_AUTO))) {
		close(fd);
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	begin = monotonic_s();
	/* socks5:// would want the origin's address: the name is sent, and the parent resolves it. */
	{
		struct parent_hop hop = p->hop;

		if (hop.kind == PARENT_SOCKS5)
			hop.kind = PARENT_SOCKS5H;
		parent_handshake_start(&pp.h, loop, fd, &hop, t.host, t.port, NULL, timeout,
		                       parent_probe_done);
		if (!pp.done)
			ev_run(loop, 0);
	}
	via->open_ms = (monotonic_s() - begin) * 1000;
	parent_handshake_cancel(&pp.h);
	ev_loop_destroy(loop);
	close(fd);
	if (pp.outcome != PARENT_OPEN) {
		snprintf(why, whylen, "%s", pp.why);
		return -1;
	}
	/* The last exchange took a round trip to the parent and its connect to the origin. */
	last = via->open_ms - parent_round_trips_before(p) * via->parent_ms;
	via->beyond_ms = last > via->parent_ms ? last - via->parent_ms : 0;
	via->path_ms = via->parent_ms + via->beyond_ms;
	return 0;
}
