#include "kp/hostpattern.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>

#include "kp/chars.h"

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
host_pattern_problem(const char *p)
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
		if (!(char_is_alnum(ch) || ch == '-' || ch == '.' || ch == '_'))
			return "not a host name, wildcard or IP address";
		if (ch == '.' && (i == 0 || name[i - 1] == '.'))
			return "empty label in the host name";
	}
	return NULL;
}

bool
host_pattern_match(const char *pattern, const char *host)
{
	unsigned char pa[16], ha[16];
	int pf, hf;

	if (is_ip_literal(pattern, pa, &pf))
		return is_ip_literal(host, ha, &hf) && pf == hf &&
		       memcmp(pa, ha, pf == AF_INET ? 4 : 16) == 0;
	/* An address is never a name below a domain: "*.2.7" must not take 192.0.2.7. */
	if (is_ip_literal(host, ha, &hf))
		return false;
	return host_name_pattern_match(pattern, host);
}

bool
host_name_pattern_match(const char *pattern, const char *host)
{
	size_t plen, hlen = name_len(host);

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
host_patterns_match(const char *const *patterns, unsigned n, const char *host)
{
	for (unsigned i = 0; i < n; i++)
		if (host_pattern_match(patterns[i], host))
			return true;
	return false;
}
