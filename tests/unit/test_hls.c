/*
 * HLS and CMCD for read-ahead: which responses are playlists; media
 * playlists parsed (VOD, live, CRLF, masters and non-playlists refused, the
 * limits); segment URIs resolved against the playlist's path and origin;
 * byte ranges with and without an offset; the segment after a requested
 * one; CMCD's nor and nrr from fields and from the query, refused when
 * they could lead elsewhere, and resolved into paths.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kp/hls.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define MAX UINT64_MAX
#define ORIGIN "https://cdn.example.com"

/* ---- helpers -------------------------------------------------------------- */

static enum hls_parse_result
parse_with(const char *text, const char *path, const char *origin, struct hls_playlist **pl)
{
	*pl = NULL;
	return hls_parse(text, strlen(text), path, strlen(path), origin,
	                 origin ? strlen(origin) : 0, pl);
}

static struct hls_playlist *
parse_ok(const char *text, const char *path)
{
	struct hls_playlist *pl;
	enum hls_parse_result r = parse_with(text, path, ORIGIN, &pl);

	if (r != HLS_MEDIA)
		fail_msg("not parsed (%d):\n%s", r, text);
	return pl;
}

/* Segment i is path (NULL: never predicted), with the range first-last when has_range. */
static void
check_segment(const struct hls_playlist *pl, size_t i, const char *path, bool has_range,
              uint64_t first, uint64_t last)
{
	const struct hls_segment *s = &pl->segments[i];

	assert_true(i < pl->nsegments);
	if (!path) {
		if (s->path)
			fail_msg("segment %zu: %.*s, expected none", i, (int)s->path_len, s->path);
	} else if (!s->path || s->path_len != strlen(path) ||
	           memcmp(s->path, path, s->path_len) != 0) {
		fail_msg("segment %zu: %.*s, expected %s", i, s->path ? (int)s->path_len : 4,
		         s->path ? s->path : "none", path);
	}
	assert_int_equal(s->has_range, has_range);
	if (has_range && path) {
		assert_int_equal(s->range.first, first);
		assert_int_equal(s->range.last, last);
	}
}

/* ---- is it a playlist ----------------------------------------------------- */

struct type_case {
	const char *ctype;  /* NULL: no Content-Type */
	const char *path;
	bool playlist;
};

static const struct type_case type_cases[] = {
	{"application/vnd.apple.mpegurl", "/live/a", true},
	{"application/x-mpegurl", "/live/a", true},
	{"audio/mpegurl", "/live/a", true},
	{"Application/VND.Apple.MpegURL", "/live/a", true},
	{"application/vnd.apple.mpegurl; charset=utf-8", "/live/a", true},
	{"  application/x-mpegURL  ;charset=UTF-8", "/live/a", true},
	{"\taudio/mpegurl\t", "/live/a", true},
	{"application/vnd.apple.mpegurlx", "/live/a", false},
	{"application/vnd.apple", "/live/a", false},
	{"audio/x-mpegurl", "/live/a", false},
	{"video/mp2t", "/live/a", false},
	{"text/plain", "/live/a", false},
	{"", "/live/a", false},
	{NULL, "/live/a", false},
	{NULL, "/live/index.m3u8", true},
	{NULL, "/live/INDEX.M3U8", true},
	{NULL, "/live/index.m3u8?token=abc", true},
	{"text/plain", "/live/index.m3u8", true},
	{NULL, "/live/index.m3u8x", false},
	{NULL, "/live/index.m3u", false},
	{NULL, "/live/seg.ts?u=index.m3u8", false},
	{NULL, "/m3u8", false},
	{NULL, ".m3u8", true},
	{NULL, "", false},
};

static void
test_is_playlist(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(type_cases); i++) {
		const struct type_case *c = &type_cases[i];
		bool got = hls_is_playlist(c->ctype, c->ctype ? strlen(c->ctype) : 0, c->path,
		                           strlen(c->path));

		if (got != c->playlist)
			fail_msg("row %zu (%s, %s): %d", i, c->ctype ? c->ctype : "none", c->path,
			         got);
	}
	/* Only the span is read: what follows it is not part of the value. */
	assert_true(hls_is_playlist("audio/mpegurl", 13, "/a", 2));
	assert_false(hls_is_playlist("audio/mpegurl", 12, "/a", 2));
	assert_true(hls_is_playlist(NULL, 0, "/a.m3u8.ts", 7));
}

/* ---- media playlists ------------------------------------------------------ */

static void
test_vod(void **state)
{
	struct hls_playlist *pl;

	(void)state;
	pl = parse_ok("#EXTM3U\n"
	              "#EXT-X-VERSION:3\n"
	              "#EXT-X-TARGETDURATION:10\n"
	              "#EXT-X-MEDIA-SEQUENCE:7\n"
	              "# a comment, and a blank line\n"
	              "\n"
	              "#EXTINF:9.009,\n"
	              "seg7.ts\n"
	              "#EXT-X-DISCONTINUITY\n"
	              "#EXT-X-KEY:METHOD=AES-128,URI=\"key.bin\"\n"
	              "#EXTINF:9.009,\n"
	              "  sub/seg8.ts  \n"
	              "#EXTINF:3.003,\n"
	              "/other/seg9.ts?token=x\n"
	              "#EXT-X-ENDLIST\n",
	              "/vod/movie/index.m3u8?token=abc");
	assert_true(pl->endlist);
	assert_int_equal(pl->media_sequence, 7);
	assert_int_equal(pl->nsegments, 3);
	check_segment(pl, 0, "/vod/movie/seg7.ts", false, 0, 0);
	check_segment(pl, 1, "/vod/movie/sub/seg8.ts", false, 0, 0);
	check_segment(pl, 2, "/other/seg9.ts?token=x", false, 0, 0);
	hls_free(pl);
}

static void
test_live(void **state)
{
	struct hls_playlist *pl;

	(void)state;
	/* CRLF line ends, no ENDLIST, no trailing line end. */
	pl = parse_ok("#EXTM3U\r\n"
	              "#EXT-X-TARGETDURATION:4\r\n"
	              "#EXT-X-MEDIA-SEQUENCE:18446744073709551615\r\n"
	              "#EXT-X-PROGRAM-DATE-TIME:2024-01-01T00:00:00Z\r\n"
	              /* Longer names are other tags. */
	              "#EXT-X-ENDLISTED\r\n"
	              "#EXT-X-MEDIA-SEQUENCES:9\r\n"
	              "#EXT-X-BYTERANGES:10@0\r\n"
	              "#EXT-X-STREAM-INFO:BANDWIDTH=1\r\n"
	              "#EXTINF:4.0,\r\n"
	              "s1.ts\r\n"
	              "\r\n"
	              "#EXTINF:4.0,\r\n"
	              "s2.ts",
	              "/live/ch1/index.m3u8");
	assert_false(pl->endlist);
	assert_int_equal(pl->media_sequence, MAX);
	assert_int_equal(pl->nsegments, 2);
	check_segment(pl, 0, "/live/ch1/s1.ts", false, 0, 0);
	check_segment(pl, 1, "/live/ch1/s2.ts", false, 0, 0);
	hls_free(pl);

	/* No segments yet, no sequence: an empty live playlist is still one. */
	pl = parse_ok("#EXTM3U\n#EXT-X-TARGETDURATION:4\n", "/live/index.m3u8");
	assert_false(pl->endlist);
	assert_int_equal(pl->media_sequence, 0);
	assert_int_equal(pl->nsegments, 0);
	hls_free(pl);
}

struct refuse_case {
	const char *text;
	const char *path;
	enum hls_parse_result result;
};

static const struct refuse_case refuse_cases[] = {
	{"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1280000\nlow/index.m3u8\n", "/m.m3u8",
	 HLS_NOT_MEDIA},
	{"#EXTM3U\n#EXTINF:4,\na.ts\n#EXT-X-STREAM-INF:BANDWIDTH=1\nlow.m3u8\n", "/m.m3u8",
	 HLS_NOT_MEDIA},
	{"#EXTM3U\n#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=1,URI=\"i.m3u8\"\n", "/m.m3u8",
	 HLS_NOT_MEDIA},
	{"", "/a.m3u8", HLS_NOT_PLAYLIST},
	{"\n#EXTM3U\n", "/a.m3u8", HLS_NOT_PLAYLIST},
	{"#EXTM3\n", "/a.m3u8", HLS_NOT_PLAYLIST},
	{"#EXTM3UX\n", "/a.m3u8", HLS_NOT_PLAYLIST},
	{"#extm3u\n", "/a.m3u8", HLS_NOT_PLAYLIST},
	{"\xef\xbb\xbf#EXTM3U\n", "/a.m3u8", HLS_NOT_PLAYLIST},
	{"<html>#EXTM3U</html>\n", "/a.m3u8", HLS_NOT_PLAYLIST},
	{"#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:\n", "/a.m3u8", HLS_MALFORMED},
	{"#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:x\n", "/a.m3u8", HLS_MALFORMED},
	{"#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:-1\n", "/a.m3u8", HLS_MALFORMED},
	{"#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:1 2\n", "/a.m3u8", HLS_MALFORMED},
	{"#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:18446744073709551616\n", "/a.m3u8", HLS_MALFORMED},
	{"#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:1\n#EXT-X-MEDIA-SEQUENCE:1\n", "/a.m3u8",
	 HLS_MALFORMED},
	{"#EXTM3U\n#EXT-X-BYTERANGE:\na.ts\n", "/a.m3u8", HLS_MALFORMED},
	{"#EXTM3U\n#EXT-X-BYTERANGE:10@\na.ts\n", "/a.m3u8", HLS_MALFORMED},
	{"#EXTM3U\n#EXT-X-BYTERANGE:@10\na.ts\n", "/a.m3u8", HLS_MALFORMED},
	{"#EXTM3U\n#EXT-X-BYTERANGE:10-20\na.ts\n", "/a.m3u8", HLS_MALFORMED},
	{"#EXTM3U\n#EXT-X-BYTERANGE:10\n#EXT-X-BYTERANGE:10\na.ts\n", "/a.m3u8",
	 HLS_MALFORMED},
	{"#EXTM3U\n#EXTINF:4,\na\tb.ts\n", "/a.m3u8", HLS_MALFORMED},
	{"#EXTM3U\n#EXTINF:4,\na.ts\rb.ts\n", "/a.m3u8", HLS_MALFORMED},
	{"#EXTM3U\n\x7f\n", "/a.m3u8", HLS_MALFORMED},
	{"#EXTM3U\n#EXTINF:4,\na.ts\n", "a.m3u8", HLS_MALFORMED},
	{"#EXTM3U\n#EXTINF:4,\na.ts\n", "", HLS_MALFORMED},
};

static void
test_refused(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(refuse_cases); i++) {
		const struct refuse_case *c = &refuse_cases[i];
		struct hls_playlist *pl;
		enum hls_parse_result r = parse_with(c->text, c->path, ORIGIN, &pl);

		if (r != c->result)
			fail_msg("row %zu: %d, expected %d:\n%s", i, r, c->result, c->text);
		assert_null(pl);
	}
	/* A NUL inside the text, which strlen would not see. */
	{
		static const char text[] = "#EXTM3U\n#EXTINF:4,\na\0b.ts\n";
		struct hls_playlist *pl = NULL;

		assert_int_equal(hls_parse(text, sizeof(text) - 1, "/a.m3u8", 7, NULL, 0, &pl),
		                 HLS_MALFORMED);
		assert_null(pl);
	}
}

/* ---- segment URIs --------------------------------------------------------- */

struct uri_case {
	const char *base;    /* the playlist's path */
	const char *origin;  /* NULL: none */
	const char *uri;     /* the URI line */
	const char *path;    /* NULL: never predicted */
};

static const struct uri_case uri_cases[] = {
	{"/a/b/index.m3u8", ORIGIN, "s.ts", "/a/b/s.ts"},
	{"/a/b/index.m3u8", ORIGIN, "./s.ts", "/a/b/s.ts"},
	{"/a/b/index.m3u8", ORIGIN, "c/./d/s.ts", "/a/b/c/d/s.ts"},
	{"/a/b/index.m3u8", ORIGIN, "../s.ts", "/a/s.ts"},
	{"/a/b/index.m3u8", ORIGIN, "../../s.ts", "/s.ts"},
	{"/a/b/index.m3u8", ORIGIN, "../../../../s.ts", "/s.ts"},
	{"/a/b/index.m3u8", ORIGIN, "c/../../x/s.ts", "/a/x/s.ts"},
	{"/a/b/index.m3u8", ORIGIN, "..", "/a/"},
	{"/a/b/index.m3u8", ORIGIN, ".", "/a/b/"},
	{"/a/b/index.m3u8", ORIGIN, "c/", "/a/b/c/"},
	{"/a/b/index.m3u8", ORIGIN, "c//s.ts", "/a/b/c//s.ts"},
	{"/a/b/index.m3u8", ORIGIN, "...", "/a/b/..."},
	{"/a/b/index.m3u8", ORIGIN, "..s.ts", "/a/b/..s.ts"},
	{"/a/./b/../c/index.m3u8", ORIGIN, "s.ts", "/a/c/s.ts"},
	{"/index.m3u8", ORIGIN, "s.ts", "/s.ts"},
	{"/", ORIGIN, "s.ts", "/s.ts"},
	{"/a/b/", ORIGIN, "s.ts", "/a/b/s.ts"},
	/* The playlist's query is not the segment's; the segment's own is kept. */
	{"/a/index.m3u8?tok=1", ORIGIN, "s.ts", "/a/s.ts"},
	{"/a/index.m3u8?tok=1/x/y", ORIGIN, "s.ts", "/a/s.ts"},
	{"/a/index.m3u8?tok=1", ORIGIN, "s.ts?tok=2&x=../y", "/a/s.ts?tok=2&x=../y"},
	{"/a/index.m3u8?tok=1", ORIGIN, "?part=2", "/a/index.m3u8?part=2"},
	{"/a/index.m3u8", ORIGIN, "s.ts#t=10", "/a/s.ts"},
	{"/a/index.m3u8", ORIGIN, "s%20x.ts", "/a/s%20x.ts"},
	{"/a/index.m3u8", ORIGIN, "s;v=1,2.ts", "/a/s;v=1,2.ts"},
	/* Absolute paths are the playlist's origin. */
	{"/a/b/index.m3u8", ORIGIN, "/x/s.ts", "/x/s.ts"},
	{"/a/b/index.m3u8", ORIGIN, "/x/../y/./s.ts", "/y/s.ts"},
	{"/a/b/index.m3u8", ORIGIN, "/../s.ts", "/s.ts"},
	{"/a/b/index.m3u8", NULL, "/x/s.ts", "/x/s.ts"},
	/* Absolute URIs only on the same origin. */
	{"/a/index.m3u8", ORIGIN, "https://cdn.example.com/x/s.ts", "/x/s.ts"},
	{"/a/index.m3u8", ORIGIN, "HTTPS://CDN.Example.COM/x/S.ts", "/x/S.ts"},
	{"/a/index.m3u8", ORIGIN, "https://cdn.example.com/x/../s.ts?q", "/s.ts?q"},
	{"/a/index.m3u8", ORIGIN, "https://cdn.example.com", "/"},
	{"/a/index.m3u8", ORIGIN, "https://cdn.example.com?q=1", "/?q=1"},
	{"/a/index.m3u8", ORIGIN, "https://cdn.example.com/", "/"},
	{"/a/index.m3u8", ORIGIN, "http://cdn.example.com/x/s.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "https://cdn2.example.com/x/s.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "https://cdn.example.com.evil/x/s.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "https://cdn.example.co/x/s.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "https://cdn.example.com:443/x/s.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "https://user@cdn.example.com/x/s.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "https:/x/s.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "https:x/s.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "ftp://cdn.example.com/x/s.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "data:video/mp2t;base64,AAAA", NULL},
	{"/a/index.m3u8", ORIGIN, "a:b.ts", NULL},
	{"/a/index.m3u8", "http://h:8080", "http://h:8080/s.ts", "/s.ts"},
	{"/a/index.m3u8", "http://h:8080", "http://h/s.ts", NULL},
	{"/a/index.m3u8", "http://h:8080", "http://h:80/s.ts", NULL},
	{"/a/index.m3u8", "http://h", "http://h:80/s.ts", NULL},
	{"/a/index.m3u8", NULL, "https://cdn.example.com/x/s.ts", NULL},
	{"/a/index.m3u8", "cdn.example.com", "https://cdn.example.com/x/s.ts", NULL},
	/* Network-path references take the origin's scheme. */
	{"/a/index.m3u8", ORIGIN, "//cdn.example.com/x/s.ts", "/x/s.ts"},
	{"/a/index.m3u8", ORIGIN, "//CDN.example.com/x/../s.ts", "/s.ts"},
	{"/a/index.m3u8", ORIGIN, "//other.example.com/x/s.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "//cdn.example.com:8443/x/s.ts", NULL},
	{"/a/index.m3u8", NULL, "//cdn.example.com/x/s.ts", NULL},
	/* What a player may send otherwise than written. */
	{"/a/index.m3u8", ORIGIN, "s x.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "x\\s.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "s\"x.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "s<x>.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "s|x.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "caf\xc3\xa9.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "s%2.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "s%zz.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "s.ts%", NULL},
	{"/a/index.m3u8", ORIGIN, "%2e%2e/s.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "x/.%2E/s.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "%2e/s.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "https://cdn.example.com/%2e%2e/s.ts", NULL},
	{"/a/index.m3u8", ORIGIN, "%2e%2ex/s.ts", "/a/%2e%2ex/s.ts"},
	{"/a/index.m3u8", ORIGIN, "s.ts?x=%2e%2e", "/a/s.ts?x=%2e%2e"},
	{"/a/index.m3u8", ORIGIN, "#frag-only-is-a-comment", NULL},
};

static void
test_uris(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(uri_cases); i++) {
		const struct uri_case *c = &uri_cases[i];
		char text[512];
		struct hls_playlist *pl;
		enum hls_parse_result r;
		const struct hls_segment *s;

		snprintf(text, sizeof(text), "#EXTM3U\n#EXTINF:4,\n%s\n#EXTINF:4,\nlast.ts\n",
		         c->uri);
		r = parse_with(text, c->base, c->origin, &pl);
		if (r != HLS_MEDIA)
			fail_msg("row %zu (%s): not parsed (%d)", i, c->uri, r);
		/* A line starting with "#" is no segment: the list has one. */
		if (c->uri[0] == '#') {
			assert_int_equal(pl->nsegments, 1);
			hls_free(pl);
			continue;
		}
		assert_int_equal(pl->nsegments, 2);
		s = &pl->segments[0];
		if (!c->path ? s->path != NULL
		             : !s->path || s->path_len != strlen(c->path) ||
		                       memcmp(s->path, c->path, s->path_len) != 0)
			fail_msg("row %zu (%s against %s): %.*s, expected %s", i, c->uri, c->base,
			         s->path ? (int)s->path_len : 4, s->path ? s->path : "none",
			         c->path ? c->path : "none");
		assert_false(s->has_range);
		hls_free(pl);
	}
}

/* ---- byte ranges ---------------------------------------------------------- */

static void
test_byteranges(void **state)
{
	struct hls_playlist *pl;

	(void)state;
	pl = parse_ok("#EXTM3U\n"
	              "#EXT-X-TARGETDURATION:4\n"
	              "#EXTINF:4,\n"
	              "#EXT-X-BYTERANGE:1000@0\n"
	              "main.ts\n"
	              "#EXTINF:4,\n"
	              "#EXT-X-BYTERANGE:500\n"
	              "main.ts\n"
	              "#EXTINF:4,\n"
	              "#EXT-X-BYTERANGE:250\n"
	              "main.ts\n"
	              "#EXTINF:4,\n"
	              "#EXT-X-BYTERANGE:100@5000\n"
	              "main.ts\n"
	              "#EXTINF:4,\n"
	              "main.ts\n"
	              "#EXT-X-ENDLIST\n",
	              "/v/index.m3u8");
	assert_int_equal(pl->nsegments, 5);
	check_segment(pl, 0, "/v/main.ts", true, 0, 999);
	check_segment(pl, 1, "/v/main.ts", true, 1000, 1499);
	check_segment(pl, 2, "/v/main.ts", true, 1500, 1749);
	check_segment(pl, 3, "/v/main.ts", true, 5000, 5099);
	check_segment(pl, 4, "/v/main.ts", false, 0, 0);
	hls_free(pl);

	/* Without "@o" and nothing before to follow: never predicted, nor what follows it. */
	pl = parse_ok("#EXTM3U\n"
	              "#EXT-X-BYTERANGE:1000\n"
	              "a.ts\n"
	              "#EXT-X-BYTERANGE:1000\n"
	              "a.ts\n"
	              "#EXT-X-BYTERANGE:10@20\n"
	              "a.ts\n"
	              "#EXT-X-BYTERANGE:10\n"
	              "b.ts\n"
	              "#EXT-X-BYTERANGE:10@0\n"
	              "b.ts\n"
	              "c.ts\n"
	              "#EXT-X-BYTERANGE:10\n"
	              "c.ts\n"
	              "#EXT-X-BYTERANGE:0@0\n"
	              "d.ts\n"
	              "#EXT-X-BYTERANGE:5\n"
	              "d.ts\n",
	              "/v/index.m3u8");
	assert_int_equal(pl->nsegments, 9);
	check_segment(pl, 0, NULL, true, 0, 0);
	check_segment(pl, 1, NULL, true, 0, 0);
	check_segment(pl, 2, "/v/a.ts", true, 20, 29);
	/* Another URI than the range before. */
	check_segment(pl, 3, NULL, true, 0, 0);
	check_segment(pl, 4, "/v/b.ts", true, 0, 9);
	check_segment(pl, 5, "/v/c.ts", false, 0, 0);
	/* The segment before was all of c.ts, not a range of it. */
	check_segment(pl, 6, NULL, true, 0, 0);
	/* A range of no bytes. */
	check_segment(pl, 7, NULL, true, 0, 0);
	check_segment(pl, 8, NULL, true, 0, 0);
	hls_free(pl);

	/* The same resource written differently is not "the same URI" of RFC 8216 4.3.2.2. */
	pl = parse_ok("#EXTM3U\n"
	              "#EXT-X-BYTERANGE:10@0\n"
	              "a.ts\n"
	              "#EXT-X-BYTERANGE:10\n"
	              "./a.ts\n",
	              "/v/index.m3u8");
	check_segment(pl, 0, "/v/a.ts", true, 0, 9);
	check_segment(pl, 1, NULL, true, 0, 0);
	hls_free(pl);

	/* A range of another origin is not predicted, but the next one still follows it. */
	pl = parse_ok("#EXTM3U\n"
	              "#EXT-X-BYTERANGE:10@0\n"
	              "http://other/a.ts\n"
	              "#EXT-X-BYTERANGE:10\n"
	              "http://other/a.ts\n",
	              "/v/index.m3u8");
	check_segment(pl, 0, NULL, true, 0, 0);
	check_segment(pl, 1, NULL, true, 0, 0);
	hls_free(pl);

	/* The edges of 64 bits. */
	pl = parse_ok("#EXTM3U\n"
	              "#EXT-X-BYTERANGE:1@18446744073709551614\n"
	              "a.ts\n"
	              "#EXT-X-BYTERANGE:1\n"
	              "a.ts\n"
	              "#EXT-X-BYTERANGE:1\n"
	              "a.ts\n"
	              "#EXT-X-BYTERANGE:2@18446744073709551615\n"
	              "b.ts\n"
	              "#EXT-X-BYTERANGE:18446744073709551615@1\n"
	              "c.ts\n",
	              "/v/index.m3u8");
	check_segment(pl, 0, "/v/a.ts", true, MAX - 1, MAX - 1);
	check_segment(pl, 1, "/v/a.ts", true, MAX, MAX);
	check_segment(pl, 2, NULL, true, 0, 0);
	check_segment(pl, 3, NULL, true, 0, 0);
	check_segment(pl, 4, "/v/c.ts", true, 1, MAX);
	hls_free(pl);

	/* A BYTERANGE with no URI after it is left alone. */
	pl = parse_ok("#EXTM3U\na.ts\n#EXT-X-BYTERANGE:10@0\n", "/v/index.m3u8");
	assert_int_equal(pl->nsegments, 1);
	check_segment(pl, 0, "/v/a.ts", false, 0, 0);
	hls_free(pl);
}

/* ---- the next segment ----------------------------------------------------- */

static const struct hls_segment *
next_of(const struct hls_playlist *pl, const char *path, bool has_range, uint64_t first)
{
	struct byte_range r = {first, MAX};
	const struct hls_segment *next = (const struct hls_segment *)&next;

	if (!hls_next(pl, path, strlen(path), has_range, &r, &next)) {
		/* Left as it was when false. */
		assert_ptr_equal(next, (const struct hls_segment *)&next);
		return NULL;
	}
	return next;
}

static void
test_next(void **state)
{
	struct hls_playlist *pl;

	(void)state;
	pl = parse_ok("#EXTM3U\n"
	              "#EXTINF:4,\ns1.ts\n"
	              "#EXTINF:4,\ns2.ts\n"
	              "#EXTINF:4,\nhttp://elsewhere/s3.ts\n"
	              "#EXTINF:4,\ns4.ts\n"
	              "#EXTINF:4,\ns5.ts?v=1\n"
	              "#EXTINF:4,\nrep.ts\n"
	              "#EXTINF:4,\ns6.ts\n"
	              "#EXTINF:4,\nrep.ts\n"
	              "#EXTINF:4,\ns7.ts\n",
	              "/live/index.m3u8");
	assert_ptr_equal(next_of(pl, "/live/s1.ts", false, 0), &pl->segments[1]);
	/* The next one is of another origin. */
	assert_null(next_of(pl, "/live/s2.ts", false, 0));
	assert_ptr_equal(next_of(pl, "/live/s4.ts", false, 0), &pl->segments[4]);
	assert_ptr_equal(next_of(pl, "/live/s5.ts?v=1", false, 0), &pl->segments[5]);
	/* A CMCD parameter in the request is not looked at; other parameters are. */
	assert_ptr_equal(next_of(pl, "/live/s1.ts?CMCD=bl%3D100%2Csu", false, 0),
	                 &pl->segments[1]);
	assert_ptr_equal(next_of(pl, "/live/s5.ts?CMCD=su&v=1", false, 0), &pl->segments[5]);
	assert_null(next_of(pl, "/live/s5.ts", false, 0));
	assert_null(next_of(pl, "/live/s5.ts?v=2", false, 0));
	/* Listed twice: two possible followers. */
	assert_null(next_of(pl, "/live/rep.ts", false, 0));
	/* The last one. */
	assert_null(next_of(pl, "/live/s7.ts", false, 0));
	/* Not listed, or listed elsewhere. */
	assert_null(next_of(pl, "/live/s8.ts", false, 0));
	assert_null(next_of(pl, "/s1.ts", false, 0));
	assert_null(next_of(pl, "/live/S1.ts", false, 0));
	assert_null(next_of(pl, "/live/s1.ts/", false, 0));
	/* A whole segment asked for with a Range is not the one listed. */
	assert_null(next_of(pl, "/live/s1.ts", true, 0));
	hls_free(pl);

	pl = parse_ok("#EXTM3U\n"
	              "#EXT-X-BYTERANGE:100@0\nmain.ts\n"
	              "#EXT-X-BYTERANGE:100\nmain.ts\n"
	              "#EXT-X-BYTERANGE:100\nmain.ts\n"
	              "#EXT-X-BYTERANGE:100\nother.ts\n"
	              "#EXT-X-ENDLIST\n",
	              "/v/index.m3u8");
	assert_ptr_equal(next_of(pl, "/v/main.ts", true, 0), &pl->segments[1]);
	assert_int_equal(pl->segments[1].range.first, 100);
	assert_int_equal(pl->segments[1].range.last, 199);
	assert_ptr_equal(next_of(pl, "/v/main.ts", true, 100), &pl->segments[2]);
	/* The one after is a range nobody can place. */
	assert_null(next_of(pl, "/v/main.ts", true, 200));
	/* Ranges match on their start only. */
	assert_null(next_of(pl, "/v/main.ts", true, 50));
	assert_null(next_of(pl, "/v/main.ts", false, 0));
	hls_free(pl);

	/* Nothing in an empty list, or when the path is too long to compare. */
	pl = parse_ok("#EXTM3U\n", "/v/index.m3u8");
	assert_null(next_of(pl, "/v/a.ts", false, 0));
	hls_free(pl);
}

/* ---- limits --------------------------------------------------------------- */

/*
 * A playlist of n segments named s<i>.ts, padded with comment lines to len
 * bytes when it is shorter; the buffer has room for one byte more.
 */
static char *
playlist_of(size_t n, size_t len, size_t *out_len)
{
	size_t cap = 16 + n * 16 + len, off;
	char *text = malloc(cap);

	assert_non_null(text);
	off = (size_t)snprintf(text, cap, "#EXTM3U\n");
	for (size_t i = 0; i < n; i++)
		off += (size_t)snprintf(text + off, cap - off, "s%zu.ts\n", i);
	while (off < len) {
		size_t line = len - off < 1000 ? len - off : 1000;

		text[off] = '#';
		memset(text + off + 1, 'x', line - 1);
		text[off + line - 1] = '\n';
		off += line;
	}
	*out_len = off;
	return text;
}

static void
test_limits(void **state)
{
	struct hls_playlist *pl;
	size_t len;
	char *text;

	(void)state;
	/* Exactly the largest, in bytes and in segments, and one more. */
	text = playlist_of(10, HLS_MAX_PLAYLIST, &len);
	assert_int_equal(len, HLS_MAX_PLAYLIST);
	assert_int_equal(hls_parse(text, len, "/a.m3u8", 7, NULL, 0, &pl), HLS_MEDIA);
	assert_int_equal(pl->nsegments, 10);
	check_segment(pl, 9, "/s9.ts", false, 0, 0);
	hls_free(pl);
	pl = NULL;
	text[len] = '\n';
	assert_int_equal(hls_parse(text, len + 1, "/a.m3u8", 7, NULL, 0, &pl), HLS_TOO_LARGE);
	assert_null(pl);
	free(text);

	text = playlist_of(HLS_MAX_SEGMENTS, 0, &len);
	assert_int_equal(hls_parse(text, len, "/a.m3u8", 7, NULL, 0, &pl), HLS_MEDIA);
	assert_int_equal(pl->nsegments, HLS_MAX_SEGMENTS);
	check_segment(pl, 0, "/s0.ts", false, 0, 0);
	check_segment(pl, HLS_MAX_SEGMENTS - 1, "/s4095.ts", false, 0, 0);
	hls_free(pl);
	free(text);

	pl = NULL;
	text = playlist_of(HLS_MAX_SEGMENTS + 1, 0, &len);
	assert_int_equal(hls_parse(text, len, "/a.m3u8", 7, NULL, 0, &pl), HLS_TOO_LARGE);
	assert_null(pl);
	free(text);
}

/*
 * Short lines at a long path resolve to long paths: the playlist's whole
 * allocation is bounded by HLS_MAX_PATHS, not by its text. 511 lines of
 * one character in a 4092-byte directory resolve to 4094 bytes each,
 * 2,092,034 in all, and are parsed (its bytes say what holding it costs);
 * 513 are too many.
 */
static void
test_resolved_paths_limit(void **state)
{
	enum { DIR = 4092 };
	char *path = malloc(DIR + 16), *text = malloc(16 + 2 * 600);
	struct hls_playlist *pl = NULL;
	size_t len, path_len;

	(void)state;
	assert_non_null(path);
	assert_non_null(text);
	path[0] = '/';
	memset(path + 1, 'd', DIR - 1);
	path_len = DIR + (size_t)snprintf(path + DIR, 16, "/a.m3u8");
	for (unsigned lines = 511; lines <= 513; lines += 2) {
		len = (size_t)snprintf(text, 16, "#EXTM3U\n");
		for (unsigned i = 0; i < lines; i++) {
			text[len++] = 'x';
			text[len++] = '\n';
		}
		pl = NULL;
		if (lines == 511) {
			assert_int_equal(hls_parse(text, len, path, path_len, NULL, 0, &pl), HLS_MEDIA);
			assert_int_equal(pl->nsegments, 511);
			assert_int_equal(pl->segments[0].path_len, DIR + 2);
			assert_true(pl->bytes >= 511 * (DIR + 2) && pl->bytes < HLS_MAX_PATHS + 64 * 1024);
			hls_free(pl);
		} else {
			assert_int_equal(hls_parse(text, len, path, path_len, NULL, 0, &pl),
			                 HLS_TOO_LARGE);
			assert_null(pl);
		}
	}
	free(path);
	free(text);
}

static void
test_line_limits(void **state)
{
	size_t cap = HLS_MAX_LINE + 64, len;
	char *text = malloc(cap);
	struct hls_playlist *pl = NULL;

	(void)state;
	assert_non_null(text);
	/* A line of HLS_MAX_LINE bytes is read, CR not counted; one more is not. */
	len = (size_t)snprintf(text, cap, "#EXTM3U\n#");
	memset(text + len, 'x', HLS_MAX_LINE - 1);
	len += HLS_MAX_LINE - 1;
	memcpy(text + len, "\r\na.ts\n", 7);
	assert_int_equal(hls_parse(text, len + 7, "/a.m3u8", 7, NULL, 0, &pl), HLS_MEDIA);
	assert_int_equal(pl->nsegments, 1);
	hls_free(pl);
	pl = NULL;
	text[len] = 'x';
	assert_int_equal(hls_parse(text, len + 7, "/a.m3u8", 7, NULL, 0, &pl), HLS_TOO_LARGE);
	assert_null(pl);
	/* The last line need not end. */
	assert_int_equal(hls_parse(text, len + 1, "/a.m3u8", 7, NULL, 0, &pl), HLS_TOO_LARGE);

	/* A segment path resolved beyond HLS_MAX_PATH is never predicted. */
	len = (size_t)snprintf(text, cap, "#EXTM3U\n");
	memset(text + len, 'y', HLS_MAX_PATH);
	len += HLS_MAX_PATH;
	memcpy(text + len, "\nb.ts\n", 6);
	assert_int_equal(hls_parse(text, len + 6, "/d/a.m3u8", 9, NULL, 0, &pl), HLS_MEDIA);
	assert_int_equal(pl->nsegments, 2);
	check_segment(pl, 0, NULL, false, 0, 0);
	check_segment(pl, 1, "/d/b.ts", false, 0, 0);
	hls_free(pl);
	/* One byte less than that fits: "/" and HLS_MAX_PATH - 1 bytes. */
	len = (size_t)snprintf(text, cap, "#EXTM3U\n");
	memset(text + len, 'y', HLS_MAX_PATH - 1);
	len += HLS_MAX_PATH - 1;
	assert_int_equal(hls_parse(text, len, "/a.m3u8", 7, NULL, 0, &pl), HLS_MEDIA);
	assert_non_null(pl->segments[0].path);
	assert_int_equal(pl->segments[0].path_len, HLS_MAX_PATH);
	hls_free(pl);
	free(text);
}

/* ---- CMCD ----------------------------------------------------------------- */

struct parsed {
	struct http_parser parser;
	struct http_head head;
	char text[4096];
};

static void
parse_request(struct parsed *ps, const char *fields)
{
	int n = snprintf(ps->text, sizeof(ps->text),
	                 "GET http://cdn.example.com/v/seg1.ts HTTP/1.1\r\n"
	                 "Host: cdn.example.com\r\n%s\r\n",
	                 fields);

	assert_true(n > 0 && (size_t)n < sizeof(ps->text));
	http_parser_init(&ps->parser, HTTP_REQUEST, sizeof(ps->text), 2048);
	http_parser_start(&ps->parser, &ps->head);
	if (http_parse_head(&ps->parser, ps->text, (size_t)n) != HTTP_PARSE_DONE)
		fail_msg("head not parsed (%s):\n%s", http_parser_error_text(&ps->parser),
		         ps->text);
}

struct cmcd_case {
	const char *fields;
	const char *target;
	bool ok;
	const char *nor;      /* NULL: none */
	bool has_nrr;
	uint64_t first, last;
};

#define Q "/v/seg1.ts"

static const struct cmcd_case cmcd_cases[] = {
	/* The header form. */
	{"CMCD-Request: nor=\"seg2.ts\"\r\n", Q, true, "seg2.ts", false, 0, 0},
	{"CMCD-Request: nrr=\"0-999\"\r\n", Q, true, NULL, true, 0, 999},
	{"CMCD-Request: nor=\"seg2.ts\",nrr=\"12323-48763\"\r\n", Q, true, "seg2.ts", true,
	 12323, 48763},
	{"CMCD-Request: nrr=\"12323-\"\r\n", Q, true, NULL, true, 12323, MAX},
	{"CMCD-Request: nrr=\"5-5\"\r\n", Q, true, NULL, true, 5, 5},
	{"CMCD-Object: br=3200,d=4004,ot=v,tb=6000\r\n"
	 "CMCD-Request: bl=21300,dl=18500,mtp=48100,nor=\"sub%2Fseg2.ts\",su\r\n"
	 "CMCD-Session: cid=\"faec5fc2-ac30\",pr=1.08,sf=h,sid=\"6e2f\",st=v\r\n"
	 "CMCD-Status: bs,rtp=12000\r\n",
	 Q, true, "sub/seg2.ts", false, 0, 0},
	{"cmcd-object: nor=\"seg2.ts\"\r\ncmcd-status: nrr=\"1-2\"\r\n", Q, true, "seg2.ts",
	 true, 1, 2},
	{"CMCD-Session: nor=\"seg2.ts\", sid=\"x\" , su\r\n", Q, true, "seg2.ts", false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts%3Fpart%3D2\"\r\n", Q, true, "seg2.ts?part=2", false, 0,
	 0},
	{"CMCD-Request: nor=\"%2Fother%2Fseg2.ts\"\r\n", Q, true, "/other/seg2.ts", false, 0,
	 0},
	{"CMCD-Request: nor=\"/other/seg2.ts\"\r\n", Q, true, "/other/seg2.ts", false, 0, 0},
	{"CMCD-Request: nor=\"a%2520b.ts\"\r\n", Q, true, "a%20b.ts", false, 0, 0},
	{"CMCD-Request: nor=\"./seg2.ts\"\r\n", Q, true, "./seg2.ts", false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts\",cid=\"a\\\"b\\\\c\",com.example-myKey=500\r\n", Q, true,
	 "seg2.ts", false, 0, 0},
	/* The query form, encoded once more. */
	{"", Q "?CMCD=nor%3D%22seg2.ts%22", true, "seg2.ts", false, 0, 0},
	{"",
	 Q "?CMCD=bl%3D21300%2Cbr%3D3200%2Cbs%2Ccid%3D%22faec5fc2%22%2Cd%3D4004%2Cnor%3D%22sub"
	   "%252Fseg2.ts%22%2Cnrr%3D%2212323-48763%22%2Cot%3Dv%2Csu%2Ctb%3D6000",
	 true, "sub/seg2.ts", true, 12323, 48763},
	{"", Q "?tok=1&CMCD=nrr%3D%2212323-%22&x=2", true, NULL, true, 12323, MAX},
	{"", Q "?CMCD=%20nor%3D%22seg2.ts%22%20", true, "seg2.ts", false, 0, 0},
	{"", Q "?CMCD=nor%3D%22seg2.ts%253Fv%253D1%22&tok=1", true, "seg2.ts?v=1", false, 0,
	 0},
	{"CMCD-Request: nrr=\"0-1\"\r\n", Q "?CMCD=nor%3D%22seg2.ts%22", true, "seg2.ts", true,
	 0, 1},
	/* Nothing to follow. */
	{"", Q, false, NULL, false, 0, 0},
	{"", Q "?tok=1", false, NULL, false, 0, 0},
	{"CMCD-Request: bl=21300,su\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: \r\n", Q, false, NULL, false, 0, 0},
	{"", Q "?CMCD=", false, NULL, false, 0, 0},
	{"", Q "?CMCD", false, NULL, false, 0, 0},
	{"", Q "?CMCD=%20%20", false, NULL, false, 0, 0},
	{"X-CMCD-Request: nor=\"seg2.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"", Q "?cmcd=nor%3D%22seg2.ts%22", false, NULL, false, 0, 0},
	{"", Q "?XCMCD=nor%3D%22seg2.ts%22", false, NULL, false, 0, 0},
	{"", Q "?CMCDX=nor%3D%22seg2.ts%22", false, NULL, false, 0, 0},
	{"", Q "?CMCDxnor%3D%22seg2.ts%22", false, NULL, false, 0, 0},
	/* nor refused. */
	{"CMCD-Request: nor=\"..%2Fseg2.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"../seg2.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"a/../seg2.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"a/..\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"..\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"%252e%252e/seg2.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"%2e%2e/seg2.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"a/.%252E/seg2.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"http%3A%2F%2Fevil.example%2Fx.ts\"\r\n", Q, false, NULL, false, 0,
	 0},
	{"CMCD-Request: nor=\"https://cdn.example.com/x.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"%2F%2Fevil.example%2Fx.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"//evil.example/x.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"a:b.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts%0A\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts%00x\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg%202.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts%5Cx\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts%23frag\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts%2\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts%252\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg\\\"2.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=seg2.ts\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor\r\n", Q, false, NULL, false, 0, 0},
	{"", Q "?CMCD=nor%3D%22..%252Fseg2.ts%22", false, NULL, false, 0, 0},
	/* A refused nor takes nrr with it: alone it would name this object. */
	{"CMCD-Request: nor=\"..%2Fx.ts\",nrr=\"0-1\"\r\n", Q, false, NULL, false, 0, 0},
	/* nrr refused. */
	{"CMCD-Request: nrr=\"-500\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nrr=\"5-4\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nrr=\"500\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nrr=\"1-2-3\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nrr=\"1-2,5-6\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nrr=\"bytes=1-2\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nrr=\" 1-2\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nrr=\"\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nrr=1-2\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nrr=\"18446744073709551616-\"\r\n", Q, false, NULL, false, 0, 0},
	/* Given twice, in one place or two. */
	{"CMCD-Request: nor=\"a.ts\",nor=\"a.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"a.ts\"\r\nCMCD-Object: nor=\"b.ts\"\r\n", Q, false, NULL, false,
	 0, 0},
	{"CMCD-Request: nor=\"a.ts\"\r\n", Q "?CMCD=nor%3D%22a.ts%22", false, NULL, false, 0, 0},
	{"CMCD-Request: nrr=\"0-1\"\r\nCMCD-Request: nrr=\"0-1\"\r\n", Q, false, NULL, false,
	 0, 0},
	{"", Q "?CMCD=nor%3D%22a.ts%22&CMCD=su", false, NULL, false, 0, 0},
	/* Garbage anywhere in CMCD. */
	{"CMCD-Request: nor=\"seg2.ts\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts\"x\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts\",\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: ,nor=\"seg2.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts\",,su\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts\" su\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts\",bl=\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts\",1bl=2\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts\",bl=2;x=1\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts\",cid=\"x\\y\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: nor=\"seg2.ts\"\r\nCMCD-Session: sid=\"unclosed\r\n", Q, false, NULL,
	 false, 0, 0},
	{"CMCD-Request: nor = \"seg2.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"CMCD-Request: NOR=\"seg2.ts\"\r\n", Q, false, NULL, false, 0, 0},
	{"", Q "?CMCD=nor%3D%22seg2.ts%22%2", false, NULL, false, 0, 0},
	{"", Q "?CMCD=nor%3D%22seg2.ts%22%2C%2C", false, NULL, false, 0, 0},
	{"", Q "?CMCD=nor%3D%22seg2.ts", false, NULL, false, 0, 0},
	{"", Q "?CMCD=nor%3D%22seg2.ts%22%0A", false, NULL, false, 0, 0},
};

static void
test_cmcd_read(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cmcd_cases); i++) {
		const struct cmcd_case *c = &cmcd_cases[i];
		struct parsed ps;
		struct hls_cmcd hint;
		bool ok;

		parse_request(&ps, c->fields);
		memset(&hint, 0x5a, sizeof(hint));
		ok = hls_cmcd_read(&ps.head, ps.text, c->target, strlen(c->target), &hint);
		if (ok != c->ok)
			fail_msg("row %zu (%s%s): %d, expected %d", i, c->fields, c->target, ok,
			         c->ok);
		if (!ok) {
			/* Left as it was. */
			assert_int_equal((unsigned char)hint.nor[0], 0x5a);
			assert_int_equal(hint.nor_len, (size_t)0x5a5a5a5a5a5a5a5aULL);
			continue;
		}
		assert_int_equal(hint.has_nor, c->nor != NULL);
		if (c->nor && (hint.nor_len != strlen(c->nor) || strcmp(hint.nor, c->nor) != 0))
			fail_msg("row %zu (%s%s): nor %s, expected %s", i, c->fields, c->target,
			         hint.nor, c->nor);
		assert_int_equal(hint.has_nrr, c->has_nrr);
		if (c->has_nrr) {
			assert_int_equal(hint.nrr.first, c->first);
			assert_int_equal(hint.nrr.last, c->last);
		}
	}
}

/* A nor just within HLS_MAX_PATH is read; one byte more is not. */
static void
test_cmcd_nor_length(void **state)
{
	static char fields[HLS_MAX_PATH + 64];
	struct hls_cmcd hint;
	struct http_head head = {0};
	int n;

	(void)state;
	/* A head by hand: the parser's own limit on a head is not the point here. */
	n = snprintf(fields, sizeof(fields), "CMCD-Requestnor=\"");
	memset(fields + n, 'a', HLS_MAX_PATH);
	memcpy(fields + n + HLS_MAX_PATH, "\"", 2);
	head.nfields = 1;
	head.fields[0].name = (struct http_span){0, 12};
	head.fields[0].value = (struct http_span){12, (uint32_t)(n - 12 + HLS_MAX_PATH + 1)};
	assert_true(hls_cmcd_read(&head, fields, "/a", 2, &hint));
	assert_int_equal(hint.nor_len, HLS_MAX_PATH);
	assert_int_equal(hint.nor[HLS_MAX_PATH], '\0');
	fields[n + HLS_MAX_PATH] = 'a';
	memcpy(fields + n + HLS_MAX_PATH + 1, "\"", 2);
	head.fields[0].value.len++;
	assert_false(hls_cmcd_read(&head, fields, "/a", 2, &hint));
}

struct path_case {
	const char *nor;   /* NULL: no nor */
	const char *path;  /* of the request carrying it */
	const char *next;  /* NULL: false */
};

static const struct path_case path_cases[] = {
	{"seg2.ts", "/v/seg1.ts", "/v/seg2.ts"},
	{"seg2.ts", "/v/seg1.ts?CMCD=nor%3D%22seg2.ts%22", "/v/seg2.ts"},
	{"seg2.ts", "/v/seg1.ts?tok=1", "/v/seg2.ts"},
	{"seg2.ts?tok=1", "/v/seg1.ts?tok=1", "/v/seg2.ts?tok=1"},
	{"sub/seg2.ts", "/v/seg1.ts", "/v/sub/seg2.ts"},
	{"./seg2.ts", "/v/w/seg1.ts", "/v/w/seg2.ts"},
	{"/abs/seg2.ts", "/v/seg1.ts", "/abs/seg2.ts"},
	{"seg2.ts", "/seg1.ts", "/seg2.ts"},
	{"seg2.ts", "/v/", "/v/seg2.ts"},
	{"?part=2", "/v/seg1.ts?CMCD=su", "/v/seg1.ts?part=2"},
	{"seg2.ts", "/v/../w/seg1.ts", "/w/seg2.ts"},
	{NULL, "/v/seg1.ts", "/v/seg1.ts"},
	{NULL, "/v/seg1.ts?CMCD=nrr%3D%220-1%22", "/v/seg1.ts"},
	{NULL, "/v/seg1.ts?a=1&CMCD=su&b=2", "/v/seg1.ts?a=1&b=2"},
	{"seg2.ts", "v/seg1.ts", NULL},
	{"seg2.ts", "", NULL},
	{NULL, "*", NULL},
};

static void
test_cmcd_path(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(path_cases); i++) {
		const struct path_case *c = &path_cases[i];
		struct hls_cmcd hint = {0};
		char out[128];
		size_t n = 12345;
		bool ok;

		if (c->nor) {
			hint.has_nor = true;
			hint.nor_len = strlen(c->nor);
			memcpy(hint.nor, c->nor, hint.nor_len + 1);
		}
		ok = hls_cmcd_path(&hint, c->path, strlen(c->path), out, sizeof(out), &n);
		if (ok != (c->next != NULL))
			fail_msg("row %zu (%s against %s): %d", i, c->nor ? c->nor : "none",
			         c->path, ok);
		if (!ok) {
			assert_int_equal(n, 12345);
			continue;
		}
		if (n != strlen(c->next) || memcmp(out, c->next, n) != 0)
			fail_msg("row %zu (%s against %s): %.*s, expected %s", i,
			         c->nor ? c->nor : "none", c->path, (int)n, out, c->next);
	}
}

static void
test_cmcd_path_space(void **state)
{
	struct hls_cmcd hint = {.has_nor = true, .nor_len = 7, .nor = "seg2.ts"};
	char out[16];
	size_t n = 0;

	(void)state;
	/* "/v/seg2.ts" is 10 bytes. */
	assert_true(hls_cmcd_path(&hint, "/v/a.ts", 7, out, 10, &n));
	assert_int_equal(n, 10);
	assert_memory_equal(out, "/v/seg2.ts", 10);
	assert_false(hls_cmcd_path(&hint, "/v/a.ts", 7, out, 9, &n));
	hint.has_nor = false;
	assert_true(hls_cmcd_path(&hint, "/v/a.ts?CMCD=su", 15, out, 7, &n));
	assert_int_equal(n, 7);
	assert_memory_equal(out, "/v/a.ts", 7);
	assert_false(hls_cmcd_path(&hint, "/v/a.ts?CMCD=su", 15, out, 6, &n));
	/*
	 * Dot segments go as the path is written: "/v/xxxxxxxxxx" (13 bytes)
	 * is written before ".." takes it back to "/v", so the 10 bytes of
	 * "/v/seg2.ts" need 13 here (fuzz_cmcd found the difference).
	 */
	hint.has_nor = true;
	assert_false(hls_cmcd_path(&hint, "/v/xxxxxxxxxx/../a.ts", 21, out, 10, &n));
	assert_false(hls_cmcd_path(&hint, "/v/xxxxxxxxxx/../a.ts", 21, out, 12, &n));
	assert_true(hls_cmcd_path(&hint, "/v/xxxxxxxxxx/../a.ts", 21, out, 13, &n));
	assert_int_equal(n, 10);
	assert_memory_equal(out, "/v/seg2.ts", 10);
}

struct strip_case {
	const char *path, *stripped;
};

static const struct strip_case strip_cases[] = {
	{"/a.ts", "/a.ts"},
	{"/a.ts?", "/a.ts?"},
	{"/a.ts?x=1", "/a.ts?x=1"},
	{"/a.ts?x=1&&y", "/a.ts?x=1&&y"},
	{"/a.ts?x=1&", "/a.ts?x=1&"},
	{"/a.ts?CMCD=bl%3D1", "/a.ts"},
	{"/a.ts?CMCD", "/a.ts"},
	{"/a.ts?CMCD=", "/a.ts"},
	{"/a.ts?CMCD=1&CMCD=2", "/a.ts"},
	{"/a.ts?x=1&CMCD=su", "/a.ts?x=1"},
	{"/a.ts?CMCD=su&x=1", "/a.ts?x=1"},
	{"/a.ts?x=1&CMCD=su&y=2", "/a.ts?x=1&y=2"},
	{"/a.ts?CMCDX=1", "/a.ts?CMCDX=1"},
	{"/a.ts?cmcd=1", "/a.ts?cmcd=1"},
	{"/a.ts?XCMCD=1", "/a.ts?XCMCD=1"},
	{"/a.ts?x=CMCD=1", "/a.ts?x=CMCD=1"},
	{"/CMCD=1/a.ts", "/CMCD=1/a.ts"},
};

static void
test_cmcd_strip(void **state)
{
	char out[64];
	size_t n;

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(strip_cases); i++) {
		const struct strip_case *c = &strip_cases[i];

		n = 12345;
		assert_true(hls_cmcd_strip(c->path, strlen(c->path), out, sizeof(out), &n));
		if (n != strlen(c->stripped) || memcmp(out, c->stripped, n) != 0)
			fail_msg("row %zu (%s): %.*s, expected %s", i, c->path, (int)n, out,
			         c->stripped);
	}
	n = 12345;
	assert_false(hls_cmcd_strip("/a.ts?x=1", 9, out, 8, &n));
	assert_int_equal(n, 12345);
	assert_true(hls_cmcd_strip("/a.ts?x=1", 9, out, 9, &n));
	assert_int_equal(n, 9);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_is_playlist),
		cmocka_unit_test(test_vod),
		cmocka_unit_test(test_live),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_uris),
		cmocka_unit_test(test_byteranges),
		cmocka_unit_test(test_next),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_resolved_paths_limit),
		cmocka_unit_test(test_line_limits),
		cmocka_unit_test(test_cmcd_read),
		cmocka_unit_test(test_cmcd_nor_length),
		cmocka_unit_test(test_cmcd_path),
		cmocka_unit_test(test_cmcd_path_space),
		cmocka_unit_test(test_cmcd_strip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
