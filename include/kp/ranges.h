/*
 * The rules of byte ranges a read-ahead needs, as pure functions of parsed
 * heads: which range a request asks for (RFC 9110 14.1.2, 14.2), which one
 * a 206 answers (14.4), whether that answer is the piece that was asked for,
 * which piece to fetch next, whether two pieces belong to one object, and
 * whether a response held for later may be served to a later request.
 *
 * Every rule errs towards "no": a request or response these functions cannot
 * read with certainty is one the read-ahead leaves alone, so the proxy then
 * only relays, as it would without read-ahead. No I/O, no allocation.
 */
#ifndef KP_RANGES_H
#define KP_RANGES_H

#include <stdbool.h>
#include <stdint.h>

#include "kp/http.h"

/* Inclusive byte positions, as HTTP writes them. */
struct byte_range {
	uint64_t first;  /* position of the first byte */
	uint64_t last;   /* position of the last byte; UINT64_MAX: up to the end */
};

enum range_form {
	RANGE_NONE,      /* no Range field: the whole object */
	RANGE_SINGLE,    /* "bytes=S-E" with S <= E */
	RANGE_OPEN,      /* "bytes=S-": from S to the end */
	RANGE_OTHER,     /* anything else: relay it, predict nothing */
};

/*
 * Consumes 1*DIGIT at *p (before end) into *v and moves *p past it; false,
 * *p and *v untouched, when there is no digit or the number does not fit
 * in 64 bits. The numbers of byte ranges and of RFC 8216 decimal-integers.
 */
bool ranges_read_number(const char **p, const char *end, uint64_t *v);

/*
 * The range a request asks for. Only one form is understood: a single
 * Range field whose value, without its surrounding whitespace, is
 * "bytes=" (the unit in any case, RFC 9110 14.1) followed by first-pos "-"
 * [last-pos] with no whitespace inside. Those are the requests of
 * downloaders that fetch an object piece by piece; the grammar puts no
 * whitespace there, and a list ("bytes=0-1,5-6", even with one element
 * and a stray comma), a suffix ("bytes=-500"), another unit, S > E, a
 * number beyond 64 bits and a repeated field are all RANGE_OTHER rather
 * than a guess. A last-pos of UINT64_MAX stays RANGE_SINGLE but means the
 * same as an open range. Only GET gives Range a meaning (RFC 9110 14.2):
 * the method is the caller's to check. *out is written for SINGLE and
 * OPEN only.
 */
enum range_form ranges_requested(const struct http_head *req, const char *base,
                                 struct byte_range *out);

/*
 * The Content-Range of a response: true for exactly one such field reading
 * "bytes F-L/T" (unit in any case, one space after it, surrounding
 * whitespace ignored) with F <= L < T. An unknown complete length ("*"),
 * the unsatisfied-range of a 416, a repeated field or a number beyond 64
 * bits is false: a piece whose place in the whole is not certain cannot be held
 * for later. The status is not looked at. *got and *complete are written
 * only when true.
 */
bool ranges_answered(const struct http_head *resp, const char *base, struct byte_range *got,
                     uint64_t *complete);

/*
 * Is resp exactly what the origin owes a request for asked, so that it may
 * be served in the origin's place? Status 206 with one
 * Content-Range starting at asked->first and ending where the origin must
 * end it: at asked->last, or at the object's last byte when the request
 * is open or runs past the end (RFC 9110 14.1.2). A Content-Length, when
 * there is one, must agree, since it is what frames the body. Pieces of a
 * multipart/byteranges answer have no Content-Range in the head and never
 * fit. *complete gets the object's length when true.
 */
bool ranges_piece_fits(const struct byte_range *asked, const struct http_head *resp,
                       const char *base, uint64_t *complete);

/*
 * The range to fetch ahead after the piece answered of an object of
 * complete bytes: it starts right after it and is as long as the longer
 * of that piece and largest_seen / 0.95 (rounded up), at most cap bytes,
 * and stops at the object's end. The 0.95 is for downloaders that vary
 * their piece lengths between 95 % and 100 % of a chunk size (yt-dlp):
 * the largest length seen so far, over 0.95, covers every next request
 * they may make. False when there is nothing to fetch: the answered piece
 * reaches the end, complete is 0, cap is 0, or answered is not a range.
 * Every sum saturates, so no input wraps around.
 */
bool ranges_next(const struct byte_range *answered, uint64_t complete, uint64_t largest_seen,
                 uint64_t cap, struct byte_range *next);

/* What tells one object from another across the pieces of a download. */
struct object_identity {
	struct http_span etag;           /* ETag value, quotes and any W/ kept; len 0: none */
	struct http_span last_modified;  /* Last-Modified value as sent; len 0: none */
	uint64_t complete;               /* whole length; 0: unknown */
};

/*
 * Fills *id from a response head: its ETag and Last-Modified (without
 * surrounding whitespace), and its complete length from a Content-Range
 * (206) or from the Content-Length of a 200. The spans point into base.
 * False when the length is unknown or ETag or Last-Modified is repeated:
 * such an identity proves nothing and must not be compared.
 */
bool ranges_identity(const struct http_head *resp, const char *base,
                     struct object_identity *id);

/* ETag and Last-Modified together, as kept: longer ones are no validators worth keeping. */
#define RANGES_IDENTITY_MAX 512

/* An identity kept beyond the head it came in, its text with it. */
struct kept_identity {
	bool known;                      /* false: none kept */
	struct object_identity id;       /* spans into text */
	char text[RANGES_IDENTITY_MAX];
};

/*
 * Keeps *id (spans into base) in *k: the ETag, then Last-Modified, copied
 * into k->text. False, with k as it was, when the two do not fit.
 */
bool ranges_identity_keep(struct kept_identity *k, const struct object_identity *id,
                          const char *base);

/*
 * May a piece described by b be joined to one described by a? Only when
 * nothing says they differ and whatever can prove sameness agrees:
 * - the same complete length, known: two lengths are two objects;
 * - the same ETag if either has one, and it must be strong: a weak ETag
 *   only promises equivalent content, not the same bytes, and RFC 9110
 *   8.8.3.2 and 13.1.5 allow only strong comparison for ranges, so W/"x"
 *   matches nothing, not even itself; an ETag on one side only means the
 *   two came from different places or versions;
 * - the same Last-Modified (byte for byte) if either has one, for the same
 *   reason. It is the weaker proof (one second's resolution), trusted only
 *   along with the length.
 */
bool ranges_same_object(const struct object_identity *a, const char *abase,
                        const struct object_identity *b, const char *bbase);

/*
 * Must this response never be served to another request than its own?
 * Cache-Control no-store or private (directive names in any case, private
 * with or without a field list), or Vary: *, which says the answer
 * depends on more than the request shows. A Cache-Control that cannot be
 * read (an unclosed quote, junk after a value) counts as private.
 */
bool ranges_response_private(const struct http_head *resp, const char *base);

/*
 * Would request b have had response resp, made for request a, from the
 * origin? Their Authorization and Cookie fields, their preconditions
 * (If-Range, If-Match, If-None-Match, If-Modified-Since,
 * If-Unmodified-Since), and every field resp's Vary names, carry the same
 * values: compared byte for byte without
 * surrounding whitespace, a repeated field value by value in order, and
 * absent equals absent only (an empty field is not an absent one).
 * Vary: * is never the same. Proxy-Authorization is left out even when
 * Vary names it: the proxy does not forward it, so the origin's answer
 * cannot depend on it.
 */
bool ranges_same_requester(const struct http_head *a, const char *abase,
                           const struct http_head *b, const char *bbase,
                           const struct http_head *resp, const char *rbase);

/*
 * The validator a request for more of resp's representation may carry in
 * If-Range (RFC 9110 13.1.5), its span into base: a strong ETag, or, when
 * there is no ETag at all, a Last-Modified that RFC 9110 8.8.2.2 lets count
 * as strong (an IMF-fixdate a second or more before the response's Date).
 * False when there is none: a weak or repeated ETag, no Date, an
 * unreadable or too recent date.
 */
bool ranges_if_range(const struct http_head *resp, const char *base, struct http_span *validator);

#endif
