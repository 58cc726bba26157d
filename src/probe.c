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

#include "kp/net.h"

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

int
probe_rtt(const char *url, const struct kp_config *cfg, double timeout, double *rtt_ms,
          char *why, size_t whylen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
	struct probe_target t;
	double start = monotonic_s();
	char port[8], reason[128] = "no address";
	int rc;

	if (probe_parse_url(url, &t, why, whylen) < 0)
		return -1;
	snprintf(port, sizeof(port), "%u", t.port);
	if ((rc = getaddrinfo(t.host, port, &hints, &res)) != 0) {
		snprintf(why, whylen, "%s: %s", t.host, gai_strerror(rc));
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
		rc = wait_connected(fd, left, timeout, why, whylen);
		if (rc == 0)
			*rtt_ms = (monotonic_s() - begin) * 1000;
		close(fd);
		if (rc == 0) {
			freeaddrinfo(res);
			return 0;
		}
		snprintf(reason, sizeof(reason), "%s: %s", addr, why);
	}
	freeaddrinfo(res);
	snprintf(why, whylen, "%s", reason);
	return -1;
}
