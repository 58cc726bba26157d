#include "kp/intercept.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Length without one trailing dot: "example.com." names the same host. */
static size_t
name_len(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && s[n - 1] == '.' ? n - 1 : n;
}

static bool
is_ip_literal(const char *s, unsigned char out[16], int *family)
{
	if (inet_pton(AF_INET, s, out) == 1) {
		*family = AF_INET;
		return true;
	}
	if (inet_pton(AF_INET6, s, out) == 1) {
		*family = AF_INET6;
		return true;
	}
	return false;
}

const char *
intercept_pattern_problem(const char *p)
{
	unsigned char ip[16];
	int family;
	const char *name = p;
	size_t len;

	if (is_ip_literal(p, ip, &family))
		return NULL;
	if (p[0] == '*') {
		if (p[1] != '.' || p[2] == '\0')
			return "a wildcard must be '*.' followed by a domain";
		name = p + 2;
	}
	len = name_len(name);
	if (len == 0 || len > 253)
		return "a host name must be 1-253 characters";
	for (size_t i = 0; i < len; i++) {
		char ch = name[i];

		if (ch == '*')
			return "'*' may only stand first, as in '*.example.com'";
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '-' || ch == '.' || ch == '_'))
			return "not a host name, wildcard or IP address";
		if (ch == '.' && (i == 0 || name[i - 1] == '.'))
			return "empty label in the host name";
	}
	return NULL;
}

bool
intercept_pattern_match(const char *pattern, const char *host)
{
	unsigned char pa[16], ha[16];
	int pf, hf;
	size_t plen, hlen;

	if (is_ip_literal(pattern, pa, &pf))
		return is_ip_literal(host, ha, &hf) && pf == hf &&
		       memcmp(pa, ha, pf == AF_INET ? 4 : 16) == 0;
	/* An address is never a name below a domain: "*.2.7" must not take 192.0.2.7. */
	if (is_ip_literal(host, ha, &hf))
		return false;
	hlen = name_len(host);
	if (pattern[0] == '*') {
		const char *domain = pattern + 1;   /* ".example.com" */

		plen = name_len(domain);
		/* At least one label in front of the domain. */
		return hlen > plen && strncasecmp(host + hlen - plen, domain, plen) == 0;
	}
	plen = name_len(pattern);
	return plen == hlen && strncasecmp(pattern, host, plen) == 0;
}

bool
intercept_patterns_match(const char *const *patterns, unsigned n, const char *host)
{
	for (unsigned i = 0; i < n; i++)
		if (intercept_pattern_match(patterns[i], host))
			return true;
	return false;
}

/* ---- refusals ------------------------------------------------------------- */

/* The client machine: its address alone, since each connection has its own port. */
static const void *
address_of(const struct sockaddr *sa, size_t *len)
{
	if (sa->sa_family == AF_INET6) {
		*len = 16;
		return &((const struct sockaddr_in6 *)sa)->sin6_addr;
	}
	*len = 4;
	return &((const struct sockaddr_in *)sa)->sin_addr;
}

static bool
same_address(const struct intercept_refusal *r, const struct sockaddr *sa)
{
	size_t len;
	const void *addr = address_of(sa, &len);

	return r->family == sa->sa_family && memcmp(r->addr, addr, len) == 0;
}

void
intercept_memory_init(struct intercept_memory *m, double remember)
{
	memset(m, 0, sizeof(*m));
	m->remember = remember;
}

static struct intercept_refusal *
find(const struct intercept_memory *m, const struct sockaddr *client, const char *key,
     ev_tstamp now)
{
	for (unsigned i = 0; i < INTERCEPT_REFUSALS; i++) {
		const struct intercept_refusal *r = &m->slot[i];

		if (r->until > now && same_address(r, client) && strcmp(r->key, key) == 0)
			return (struct intercept_refusal *)r;
	}
	return NULL;
}

bool
intercept_memory_add(struct intercept_memory *m, const struct sockaddr *client, const char *key,
                     ev_tstamp now)
{
	struct intercept_refusal *r = find(m, client, key, now);
	bool fresh = r == NULL;
	size_t len;
	const void *addr = address_of(client, &len);

	if (!r) {
		r = &m->slot[0];
		for (unsigned i = 1; i < INTERCEPT_REFUSALS && r->until > now; i++)
			if (m->slot[i].until < r->until)
				r = &m->slot[i];
	}
	memset(r->addr, 0, sizeof(r->addr));
	memcpy(r->addr, addr, len);
	r->family = client->sa_family;
	snprintf(r->key, sizeof(r->key), "%s", key);
	r->until = now + m->remember;
	return fresh;
}

bool
intercept_memory_has(const struct intercept_memory *m, const struct sockaddr *client,
                     const char *key, ev_tstamp now)
{
	return find(m, client, key, now) != NULL;
}
