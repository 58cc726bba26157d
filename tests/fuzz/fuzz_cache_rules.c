/*
 * libFuzzer target: a shared cache's rules (cache_rules.c) and HTTP-dates
 * (http_date.c), which decide whether one client's answer may be given to
 * another.
 *
 * One input is text, laid out as fuzz_ranges' is: the fields of a request
 * (a GET, or a POST when its first field line is "X-Method: POST"), one a
 * line, then an empty line, then a response head (status line and
 * fields). Both are parsed by the proxy's parser (fuzz_head.h). Each
 * field value is also read as an HTTP-date.
 *
 * Asserted, besides no crash, leak or sanitizer report:
 * - the verdict is one of the enum's, and named;
 * - a shareable answer was to a GET, is final, carries no no-store (either
 *   side), private, no-cache, Set-Cookie or Vary: *, and with
 *   Authorization in the request is marked public, s-maxage or
 *   must-revalidate: the rules a wrong yes would break hand one client's
 *   answer to another;
 * - a shareable answer is fresh when it arrives, its lifetime and age lie
 *   in 0..2^31 (plus the time in flight for the age), and it stays fresh
 *   no longer than its lifetime; a guessed lifetime is at most a day;
 * - the same heads judged again give the same verdict (no hidden state);
 * - a date read in the preferred form is read the same by the reader of
 *   all forms, and written back in the preferred form reads the same.
 */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fuzz_head.h"
#include "kp/cache_rules.h"
#include "kp/http_date.h"

#define ASKED 1700000000LL
#define ARRIVED (ASKED + 3)

static bool
has(const struct http_head *h, const char *base, const char *name)
{
	for (unsigned i = 0; i < h->nfields; i++)
		if (http_span_is(base, h->fields[i].name, name))
			return true;
	return false;
}

static bool
vary_any(const struct http_head *h, const char *base)
{
	for (unsigned i = 0; i < h->nfields; i++)
		if (http_span_is(base, h->fields[i].name, "vary") &&
		    http_list_has(base, h->fields[i].value, "*"))
			return true;
	return false;
}

static void
check_dates(const struct http_head *h, const char *base)
{
	for (unsigned i = 0; i < h->nfields; i++) {
		const char *v = base + h->fields[i].value.off;
		size_t n = h->fields[i].value.len;
		int64_t fix, any, back;

		if (http_date_fixdate(v, n, &fix)) {
			char text[64];
			time_t t = (time_t)fix;
			struct tm tm;

			assert(http_date_parse(v, n, &any) && any == fix);
			/* Years beyond four digits have no preferred form to write back. */
			if (gmtime_r(&t, &tm) && tm.tm_year + 1900 <= 9999 &&
			    strftime(text, sizeof(text), "%a, %d %b %Y %H:%M:%S GMT", &tm) == 29) {
				assert(http_date_fixdate(text, 29, &back));
				/* A leap second reads as the next minute's first. */
				assert(back == fix);
			}
		} else {
			(void)http_date_parse(v, n, &any);
		}
	}
}

static void
check_verdict(const struct http_head *req, const char *qbase, const struct http_head *resp,
              const char *rbase)
{
	struct cache_control qcc, rcc;
	struct cache_life life, again;
	enum cache_verdict v = cache_judge(req, qbase, resp, rbase, ASKED, ARRIVED, &life);

	assert((unsigned)v < CACHE_VERDICTS);
	assert(strcmp(cache_verdict_name(v), "unknown") != 0);
	assert(cache_judge(req, qbase, resp, rbase, ASKED, ARRIVED, &again) == v);
	if (v != CACHE_SHAREABLE)
		return;
	cache_control_read(req, qbase, &qcc);
	cache_control_read(resp, rbase, &rcc);
	assert(req->method == HTTP_GET && resp->status >= 200);
	assert(!qcc.no_store && !rcc.no_store && !rcc.private_ && !rcc.no_cache);
	assert(!has(resp, rbase, "set-cookie") && !vary_any(resp, rbase));
	assert(!has(req, qbase, "authorization") || rcc.public_ || rcc.s_maxage >= 0 ||
	       rcc.must_revalidate);
	assert(life.lifetime > life.initial_age && life.initial_age >= 0);
	assert(life.lifetime <= 2147483648LL);
	assert(!life.heuristic || life.lifetime <= 86400);
	assert(cache_fresh(&life, ARRIVED, ARRIVED));
	assert(!cache_fresh(&life, ARRIVED, ARRIVED + life.lifetime));
	assert(again.lifetime == life.lifetime && again.initial_age == life.initial_age);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data, *p = text, *end = text + size, *line, *resp_text;
	static const char post[] = "X-Method: POST";
	struct fuzz_head req, resp;
	bool is_post, have_req, have_resp;
	size_t n;

	n = fuzz_line(&p, end, &line);
	is_post = n == sizeof(post) - 1 && memcmp(line, post, n) == 0;
	for (p = text; p < end && fuzz_line(&p, end, &line) > 0;)
		;
	resp_text = p;
	have_req = fuzz_head_parse(&req, HTTP_REQUEST,
	                           is_post ? "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n"
	                                   : "GET /a HTTP/1.1\r\nHost: h\r\n",
	                           text, (size_t)(resp_text - text));
	have_resp = resp_text < end &&
	            fuzz_head_parse(&resp, HTTP_RESPONSE, "", resp_text, (size_t)(end - resp_text));
	if (have_resp)
		check_dates(&resp.head, resp.text);
	if (have_req && have_resp)
		check_verdict(&req.head, req.text, &resp.head, resp.text);
	fuzz_head_free(&req);
	if (resp_text < end)
		fuzz_head_free(&resp);
	return 0;
}
