#include "kp/parent_wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "kp/chars.h"

/* SOCKS5 address types (RFC 1928 section 5). */
#define ATYP_IPV4 0x01
#define ATYP_NAME 0x03
#define ATYP_IPV6 0x04

/*
 * AF_INET or AF_INET6 with the address in bytes when host is a literal
 * ("[::1]" as well as "::1"); 0 for a name.
 */
static int
host_literal(const char *host, uint8_t bytes[16])
{
	char inner[INET6_ADDRSTRLEN + 1];
	size_t n = strlen(host);

	if (inet_pton(AF_INET, host, bytes) == 1)
		return AF_INET;
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < sizeof(inner)) {
		memcpy(inner, host + 1, n - 2);
		inner[n - 2] = '\0';
		host = inner;
	}
	if (inet_pton(AF_INET6, host, bytes) == 1)
		return AF_INET6;
	return 0;
}

/*
 * A host as RFC 3986 allows it in an authority: an IP literal, or a
 * reg-name (unreserved characters, sub-delims, percent signs). Nothing
 * that ends a line, splits the authority ("@", "/") or hides from the
 * person reading the logs gets into a request.
 */
static bool
host_ok(const char *host, const char **why)
{
	uint8_t bytes[16];

	if (!*host) {
		*why = "the host name is empty";
		return false;
	}
	if (host_literal(host, bytes))
		return true;
	for (const char *c = host; *c; c++) {
		if (!char_is_alnum(*c) && !strchr("-._~!$&'()*+,;=%", *c)) {
			*why = "the host has characters no host name has";
			return false;
		}
	}
	return true;
}

size_t
parent_socks5_greeting(uint8_t out[PARENT_SOCKS5_GREETING_MAX], bool password)
{
	size_t n = 0;

	out[n++] = 0x05;
	out[n++] = password ? 2 : 1;
	/* "No authentication" is offered even with credentials: the parent may not need them. */
	out[n++] = PARENT_SOCKS5_NO_AUTH;
	if (password)
		out[n++] = PARENT_SOCKS5_PASSWORD;
	return n;
}

ssize_t
parent_socks5_login(uint8_t *out, size_t cap, const char *user, const char *password,
                    const char **why)
{
	size_t ulen = strlen(user), plen = strlen(password), n = 0;

	if (ulen > 255 || plen > 255) {
		*why = "SOCKS5 takes a username and a password of at most 255 bytes each";
		return -1;
	}
	if (3 + ulen + plen > cap) {
		*why = "the login does not fit in the buffer";
		return -1;
	}
	out[n++] = 0x01;   /* the version of RFC 1929's sub-negotiation, not of SOCKS */
	out[n++] = (uint8_t)ulen;
	memcpy(out + n, user, ulen);
	n += ulen;
	out[n++] = (uint8_t)plen;
	memcpy(out + n, password, plen);
	n += plen;
	return (ssize_t)n;
}

ssize_t
parent_socks5_connect(uint8_t *out, size_t cap, const char *host, uint16_t port,
                      const struct sockaddr *addr, const char **why)
{
	uint8_t bytes[16];
	size_t alen, n = 0;
	int family = 0;

	if (addr && addr->sa_family == AF_INET) {
		memcpy(bytes, &((const struct sockaddr_in *)addr)->sin_addr, 4);
		family = AF_INET;
	} else if (addr && addr->sa_family == AF_INET6) {
		memcpy(bytes, &((const struct sockaddr_in6 *)addr)->sin6_addr, 16);
		family = AF_INET6;
	} else if (addr) {
		*why = "the origin's address is neither IPv4 nor IPv6";
		return -1;
	} else {
		if (!host_ok(host, why))
			return -1;
		family = host_literal(host, bytes);
	}
	alen = family == AF_INET ? 4 : family == AF_INET6 ? 16 : strlen(host);
	if (!family && alen > 255) {
		*why = "a SOCKS5 host name is at most 255 bytes";
		return -1;
	}
	if (4 + 1 + alen + 2 > cap) {
		*why = "the request does not fit in the buffer";
		return -1;
	}
	out[n++] = 0x05;
	out[n++] = 0x01;   /* CONNECT */
	out[n++] = 0x00;
	if (family == AF_INET) {
		out[n++] = ATYP_IPV4;
		memcpy(out + n, bytes, 4);
	} else if (family == AF_INET6) {
		out[n++] = ATYP_IPV6;
		memcpy(out + n, bytes, 16);
	} else {
		out[n++] = ATYP_NAME;
		out[n++] = (uint8_t)alen;
		memcpy(out + n, host, alen);
	}
	n += alen;
	out[n++] = (uint8_t)(port >> 8);
	out[n++] = (uint8_t)port;
	return (ssize_t)n;
}

/* Base64 of in at out (with padding, NUL-terminated); the characters written. */
static size_t
b64_encode(const uint8_t *in, size_t len, char *out)
{
	static const char digits[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = 0;

	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t)in[i + 1] << 8;
		if (i + 2 < len)
			v |= in[i + 2];
		out[n++] = digits[v >> 18 & 63];
		out[n++] = digits[v >> 12 & 63];
		out[n++] = i + 1 < len ? digits[v >> 6 & 63] : '=';
		out[n++] = i + 2 < len ? digits[v & 63] : '=';
	}
	out[n] = '\0';
	return n;
}

ssize_t
parent_http_authorization(char *out, size_t cap, const char *user, const char *password,
                          const char **why)
{
	static const char field[] = "Proxy-Authorization: Basic ";
	size_t ulen = strlen(user), plen = strlen(password), n;
	uint8_t pair[512];

	/* RFC 7617: the first colon ends the user-id; one inside would move the split. */
	if (strchr(user, ':')) {
		*why = "HTTP Basic cannot carry a username with a colon";
		return -1;
	}
	if (ulen + 1 + plen > sizeof(pair) ||
	    sizeof(field) - 1 + (ulen + 1 + plen + 2) / 3 * 4 + 2 + 1 > cap) {
		*why = "the username and password do not fit in the request";
		return -1;
	}
	memcpy(pair, user, ulen);
	pair[ulen] = ':';
	memcpy(pair + ulen + 1, password, plen);
	memcpy(out, field, sizeof(field) - 1);
	n = sizeof(field) - 1;
	n += b64_encode(pair, ulen + 1 + plen, out + n);
	memcpy(out + n, "\r\n", 3);
	return (ssize_t)(n + 2);
}

ssize_t
parent_http_connect(char *out, size_t cap, const char *host, uint16_t port, const char *user,
                    const char *password, const char **why)
{
	uint8_t bytes[16];
	bool bracket;
	size_t hlen, n;
	int w;

	if (!host_ok(host, why))
		return -1;
	hlen = strlen(host);
	/* Checked ahead so every write below is known to fit; the margin is the fixed text. */
	if (hlen > cap / 4) {
		*why = "the host name does not fit in the request";
		return -1;
	}
	bracket = host[0] != '[' && host_literal(host, bytes) == AF_INET6;
	w = snprintf(out, cap, "CONNECT %s%s%s:%u HTTP/1.1\r\nHost: %s%s%s:%u\r\n",
	             bracket ? "[" : "", host, bracket ? "]" : "", port, bracket ? "[" : "", host,
	             bracket ? "]" : "", port);
	if (w < 0 || (size_t)w >= cap) {
		*why = "the request does not fit in the buffer";
		return -1;
	}
	n = (size_t)w;
	if (user) {
		ssize_t a = parent_http_authorization(out + n, cap - n, user, password, why);

		if (a < 0)
			return -1;
		n += (size_t)a;
	}
	if (n + 3 > cap) {
		*why = "the request does not fit in the buffer";
		return -1;
	}
	memcpy(out + n, "\r\n", 2);
	n += 2;
	out[n] = '\0';
	return (ssize_t)n;
}

/* ---- SOCKS5 replies ------------------------------------------------------- */

enum parent_wire
parent_socks5_method_check(const uint8_t *p, size_t len, size_t *need, const char **bad)
{
	*need = 2;
	if (len >= 1 && p[0] != 0x05) {
		*bad = "the method reply is not SOCKS version 5";
		return PARENT_WIRE_BAD;
	}
	return len >= 2 ? PARENT_WIRE_WHOLE : PARENT_WIRE_SHORT;
}

enum parent_wire
parent_socks5_login_check(const uint8_t *p, size_t len, size_t *need, const char **bad)
{
	*need = 2;
	if (len >= 1 && p[0] != 0x01 && p[0] != 0x05) {
		*bad = "the login reply has neither version 1 nor 5";
		return PARENT_WIRE_BAD;
	}
	return len >= 2 ? PARENT_WIRE_WHOLE : PARENT_WIRE_SHORT;
}

static const char *const rep_texts[] = {
	[0x00] = "succeeded",
	[0x01] = "general SOCKS server failure",
	[0x02] = "connection not allowed by ruleset",
	[0x03] = "network unreachable",
	[0x04] = "host unreachable",
	[0x05] = "connection refused",
	[0x06] = "TTL expired",
	[0x07] = "command not supported",
	[0x08] = "address type not supported",
};

const char *
parent_socks5_rep_text(uint8_t rep)
{
	return rep < sizeof(rep_texts) / sizeof(rep_texts[0]) ? rep_texts[rep] : NULL;
}

enum parent_wire
parent_socks5_reply_check(const uint8_t *p, size_t len, size_t *need, const char **bad)
{
	/*
	 * Until ATYP and the byte after it are in, the floor is the shortest
	 * reply of all, a one-byte name (8 bytes), not IPv4's 10: reading 10
	 * could take origin bytes behind a short reply.
	 */
	*need = 4 + 1 + 1 + 2;
	if (len >= 1 && p[0] != 0x05) {
		*bad = "the reply is not SOCKS version 5";
		return PARENT_WIRE_BAD;
	}
	if (len >= 2 && !parent_socks5_rep_text(p[1])) {
		*bad = "the reply code is unassigned";
		return PARENT_WIRE_BAD;
	}
	if (len >= 3 && p[2] != 0x00) {
		*bad = "the reserved byte is not 0";
		return PARENT_WIRE_BAD;
	}
	if (len >= 4) {
		switch (p[3]) {
		case ATYP_IPV4:
			*need = 4 + 4 + 2;
			break;
		case ATYP_IPV6:
			*need = 4 + 16 + 2;
			break;
		case ATYP_NAME:
			if (len < 5)
				return PARENT_WIRE_SHORT;
			if (p[4] == 0) {
				*bad = "the bound address is an empty name";
				return PARENT_WIRE_BAD;
			}
			*need = 4 + 1 + (size_t)p[4] + 2;
			break;
		default:
			*bad = "the address type is unknown";
			return PARENT_WIRE_BAD;
		}
	}
	return len >= *need ? PARENT_WIRE_WHOLE : PARENT_WIRE_SHORT;
}

/* ---- the head of an HTTP answer ------------------------------------------- */

static const char version_prefix[] = "HTTP/1.";

void
parent_http_reply_init(struct parent_http_reply *r)
{
	memset(r, 0, sizeof(*r));
	r->at = PARENT_HTTP_VERSION;
}

/* What a reason phrase keeps of c: printable ASCII, anything else as '?'. */
static void
reason_put(struct parent_http_reply *r, unsigned char c)
{
	if (r->reason_len == PARENT_REASON_MAX)
		return;
	if (c == '\t')
		c = ' ';
	r->reason[r->reason_len++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	r->reason[r->reason_len] = '\0';
}

/*
 * A head ended. An interim answer (1xx, but not 101, which would switch
 * protocols and is final) is passed over: the next status line starts.
 */
static bool
head_ended(struct parent_http_reply *r)
{
	if (r->status / 100 != 1 || r->status == 101)
		return true;
	r->at = PARENT_HTTP_VERSION;
	r->vpos = 0;
	r->status = 0;
	r->field_seen = false;
	r->reason_len = 0;
	r->reason[0] = '\0';
	return false;
}

/* A byte of the status line or of a field's value: 0, or -1 when it is wrong. */
static int
status_line_byte(struct parent_http_reply *r, unsigned char c, const char **bad)
{
	switch (r->at) {
	case PARENT_HTTP_VERSION:
		if (c != (unsigned char)version_prefix[r->vpos]) {
			*bad = "not an HTTP/1.x status line";
			return -1;
		}
		if (++r->vpos == sizeof(version_prefix) - 1)
			r->at = PARENT_HTTP_MINOR;
		return 0;
	case PARENT_HTTP_MINOR:
		if (!char_is_digit((char)c)) {
			*bad = "not an HTTP/1.x status line";
			return -1;
		}
		r->at = PARENT_HTTP_CODE_SP;
		return 0;
	case PARENT_HTTP_CODE_SP:
		if (c != ' ') {
			*bad = "no space after the HTTP version";
			return -1;
		}
		r->at = PARENT_HTTP_CODE;
		r->vpos = 0;
		return 0;
	case PARENT_HTTP_CODE:
		if (!char_is_digit((char)c) || (r->vpos == 0 && (c < '1' || c > '5'))) {
			*bad = "the status code is not 100 to 599";
			return -1;
		}
		r->status = r->status * 10 + (c - '0');
		if (++r->vpos == 3)
			r->at = PARENT_HTTP_CODE_END;
		return 0;
	case PARENT_HTTP_CODE_END:
		/* The space before an empty reason is often left out; both are taken. */
		if (c == ' ')
			r->at = PARENT_HTTP_REASON;
		else if (c == '\r')
			r->at = PARENT_HTTP_LINE_CR;
		else if (c == '\n')
			r->at = PARENT_HTTP_LINE_START;
		else {
			*bad = "the status code is not three digits";
			return -1;
		}
		return 0;
	case PARENT_HTTP_REASON:
	case PARENT_HTTP_VALUE:
		if (c == '\r')
			r->at = PARENT_HTTP_LINE_CR;
		else if (c == '\n')
			r->at = PARENT_HTTP_LINE_START;
		else if (c == '\0') {
			*bad = "a NUL byte in the head";
			return -1;
		} else if (r->at == PARENT_HTTP_REASON)
			reason_put(r, c);
		return 0;
	default:
		break;
	}
	*bad = "the reader is lost";
	return -1;
}

/* One byte of the head: 1 when it ended the head, 0 when more follows, -1 when it is wrong. */
static int
http_byte(struct parent_http_reply *r, unsigned char c, const char **bad)
{
	switch (r->at) {
	case PARENT_HTTP_LINE_CR:
		if (c != '\n') {
			*bad = "a CR not followed by LF";
			return -1;
		}
		r->at = PARENT_HTTP_LINE_START;
		return 0;
	case PARENT_HTTP_LINE_START:
		if (c == '\r') {
			r->at = PARENT_HTTP_END_CR;
			return 0;
		}
		if (c == '\n')
			return head_ended(r) ? 1 : 0;
		if ((c == ' ' || c == '\t') && r->field_seen) {
			r->at = PARENT_HTTP_VALUE;   /* obs-fold: more of the field before */
			return 0;
		}
		if (!char_is_tchar((char)c)) {
			*bad = "a header line that is not a field";
			return -1;
		}
		r->at = PARENT_HTTP_NAME;
		r->field_seen = true;
		return 0;
	case PARENT_HTTP_NAME:
		if (c == ':')
			r->at = PARENT_HTTP_VALUE;
		else if (!char_is_tchar((char)c)) {
			*bad = "a header field name without its colon";
			return -1;
		}
		return 0;
	case PARENT_HTTP_END_CR:
		if (c != '\n') {
			*bad = "a CR not followed by LF";
			return -1;
		}
		return head_ended(r) ? 1 : 0;
	default:
		return status_line_byte(r, c, bad);
	}
	*bad = "the reader is lost";
	return -1;
}

enum parent_wire
parent_http_reply_feed(struct parent_http_reply *r, const uint8_t *p, size_t len, size_t *took,
                       const char **bad)
{
	for (size_t i = 0; i < len; i++) {
		int end = http_byte(r, p[i], bad);

		*took = i + 1;
		if (end < 0)
			return PARENT_WIRE_BAD;
		r->len++;
		if (end > 0)
			return PARENT_WIRE_WHOLE;
		/* The limit holds the end too: a head of exactly the most may still end here. */
		if (r->len == PARENT_HTTP_HEAD_MAX) {
			*bad = "oversized: no end of the head within 8 KiB";
			return PARENT_WIRE_BAD;
		}
	}
	*took = len;
	return PARENT_WIRE_SHORT;
}
