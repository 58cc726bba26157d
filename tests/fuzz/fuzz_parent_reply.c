/*
 * libFuzzer target: what a parent proxy answers (parent_wire.h), read by
 * the SOCKS5 method, login and CONNECT reply readers and by the HTTP
 * CONNECT head reader, and the requests built from a host, a username and
 * a password the input names.
 *
 * The input is the parent's bytes, read by every reader. It is also cut at
 * NUL bytes into a host, a username and a password for the requests.
 *
 * Asserted, besides no crash, leak or sanitizer report, against checks
 * written here apart from the readers:
 * - at every prefix, a SOCKS reader says BAD exactly when some byte so far
 *   breaks RFC 1928's (or 1929's) layout, WHOLE exactly when a reply of
 *   the layout's length is in, and otherwise asks for more bytes, never
 *   more than the shortest valid reply with that prefix: the handshake
 *   reads what it is asked for, and a byte too many is the origin's;
 * - the HTTP reader says the same fed whole or in pieces of any size;
 *   WHOLE only for bytes that are, line by line, HTTP/1.x heads (interim
 *   1xx ones, then a final one) ending in an empty line within 8 KiB, at
 *   exactly that line's end, with its status and its reason cleaned; BAD
 *   exactly when a line breaks that or 8 KiB pass without an end;
 * - a request built is what the RFCs lay out for that host: the name or
 *   address back from the bytes, the port, Basic credentials that decode
 *   to user:password, and no line break but the request's own; a host
 *   refused is one the rules refuse.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp/parent_wire.h"

#define HEAD_MAX PARENT_HTTP_HEAD_MAX

/* ---- SOCKS5 ---------------------------------------------------------------- */

/* Can p[0..k) start a CONNECT reply? Position by position, as RFC 1928 section 6 lays it out. */
static bool
reply_prefix_ok(const uint8_t *p, size_t k)
{
	static const uint8_t atyps[] = {1, 3, 4};

	if (k > 0 && p[0] != 5)
		return false;
	if (k > 1 && p[1] > 8)
		return false;
	if (k > 2 && p[2] != 0)
		return false;
	if (k > 3 && !memchr(atyps, p[3], sizeof(atyps)))
		return false;
	if (k > 4 && p[3] == 3 && p[4] == 0)
		return false;
	return true;
}

/* The shortest reply p[0..k) can be the start of (k bytes valid already). */
static size_t
reply_min_len(const uint8_t *p, size_t k)
{
	if (k < 4)
		return 4 + 1 + 1 + 2;
	switch (p[3]) {
	case 1:
		return 10;
	case 4:
		return 22;
	default:
		return k < 5 ? 8 : 4 + 1 + (size_t)p[4] + 2;
	}
}

static void
check_socks_reply(const uint8_t *data, size_t size)
{
	size_t top = size < 300 ? size : 300;

	for (size_t k = 0; k <= top; k++) {
		const char *bad = NULL;
		size_t need = 0;
		enum parent_wire v = parent_socks5_reply_check(data, k, &need, &bad);

		if (!reply_prefix_ok(data, k)) {
			assert(v == PARENT_WIRE_BAD && bad && *bad);
			/* Once wrong, wrong for good: no later byte makes it a reply. */
			return;
		}
		assert(v != PARENT_WIRE_BAD);
		assert(need <= PARENT_SOCKS5_REPLY_MAX);
		if (k >= 4 && (data[3] != 3 || k >= 5)) {
			/* The layout is known: WHOLE at exactly its length. */
			assert(need == reply_min_len(data, k));
			assert(v == (k >= need ? PARENT_WIRE_WHOLE : PARENT_WIRE_SHORT));
		} else {
			assert(v == PARENT_WIRE_SHORT);
			assert(need > k && need <= reply_min_len(data, k));
		}
		if (v == PARENT_WIRE_WHOLE) {
			assert(need <= k);
			assert(parent_socks5_rep_text(data[1]) != NULL);
			return;
		}
	}
}

/* The method and the login verdict: two bytes, the first a version. */
static void
check_two_byte(const uint8_t *data, size_t size, bool login)
{
	for (size_t k = 0; k <= size && k <= 3; k++) {
		const char *bad = NULL;
		size_t need = 0;
		enum parent_wire v = login ? parent_socks5_login_check(data, k, &need, &bad)
		                           : parent_socks5_method_check(data, k, &need, &bad);
		bool version_ok = k == 0 || data[0] == 5 || (login && data[0] == 1);

		assert(need == 2);
		if (!version_ok) {
			assert(v == PARENT_WIRE_BAD && bad);
			return;
		}
		assert(v == (k >= 2 ? PARENT_WIRE_WHOLE : PARENT_WIRE_SHORT));
	}
}

/* ---- the HTTP head, checked line by line ----------------------------------- */

static bool
is_tchar(uint8_t c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/*
 * A status line's text (no line end), whole or only begun: "HTTP/1.",
 * a digit, a space, a code 100 to 599, then nothing or a space and a reason.
 */
static bool
status_text_ok(const uint8_t *l, size_t n, bool whole, int *status)
{
	static const char pattern[] = "HTTP/1.d cdd";   /* d: a digit, c: 1 to 5 */

	for (size_t i = 0; i < n && i < 12; i++) {
		char want = pattern[i];
		bool ok = want == 'd'   ? l[i] >= '0' && l[i] <= '9'
		          : want == 'c' ? l[i] >= '1' && l[i] <= '5'
		                        : l[i] == (uint8_t)want;
		if (!ok)
			return false;
	}
	if (n > 12 && l[12] != ' ')
		return false;
	if (whole && n < 12)
		return false;
	if (n >= 12)
		*status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
	return true;
}

/* A field line's text (not empty): a name and a colon, or a folded line after a field. */
static bool
field_text_ok(const uint8_t *l, size_t n, bool whole, bool field_seen)
{
	size_t i = 0;

	if (l[0] == ' ' || l[0] == '\t')
		return field_seen;
	while (i < n && is_tchar(l[i]))
		i++;
	if (i == 0)
		return false;
	if (i == n)
		return !whole;
	return l[i] == ':';
}

struct head_verdict {
	enum parent_wire v;
	size_t end;       /* WHOLE: where the final head ends */
	int status;
	char reason[PARENT_REASON_MAX + 1];
};

static void
clean_reason(const uint8_t *l, size_t n, char *out)
{
	size_t k = 0;

	for (size_t i = 13; i < n && k < PARENT_REASON_MAX; i++) {
		uint8_t c = l[i] == '\t' ? ' ' : l[i];

		out[k++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	out[k] = '\0';
}

/* What the bytes are, read by lines: the reader's verdict must be this. */
static struct head_verdict
head_oracle(const uint8_t *data, size_t size)
{
	struct head_verdict hv = {.v = PARENT_WIRE_SHORT};
	size_t at = 0;
	bool status_next = true, field_seen = false;
	int status = 0;

	while (at < size) {
		const uint8_t *nl = memchr(data + at, '\n', size - at);
		bool whole = nl != NULL;
		size_t n = whole ? (size_t)(nl - (data + at)) : size - at;
		const uint8_t *l = data + at;
		size_t next = whole ? at + n + 1 : size;

		/*
		 * A CR only as the last byte: ending the line, or ending it with
		 * the LF still to come. Either way the text before it is all of
		 * the line (ends), though only an LF ends the head (whole).
		 */
		bool ends = whole;

		if (n > 0 && l[n - 1] == '\r') {
			n--;
			ends = true;
		}
		if (memchr(l, '\r', n) || memchr(l, '\0', n)) {
			hv.v = PARENT_WIRE_BAD;
			return hv;
		}
		if (status_next) {
			if (!status_text_ok(l, n, ends, &status)) {
				hv.v = PARENT_WIRE_BAD;
				return hv;
			}
			if (whole)
				clean_reason(l, n, hv.reason);
			if (whole)
				status_next = false;
		} else if (n == 0 && whole) {
			bool interim = status / 100 == 1 && status != 101;

			if (next <= HEAD_MAX && !interim) {
				hv.v = PARENT_WIRE_WHOLE;
				hv.end = next;
				hv.status = status;
				return hv;
			}
			status_next = true;
			field_seen = false;
			hv.reason[0] = '\0';
		} else if (n > 0) {
			if (!field_text_ok(l, n, ends, field_seen)) {
				hv.v = PARENT_WIRE_BAD;
				return hv;
			}
			field_seen = true;
		}
		if (next >= HEAD_MAX) {
			/* 8 KiB in and no end among them. */
			hv.v = PARENT_WIRE_BAD;
			return hv;
		}
		at = next;
	}
	return hv;
}

/* The reader, given the bytes in pieces whose sizes come from the bytes. */
static enum parent_wire
feed_in_pieces(struct parent_http_reply *r, const uint8_t *data, size_t size, size_t *took)
{
	size_t at = 0;

	parent_http_reply_init(r);
	*took = 0;
	while (at < size) {
		size_t piece = (size_t)(data[(at * 7) % size] % 13) + 1, got = 0;
		const char *bad = NULL;
		enum parent_wire v;

		if (piece > size - at)
			piece = size - at;
		v = parent_http_reply_feed(r, data + at, piece, &got, &bad);
		assert(got <= piece);
		assert(r->len <= HEAD_MAX);
		at += got;
		if (v != PARENT_WIRE_SHORT) {
			*took = at;
			return v;
		}
		assert(got == piece);
	}
	*took = at;
	return PARENT_WIRE_SHORT;
}

static void
check_http_head(const uint8_t *data, size_t size)
{
	struct parent_http_reply whole_r, piece_r;
	struct head_verdict want = head_oracle(data, size);
	const char *bad = NULL;
	size_t took = 0, piece_took = 0;
	enum parent_wire v;

	parent_http_reply_init(&whole_r);
	v = parent_http_reply_feed(&whole_r, data, size, &took, &bad);
	assert(took <= size);
	assert(v == want.v);
	assert(feed_in_pieces(&piece_r, data, size, &piece_took) == v);
	if (v == PARENT_WIRE_BAD) {
		assert(bad && *bad);
		return;
	}
	assert(took == piece_took);
	if (v == PARENT_WIRE_SHORT) {
		assert(took == size && size < HEAD_MAX);
		return;
	}
	assert(took == want.end && took <= HEAD_MAX);
	assert(whole_r.status == want.status && piece_r.status == want.status);
	assert(strcmp(whole_r.reason, want.reason) == 0);
	assert(strcmp(piece_r.reason, want.reason) == 0);
	assert(strlen(whole_r.reason) == whole_r.reason_len);
	/* Not a byte past the head: the bytes after it are the origin's. */
	assert(data[took - 1] == '\n');
}

/* ---- the requests ------------------------------------------------------------ */

/* host's address when it is an IP literal (IPv6 with or without brackets): its family, else 0. */
static int
literal(const char *host, uint8_t bytes[16])
{
	char inner[64];
	size_t n = strlen(host);

	if (inet_pton(AF_INET, host, bytes) == 1)
		return AF_INET;
	if (inet_pton(AF_INET6, host, bytes) == 1)
		return AF_INET6;
	if (n >= 2 && n < sizeof(inner) && host[0] == '[' && host[n - 1] == ']') {
		memcpy(inner, host + 1, n - 2);
		inner[n - 2] = '\0';
		if (inet_pton(AF_INET6, inner, bytes) == 1)
			return AF_INET6;
	}
	return 0;
}

/* RFC 3986 3.2.2: an IP literal, or a reg-name of unreserved, sub-delims and "%". */
static bool
host_acceptable(const char *host)
{
	static const char regname[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                              "0123456789-._~!$&'()*+,;=%";
	uint8_t bytes[16];

	return *host && (literal(host, bytes) || strspn(host, regname) == strlen(host));
}

static int
b64_value(char c)
{
	const char *digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *at = c ? strchr(digits, c) : NULL;

	return at ? (int)(at - digits) : -1;
}

/* Decodes padded base64 of n characters; the bytes written, or -1. */
static long
b64_decode(const char *in, size_t n, uint8_t *out)
{
	long len = 0;

	if (n % 4)
		return -1;
	for (size_t i = 0; i < n; i += 4) {
		int v[4];

		for (int j = 0; j < 4; j++)
			v[j] = in[i + j] == '=' ? 0 : b64_value(in[i + j]);
		if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0)
			return -1;
		out[len++] = (uint8_t)(v[0] << 2 | v[1] >> 4);
		if (in[i + 2] != '=')
			out[len++] = (uint8_t)(v[1] << 4 | v[2] >> 2);
		if (in[i + 3] != '=')
			out[len++] = (uint8_t)(v[2] << 6 | v[3]);
	}
	return len;
}

static void
check_socks_request(const char *host, uint16_t port)
{
	uint8_t out[600], bytes[16];
	const char *why = NULL;
	ssize_t n = parent_socks5_connect(out, sizeof(out), host, port, NULL, &why);
	size_t hlen = strlen(host);

	if (n < 0) {
		assert(why && *why);
		assert(!host_acceptable(host) || hlen > 255);
		return;
	}
	assert(host_acceptable(host));
	assert(out[0] == 5 && out[1] == 1 && out[2] == 0);
	assert(out[n - 2] == port >> 8 && out[n - 1] == (port & 0xff));
	switch (out[3]) {
	case 1:
		assert(n == 10 && inet_pton(AF_INET, host, bytes) == 1);
		assert(memcmp(out + 4, bytes, 4) == 0);
		break;
	case 4:
		assert(n == 22 && literal(host, bytes) == AF_INET6);
		assert(memcmp(out + 4, bytes, 16) == 0);
		break;
	case 3:
		assert(hlen <= 255 && out[4] == hlen && (size_t)n == 7 + hlen);
		assert(memcmp(out + 5, host, hlen) == 0);
		assert(!literal(host, bytes));
		break;
	default:
		assert(!"no such address type");
	}
}

static void
check_http_request(const char *host, uint16_t port, const char *user, const char *password)
{
	char out[1400], pair[1100];
	uint8_t decoded[1100];
	const char *why = NULL, *auth;
	ssize_t n = parent_http_connect(out, sizeof(out), host, port, user, password, &why);
	unsigned lines = 0;

	if (n < 0) {
		assert(why && *why);
		assert(!host_acceptable(host) || (user && strchr(user, ':')) ||
		       strlen(host) > sizeof(out) / 4 ||
		       (user && strlen(user) + strlen(password) + 1 > 512));
		return;
	}
	assert(host_acceptable(host));
	assert((size_t)n == strlen(out));
	/* Every LF ends a CRLF the request itself writes: nothing of the host breaks a line. */
	for (ssize_t i = 0; i < n; i++) {
		if (out[i] == '\n') {
			assert(i > 0 && out[i - 1] == '\r');
			lines++;
		} else if (out[i] == '\r') {
			assert(i + 1 < n && out[i + 1] == '\n');
		}
	}
	assert(lines == (user ? 4u : 3u));
	assert(strncmp(out, "CONNECT ", 8) == 0 && strstr(out, host));
	assert(memcmp(out + n - 4, "\r\n\r\n", 4) == 0);
	auth = strstr(out, "\r\nProxy-Authorization: Basic ");
	assert(!!auth == !!user);
	if (user) {
		const char *b64 = auth + strlen("\r\nProxy-Authorization: Basic ");
		size_t blen = strcspn(b64, "\r");
		long dlen = b64_decode(b64, blen, decoded);
		int plen = snprintf(pair, sizeof(pair), "%s:%s", user, password);

		assert(dlen == plen && memcmp(decoded, pair, (size_t)plen) == 0);
	}
	(void)port;
}

static void
check_requests(const uint8_t *data, size_t size)
{
	char host[301], user[301], password[301];
	const uint8_t *p = data, *end = data + size;
	char *fields[3] = {host, user, password};
	int have = 0;
	uint16_t port = size >= 2 ? (uint16_t)(data[0] << 8 | data[1]) : 443;

	/* host NUL user NUL password: each cut at 300 bytes. */
	while (have < 3) {
		const uint8_t *nul = memchr(p, 0, (size_t)(end - p));
		size_t n = (size_t)((nul ? nul : end) - p);

		if (n > 300)
			n = 300;
		memcpy(fields[have], p, n);
		fields[have++][n] = '\0';
		if (!nul)
			break;
		p = nul + 1;
	}
	if (have < 3)
		password[0] = '\0';
	check_socks_request(host, port);
	check_http_request(host, port, have >= 2 ? user : NULL, password);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_two_byte(data, size, false);
	check_two_byte(data, size, true);
	check_socks_reply(data, size);
	check_http_head(data, size);
	check_requests(data, size);
	return 0;
}
