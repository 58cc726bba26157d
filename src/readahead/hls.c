#include "kp/hls.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kp/chars.h"

/* ---- characters ----------------------------------------------------------- */

/* RFC 3986's characters of a path and a query: unreserved, sub-delims, ":@/?" and "%". */
static bool
is_uri_char(char c)
{
	return char_is_alnum(c) || (c && strchr("-._~!$&'()*+,;=:@/?%", c));
}

/* Is s spelled as a player would send it, every "%" with its two hex digits? */
static bool
uri_chars_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!is_uri_char(s[i]))
			return false;
		if (s[i] == '%' && (n - i < 3 || !char_is_hex(s[i + 1]) || !char_is_hex(s[i + 2])))
			return false;
	}
	return true;
}

/* 1 for ".", 2 for "..", 0 for any other segment; -1 for "." or ".." spelled with "%2e". */
static int
dot_segment(const char *s, size_t n)
{
	size_t dots = 0, i = 0;
	bool encoded = false;

	while (i < n) {
		if (s[i] == '.') {
			i++;
		} else if (n - i >= 3 && s[i] == '%' && s[i + 1] == '2' &&
		           (s[i + 2] | 0x20) == 'e') {
			i += 3;
			encoded = true;
		} else {
			return 0;
		}
		if (++dots > 2)
			return 0;
	}
	if (dots == 0)
		return 0;
	return encoded ? -1 : (int)dots;
}

/*
 * Checks the segments of a reference's path (up to its "?"). RFC 3986
 * leaves "%2e" segments alone where WHATWG URL parsers, and so browsers'
 * players, remove them: such a path may be requested otherwise than
 * resolved here. With no_dotdot, ".." is refused too.
 */
static bool
segments_ok(const char *s, size_t n, bool no_dotdot)
{
	const char *q = memchr(s, '?', n);
	size_t end = q ? (size_t)(q - s) : n;

	for (size_t i = 0;;) {
		const char *slash = memchr(s + i, '/', end - i);
		size_t len = slash ? (size_t)(slash - (s + i)) : end - i;
		int d = dot_segment(s + i, len);

		if (d < 0 || (no_dotdot && d == 2))
			return false;
		if (!slash)
			return true;
		i += len + 1;
	}
}

/* ---- building paths ------------------------------------------------------- */

struct out {
	char *buf;
	size_t len, cap;
	bool full;  /* something did not fit: the result is not to be used */
};

static void
put(struct out *o, const char *s, size_t n)
{
	if (o->full || n > o->cap - o->len) {
		o->full = true;
		return;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
}

/* One segment of remove_dot_segments (RFC 3986 5.2.4), o holding the path so far. */
static void
segment(struct out *o, const char *s, size_t n, bool last)
{
	int d = dot_segment(s, n);

	if (d == 2)
		while (o->len > 0 && o->buf[--o->len] != '/')
			;
	if (d == 1 || d == 2) {
		/* "a/." and "a/.." name a directory: the path keeps its closing "/". */
		if (last)
			put(o, "/", 1);
		return;
	}
	put(o, "/", 1);
	put(o, s, n);
}

/*
 * Writes "/" dir rel, to an empty o, with its dot segments removed: dir
 * is a directory without its leading "/" (every segment closed by "/"),
 * rel a relative path. Popping stops at the root: "/.." is "/".
 */
static void
merge_path(struct out *o, const char *dir, size_t dir_len, const char *rel, size_t rel_len)
{
	for (size_t i = 0; i < dir_len;) {
		const char *slash = memchr(dir + i, '/', dir_len - i);
		size_t n = slash ? (size_t)(slash - (dir + i)) : dir_len - i;

		segment(o, dir + i, n, false);
		i += n + 1;
	}
	for (size_t i = 0;;) {
		const char *slash = memchr(rel + i, '/', rel_len - i);
		size_t n = slash ? (size_t)(slash - (rel + i)) : rel_len - i;

		segment(o, rel + i, n, !slash);
		if (!slash)
			break;
		i += n + 1;
	}
}

/*
 * RFC 3986 5.2.2 for a reference without scheme or authority against
 * base, an origin-form path: an absolute path as it is, a relative one
 * merged with base's directory (5.2.3), dot segments removed, ref's query.
 * An empty path keeps base's path, and its query when ref has none.
 */
static void
resolve(struct out *o, const char *base, size_t base_len, const char *ref, size_t ref_len)
{
	const char *q = memchr(ref, '?', ref_len);
	size_t path = q ? (size_t)(q - ref) : ref_len;
	const char *bq = memchr(base, '?', base_len);
	size_t bpath = bq ? (size_t)(bq - base) : base_len;
	size_t dir = bpath;

	if (path == 0) {
		put(o, base, bpath);
		if (q)
			put(o, ref, ref_len);
		else
			put(o, base + bpath, base_len - bpath);
		return;
	}
	if (ref[0] == '/') {
		merge_path(o, "", 0, ref + 1, path - 1);
	} else {
		while (dir > 1 && base[dir - 1] != '/')
			dir--;
		merge_path(o, base + 1, dir - 1, ref, path);
	}
	put(o, ref + path, ref_len - path);
}

/* ---- is it a playlist ----------------------------------------------------- */

bool
hls_is_playlist(const char *ctype, size_t ctype_len, const char *path, size_t path_len)
{
	static const char *const types[] = {
		"application/vnd.apple.mpegurl",
		"application/x-mpegurl",
		"audio/mpegurl",
	};
	const char *q = memchr(path, '?', path_len);

	if (ctype) {
		const char *p = ctype, *end = memchr(ctype, ';', ctype_len);

		if (!end)
			end = ctype + ctype_len;
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
			if ((size_t)(end - p) == strlen(types[i]) &&
			    strncasecmp(p, types[i], strlen(types[i])) == 0)
				return true;
	}
	if (q)
		path_len = (size_t)(q - path);
	return path_len >= 5 && strncasecmp(path + path_len - 5, ".m3u8", 5) == 0;
}

/* ---- media playlists ------------------------------------------------------ */

/* Is line the tag name, alone or with ":" and a value (*value, *end)? */
static bool
tag_is(const char *line, size_t n, const char *name, const char **value, const char **end)
{
	size_t len = strlen(name);

	if (n < len || memcmp(line, name, len) != 0 || (n > len && line[len] != ':'))
		return false;
	*value = line + (n > len ? len + 1 : len);
	*end = line + n;
	return true;
}

/*
 * The two passes over a playlist: the first counts segments and path
 * bytes with pl NULL, the second, given the allocation, fills it.
 */
struct walk {
	const char *base, *origin;
	size_t base_len, origin_len;
	struct hls_playlist *pl;    /* NULL in the first pass */
	char *pool;                 /* second pass: where resolved paths go */
	size_t nsegments, pool_len;
	bool endlist, have_sequence;
	uint64_t sequence;
	bool pending;               /* an EXT-X-BYTERANGE waits for its URI */
	bool pending_offset;        /* it had "@o" */
	uint64_t pending_length, pending_first;
	bool chain;                 /* the segment before was a range ending before UINT64_MAX */
	uint64_t chain_next;        /* then its last byte + 1 */
	const char *prev_uri;       /* that segment's URI as written */
	size_t prev_uri_len;
};

/*
 * The part of ref after a scheme and authority that are origin's, or after
 * "//" and origin's authority; NULL when ref names another origin or
 * origin is none. Both compared in any case.
 */
static const char *
same_origin_rest(const char *ref, size_t n, const char *origin, size_t olen, size_t *rest_len)
{
	const char *sep = origin ? memmem(origin, olen, "://", 3) : NULL;
	size_t scheme, auth, i = 0;

	if (!sep)
		return NULL;
	scheme = (size_t)(sep - origin);
	if (n < 2 || ref[0] != '/' || ref[1] != '/') {
		if (n < scheme + 3 || strncasecmp(ref, origin, scheme) != 0 ||
		    memcmp(ref + scheme, "://", 3) != 0)
			return NULL;
		i = scheme + 1;
	}
	i += 2;
	for (auth = i; auth < n && ref[auth] != '/' && ref[auth] != '?'; auth++)
		;
	if (auth - i != olen - scheme - 3 || strncasecmp(ref + i, sep + 3, auth - i) != 0)
		return NULL;
	*rest_len = n - auth;
	return ref + auth;
}

/* Does ref begin with a scheme (RFC 3986 3.1: ALPHA *( ALPHA / DIGIT / "+-." ) ":")? */
static bool
has_scheme(const char *ref, size_t n)
{
	size_t i = 0;

	if (n == 0 || !char_is_alpha(ref[0]))
		return false;
	while (i < n && (char_is_alnum(ref[i]) || ref[i] == '+' || ref[i] == '-' || ref[i] == '.'))
		i++;
	return i < n && ref[i] == ':';
}

/* Resolves a segment's URI line into o; false when it is never to be predicted. */
static bool
segment_path(const struct walk *w, struct out *o, const char *uri, size_t n)
{
	const char *hash = memchr(uri, '#', n);

	if (hash)
		n = (size_t)(hash - uri);
	if ((n >= 2 && uri[0] == '/' && uri[1] == '/') || has_scheme(uri, n)) {
		uri = same_origin_rest(uri, n, w->origin, w->origin_len, &n);
		if (!uri)
			return false;
		if (n == 0 || uri[0] == '?') {
			/* An empty path is "/" in origin-form (RFC 9112 3.2.1). */
			if (!uri_chars_ok(uri, n))
				return false;
			put(o, "/", 1);
			put(o, uri, n);
			return !o->full;
		}
	}
	if (n == 0 || !uri_chars_ok(uri, n) || !segments_ok(uri, n, false))
		return false;
	resolve(o, w->base, w->base_len, uri, n);
	return !o->full;
}

static enum hls_parse_result
add_segment(struct walk *w, const char *uri, size_t n)
{
	char scratch[HLS_MAX_PATH];
	struct out o = {scratch, 0, sizeof(scratch), false};
	struct hls_segment seg = {0};
	bool usable;

	if (w->nsegments == HLS_MAX_SEGMENTS)
		return HLS_TOO_LARGE;
	usable = segment_path(w, &o, uri, n);
	if (w->pending) {
		/* RFC 8216 4.3.2.2: without "@o", right after the range before, of the same URI. */
		bool known = w->pending_offset ||
		             (w->chain && w->prev_uri_len == n && memcmp(w->prev_uri, uri, n) == 0);
		uint64_t first = w->pending_offset ? w->pending_first : w->chain_next;

		known = known && w->pending_length > 0 &&
		        w->pending_length - 1 <= UINT64_MAX - first;
		seg.has_range = true;
		if (known) {
			seg.range.first = first;
			seg.range.last = first + (w->pending_length - 1);
		}
		usable = usable && known;
		w->chain = known && seg.range.last != UINT64_MAX;
		w->chain_next = seg.range.last + 1;
		w->pending = false;
	} else {
		w->chain = false;
	}
	w->prev_uri = uri;
	w->prev_uri_len = n;
	if (w->pl) {
		if (usable) {
			memcpy(w->pool + w->pool_len, scratch, o.len);
			seg.path = w->pool + w->pool_len;
			seg.path_len = o.len;
		}
		w->pl->segments[w->nsegments] = seg;
	}
	if (usable)
		w->pool_len += o.len;
	w->nsegments++;
	return HLS_MEDIA;
}

static enum hls_parse_result
tag(struct walk *w, const char *line, size_t n)
{
	const char *p, *end;

	if (tag_is(line, n, "#EXT-X-STREAM-INF", &p, &end) ||
	    tag_is(line, n, "#EXT-X-I-FRAME-STREAM-INF", &p, &end))
		return HLS_NOT_MEDIA;
	if (tag_is(line, n, "#EXT-X-ENDLIST", &p, &end)) {
		w->endlist = true;
	} else if (tag_is(line, n, "#EXT-X-MEDIA-SEQUENCE", &p, &end)) {
		if (w->have_sequence || !ranges_read_number(&p, end, &w->sequence) || p != end)
			return HLS_MALFORMED;
		w->have_sequence = true;
	} else if (tag_is(line, n, "#EXT-X-BYTERANGE", &p, &end)) {
		if (w->pending || !ranges_read_number(&p, end, &w->pending_length))
			return HLS_MALFORMED;
		w->pending_offset = p < end && *p == '@';
		if (w->pending_offset) {
			p++;
			if (!ranges_read_number(&p, end, &w->pending_first))
				return HLS_MALFORMED;
		}
		if (p != end)
			return HLS_MALFORMED;
		w->pending = true;
	}
	return HLS_MEDIA;
}

static enum hls_parse_result
walk(struct walk *w, const char *text, size_t len)
{
	for (size_t i = 0, lineno = 0; i < len; lineno++) {
		const char *line = text + i;
		const char *nl = memchr(line, '\n', len - i);
		size_t n = nl ? (size_t)(nl - line) : len - i;
		enum hls_parse_result r;

		i += n + (nl != NULL);
		if (n && line[n - 1] == '\r')
			n--;
		if (n > HLS_MAX_LINE)
			return HLS_TOO_LARGE;
		while (n && line[0] == ' ') {
			line++;
			n--;
		}
		while (n && line[n - 1] == ' ')
			n--;
		if (lineno == 0) {
			if (n != 7 || memcmp(line, "#EXTM3U", 7) != 0)
				return HLS_NOT_PLAYLIST;
			continue;
		}
		/* RFC 8216 4.1: no control characters but the line ends. */
		for (size_t k = 0; k < n; k++)
			if ((unsigned char)line[k] < 0x20 || line[k] == 0x7f)
				return HLS_MALFORMED;
		if (n == 0 || (line[0] == '#' && (n < 4 || memcmp(line, "#EXT", 4) != 0)))
			continue;
		r = line[0] == '#' ? tag(w, line, n) : add_segment(w, line, n);
		if (r != HLS_MEDIA)
			return r;
	}
	return len ? HLS_MEDIA : HLS_NOT_PLAYLIST;
}

enum hls_parse_result
hls_parse(const char *text, size_t len, const char *path, size_t path_len, const char *origin,
          size_t origin_len, struct hls_playlist **out)
{
	struct walk w = {
		.base = path, .base_len = path_len, .origin = origin, .origin_len = origin_len,
	};
	struct walk fill = w;
	enum hls_parse_result r;
	struct hls_playlist *pl;
	size_t size;

	if (len > HLS_MAX_PLAYLIST)
		return HLS_TOO_LARGE;
	if (path_len == 0 || path[0] != '/')
		return HLS_MALFORMED;
	r = walk(&w, text, len);
	if (r != HLS_MEDIA)
		return r;
	if (w.pool_len > HLS_MAX_PATHS)
		return HLS_TOO_LARGE;
	/* One block: the playlist, its segments, their paths. */
	size = sizeof(*pl) + w.nsegments * sizeof(pl->segments[0]) + w.pool_len;
	if (!(pl = malloc(size)))
		return HLS_NO_MEMORY;
	pl->bytes = size;
	pl->segments = (struct hls_segment *)(pl + 1);
	fill.pl = pl;
	fill.pool = (char *)(pl->segments + w.nsegments);
	/* The same text walked again gives the same answer and the same sizes. */
	walk(&fill, text, len);
	pl->endlist = fill.endlist;
	pl->media_sequence = fill.sequence;
	pl->nsegments = fill.nsegments;
	*out = pl;
	return HLS_MEDIA;
}

void
hls_free(struct hls_playlist *pl)
{
	free(pl);
}

bool
hls_next(const struct hls_playlist *pl, const char *path, size_t path_len, bool has_range,
         const struct byte_range *range, const struct hls_segment **next)
{
	char buf[HLS_MAX_PATH];
	const struct hls_segment *found = NULL;
	size_t n;

	if (!hls_cmcd_strip(path, path_len, buf, sizeof(buf), &n))
		return false;
	for (size_t i = 0; i < pl->nsegments; i++) {
		const struct hls_segment *s = &pl->segments[i];

		if (!s->path || s->path_len != n || memcmp(s->path, buf, n) != 0)
			continue;
		if (s->has_range ? !has_range || range->first != s->range.first : has_range)
			continue;
		/* A segment listed twice has two followers: which one is next is not known. */
		if (found)
			return false;
		found = s;
	}
	if (!found || found == &pl->segments[pl->nsegments - 1] || !found[1].path)
		return false;
	*next = found + 1;
	return true;
}

/* ---- CMCD ----------------------------------------------------------------- */

/* The CMCD query parameter's list, decoded, holds nor still encoded and the other keys. */
#define CMCD_MAX_QUERY (4 * HLS_MAX_PATH)

struct cmcd_read {
	struct hls_cmcd hint;
	unsigned nor_seen, nrr_seen;
};

/*
 * A key: a letter or "*", then letters, digits and "_-.*". Reserved keys
 * are lower case; custom ones are seen with capitals too.
 */
static bool
is_key_char(char c, bool first)
{
	return char_is_alpha(c) || c == '*' ||
	       (!first && (char_is_digit(c) || c == '_' || c == '-' || c == '.'));
}

/* Characters of a value without quotes: tokens, numbers, "?1". */
static bool
is_bare_char(char c)
{
	return char_is_alnum(c) || (c && strchr("!#$%&'*+-.^_`|~:/?", c));
}

/*
 * Consumes a double-quoted string whose only escapes are \" and \\, its
 * characters printable ASCII; unescaped into buf (cap bytes) unless buf is
 * NULL.
 */
static bool
read_string(const char **pp, const char *end, char *buf, size_t cap, size_t *n)
{
	const char *p = *pp;
	size_t len = 0;

	if (p == end || *p++ != '"')
		return false;
	for (;; p++) {
		char c;

		if (p == end)
			return false;
		c = *p;
		if (c == '"')
			break;
		if (c == '\\') {
			if (++p == end || (*p != '"' && *p != '\\'))
				return false;
			c = *p;
		} else if (c < 0x20 || c == 0x7f) {
			return false;
		}
		if (buf) {
			if (len == cap)
				return false;
			buf[len] = c;
		}
		len++;
	}
	*pp = p + 1;
	if (n)
		*n = len;
	return true;
}

/* Percent-decodes s into out (cap bytes); false for a "%" without two hex digits. */
static bool
percent_decode(const char *s, size_t n, char *out, size_t cap, size_t *out_len)
{
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '%') {
			if (n - i < 3 || !char_is_hex(s[i + 1]) || !char_is_hex(s[i + 2]))
				return false;
			c = (char)(char_hex_value(s[i + 1]) << 4 | char_hex_value(s[i + 2]));
			i += 2;
		}
		if (len == cap)
			return false;
		out[len++] = c;
	}
	*out_len = len;
	return true;
}

/*
 * A decoded nor a prediction may follow: a relative reference or absolute
 * path, no scheme (RFC 3986 4.2: a colon in the first segment reads as
 * one), no authority, no "..", spelled as a player would send it.
 */
static bool
nor_ok(const char *s, size_t n)
{
	size_t first = strcspn(s, "/?");

	if (n == 0 || !uri_chars_ok(s, n) || (n >= 2 && s[0] == '/' && s[1] == '/'))
		return false;
	if (memchr(s, ':', first < n ? first : n))
		return false;
	return segments_ok(s, n, true);
}

/*
 * A URL-encoded nor has nothing to escape, so its characters are decoded
 * as they stand between the quotes: a backslash among them is then
 * refused as any other byte a path does not hold.
 */
static bool
read_nor(struct cmcd_read *r, const char **p, const char *end)
{
	const char *quote = *p;
	size_t n;

	r->nor_seen++;
	if (!read_string(p, end, NULL, 0, &n) ||
	    !percent_decode(quote + 1, n, r->hint.nor, HLS_MAX_PATH, &r->hint.nor_len))
		return false;
	r->hint.nor[r->hint.nor_len] = '\0';
	return nor_ok(r->hint.nor, r->hint.nor_len);
}

static bool
read_nrr(struct cmcd_read *r, const char **p, const char *end)
{
	char s[64];
	const char *q = s, *qend;
	size_t n;

	r->nrr_seen++;
	if (!read_string(p, end, s, sizeof(s), &n))
		return false;
	qend = s + n;
	if (!ranges_read_number(&q, qend, &r->hint.nrr.first) || q == qend || *q++ != '-')
		return false;
	r->hint.nrr.last = UINT64_MAX;
	if (q == qend)
		return true;
	return ranges_read_number(&q, qend, &r->hint.nrr.last) && q == qend &&
	       r->hint.nrr.first <= r->hint.nrr.last;
}

/* Reads one CMCD list to its end: key[=value] items separated by commas. */
static bool
read_list(struct cmcd_read *r, const char *p, const char *end)
{
	while (p < end && char_is_ows(*p))
		p++;
	if (p == end)
		return true;
	for (;;) {
		const char *key = p;
		size_t klen;

		if (p == end || !is_key_char(*p, true))
			return false;
		while (p < end && is_key_char(*p, false))
			p++;
		klen = (size_t)(p - key);
		if (klen == 3 && memcmp(key, "nor", 3) == 0) {
			if (p == end || *p++ != '=' || !read_nor(r, &p, end))
				return false;
		} else if (klen == 3 && memcmp(key, "nrr", 3) == 0) {
			if (p == end || *p++ != '=' || !read_nrr(r, &p, end))
				return false;
		} else if (p < end && *p == '=') {
			const char *v = ++p;

			if (p < end && *p == '"') {
				if (!read_string(&p, end, NULL, 0, NULL))
					return false;
			} else {
				while (p < end && is_bare_char(*p))
					p++;
				if (p == v)
					return false;
			}
		}
		while (p < end && char_is_ows(*p))
			p++;
		if (p == end)
			return true;
		if (*p++ != ',')
			return false;
		while (p < end && char_is_ows(*p))
			p++;
	}
}

bool
hls_cmcd_read(const struct http_head *req, const char *base, const char *target,
              size_t target_len, struct hls_cmcd *hint)
{
	static const char *const fields[] = {
		"cmcd-request", "cmcd-object", "cmcd-status", "cmcd-session",
	};
	struct cmcd_read r;
	const char *q = memchr(target, '?', target_len);
	const char *end = target + target_len;
	unsigned params = 0;

	memset(&r, 0, sizeof(r));
	for (unsigned i = 0; i < req->nfields; i++) {
		const struct http_field *f = &req->fields[i];

		for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++)
			if (http_span_is(base, f->name, fields[k]) &&
			    !read_list(&r, base + f->value.off, base + f->value.off + f->value.len))
				return false;
	}
	for (const char *p = q ? q + 1 : end; p < end;) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *pend = amp ? amp : end;
		char list[CMCD_MAX_QUERY];
		size_t n;

		if (pend - p >= 4 && memcmp(p, "CMCD", 4) == 0 && (pend - p == 4 || p[4] == '=')) {
			p += pend - p == 4 ? 4 : 5;
			if (++params > 1 ||
			    !percent_decode(p, (size_t)(pend - p), list, sizeof(list), &n) ||
			    !read_list(&r, list, list + n))
				return false;
		}
		p = amp ? amp + 1 : end;
	}
	if (r.nor_seen > 1 || r.nrr_seen > 1 || (!r.nor_seen && !r.nrr_seen))
		return false;
	r.hint.has_nor = r.nor_seen;
	r.hint.has_nrr = r.nrr_seen;
	*hint = r.hint;
	return true;
}

bool
hls_cmcd_path(const struct hls_cmcd *hint, const char *path, size_t path_len, char *out,
              size_t cap, size_t *out_len)
{
	struct out o = {out, 0, cap < HLS_MAX_PATH ? cap : HLS_MAX_PATH, false};

	if (path_len == 0 || path[0] != '/')
		return false;
	if (!hint->has_nor)
		return hls_cmcd_strip(path, path_len, out, o.cap, out_len);
	resolve(&o, path, path_len, hint->nor, hint->nor_len);
	if (o.full)
		return false;
	*out_len = o.len;
	return true;
}

void
hls_cmcd_kept(const char *path, size_t path_len,
              void (*fn)(void *arg, const char *part, size_t len), void *arg)
{
	const char *q = memchr(path, '?', path_len);
	const char *end = path + path_len;
	bool kept = false;

	fn(arg, path, q ? (size_t)(q - path) : path_len);
	for (const char *p = q ? q + 1 : end; q && p <= end;) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		size_t n = amp ? (size_t)(amp - p) : (size_t)(end - p);

		if (!(n >= 4 && memcmp(p, "CMCD", 4) == 0 && (n == 4 || p[4] == '='))) {
			fn(arg, kept ? "&" : "?", 1);
			fn(arg, p, n);
			kept = true;
		}
		if (!amp)
			break;
		p = amp + 1;
	}
}

static void
put_part(void *arg, const char *part, size_t len)
{
	put(arg, part, len);
}

bool
hls_cmcd_strip(const char *path, size_t path_len, char *out, size_t cap, size_t *out_len)
{
	struct out o = {out, 0, cap, false};

	hls_cmcd_kept(path, path_len, put_part, &o);
	if (o.full)
		return false;
	*out_len = o.len;
	return true;
}
