/*
 * libFuzzer target: byte ranges (ranges.c), the Range a client sends and
 * the Content-Range an origin answers, and what read-ahead does with them.
 *
 * One input is text: the fields of a GET request (Range, If-Range, Cookie
 * ...), one a line, then an empty line, then an origin's response head
 * (status line and fields). Lines end in LF or CRLF. Both are parsed by the
 * proxy's parser (fuzz_head.h) and given to every function of ranges.h.
 * Independently of that text, the last 40 bytes of an input of that size
 * are read as five 64-bit numbers for ranges_next's arithmetic, whose
 * edges (sums near 2^64) no text reaches as easily.
 *
 * Asserted, besides no crash, leak or sanitizer report:
 * - a range read from Range has first <= last (an open one last UINT64_MAX),
 *   and writing it back as read-ahead writes its requests reads the same:
 *   the proxy sends these numbers to origins;
 * - a Content-Range read has first <= last < complete length, and written
 *   back reads the same; the piece it describes fits a request for itself;
 * - ranges_piece_fits says yes exactly when ranges.h says it must: status
 *   206, same first byte, last byte where the origin must end it, and a
 *   Content-Length that agrees. A wrong yes serves a client the wrong bytes;
 * - ranges_next says yes exactly when there is something left, and its
 *   range starts right after the piece, stays inside the object and the
 *   cap, and is as long as ranges.h promises (computed here with 128-bit
 *   arithmetic). Chained, it moves forward and stays inside the object:
 *   read-ahead loops on it;
 * - an identity is known only with a complete length, its spans lie inside
 *   the head, and it is the same object as itself, or as another response
 *   with the same validators and length, unless its ETag is weak; never
 *   with another length or with an ETag on one side only, either way
 *   round: a wrong yes glues two versions of a file together;
 * - a response that is not private may be served to an identical request,
 *   and "same requester" is symmetric.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_head.h"
#include "kp/ranges.h"

#define MAX UINT64_MAX

typedef unsigned __int128 u128;

static u128
min128(u128 a, u128 b)
{
	return a < b ? a : b;
}

static u128
max128(u128 a, u128 b)
{
	return a > b ? a : b;
}

/* The request read-ahead writes for range (ranges.h's reader must read it back as it was). */
static void
check_range_written(const struct byte_range *r, enum range_form form)
{
	char text[128];
	struct fuzz_head h;
	struct byte_range back;

	if (form == RANGE_OPEN)
		snprintf(text, sizeof(text),
		         "GET /v HTTP/1.1\r\nHost: h\r\nRange: bytes=%" PRIu64 "-\r\n", r->first);
	else
		snprintf(text, sizeof(text),
		         "GET /v HTTP/1.1\r\nHost: h\r\nRange: bytes=%" PRIu64 "-%" PRIu64 "\r\n",
		         r->first, r->last);
	assert(fuzz_head_parse(&h, HTTP_REQUEST, text, "", 0));
	assert(ranges_requested(&h.head, h.text, &back) == form);
	assert(back.first == r->first && back.last == r->last);
	fuzz_head_free(&h);
}

static enum range_form
check_requested(const struct http_head *req, const char *base, struct byte_range *asked)
{
	enum range_form form = ranges_requested(req, base, asked);

	switch (form) {
	case RANGE_NONE:
	case RANGE_OTHER:
		break;
	case RANGE_SINGLE:
		assert(asked->first <= asked->last);
		check_range_written(asked, form);
		break;
	case RANGE_OPEN:
		assert(asked->last == MAX);
		check_range_written(asked, form);
		break;
	default:
		assert(!"ranges_requested: no such form");
	}
	return form;
}

/* ranges_piece_fits against what ranges.h says it must answer. */
static void
check_fits(const struct byte_range *asked, const struct http_head *resp, const char *base)
{
	struct byte_range got = {0, 0};
	uint64_t complete = 0, fits_complete = 0;
	bool answered = ranges_answered(resp, base, &got, &complete);
	bool fits = ranges_piece_fits(asked, resp, base, &fits_complete);
	bool expect = resp->status == 206 && answered && got.first == asked->first &&
	              got.last == (asked->last < complete - 1 ? asked->last : complete - 1) &&
	              (!(resp->llhttp_flags & F_CONTENT_LENGTH) ||
	               resp->content_length == got.last - got.first + 1);

	assert(fits == expect);
	if (fits)
		assert(fits_complete == complete);
}

/* A Content-Range as an origin would write it for got, read back. */
static void
check_answer_written(const struct byte_range *got, uint64_t complete)
{
	char text[256];
	struct fuzz_head h;
	struct byte_range back, open = {got->first, MAX};
	uint64_t back_complete;

	snprintf(text, sizeof(text),
	         "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %" PRIu64 "-%" PRIu64
	         "/%" PRIu64 "\r\n",
	         got->first, got->last, complete);
	assert(fuzz_head_parse(&h, HTTP_RESPONSE, text, "", 0));
	assert(ranges_answered(&h.head, h.text, &back, &back_complete));
	assert(back.first == got->first && back.last == got->last && back_complete == complete);
	/* The piece is what a request for exactly it, or for all from its start, is owed. */
	assert(ranges_piece_fits(got, &h.head, h.text, &back_complete));
	assert(ranges_piece_fits(&open, &h.head, h.text, &back_complete) ==
	       (got->last == complete - 1));
	fuzz_head_free(&h);
}

/* ceil(largest / 0.95) as ranges.h defines it, in 128 bits. */
static u128
grown(uint64_t largest)
{
	return ((u128)largest * 20 + 18) / 19;
}

/* ranges_next once, against ranges.h's words; true and *next when it gave a range. */
static bool
check_next_once(const struct byte_range *a, uint64_t complete, uint64_t largest, uint64_t cap,
                struct byte_range *next)
{
	bool ok = ranges_next(a, complete, largest, cap, next);
	bool expect = a->first <= a->last && a->last != MAX && a->last + 1 < complete && cap > 0;
	u128 piece, to_end, len, lo, hi;

	assert(ok == expect);
	if (!ok)
		return false;
	assert(next->first == a->last + 1);
	assert(next->first <= next->last && next->last < complete);
	piece = (u128)a->last - a->first + 1;
	to_end = (u128)complete - next->first;
	len = (u128)next->last - next->first + 1;
	/*
	 * The exact length, except that a grown length within 20 of 2^64
	 * saturates to UINT64_MAX: "every sum saturates", so it may be longer
	 * there, never shorter.
	 */
	lo = min128(min128(max128(piece, grown(largest)), cap), to_end);
	hi = min128(min128(max128(piece, grown(largest) >= (u128)MAX - 20 ? MAX : grown(largest)),
	                   cap),
	            to_end);
	assert(lo <= len && len <= hi);
	return true;
}

/* ranges_next fed its own answers, as read-ahead does: forward each time, and done in time. */
static void
check_next(const struct byte_range *answered, uint64_t complete, uint64_t largest, uint64_t cap)
{
	struct byte_range from = *answered, next;

	for (int i = 0; i < 16 && check_next_once(&from, complete, largest, cap, &next); i++) {
		assert(next.first > from.last);
		from = next;
	}
}

/*
 * The identity of another response carrying the same ETag and
 * Last-Modified, with the same complete length (same object unless weak),
 * another length, or no ETag (never the same): each answer the same both
 * ways round, across two buffers.
 */
static void
check_same_object(const struct object_identity *id, const char *base, bool weak)
{
	struct object_identity other;
	struct fuzz_head h;
	char *text = malloc(160 + id->etag.len + id->last_modified.len);
	int n;

	assert(text);
	for (int variant = 0; variant < 3; variant++) {
		uint64_t complete = id->complete + (variant == 1 && id->complete < MAX);
		bool etag = id->etag.len && variant != 2;
		bool expect = variant == 0   ? !weak
		              : variant == 1 ? complete == id->complete && !weak
		                             : !id->etag.len && !weak;

		n = sprintf(text,
		            "HTTP/1.1 206 Partial Content\r\n"
		            "Content-Range: bytes 0-0/%" PRIu64 "\r\n",
		            complete);
		if (etag)
			n += sprintf(text + n, "ETag: %.*s\r\n", (int)id->etag.len,
			             base + id->etag.off);
		if (id->last_modified.len)
			sprintf(text + n, "Last-Modified: %.*s\r\n", (int)id->last_modified.len,
			        base + id->last_modified.off);
		assert(fuzz_head_parse(&h, HTTP_RESPONSE, text, "", 0));
		assert(ranges_identity(&h.head, h.text, &other) && other.complete == complete);
		assert(ranges_same_object(id, base, &other, h.text) == expect);
		assert(ranges_same_object(&other, h.text, id, base) == expect);
		fuzz_head_free(&h);
	}
	free(text);
}

static void
check_identity(const struct http_head *resp, const char *base)
{
	struct object_identity id;
	struct byte_range got;
	uint64_t complete;
	bool known = ranges_identity(resp, base, &id);
	bool weak = id.etag.len >= 2 && base[id.etag.off] == 'W' && base[id.etag.off + 1] == '/';

	if (known) {
		assert(id.complete > 0);
		assert(id.etag.off + (uint64_t)id.etag.len <= resp->head_len);
		assert(id.last_modified.off + (uint64_t)id.last_modified.len <= resp->head_len);
		if (resp->status == 206) {
			assert(ranges_answered(resp, base, &got, &complete));
			assert(complete == id.complete);
		} else {
			assert(resp->status == 200 && (resp->llhttp_flags & F_CONTENT_LENGTH) &&
			       id.complete == resp->content_length);
		}
	} else {
		assert(id.complete == 0 && id.etag.len == 0 && id.last_modified.len == 0);
	}
	assert(ranges_same_object(&id, base, &id, base) == (known && !weak));
	if (known)
		check_same_object(&id, base, weak);
}

static void
check_requester(const struct http_head *req, const char *rbase, const struct http_head *resp,
                const char *base)
{
	bool private = ranges_response_private(resp, base);

	if (!private)
		assert(ranges_same_requester(req, rbase, req, rbase, resp, base));
	/* The response head stands in for a second request with other fields. */
	assert(ranges_same_requester(req, rbase, resp, base, resp, base) ==
	       ranges_same_requester(resp, base, req, rbase, resp, base));
}

static void
check_heads(const char *text, size_t size)
{
	const char *p = text, *end = text + size, *line, *resp_text;
	struct fuzz_head req, resp;
	struct byte_range asked = {0, 0}, got;
	enum range_form form = RANGE_NONE;
	uint64_t complete;
	bool have_req, have_resp;

	/* The request's fields end at the first empty line; the response head follows. */
	while (p < end && fuzz_line(&p, end, &line) > 0)
		;
	resp_text = p;
	have_req = fuzz_head_parse(&req, HTTP_REQUEST, "GET /video.mp4 HTTP/1.1\r\nHost: h\r\n",
	                           text, (size_t)(resp_text - text));
	have_resp = resp_text < end &&
	            fuzz_head_parse(&resp, HTTP_RESPONSE, "", resp_text, (size_t)(end - resp_text));
	if (have_req)
		form = check_requested(&req.head, req.text, &asked);
	if (have_resp) {
		if (ranges_answered(&resp.head, resp.text, &got, &complete)) {
			assert(got.first <= got.last && got.last < complete);
			check_answer_written(&got, complete);
			check_fits(&got, &resp.head, resp.text);
			check_next(&got, complete, 0, MAX);
			check_next(&got, complete, got.last - got.first + 1, 1u << 20);
			if (have_req && (form == RANGE_SINGLE || form == RANGE_OPEN))
				check_next(&got, complete, asked.last - asked.first, complete / 2);
		}
		if (have_req && (form == RANGE_SINGLE || form == RANGE_OPEN))
			check_fits(&asked, &resp.head, resp.text);
		check_identity(&resp.head, resp.text);
		if (have_req)
			check_requester(&req.head, req.text, &resp.head, resp.text);
	}
	fuzz_head_free(&req);
	if (resp_text < end)
		fuzz_head_free(&resp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_heads((const char *)data, size);
	if (size >= 40) {
		uint64_t n[5];
		struct byte_range a;

		memcpy(n, data + size - sizeof(n), sizeof(n));
		a.first = n[0];
		a.last = n[1];
		check_next(&a, n[2], n[3], n[4]);
		/* The same piece, ordered, so that most inputs reach the arithmetic. */
		a.first = n[0] < n[1] ? n[0] : n[1];
		a.last = n[0] < n[1] ? n[1] : n[0];
		check_next(&a, n[2], n[3], n[4]);
	}
	return 0;
}
