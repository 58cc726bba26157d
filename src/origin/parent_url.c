#include "kp/parent_url.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kp/chars.h"
#include "kp/cidr.h"
#include "kp/hostpattern.h"

static const struct {
	const char *scheme;
	enum parent_kind kind;
} schemes[] = {
	{"socks5h://", PARENT_SOCKS5H},
	{"socks5://", PARENT_SOCKS5},
	{"http://", PARENT_HTTP},
};

/* Percent-decodes len bytes of s into out (RFC 3986 2.1); false when malformed or too long. */
static bool
decode_userinfo_part(const char *s, size_t len, char *out, size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (c == '%') {
			int hi, lo;

			if (i + 2 >= len || (hi = char_hex_value(s[i + 1])) < 0 ||
			    (lo = char_hex_value(s[i + 2])) < 0)
				return false;
			c = (char)(hi << 4 | lo);
			i += 2;
		}
		if (c == '\0' || n + 1 >= cap)
			return false;
		out[n++] = c;
	}
	out[n] = '\0';
	return true;
}

const char *
parent_url_parse(const char *url, struct parent_url *p)
{
	const char *rest = NULL, *at, *host, *host_end, *port_at, *end;
	unsigned long port;
	char *num_end;
	size_t host_len;

	memset(p, 0, sizeof(*p));
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]) && !rest; i++) {
		size_t n = strlen(schemes[i].scheme);

		if (strncasecmp(url, schemes[i].scheme, n) == 0) {
			rest = url + n;
			p->kind = schemes[i].kind;
		}
	}
	if (!rest)
		return "a parent is socks5h://, socks5:// or http:// followed by host:port";
	end = rest + strcspn(rest, "/?#");
	if (*end && strcmp(end, "/") != 0)
		return "a parent URL has no path: scheme://[user:password@]host:port";
	/* The last '@' ends the credentials: a password may hold one, encoded or not. */
	host = rest;
	for (at = rest; at < end; at++)
		if (*at == '@')
			host = at + 1;
	if (host != rest) {
		const char *colon = memchr(rest, ':', (size_t)(host - 1 - rest));
		const char *user_end = colon ? colon : host - 1;

		if (!decode_userinfo_part(rest, (size_t)(user_end - rest), p->user, sizeof(p->user)) ||
		    (colon && !decode_userinfo_part(colon + 1, (size_t)(host - 1 - colon - 1),
		                                    p->password, sizeof(p->password))))
			return "a parent's user or password is malformed or too long "
			       "(at most 255 bytes each, %XX for special characters)";
		if (!p->user[0])
			return "a parent URL with '@' needs a user name before it";
	}
	if (*host == '[') {
		host_end = memchr(host, ']', (size_t)(end - host));
		if (!host_end)
			return "a parent's IPv6 address needs its closing ']'";
		port_at = host_end + 1;
		host++;
	} else {
		host_end = memchr(host, ':', (size_t)(end - host));
		if (!host_end)
			host_end = end;
		port_at = host_end;
	}
	host_len = (size_t)(host_end - host);
	if (host_len == 0 || host_len >= sizeof(p->host))
		return "a parent URL needs a host (at most 255 bytes)";
	if (port_at >= end || *port_at != ':' || !char_is_digit(port_at[1]))
		return "a parent URL needs its port, e.g. socks5h://127.0.0.1:9050";
	errno = 0;
	port = strtoul(port_at + 1, &num_end, 10);
	if (errno || num_end != end || port == 0 || port > 65535)
		return "a parent's port must be 1-65535";
	memcpy(p->host, host, host_len);
	p->host[host_len] = '\0';
	for (size_t i = 0; i < host_len; i++)
		if (!char_is_alnum(p->host[i]) && !strchr("-._:", p->host[i]))
			return "a parent's host has a character no host name has";
	p->port = (uint16_t)port;
	return NULL;
}

const char *
parent_pattern_problem(const char *pattern)
{
	struct cidr c;

	if (strchr(pattern, '/'))
		return cidr_parse(pattern, &c) < 0 ? "not a range such as 10.0.0.0/8" : NULL;
	return host_pattern_problem(pattern);
}
