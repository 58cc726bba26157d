#include "kp/ranges.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "kp/chars.h"
#include "kp/http_date.h"

/* ---- reading field values ------------------------------------------------- */

/* Whitespace around a field value is not part of it (RFC 9110 5.5). */
static struct http_span
trimmed(const char *base, struct http_span s)
{
	while (s.len && char_is_ows(base[s.off])) {
		s.off++;
		s.len--;
	}
	while (s.len && char_is_ows(base[s.off + s.len - 1]))
		s.len--;
	return s;
}

static bool
spans_equal(const char *abase, struct http_span a, const char *bbase, struct http_span b)
{
	return a.len == b.len && memcmp(abase + a.off, bbase + b.off, a.len) == 0;
}

/*
 * How many fields are named name (0, 1, or 2 for "more"); *value gets the
 * first one's value, trimmed, or an empty span. The fields read here are
 * singletons: two of them contradict each other or were glued from two
 * sources, and neither is to be believed.
 */
static unsigned
field_count(const struct http_head *h, const char *base, const char *name,
            struct http_span *value)
{
	unsigned n = 0;

	*value = (struct http_span){0, 0};
	for (unsigned i = 0; i < h->nfields && n < 2; i++) {
		if (!http_span_is(base, h->fields[i].name, name))
			continue;
		if (n++ == 0)
			*value = trimmed(base, h->fields[i].value);
	}
	return n;
}

/* Consumes word at *p, in any case. */
static bool
skip_word(const char **p, const char *end, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(end - *p) < n || strncasecmp(*p, word, n) != 0)
		return false;
	*p += n;
	return true;
}

static bool
skip_char(const char **p, const char *end, char c)
{
	if (*p == end || **p != c)
		return false;
	(*p)++;
	return true;
}

bool
ranges_read_number(const char **p, const char *end, uint64_t *v)
{
	const char *s = *p;
	uint64_t n = 0;

	for (; s < end && char_is_digit(*s); s++) {
		unsigned d = (unsigned)(*s - '0');

		if (n > (UINT64_MAX - d) / 10)
			return false;
		n = n * 10 + d;
	}
	if (s == *p)
		return false;
	*p = s;
	*v = n;
	return true;
}

/* ---- requests and answers ------------------------------------------------- */

enum range_form
ranges_requested(const struct http_head *req, const char *base, struct byte_range *out)
{
	struct http_span v;
	const char *p, *end;
	uint64_t first, last;

	switch (field_count(req, base, "range", &v)) {
	case 0:
		return RANGE_NONE;
	case 1:
		break;
	default:
		return RANGE_OTHER;
	}
	p = base + v.off;
	end = p + v.len;
	if (!skip_word(&p, end, "bytes=") || !ranges_read_number(&p, end, &first) ||
	    !skip_char(&p, end, '-'))
		return RANGE_OTHER;
	if (p == end) {
		out->first = first;
		out->last = UINT64_MAX;
		return RANGE_OPEN;
	}
	/* RFC 9110 14.1.1: S > E is invalid, and so the whole field is ignored. */
	if (!ranges_read_number(&p, end, &last) || p != end || last < first)
		return RANGE_OTHER;
	out->first = first;
	out->last = last;
	return RANGE_SINGLE;
}

bool
ranges_answered(const struct http_head *resp, const char *base, struct byte_range *got,
                uint64_t *complete)
{
	struct http_span v;
	const char *p, *end;
	uint64_t first, last, length;

	if (field_count(resp, base, "content-range", &v) != 1)
		return false;
	p = base + v.off;
	end = p + v.len;
	if (!skip_word(&p, end, "bytes ") || !ranges_read_number(&p, end, &first) ||
	    !skip_char(&p, end, '-') || !ranges_read_number(&p, end, &last) ||
	    !skip_char(&p, end, '/') || !ranges_read_number(&p, end, &length) || p != end)
		return false;
	/* RFC 9110 14.4: anything else is invalid, and the 206 must not be used. */
	if (first > last || last >= length)
		return false;
	got->first = first;
	got->last = last;
	*complete = length;
	return true;
}

bool
ranges_piece_fits(const struct byte_range *asked, const struct http_head *resp,
                  const char *base, uint64_t *complete)
{
	struct byte_range got;
	uint64_t length, want_last;

	if (resp->status != 206 || !ranges_answered(resp, base, &got, &length))
		return false;
	/* A server may answer less than was asked (RFC 9110 15.3.7), but then not in our place. */
	want_last = asked->last < length - 1 ? asked->last : length - 1;
	if (got.first != asked->first || got.last != want_last)
		return false;
	if ((resp->llhttp_flags & F_CONTENT_LENGTH) &&
	    resp->content_length != got.last - got.first + 1)
		return false;
	*complete = length;
	return true;
}

/* ---- what to fetch next --------------------------------------------------- */

/* ceil(n / 0.95) = ceil(n * 20 / 19), without the product overflowing. */
static uint64_t
grown_length(uint64_t n)
{
	uint64_t q = n / 19, r = n % 19;

	if (q > (UINT64_MAX - 20) / 20)
		return UINT64_MAX;
	return q * 20 + (r * 20 + 18) / 19;
}

bool
ranges_next(const struct byte_range *answered, uint64_t complete, uint64_t largest_seen,
            uint64_t cap, struct byte_range *next)
{
	uint64_t first, length;

	if (answered->first > answered->last || answered->last == UINT64_MAX)
		return false;
	first = answered->last + 1;
	if (first >= complete || cap == 0)
		return false;
	length = grown_length(largest_seen);
	if (length < answered->last - answered->first + 1)
		length = answered->last - answered->first + 1;
	if (length > cap)
		length = cap;
	next->first = first;
	/* first < complete, so the bytes left to the end are counted without wrapping. */
	next->last = length - 1 < complete - 1 - first ? first + length - 1 : complete - 1;
	return true;
}

/* ---- one object ----------------------------------------------------------- */

bool
ranges_identity(const struct http_head *resp, const char *base, struct object_identity *id)
{
	struct byte_range got;
	bool known = true;

	*id = (struct object_identity){0};
	if (field_count(resp, base, "etag", &id->etag) > 1 ||
	    field_count(resp, base, "last-modified", &id->last_modified) > 1)
		known = false;
	else if (resp->status == 206)
		known = ranges_answered(resp, base, &got, &id->complete);
	else if (resp->status == 200 && (resp->llhttp_flags & F_CONTENT_LENGTH))
		id->complete = resp->content_length;
	if (!known || id->complete == 0) {
		*id = (struct object_identity){0};
		return false;
	}
	return true;
}

static bool
is_weak(const char *base, struct http_span etag)
{
	return etag.len >= 2 && base[etag.off] == 'W' && base[etag.off + 1] == '/';
}

bool
ranges_identity_keep(struct kept_identity *k, const struct object_identity *id,
                     const char *base)
{
	if (id->etag.len + id->last_modified.len > sizeof(k->text))
		return false;
	memcpy(k->text, base + id->etag.off, id->etag.len);
	memcpy(k->text + id->etag.len, base + id->last_modified.off, id->last_modified.len);
	k->id = *id;
	k->id.etag.off = 0;
	k->id.last_modified.off = id->etag.len;
	k->known = true;
	return true;
}

bool
ranges_same_object(const struct object_identity *a, const char *abase,
                   const struct object_identity *b, const char *bbase)
{
	if (a->complete == 0 || a->complete != b->complete)
		return false;
	/* Unequal spans when one is weak and the other not; both weak is caught here. */
	if ((a->etag.len || b->etag.len) &&
	    (is_weak(abase, a->etag) || !spans_equal(abase, a->etag, bbase, b->etag)))
		return false;
	if ((a->last_modified.len || b->last_modified.len) &&
	    !spans_equal(abase, a->last_modified, bbase, b->last_modified))
		return false;
	return true;
}

/* ---- who may be served ---------------------------------------------------- */

/*
 * Does one Cache-Control value hold no-store or private? -1 when it cannot
 * be read to the end. Read directive by directive rather than with
 * http_list_has, because private="a, b" has a comma inside its quotes.
 */
static int
names_private(const char *p, const char *end)
{
	while (p < end) {
		const char *name;
		size_t n;

		while (p < end && (char_is_ows(*p) || *p == ','))
			p++;
		if (p == end)
			break;
		for (name = p; p < end && char_is_tchar(*p); p++)
			;
		n = (size_t)(p - name);
		if (n == 0)
			return -1;
		if ((n == 8 && strncasecmp(name, "no-store", n) == 0) ||
		    (n == 7 && strncasecmp(name, "private", n) == 0))
			return 1;
		if (skip_char(&p, end, '=')) {
			if (skip_char(&p, end, '"')) {
				for (; p < end && *p != '"'; p++)
					if (*p == '\\' && ++p == end)
						return -1;
				if (!skip_char(&p, end, '"'))
					return -1;
			} else {
				for (name = p; p < end && char_is_tchar(*p); p++)
					;
				if (p == name)
					return -1;
			}
		}
		while (p < end && char_is_ows(*p))
			p++;
		if (p < end && *p != ',')
			return -1;
	}
	return 0;
}

bool
ranges_response_private(const struct http_head *resp, const char *base)
{
	for (unsigned i = 0; i < resp->nfields; i++) {
		const struct http_field *f = &resp->fields[i];

		if (http_span_is(base, f->name, "cache-control") &&
		    names_private(base + f->value.off, base + f->value.off + f->value.len) != 0)
			return true;
		if (http_span_is(base, f->name, "vary") && http_list_has(base, f->value, "*"))
			return true;
	}
	return false;
}

static bool
name_is(const char *base, struct http_span s, const char *name, size_t n)
{
	return s.len == n && strncasecmp(base + s.off, name, n) == 0;
}

/* Moves *i to the next field named name, from *i on; false when there is none. */
static bool
next_named(const struct http_head *h, const char *base, const char *name, size_t n,
           unsigned *i)
{
	for (; *i < h->nfields; (*i)++)
		if (name_is(base, h->fields[*i].name, name, n))
			return true;
	return false;
}

/* Do a and b carry the same fields named name, value for value in order? */
static bool
same_values(const struct http_head *a, const char *abase, const struct http_head *b,
            const char *bbase, const char *name, size_t n)
{
	for (unsigned i = 0, j = 0;; i++, j++) {
		bool in_a = next_named(a, abase, name, n, &i);
		bool in_b = next_named(b, bbase, name, n, &j);

		if (!in_a || !in_b)
			return in_a == in_b;
		if (!spans_equal(abase, trimmed(abase, a->fields[i].value), bbase,
		                 trimmed(bbase, b->fields[j].value)))
			return false;
	}
}

/* Are the fields that one Vary value names the same in a and b? */
static bool
same_varied(const struct http_head *a, const char *abase, const struct http_head *b,
            const char *bbase, const char *p, const char *end)
{
	while (p < end) {
		const char *tok;
		struct http_span s;

		while (p < end && (char_is_ows(*p) || *p == ','))
			p++;
		for (tok = p; p < end && *p != ','; p++)
			;
		s = trimmed(tok, (struct http_span){0, (uint32_t)(p - tok)});
		if (s.len == 0)
			continue;
		if (name_is(tok, s, "*", 1))
			return false;
		if (name_is(tok, s, "proxy-authorization", 19))
			continue;
		if (!same_values(a, abase, b, bbase, tok + s.off, s.len))
			return false;
	}
	return true;
}

bool
ranges_same_requester(const struct http_head *a, const char *abase,
                      const struct http_head *b, const char *bbase,
                      const struct http_head *resp, const char *rbase)
{
	/*
	 * Credentials and cookies whether or not Vary names them: origins
	 * often answer per user without saying so (RFC 9111 3.5 keeps shared
	 * caches from reusing answers to Authorization for the same reason).
	 * Preconditions too: with another If-Range the origin owes a whole
	 * 200 instead of the piece (RFC 9110 13.1.5), and the others decide
	 * between the piece and a 304 or 412.
	 */
	static const struct {
		const char *name;
		size_t len;
	} always[] = {
		{"authorization", 13},     {"cookie", 6},
		{"if-range", 8},           {"if-match", 8},
		{"if-none-match", 13},     {"if-modified-since", 17},
		{"if-unmodified-since", 19},
	};

	for (size_t i = 0; i < sizeof(always) / sizeof(always[0]); i++)
		if (!same_values(a, abase, b, bbase, always[i].name, always[i].len))
			return false;
	for (unsigned i = 0; i < resp->nfields; i++) {
		const struct http_field *f = &resp->fields[i];
		const char *v = rbase + f->value.off;

		if (http_span_is(rbase, f->name, "vary") &&
		    !same_varied(a, abase, b, bbase, v, v + f->value.len))
			return false;
	}
	return true;
}

/* ---- If-Range (RFC 9110 13.1.5) -------------------------------------------- */

bool
ranges_if_range(const struct http_head *resp, const char *base, struct http_span *validator)
{
	struct http_span etag, modified, date;
	unsigned etags = field_count(resp, base, "etag", &etag);
	int64_t lm, now;

	if (etags > 1)
		return false;
	if (etags == 1) {
		/* A weak ETag may not be sent, and with an ETag a date may not either. */
		if (etag.len < 2 || base[etag.off] != '"' || base[etag.off + etag.len - 1] != '"')
			return false;
		*validator = etag;
		return true;
	}
	/*
	 * Last-Modified is a strong validator only a second or more before the
	 * response's Date (RFC 9110 8.8.2.2): within the same second, the
	 * representation could have changed again unseen.
	 */
	if (field_count(resp, base, "last-modified", &modified) != 1 ||
	    field_count(resp, base, "date", &date) != 1 ||
	    !http_date_fixdate(base + modified.off, modified.len, &lm) ||
	    !http_date_fixdate(base + date.off, date.len, &now) || lm > now - 1)
		return false;
	*validator = modified;
	return true;
}
