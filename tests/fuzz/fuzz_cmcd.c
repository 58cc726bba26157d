/*
 * libFuzzer target: Common Media Client Data (CTA-5004) as hls.c reads it
 * for read-ahead, a player's own word on its next request, which a client
 * writes in its CMCD-* fields or its CMCD query parameter.
 *
 * One input is read twice:
 * - as a request: its first line is the request-target (origin-form, as
 *   the proxy sends it and read-ahead reads it), every other line a field
 *   ("CMCD-Request: nor=\"seg2.m4s\",nrr=\"0-99\",bl=2100"). The head is
 *   parsed by the proxy's parser (fuzz_head.h), then CMCD is read from it
 *   (hls_cmcd_read), the next object's path made (hls_cmcd_path), and the
 *   target stripped of its CMCD parameter (hls_cmcd_strip);
 * - whole, as the value of one CMCD-Request field of a head made here (so
 *   bytes llhttp would refuse reach the list reader too), and again
 *   percent-encoded as the CMCD query parameter of a head without fields.
 *
 * Asserted, besides no crash, leak or sanitizer report:
 * - what hls_cmcd_read accepts holds what hls.h promises: nor decoded,
 *   NUL-terminated, at most HLS_MAX_PATH bytes of RFC 3986 characters, no
 *   scheme, no authority, no ".." (nor "%2e") segment; nrr first <= last.
 *   These decide which path on which origin the proxy fetches. A refusal
 *   leaves *hint untouched;
 * - the two transmission modes are one: a list in a field and the same
 *   list percent-encoded in the query read the same (CTA-5004 section 2);
 * - the next path is origin-form, takes nor's query and never the
 *   request's, has no "." or ".." segment left (unless nor is only a
 *   query, RFC 3986 5.2.2), and written as read-ahead writes its request
 *   (with nrr as Range) parses back the same; it fits in exactly its
 *   length (unless a ".." in the request's directory made it longer on
 *   the way, which hls.h refuses) and never in one byte less;
 * - stripping leaves the path and the other parameters as they were, no
 *   CMCD parameter, is idempotent, copies a path without CMCD as it is,
 *   ignores a CMCD parameter added, fits exactly, and is never longer.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuzz_head.h"
#include "fuzz_uri.h"
#include "kp/hls.h"

static const char *const raw_paths[] = {
	"/live/720p/seg_12.m4s",
	"/",
	"/a/b/c/d/seg.ts?token=x&CMCD=bl%3D1",
	"/vod/x/",
};

/* Is seg[0..len) "." or "..", or (with encoded) one spelled with "%2e"? */
static bool
is_dot(const char *seg, size_t len, bool encoded, bool dotdot_only)
{
	size_t dots = 0, i = 0;
	bool enc = false;

	while (i < len) {
		if (seg[i] == '.') {
			i++;
		} else if (len - i >= 3 && seg[i] == '%' && seg[i + 1] == '2' &&
		           (seg[i + 2] | 0x20) == 'e') {
			i += 3;
			enc = true;
		} else {
			return false;
		}
		dots++;
	}
	if (dots == 0 || dots > 2 || (enc && !encoded))
		return false;
	return !dotdot_only || dots == 2 || enc;
}

/* Does the path part of s (up to "?") have a segment is_dot says yes to? */
static bool
has_dot_segment(const char *s, size_t n, bool encoded, bool dotdot_only)
{
	const char *q = memchr(s, '?', n);
	size_t end = q ? (size_t)(q - s) : n;

	for (size_t i = 0;;) {
		const char *slash = memchr(s + i, '/', end - i);
		size_t len = slash ? (size_t)(slash - (s + i)) : end - i;

		if (is_dot(s + i, len, encoded, dotdot_only))
			return true;
		if (!slash)
			return false;
		i += len + 1;
	}
}

/* The query parameters of path named CMCD (the name exactly, with or without a value). */
static unsigned
cmcd_params(const char *path, size_t n)
{
	const char *q = memchr(path, '?', n), *end = path + n;
	unsigned count = 0;

	for (const char *p = q ? q + 1 : end; q && p <= end;) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		size_t len = amp ? (size_t)(amp - p) : (size_t)(end - p);

		if (len >= 4 && memcmp(p, "CMCD", 4) == 0 && (len == 4 || p[4] == '='))
			count++;
		if (!amp)
			break;
		p = amp + 1;
	}
	return count;
}

static size_t
path_part(const char *s, size_t n)
{
	const char *q = memchr(s, '?', n);

	return q ? (size_t)(q - s) : n;
}

/* ---- the checks ----------------------------------------------------------- */

static void
check_hint(const struct hls_cmcd *hint)
{
	assert(hint->has_nor || hint->has_nrr);
	if (hint->has_nrr)
		assert(hint->nrr.first <= hint->nrr.last);
	if (hint->has_nor) {
		const char *s = hint->nor;
		size_t n = hint->nor_len, first = strcspn(s, "/?");

		assert(n >= 1 && n <= HLS_MAX_PATH);
		assert(s[n] == '\0' && strlen(s) == n);
		assert(uri_clean(s, n));
		assert(!(n >= 2 && s[0] == '/' && s[1] == '/'));
		assert(!memchr(s, ':', first));
		assert(!has_dot_segment(s, n, true, true));
	}
}

/* hls_cmcd_strip of path, against hls.h's words. */
static void
check_strip(const char *path, size_t n)
{
	char *out = malloc(n ? n : 1), *again, *exact, *with;
	size_t len, len2, cap;

	assert(out);
	assert(hls_cmcd_strip(path, n, out, n, &len));
	assert(len <= n);
	assert(path_part(out, len) == path_part(path, n) &&
	       memcmp(out, path, path_part(path, n)) == 0);
	assert(cmcd_params(out, len) == 0);
	if (cmcd_params(path, n) == 0)
		assert(len == n && memcmp(out, path, n) == 0);
	/* Idempotent, and exactly as long as it says. */
	again = malloc(len ? len : 1);
	exact = malloc(len ? len : 1);
	assert(again && exact);
	assert(hls_cmcd_strip(out, len, again, len, &len2));
	assert(len2 == len && memcmp(again, out, len) == 0);
	assert(hls_cmcd_strip(path, n, exact, len, &len2));
	assert(len2 == len && memcmp(exact, out, len) == 0);
	if (len > 0)
		assert(!hls_cmcd_strip(path, n, exact, len - 1, &len2));
	/* A CMCD parameter added is taken out again. */
	cap = n + 16;
	with = malloc(cap);
	assert(with);
	memcpy(with, path, n);
	memcpy(with + n, memchr(path, '?', n) ? "&CMCD=bl%3D500" : "?CMCD=bl%3D500", 14);
	assert(hls_cmcd_strip(with, n + 14, again, len, &len2));
	assert(len2 == len && memcmp(again, out, len) == 0);
	free(with);
	free(exact);
	free(again);
	free(out);
}

/* The request read-ahead writes for the next object parses back to it. */
static void
check_request(const struct hls_cmcd *hint, const char *out, size_t n)
{
	static char text[HLS_MAX_PATH + 256];
	struct fuzz_head h;
	struct byte_range r;
	bool ranged = hint->has_nrr && hint->nrr.last != UINT64_MAX;
	int len;

	if (ranged)
		len = snprintf(text, sizeof(text),
		               "GET %.*s HTTP/1.1\r\nHost: h\r\n"
		               "Range: bytes=%" PRIu64 "-%" PRIu64 "\r\n",
		               (int)n, out, hint->nrr.first, hint->nrr.last);
	else
		len = snprintf(text, sizeof(text), "GET %.*s HTTP/1.1\r\nHost: h\r\n", (int)n, out);
	assert(len > 0 && (size_t)len < sizeof(text));
	assert(fuzz_head_parse(&h, HTTP_REQUEST, text, "", 0));
	assert(h.head.url.len == n && memcmp(h.text + h.head.url.off, out, n) == 0);
	assert(ranges_requested(&h.head, h.text, &r) == (ranged ? RANGE_SINGLE : RANGE_NONE));
	if (ranged)
		assert(r.first == hint->nrr.first && r.last == hint->nrr.last);
	fuzz_head_free(&h);
}

/* hls_cmcd_path of hint for a request for path, against hls.h's words. */
static void
check_path(const struct hls_cmcd *hint, const char *path, size_t path_len)
{
	char *out = malloc(HLS_MAX_PATH), *exact;
	size_t n, n2;
	bool ok;

	assert(out);
	ok = hls_cmcd_path(hint, path, path_len, out, HLS_MAX_PATH, &n);
	if (path_len == 0 || path[0] != '/')
		assert(!ok);
	if (!ok) {
		free(out);
		return;
	}
	assert(n >= 1 && n <= HLS_MAX_PATH && out[0] == '/');
	if (!hint->has_nor) {
		char *stripped = malloc(n);
		size_t sn;

		assert(stripped && hls_cmcd_strip(path, path_len, stripped, n, &sn));
		assert(sn == n && memcmp(stripped, out, n) == 0);
		free(stripped);
	} else {
		const char *nq = memchr(hint->nor, '?', hint->nor_len);
		size_t nq_len = nq ? hint->nor_len - (size_t)(nq - hint->nor) : 0;
		size_t op = path_part(out, n);

		/* nor's query and never the request's. */
		assert(n - op == nq_len && (!nq || memcmp(out + op, nq, nq_len) == 0));
		if (uri_clean(path, path_len))
			assert(uri_clean(out, n));
		/* A nor that is only a query keeps the request's path as it is (RFC 3986 5.2.2). */
		if (hint->nor[0] != '?')
			assert(!has_dot_segment(out, n, false, false));
		/* An absolute nor without dot segments is the path as it is. */
		if (hint->nor[0] == '/' && !has_dot_segment(hint->nor, hint->nor_len, true, false))
			assert(n == hint->nor_len && memcmp(out, hint->nor, n) == 0);
	}
	/*
	 * It fits in exactly its length, unless a ".." in the request's
	 * directory made the path longer on the way (hls.h: that is refused
	 * too); never in one byte less.
	 */
	exact = malloc(n);
	assert(exact);
	if (!hint->has_nor || hint->nor[0] == '/' ||
	    !has_dot_segment(path, path_len, false, true)) {
		assert(hls_cmcd_path(hint, path, path_len, exact, n, &n2));
		assert(n2 == n && memcmp(exact, out, n) == 0);
	}
	assert(!hls_cmcd_path(hint, path, path_len, exact, n - 1, &n2));
	free(exact);
	check_request(hint, out, n);
	free(out);
}

/* hls_cmcd_read, with *hint's bytes left as they were when it refuses. */
static bool
read_hint(const struct http_head *req, const char *base, const char *target, size_t target_len,
          struct hls_cmcd *hint)
{
	static struct hls_cmcd before;
	bool ok;

	memset(hint, 0xa5, sizeof(*hint));
	memset(&before, 0xa5, sizeof(before));
	ok = hls_cmcd_read(req, base, target, target_len, hint);
	if (ok)
		check_hint(hint);
	else
		assert(memcmp(hint, &before, sizeof(*hint)) == 0);
	return ok;
}

static bool
hints_equal(const struct hls_cmcd *a, const struct hls_cmcd *b)
{
	return a->has_nor == b->has_nor && a->has_nrr == b->has_nrr &&
	       (!a->has_nrr || (a->nrr.first == b->nrr.first && a->nrr.last == b->nrr.last)) &&
	       (!a->has_nor ||
	        (a->nor_len == b->nor_len && memcmp(a->nor, b->nor, a->nor_len) == 0));
}

/* The whole input as one CMCD-Request value, and as the CMCD parameter. */
static void
fuzz_raw(const char *data, size_t size)
{
	static const char name[] = "CMCD-Request";
	static struct hls_cmcd field_hint, query_hint;
	const char *path = raw_paths[size % (sizeof(raw_paths) / sizeof(raw_paths[0]))];
	struct http_head head;
	char *base, *target;
	size_t target_len;
	bool ok;

	base = malloc(sizeof(name) - 1 + size);
	assert(base);
	memcpy(base, name, sizeof(name) - 1);
	memcpy(base + sizeof(name) - 1, data, size);
	memset(&head, 0, sizeof(head));
	head.nfields = 1;
	head.fields[0].name = (struct http_span){0, sizeof(name) - 1};
	head.fields[0].value = (struct http_span){sizeof(name) - 1, (uint32_t)size};
	ok = read_hint(&head, base, path, strlen(path), &field_hint);
	if (ok)
		check_path(&field_hint, path, strlen(path));
	free(base);

	/* The same list in the query, every byte percent-encoded. */
	if (size > 4 * HLS_MAX_PATH)
		return;
	target_len = 8 + 3 * size;
	target = malloc(target_len + 1);  /* sprintf's NUL */
	assert(target);
	memcpy(target, "/s?CMCD=", 8);
	for (size_t i = 0; i < size; i++)
		sprintf(target + 8 + 3 * i, "%%%02X", (unsigned char)data[i]);
	memset(&head, 0, sizeof(head));
	assert(read_hint(&head, "", target, target_len, &query_hint) == ok);
	if (ok)
		assert(hints_equal(&field_hint, &query_hint));
	free(target);
}

/* The input as a request: the target's line, then fields. */
static void
fuzz_request(const char *data, size_t size)
{
	static struct hls_cmcd hint;
	const char *p = data, *end = data + size, *line;
	size_t n = fuzz_line(&p, end, &line), rest = (size_t)(end - p);
	char *text = malloc(4 + n + 10 + 8 + rest);
	struct fuzz_head h;
	const char *target;

	assert(text);
	memcpy(text, "GET ", 4);
	memcpy(text + 4, line, n);
	memcpy(text + 4 + n, " HTTP/1.1\nHost: h\n", 18);
	memcpy(text + 4 + n + 18, p, rest);
	if (fuzz_head_parse(&h, HTTP_REQUEST, "", text, 4 + n + 18 + rest)) {
		target = h.text + h.head.url.off;
		check_strip(target, h.head.url.len);
		if (read_hint(&h.head, h.text, target, h.head.url.len, &hint))
			check_path(&hint, target, h.head.url.len);
	}
	fuzz_head_free(&h);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > UINT32_MAX / 4)
		return 0;
	fuzz_request((const char *)data, size);
	fuzz_raw((const char *)data, size);
	return 0;
}
