/*
 * libFuzzer target: the media playlist parser (hls.c), whose input an
 * origin writes, and what read-ahead does with its result.
 *
 * One input is a selector byte, then the playlist text. The selector picks
 * the path the playlist was requested with and the origin it came from
 * (bases[] below: directories, queries, a CMCD parameter, dot segments, no
 * origin); for two of its values the path is instead the input's first
 * line, so the base of resolution is fuzzed too. hls_parse is not
 * incremental: read-ahead collects the whole body (ra_hls.c) and
 * parses it once, so there are no splits to fuzz. The text is handed over
 * in a copy freed as soon as hls_parse returns, so a segment that kept a
 * pointer into it is a use-after-free report.
 *
 * Asserted, besides no crash, leak or sanitizer report:
 * - the list has one entry per URI line (hls.h: a segment never predicted
 *   keeps its place), each path lies in the playlist's own allocation, the
 *   paths one after another in order: nothing points into the text or
 *   past the block;
 * - every path is origin-form ("/" first, at most HLS_MAX_PATH bytes) and,
 *   against a clean base, holds only RFC 3986 path and query characters
 *   and no "." or ".." segment: it is sent to the origin as it is;
 * - a URI naming another origin (scheme or authority other than origin's,
 *   any scheme without "//", any absolute URI when origin is none) is never
 *   predicted: the proxy must not fetch from elsewhere on a playlist's word;
 *   a clean absolute path, or same-origin URI, is taken as it is, and a
 *   clean relative one is base's directory followed by it;
 * - a range applies exactly where an EXT-X-BYTERANGE was; a known range has
 *   first <= last, starts at "@o" when given and otherwise right after
 *   the range before, of the same URI;
 * - each segment's request, written as read-ahead writes it (request line
 *   and Range), parses back to the same path and range;
 * - hls_next finds a segment's follower exactly when hls.h says it must,
 *   and a CMCD parameter added to the path changes nothing;
 * - a path ending in ".m3u8" is a playlist whatever the Content-Type.
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

static const struct {
	const char *path;    /* NULL: the input's first line */
	const char *origin;  /* NULL: none */
} bases[16] = {
	{"/live/index.m3u8", "https://cdn.example.com"},
	{"/vod/movie/720p/index.m3u8?token=abc", "https://cdn.example.com"},
	{"/", "http://example.com"},
	{"/a/b/c/", "http://Example.COM:8080"},
	{"/hls/stream.m3u8?CMCD=sid%3D%22x%22&t=1", "https://cdn.example.com:443"},
	{"/index.m3u8", NULL},
	{"/x/./y/../z/p.m3u8", "http://[::1]:8080"},
	{"//double//slash/p.m3u8", "http://example.com"},
	{NULL, "https://cdn.example.com"},
	{NULL, NULL},
	{"/live/index.m3u8", "https://cdn.example.com"},
	{"/a/b/c/", "https://cdn.example.com"},
	{"/ch/1/", "HTTPS://CDN.example.com"},
	{"/v.m3u8?a=1&b=2", "http://example.com"},
	{"/deep/er/and/deeper/still/p.m3u8", "https://cdn.example.com"},
	{"/index.m3u8", "https://cdn.example.com"},
};

/* ---- an independent reading of the text ----------------------------------- */

/* What the text says of one segment, read here without hls.c. */
struct line_seg {
	const char *uri;     /* the URI line, trimmed, fragment kept */
	size_t uri_len;
	bool has_range;      /* an EXT-X-BYTERANGE came before it */
	bool has_offset;     /* it had "@o" and both numbers were read */
	uint64_t length, offset;
};

static struct line_seg lines[HLS_MAX_SEGMENTS + 1];

/* Does the path part of s (up to "?") have a ".", "..", or (with encoded) "%2e" segment? */
static bool
has_dot_segment(const char *s, size_t n, bool encoded)
{
	const char *q = memchr(s, '?', n);
	size_t end = q ? (size_t)(q - s) : n;

	for (size_t i = 0; i <= end;) {
		const char *slash = memchr(s + i, '/', end - i);
		size_t len = slash ? (size_t)(slash - (s + i)) : end - i;
		const char *seg = s + i;

		if ((len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.'))
			return true;
		if (encoded && len >= 3 && memmem(seg, len, "%2", 2)) {
			for (size_t k = 0; k + 2 < len; k++)
				if (seg[k] == '%' && seg[k + 1] == '2' &&
				    (seg[k + 2] | 0x20) == 'e')
					return true;
		}
		if (!slash)
			break;
		i += len + 1;
	}
	return false;
}

/* 1*DIGIT, within 64 bits. */
static bool
number(const char **p, const char *end, uint64_t *v)
{
	const char *s = *p;

	*v = 0;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		if (*v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		*v = *v * 10 + (uint64_t)(*s - '0');
	}
	if (s == *p)
		return false;
	*p = s;
	return true;
}

/* The URI lines of text in order, with the EXT-X-BYTERANGE before each; their count. */
static size_t
read_lines(const char *text, size_t len)
{
	const char *p = text, *end = text + len, *line;
	struct line_seg pending = {0};
	size_t count = 0;

	/* The first line is #EXTM3U; hls_parse checks that. */
	if (p < end)
		fuzz_line(&p, end, &line);
	while (p < end && count <= HLS_MAX_SEGMENTS) {
		size_t n = fuzz_line(&p, end, &line);

		while (n && line[0] == ' ') {
			line++;
			n--;
		}
		while (n && line[n - 1] == ' ')
			n--;
		if (n == 0)
			continue;
		if (line[0] == '#') {
			static const char tag[] = "#EXT-X-BYTERANGE";
			const char *v = line + sizeof(tag) - 1, *vend = line + n;

			if (n >= sizeof(tag) - 1 && memcmp(line, tag, sizeof(tag) - 1) == 0 &&
			    (v == vend || *v == ':')) {
				pending.has_range = true;
				v += v < vend;
				if (number(&v, vend, &pending.length) && v < vend && *v == '@') {
					v++;
					pending.has_offset =
					        number(&v, vend, &pending.offset) && v == vend;
				}
			}
			continue;
		}
		pending.uri = line;
		pending.uri_len = n;
		lines[count++] = pending;
		pending = (struct line_seg){0};
	}
	return count;
}

/* ---- origins -------------------------------------------------------------- */

/* RFC 3986 3.1: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"; the scheme's length. */
static size_t
scheme_len(const char *u, size_t n)
{
	size_t i = 0;

	if (n == 0 || !((u[0] >= 'a' && u[0] <= 'z') || (u[0] >= 'A' && u[0] <= 'Z')))
		return 0;
	while (i < n && (fuzz_is_alnum(u[i]) || u[i] == '+' || u[i] == '-' || u[i] == '.'))
		i++;
	return i < n && u[i] == ':' ? i : 0;
}

/*
 * Where u (fragment removed) leads: 0 relative to the playlist, 1 to
 * origin (*rest: what follows the authority), -1 anywhere else.
 */
static int
names_origin(const char *u, size_t n, const char *origin, const char **rest, size_t *rest_len)
{
	size_t s = scheme_len(u, n), os, a, ae;
	const char *oa;

	if (!s && !(n >= 2 && u[0] == '/' && u[1] == '/'))
		return 0;
	if (!origin)
		return -1;
	os = (size_t)(strstr(origin, "://") - origin);
	oa = origin + os + 3;
	if (s) {
		if (s != os || strncasecmp(u, origin, s) != 0 || n < s + 3 ||
		    memcmp(u + s, "://", 3) != 0)
			return -1;
		a = s + 3;
	} else {
		a = 2;
	}
	for (ae = a; ae < n && u[ae] != '/' && u[ae] != '?'; ae++)
		;
	if (ae - a != strlen(oa) || strncasecmp(u + a, oa, ae - a) != 0)
		return -1;
	*rest = u + ae;
	*rest_len = n - ae;
	return 1;
}

/* ---- the checks ----------------------------------------------------------- */

/* The request read-ahead makes for seg parses back to its path and range. */
static void
check_request(const struct hls_segment *seg)
{
	static char text[HLS_MAX_PATH + 256];
	struct fuzz_head h;
	struct byte_range r;
	int n;

	if (seg->has_range)
		n = snprintf(text, sizeof(text),
		             "GET %.*s HTTP/1.1\r\nHost: h\r\n"
		             "Range: bytes=%" PRIu64 "-%" PRIu64 "\r\n",
		             (int)seg->path_len, seg->path, seg->range.first, seg->range.last);
	else
		n = snprintf(text, sizeof(text), "GET %.*s HTTP/1.1\r\nHost: h\r\n",
		             (int)seg->path_len, seg->path);
	assert(n > 0 && (size_t)n < sizeof(text));
	assert(fuzz_head_parse(&h, HTTP_REQUEST, text, "", 0));
	assert(h.head.url.len == seg->path_len &&
	       memcmp(h.text + h.head.url.off, seg->path, seg->path_len) == 0);
	if (seg->has_range) {
		assert(ranges_requested(&h.head, h.text, &r) == RANGE_SINGLE);
		assert(r.first == seg->range.first && r.last == seg->range.last);
	} else {
		assert(ranges_requested(&h.head, h.text, &r) == RANGE_NONE);
	}
	fuzz_head_free(&h);
}

/* hls_next for a request of path (and range), against hls.h's words. */
static void
check_next(const struct hls_playlist *pl, const char *path, size_t path_len, bool has_range,
           const struct byte_range *range)
{
	static char stripped[HLS_MAX_PATH], with[HLS_MAX_PATH + 16];
	const struct hls_segment *next = NULL, *next2 = NULL, *found = NULL;
	size_t n, matches = 0;
	bool ok, expect;

	ok = hls_next(pl, path, path_len, has_range, range, &next);
	if (!hls_cmcd_strip(path, path_len, stripped, sizeof(stripped), &n)) {
		assert(!ok);
		return;
	}
	for (size_t i = 0; i < pl->nsegments; i++) {
		const struct hls_segment *s = &pl->segments[i];

		if (s->path && s->path_len == n && memcmp(s->path, stripped, n) == 0 &&
		    s->has_range == has_range && (!has_range || s->range.first == range->first)) {
			matches++;
			found = s;
		}
	}
	expect = matches == 1 && found < &pl->segments[pl->nsegments - 1] && found[1].path;
	assert(ok == expect);
	if (ok)
		assert(next == found + 1);
	/* Players that send CMCD in the query add it to every request. */
	if (path_len + 16 <= sizeof(with)) {
		memcpy(with, path, path_len);
		memcpy(with + path_len,
		       memchr(path, '?', path_len) ? "&CMCD=bl%3D500" : "?CMCD=bl%3D500", 14);
		assert(hls_next(pl, with, path_len + 14, has_range, range, &next2) == ok);
		assert(next2 == next);
	}
}

static void
check_segment(const struct hls_playlist *pl, size_t i, const struct line_seg *ls,
              const char *base, size_t base_len, const char *origin, bool clean_base)
{
	const struct hls_segment *seg = &pl->segments[i];
	const char *u = ls->uri, *hash = memchr(u, '#', ls->uri_len), *rest;
	size_t n = hash ? (size_t)(hash - u) : ls->uri_len, rest_len;
	int where = names_origin(u, n, origin, &rest, &rest_len);

	assert(seg->has_range == ls->has_range);
	if (seg->has_range && seg->path) {
		assert(seg->range.first <= seg->range.last);
		if (ls->has_offset) {
			assert(seg->range.first == ls->offset);
			assert(seg->range.last - seg->range.first == ls->length - 1);
		} else {
			/* Right after the range before, which was of the same URI as written. */
			assert(i > 0 && seg[-1].has_range);
			assert(ls[-1].uri_len == ls->uri_len &&
			       memcmp(ls[-1].uri, ls->uri, ls->uri_len) == 0);
			assert(seg->range.first == seg[-1].range.last + 1);
		}
	}
	if (!seg->path) {
		assert(seg->path_len == 0);
		return;
	}
	assert(seg->path_len >= 1 && seg->path_len <= HLS_MAX_PATH && seg->path[0] == '/');
	assert(where >= 0);
	/* Else the base is no origin-form path (a "#", a space): garbage in, garbage out. */
	if (clean_base) {
		assert(uri_clean(seg->path, seg->path_len));
		assert(!has_dot_segment(seg->path, seg->path_len, false));
	}
	/* Clean references resolve without any removal of dot segments. */
	if (!uri_clean(u, n) || has_dot_segment(u, n, true))
		return;
	if (where == 1) {
		if (rest_len == 0 || rest[0] == '?')
			assert(seg->path_len == rest_len + 1 &&
			       memcmp(seg->path + 1, rest, rest_len) == 0);
		else
			assert(seg->path_len == rest_len && memcmp(seg->path, rest, rest_len) == 0);
	} else if (n && u[0] == '/') {
		assert(seg->path_len == n && memcmp(seg->path, u, n) == 0);
	} else if (clean_base && n && u[0] != '?' && !memchr(u, ':', n)) {
		const char *q = memchr(base, '?', base_len);
		size_t dir = q ? (size_t)(q - base) : base_len;

		while (dir > 1 && base[dir - 1] != '/')
			dir--;
		assert(seg->path_len == dir + n && memcmp(seg->path, base, dir) == 0 &&
		       memcmp(seg->path + dir, u, n) == 0);
	}
}

static void
check_playlist(const struct hls_playlist *pl, const char *text, size_t len, const char *base,
               size_t base_len, const char *origin, bool clean_base)
{
	const char *pool = (const char *)(pl->segments + pl->nsegments);
	size_t count = read_lines(text, len), used = 0;

	assert(pl->segments == (struct hls_segment *)(pl + 1));
	assert(pl->nsegments <= HLS_MAX_SEGMENTS);
	assert(pl->nsegments == count);
	for (size_t i = 0; i < pl->nsegments; i++) {
		const struct hls_segment *seg = &pl->segments[i];

		if (seg->path) {
			assert(seg->path == pool + used);
			used += seg->path_len;
		}
		check_segment(pl, i, &lines[i], base, base_len, origin, clean_base);
	}
	/* Quadratic in the segments: the first ones are enough to find a wrong rule. */
	for (size_t i = 0; i < pl->nsegments && i < 64; i++) {
		const struct hls_segment *seg = &pl->segments[i];

		if (!seg->path)
			continue;
		if (clean_base)
			check_request(seg);
		check_next(pl, seg->path, seg->path_len, seg->has_range, &seg->range);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hls_playlist *pl = (struct hls_playlist *)&pl, *sentinel = pl;
	const char *text, *path, *origin, *line, *p;
	size_t len, path_len;
	enum hls_parse_result r;
	char *text_copy, *path_copy;
	bool clean_base;

	if (size < 1)
		return 0;
	text = (const char *)data + 1;
	len = size - 1;
	origin = bases[data[0] % 16].origin;
	path = bases[data[0] % 16].path;
	if (path) {
		path_len = strlen(path);
	} else {
		p = text;
		path_len = fuzz_line(&p, text + len, &line);
		path = line;
		len -= (size_t)(p - text);
		text = p;
	}
	clean_base = path_len && path[0] == '/' && uri_clean(path, path_len) &&
	             !has_dot_segment(path, path_len, true);
	text_copy = malloc(len ? len : 1);
	path_copy = malloc(path_len ? path_len : 1);
	assert(text_copy && path_copy);
	memcpy(text_copy, text, len);
	memcpy(path_copy, path, path_len);
	r = hls_parse(text_copy, len, path_copy, path_len, origin, origin ? strlen(origin) : 0,
	              &pl);
	free(text_copy);
	free(path_copy);

	/* A path ending in ".m3u8" is a playlist, whatever the Content-Type says. */
	if (hls_is_playlist(NULL, 0, path, path_len))
		assert(hls_is_playlist(text, len < 128 ? len : 128, path, path_len));

	switch (r) {
	case HLS_MEDIA:
		assert(pl != sentinel && pl);
		assert(path_len && path[0] == '/');
		check_playlist(pl, text, len, path, path_len, origin, clean_base);
		hls_free(pl);
		break;
	case HLS_NOT_PLAYLIST:
	case HLS_NOT_MEDIA:
	case HLS_TOO_LARGE:
	case HLS_MALFORMED:
	case HLS_NO_MEMORY:
		/* *out is set only for HLS_MEDIA. */
		assert(pl == sentinel);
		break;
	default:
		assert(!"hls_parse: no such result");
	}
	if (path_len == 0 || path[0] != '/')
		assert(r == HLS_MALFORMED || r == HLS_TOO_LARGE);
	return 0;
}
