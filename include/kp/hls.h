/*
 * The rules a read-ahead needs to know which object a media player asks
 * for next, as pure functions: whether a response is an HLS playlist
 * (RFC 8216 4), the segments of a media playlist in order with their
 * paths and byte ranges (RFC 8216 4.1, 4.3), the segment after a given
 * one, and the next-object hints a player may send itself in Common Media
 * Client Data (CTA-5004): "nor" and "nrr".
 *
 * Every path here is origin-form, path and query as a request-target
 * carries it (RFC 9112 3.2.1). A playlist's references resolve against the
 * playlist's own path by RFC 3986 5.2, and so does nor against the path of
 * the request that carried it. Only what stays on the same origin and is
 * spelled the way a player would send it is ever predicted.
 *
 * Every rule errs towards "no": a playlist, a reference or a hint these
 * functions cannot read with certainty predicts nothing, and the proxy
 * then only relays. No I/O; hls_parse makes the one allocation its
 * result lives in.
 */
#ifndef KP_HLS_H
#define KP_HLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kp/http.h"
#include "kp/ranges.h"

/* A longer playlist is not parsed: live playlists are a few KiB, long VOD ones some 100. */
#define HLS_MAX_PLAYLIST (256 * 1024)
/* A longer line is not read. */
#define HLS_MAX_LINE (8 * 1024)
/* A playlist with more segments is not parsed (a 4-hour VOD of 4 s segments has 3600). */
#define HLS_MAX_SEGMENTS 4096
/* A resolved path longer than this is never predicted; a nor longer than this is refused. */
#define HLS_MAX_PATH 4096
/*
 * A playlist whose resolved paths take more than this together is not
 * parsed: a few short lines at a long path would otherwise make megabytes
 * (4096 lines of one character at a 4 KB path resolve to 16 MiB). A 4-hour
 * VOD of 4 s segments with 500-byte paths takes 1.7 MiB.
 */
#define HLS_MAX_PATHS (2 * 1024 * 1024)

/*
 * Is this response a playlist? Its Content-Type's media type (in any
 * case, without parameters and surrounding whitespace) is
 * application/vnd.apple.mpegurl, application/x-mpegurl or audio/mpegurl,
 * or the request's path, without its query, ends in ".m3u8" in any case
 * (RFC 8216 4). The ".m3u" ending RFC 8216 also allows is left out: it
 * names every other kind of M3U too. ctype may be NULL when there is no
 * Content-Type. Only hls_parse says whether it is one that can be used.
 */
bool hls_is_playlist(const char *ctype, size_t ctype_len, const char *path, size_t path_len);

/* One media segment, in playlist order. */
struct hls_segment {
	const char *path;         /* origin-form path and query; NULL: never predicted */
	size_t path_len;          /* bytes at path, which is not NUL-terminated */
	bool has_range;           /* an EXT-X-BYTERANGE applies: the segment is a range of path */
	struct byte_range range;  /* when has_range: first and last byte, both known */
};

/* A media playlist as hls_parse returns it: one allocation, freed by hls_free. */
struct hls_playlist {
	bool endlist;             /* EXT-X-ENDLIST: no segment will be added (VOD); else live */
	uint64_t media_sequence;  /* EXT-X-MEDIA-SEQUENCE; 0 when absent (RFC 8216 4.3.3.2) */
	size_t nsegments;         /* up to HLS_MAX_SEGMENTS */
	struct hls_segment *segments;  /* nsegments, in order, in the same allocation */
	size_t bytes;             /* the one allocation's size: what holding it costs */
};

enum hls_parse_result {
	HLS_MEDIA,         /* a media playlist: *out is set */
	HLS_NOT_PLAYLIST,  /* the first line is not #EXTM3U (RFC 8216 4.3.1.1) */
	HLS_NOT_MEDIA,     /* a master playlist: EXT-X-STREAM-INF or EXT-X-I-FRAME-STREAM-INF */
	HLS_TOO_LARGE,     /* past HLS_MAX_PLAYLIST, HLS_MAX_LINE, HLS_MAX_SEGMENTS or HLS_MAX_PATHS */
	HLS_MALFORMED,     /* a control character, an unreadable tag value, a bad base path */
	HLS_NO_MEMORY,     /* the allocation failed */
};

/*
 * Parses the media playlist text[0..len) that was answered to the request
 * for path (origin-form, starting with "/"). Lines end in LF or CRLF and
 * are read without surrounding spaces; blank lines, comments ("#" not
 * followed by "EXT") and tags other than the ones below are skipped, as
 * RFC 8216 4.1 tells clients to. Any other control character than CR and
 * LF (RFC 8216 4.1 forbids them) makes the text HLS_MALFORMED.
 *
 * - EXT-X-MEDIA-SEQUENCE:<n> and EXT-X-ENDLIST fill the fields named so.
 *   An unreadable or repeated EXT-X-MEDIA-SEQUENCE is HLS_MALFORMED.
 * - EXT-X-BYTERANGE:<n>[@<o>] makes the next URI line the range of n bytes
 *   from o (RFC 8216 4.3.2.2). Without @o it starts right after the
 *   range of the segment before, which must be a range of the same URI
 *   as written; otherwise, or for n = 0 or a range past 64 bits, the
 *   segment is never predicted. An unreadable one, or two before one URI,
 *   is HLS_MALFORMED.
 * - Every other line is a segment's URI. A fragment is dropped. A
 *   relative reference resolves against path (RFC 3986 5.2: merged with
 *   path's directory, dot segments removed, never above the root); an
 *   absolute path is taken as it is. An absolute URI ("http://h/p") or a
 *   network-path reference ("//h/p") is used only when its scheme (or
 *   origin's, for "//") and authority equal origin ("scheme://host[:port]",
 *   the scheme and host in any case, the port as written: ":80" is not
 *   its absence); origin may be NULL, and then neither ever is. A URI
 *   holding a byte outside RFC 3986's path and query characters (a
 *   space, a backslash, a non-ASCII letter), a "%" without two hex
 *   digits, a dot segment written with "%2e", or resolving to more than
 *   HLS_MAX_PATH bytes (counted as the path is written, before a ".."
 *   takes a segment off again), is never predicted either: a player may
 *   send such a URI otherwise than it is written. A segment that is never
 *   predicted keeps its place in the list, so that the one after it is
 *   not taken for its follower.
 *
 * *out is set only for HLS_MEDIA; free it with hls_free.
 */
enum hls_parse_result hls_parse(const char *text, size_t len, const char *path, size_t path_len,
                                const char *origin, size_t origin_len,
                                struct hls_playlist **out);

void hls_free(struct hls_playlist *pl);

/*
 * The segment after the one a client asked for with path (origin-form,
 * any CMCD query parameter of it not looked at) and, if it sent a Range,
 * range. A segment with a byte range matches a request for its path whose
 * range starts where its does; one without matches a request without a
 * Range only. False when no segment or more than one matches, when it is
 * the last, or when the next one is never predicted. *next points into pl.
 */
bool hls_next(const struct hls_playlist *pl, const char *path, size_t path_len, bool has_range,
              const struct byte_range *range, const struct hls_segment **next);

/*
 * A player's own word on its next request, CTA-5004's "nor" (next object
 * request: a relative path, from the directory of the request carrying
 * it, URL-encoded) and "nrr" (next range request, of nor or, without nor,
 * of the object requested now).
 */
struct hls_cmcd {
	bool has_nor;                  /* nor was given (and is fit to follow) */
	bool has_nrr;                  /* nrr was given */
	struct byte_range nrr;         /* when has_nrr; last UINT64_MAX for "<start>-" */
	size_t nor_len;                /* when has_nor: bytes in nor, without the NUL */
	char nor[HLS_MAX_PATH + 1];    /* when has_nor: nor decoded, NUL-terminated */
};

/*
 * Reads nor and nrr from a request: from its CMCD-Request, CMCD-Object,
 * CMCD-Status and CMCD-Session fields (comma-separated key=value pairs,
 * a boolean key alone, string values in double quotes with \" and \\
 * escapes), and from the one query parameter of target (its origin-form
 * request-target) named exactly CMCD, whose value is the same list
 * percent-encoded: the transmission modes of CTA-5004 section 2. Keys may
 * be in any of them.
 *
 * nor's string is percent-decoded once more (CTA-5004's table of reserved
 * keys has it URL-encoded) and must then be a relative reference, or an
 * absolute path, with a query at most: no scheme, no "//" authority, no
 * byte outside RFC 3986's path and query characters, at most HLS_MAX_PATH
 * bytes, and no ".." segment (nor one written with "%2e"), at the price of
 * the hints of players that switch renditions with "../". nrr must be
 * "<start>-<end>" with start <= end, or "<start>-"; a suffix "-<length>"
 * cannot be placed and is refused.
 *
 * True when nor or nrr, or both, were read. False when neither is there,
 * when either is refused or given twice, or when any CMCD field or the
 * CMCD parameter cannot be read to its end (or there are two CMCD
 * parameters): a player whose CMCD is not understood is not followed.
 * *hint is written only when true.
 */
bool hls_cmcd_read(const struct http_head *req, const char *base, const char *target,
                   size_t target_len, struct hls_cmcd *hint);

/*
 * The origin-form path of the object hint names, the request carrying it
 * being for path: nor resolved against path (RFC 3986 5.2, nor's own query
 * if it has one, never path's), or without nor path itself, its CMCD
 * parameter taken out. The result, not NUL-terminated, is written to out
 * and its length to *out_len. False when path is not origin-form or the
 * result does not fit in cap or in HLS_MAX_PATH, or did not on the way:
 * dot segments are removed as the path is written, so a segment of path's
 * directory that a ".." after it takes off again must fit too. Players
 * send no dot segments; erring towards "no" there costs nothing.
 */
bool hls_cmcd_path(const struct hls_cmcd *hint, const char *path, size_t path_len, char *out,
                   size_t cap, size_t *out_len);

/*
 * path without the query parameters named CMCD, as the players that send
 * CMCD in the query add them to every request: the request one is to be
 * compared with will carry other values, or none. Other parameters stay in
 * order; a query left empty loses its "?". A path without a CMCD
 * parameter is copied as it is. False when the result does not fit in cap.
 */
bool hls_cmcd_strip(const char *path, size_t path_len, char *out, size_t cap, size_t *out_len);

/*
 * The same without a copy: the parts of path hls_cmcd_strip keeps, in
 * order, each handed to fn (their concatenation is what it writes), for
 * a key hashed or compared where the path lies.
 */
void hls_cmcd_kept(const char *path, size_t path_len,
                   void (*fn)(void *arg, const char *part, size_t len), void *arg);

#endif
