/*
 * Request-targets (RFC 9112 3.2): the absolute form a forward proxy is
 * sent, CONNECT's authority form, and the origin form of a request inside
 * an intercepted tunnel, each into the host, port, pool key, Host and path
 * the proxy goes on with (include/kp/http_target.h). Part of the http
 * module: the inner form reads its head's Host field.
 */
#include "kp/http.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "kp/chars.h"

#include "http_priv.h"

static bool
is_reg_name_char(char c)
{
	return char_is_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

static bool
is_ipv6_char(char c)
{
	return char_is_hex(c) || c == ':' || c == '.';
}

/* The pool key "host:port" ("[v6]:port"); host and port are set and fit. */
static void
write_key(struct http_target *t)
{
	size_t host_len = strlen(t->host), n = 0;

	if (t->ipv6_literal)
		t->key[n++] = '[';
	memcpy(t->key + n, t->host, host_len);
	n += host_len;
	if (t->ipv6_literal)
		t->key[n++] = ']';
	t->key[n++] = ':';
	n += format_uint(t->key + n, t->port);
	t->key[n] = '\0';
}

/*
 * authority = host [ ":" port ], host a reg-name or a bracketed IPv6 literal.
 * Fills host, port, authority and key; 0 or 400.
 */
static int
parse_authority(const char *auth, const char *auth_end, struct http_target *t, bool port_required)
{
	const char *host = auth, *host_end, *colon = NULL;
	size_t host_len, auth_len;
	unsigned long port = 80;

	if (memchr(auth, '@', (size_t)(auth_end - auth)))
		return 400;   /* userinfo is deprecated and a phishing tool (RFC 9110 4.2.4) */
	if (host < auth_end && *host == '[') {
		host_end = memchr(host, ']', (size_t)(auth_end - host));
		if (!host_end)
			return 400;
		for (const char *c = host + 1; c < host_end; c++)
			if (!is_ipv6_char(*c))
				return 400;
		if (host_end + 1 < auth_end) {
			if (host_end[1] != ':')
				return 400;
			colon = host_end + 1;
		}
		host++;
		t->ipv6_literal = true;
	} else {
		host_end = host;
		while (host_end < auth_end && *host_end != ':') {
			if (!is_reg_name_char(*host_end))
				return 400;
			host_end++;
		}
		if (host_end < auth_end)
			colon = host_end;
	}
	host_len = (size_t)(host_end - host);
	if (host_len == 0 || host_len >= sizeof(t->host))
		return 400;
	if (port_required && (!colon || colon + 1 == auth_end))
		return 400;
	if (colon && colon + 1 < auth_end) {
		port = 0;
		for (const char *c = colon + 1; c < auth_end; c++) {
			if (*c < '0' || *c > '9')
				return 400;
			port = port * 10 + (unsigned long)(*c - '0');
			if (port > 65535)
				return 400;
		}
		if (port == 0)
			return 400;
	}
	for (size_t i = 0; i < host_len; i++)
		t->host[i] = (char)((host[i] >= 'A' && host[i] <= 'Z') ? host[i] | 0x20 : host[i]);
	t->host[host_len] = '\0';
	t->port = (uint16_t)port;
	/*
	 * RFC 9112 3.2.2: Host is the target URI's authority, as the client wrote
	 * it; "host:" means the default port, so the bare colon goes.
	 */
	auth_len = (size_t)(auth_end - auth);
	if (colon && colon + 1 == auth_end)
		auth_len--;
	if (auth_len >= sizeof(t->authority))   /* only leading zeros in a port get here */
		auth_len = sizeof(t->authority) - 1;
	memcpy(t->authority, auth, auth_len);
	t->authority[auth_len] = '\0';
	write_key(t);
	return 0;
}

int
http_parse_target(const char *url, size_t len, struct http_target *t)
{
	const char *p = url, *end = url + len, *auth, *auth_end, *path_end;
	int status;

	memset(t, 0, sizeof(*t));
	if (len == 0 || url[0] == '/' || url[0] == '*')
		return 400;   /* origin-form or asterisk-form: we are not the origin */
	while (p < end && *p != ':' && *p != '/')
		p++;
	if (p + 3 > end || p[0] != ':' || p[1] != '/' || p[2] != '/')
		return 400;
	if ((size_t)(p - url) != 4 || strncasecmp(url, "http", 4) != 0)
		return 501;   /* https:// in absolute form, ftp://, ... */
	auth = p + 3;
	auth_end = auth;
	while (auth_end < end && *auth_end != '/' && *auth_end != '?' && *auth_end != '#')
		auth_end++;
	status = parse_authority(auth, auth_end, t, false);
	if (status)
		return status;
	/* A fragment never goes on the wire. */
	path_end = memchr(auth_end, '#', (size_t)(end - auth_end));
	if (!path_end)
		path_end = end;
	if (auth_end == path_end) {
		t->path = "/";
		t->path_len = 1;
		t->path_empty = true;
	} else {
		/* "http://h?q" has an empty path; the head writer adds the slash. */
		t->path = auth_end;
		t->path_len = (size_t)(path_end - auth_end);
	}
	return 0;
}

/* Only interception reads requests inside a CONNECT, and it needs TLS. */
#if KP_TLS
int
http_parse_inner_target(const char *url, size_t len, const struct http_head *h, const char *base,
                        const struct http_target *origin, struct http_target *t)
{
	const char *end = url + len, *path = url;
	const char *host_value = NULL;
	size_t host_len = 0;

	*t = *origin;
	if (len > 8 && strncasecmp(url, "https://", 8) == 0) {
		/* Absolute form is allowed, for the host the tunnel was asked for only. */
		struct http_target named;
		const char *auth = url + 8, *auth_end = auth, *after_host;

		while (auth_end < end && *auth_end != '/' && *auth_end != '?' && *auth_end != '#')
			auth_end++;
		memset(&named, 0, sizeof(named));
		if (parse_authority(auth, auth_end, &named, false))
			return 400;
		/* No port written: https's default, not the 80 parse_authority assumes. */
		after_host = auth;
		if (*auth == '[')
			after_host = memchr(auth, ']', (size_t)(auth_end - auth));
		if (!memchr(after_host, ':', (size_t)(auth_end - after_host)))
			named.port = 443;
		if (strcmp(named.host, origin->host) != 0 || named.port != origin->port)
			return 400;
		path = auth_end;
	} else if (len == 1 && url[0] == '*') {
		if (h->method != HTTP_OPTIONS)
			return 400;
		path = end;
	} else if (len == 0 || url[0] != '/') {
		return 400;
	}
	/* A fragment never goes on the wire. */
	{
		const char *hash = memchr(path, '#', (size_t)(end - path));

		if (hash)
			end = hash;
	}
	if (path == end) {
		t->path = "/";
		t->path_len = 1;
		t->path_empty = true;
	} else {
		t->path = path;
		t->path_len = (size_t)(end - path);
	}
	/* The client's own Host goes on unchanged: it named the site inside the tunnel. */
	for (unsigned i = 0; i < h->nfields; i++)
		if (http_span_is(base, h->fields[i].name, "host")) {
			host_value = base + h->fields[i].value.off;
			host_len = h->fields[i].value.len;
			break;
		}
	if (host_value && host_len > 0 && host_len < sizeof(t->authority)) {
		memcpy(t->authority, host_value, host_len);
		t->authority[host_len] = '\0';
	} else if (origin->port == 443) {
		/* The CONNECT's authority without the default port. */
		snprintf(t->authority, sizeof(t->authority), "%s%s%s", origin->ipv6_literal ? "[" : "",
		         origin->host, origin->ipv6_literal ? "]" : "");
	}
	return 0;
}
#endif

int
http_parse_authority(const char *s, size_t len, struct http_target *t)
{
	memset(t, 0, sizeof(*t));
	if (len == 0)
		return 400;
	t->path = "";
	return parse_authority(s, s + len, t, true);
}
