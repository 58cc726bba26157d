/*
 * A shared cache's rules (RFC 9111), read from heads: which answers may
 * serve more than their asker, how long they stay fresh, how old they
 * arrive; and HTTP-dates in their three forms.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kp/cache_rules.h"
#include "kp/http_date.h"

#include "parsed_head.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Sun, 06 Nov 1994 08:49:37 GMT, the RFC's own example date. */
#define T 784111777LL
#define DATE_T "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"

/* ---- HTTP-dates ------------------------------------------------------------- */

static void
dates_in_every_form(void **state)
{
	static const struct {
		const char *text;
		bool fixdate, any;
		int64_t t;
	} cases[] = {
		{"Sun, 06 Nov 1994 08:49:37 GMT", true, true, T},
		{"Sunday, 06-Nov-94 08:49:37 GMT", false, true, T},
		{"Sun Nov  6 08:49:37 1994", false, true, T},
		{"Sun Nov 06 08:49:37 1994", false, true, T},
		{"Wednesday, 01-Jan-20 00:00:00 GMT", false, true, 1577836800},
		{"Thu, 01 Jan 1970 00:00:00 GMT", true, true, 0},
		{"Tue, 29 Feb 2000 23:59:60 GMT", true, true, 951868800},
		{"Sun, 06 Nov 1994 08:49:37 UTC", false, false, 0},
		{"Sun, 06 Nov 1994 24:00:00 GMT", false, false, 0},
		{"Sun, 32 Nov 1994 08:49:37 GMT", false, false, 0},
		{"Sun, 06 Foo 1994 08:49:37 GMT", false, false, 0},
		{"Sun, 6 Nov 1994 08:49:37 GMT", false, false, 0},
		{"Sun, 06 Nov 1994 08:49:37 GMT ", false, false, 0},
		{"Sun, 06 Nov 1994 08-49-37 GMT", false, false, 0},
		{"0", false, false, 0},
		{"", false, false, 0},
		{"Sun, 06-Nov-94 08:49:37 GMT", false, false, 0},
		{"Sun Nov  6 08:49:37 94", false, false, 0},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		int64_t t = -1;
		bool any = http_date_parse(cases[i].text, strlen(cases[i].text), &t);

		if (any != cases[i].any || (any && t != cases[i].t))
			fail_msg("\"%s\": read %d as %lld, expected %d as %lld", cases[i].text, any,
			         (long long)t, cases[i].any, (long long)cases[i].t);
		if (http_date_fixdate(cases[i].text, strlen(cases[i].text), &t) != cases[i].fixdate)
			fail_msg("\"%s\": fixdate %d expected", cases[i].text, cases[i].fixdate);
	}
}

/* ---- verdicts --------------------------------------------------------------- */

struct judge_case {
	const char *request;       /* the request's start line and fields */
	const char *response;      /* the response's */
	int64_t asked, arrived;    /* request and response times */
	enum cache_verdict verdict;
	int64_t lifetime, age;     /* when shareable */
	bool heuristic;
};

#define GET "GET http://example.com/a HTTP/1.1\r\nHost: example.com\r\n"
#define OK "HTTP/1.1 200 OK\r\n"

static void
verdicts(void **state)
{
	static const struct judge_case cases[] = {
		/* Lifetimes given, in their order of precedence. */
		{GET, OK DATE_T "Cache-Control: max-age=3600\r\n", T, T, CACHE_SHAREABLE, 3600, 0, false},
		{GET, OK DATE_T "Cache-Control: max-age=3600, s-maxage=60\r\n", T, T, CACHE_SHAREABLE,
		 60, 0, false},
		{GET, OK DATE_T "Cache-Control: max-age=60\r\nExpires: Sun, 06 Nov 1994 09:49:37 GMT\r\n",
		 T, T, CACHE_SHAREABLE, 60, 0, false},
		{GET, OK DATE_T "Expires: Sun, 06 Nov 1994 08:51:17 GMT\r\n", T, T, CACHE_SHAREABLE, 100,
		 0, false},
		{GET, OK DATE_T "Cache-Control: Max-Age=60\r\n", T, T, CACHE_SHAREABLE, 60, 0, false},
		{GET, OK DATE_T "Cache-Control: max-age=\"60\"\r\n", T, T, CACHE_SHAREABLE, 60, 0, false},
		{GET, OK DATE_T "Cache-Control: max-age=60\r\nCache-Control: max-age=60\r\n", T, T,
		 CACHE_SHAREABLE, 60, 0, false},
		{GET, OK DATE_T "Cache-Control: foo=\"a, b\", max-age=60, bar\r\n", T, T, CACHE_SHAREABLE,
		 60, 0, false},
		{GET, OK DATE_T "Cache-Control: max-age=99999999999999999999\r\n", T, T, CACHE_SHAREABLE,
		 2147483648LL, 0, false},
		{GET, OK DATE_T "Expires: Sun Nov  6 09:48:37 9194\r\n", T, T, CACHE_SHAREABLE,
		 2147483648LL, 0, false},
		{GET, "HTTP/1.1 302 Found\r\n" DATE_T "Cache-Control: max-age=60\r\n", T, T,
		 CACHE_SHAREABLE, 60, 0, false},
		/* Guessed from Last-Modified: a tenth of its age, a day at most. */
		{GET, OK DATE_T "Last-Modified: Sun, 06 Nov 1994 06:03:57 GMT\r\n", T, T, CACHE_SHAREABLE,
		 994, 0, true},
		{GET, OK DATE_T "Last-Modified: Sun, 06 Nov 1984 08:49:37 GMT\r\n", T, T, CACHE_SHAREABLE,
		 86400, 0, true},
		{GET, "HTTP/1.1 404 Not Found\r\n" DATE_T "Last-Modified: Sun, 06 Nov 1994 06:03:57 GMT\r\n",
		 T, T, CACHE_SHAREABLE, 994, 0, true},
		/* Age on arrival: the larger of Date's and Age's plus the time in flight. */
		{GET, OK DATE_T "Age: 30\r\nCache-Control: max-age=60\r\n", T, T + 2, CACHE_SHAREABLE, 60,
		 32, false},
		{GET, OK "Date: Sun, 06 Nov 1994 08:49:07 GMT\r\nCache-Control: max-age=60\r\n", T, T,
		 CACHE_SHAREABLE, 60, 30, false},
		{GET, OK "Cache-Control: max-age=60\r\n", T, T + 5, CACHE_SHAREABLE, 60, 5, false},
		{GET, OK DATE_T "Age: 100\r\nCache-Control: max-age=60\r\n", T, T, CACHE_STALE, 0, 0,
		 false},
		{GET, OK "Date: Sun, 06 Nov 1994 08:47:37 GMT\r\nCache-Control: max-age=60\r\n", T, T,
		 CACHE_STALE, 0, 0, false},
		/* Lifetimes that cannot be trusted are over. */
		{GET, OK DATE_T "Expires: 0\r\n", T, T, CACHE_STALE, 0, 0, false},
		{GET, OK DATE_T "Expires: Sun, 06 Nov 1994 08:51:17 GMT\r\n"
		     "Expires: Sun, 06 Nov 1994 09:51:17 GMT\r\n", T, T, CACHE_STALE, 0, 0, false},
		{GET, OK DATE_T "Cache-Control: max-age=60, max-age=3600\r\n", T, T, CACHE_STALE, 0, 0,
		 false},
		{GET, OK DATE_T "Cache-Control: max-age=soon\r\n", T, T, CACHE_STALE, 0, 0, false},
		{GET, OK DATE_T "Cache-Control: max-age\r\n", T, T, CACHE_STALE, 0, 0, false},
		{GET, OK DATE_T "Cache-Control: max-age=0\r\n", T, T, CACHE_STALE, 0, 0, false},
		/* Never for others. */
		{"POST http://example.com/a HTTP/1.1\r\nHost: example.com\r\nContent-Length: 0\r\n",
		 OK DATE_T "Cache-Control: max-age=60\r\n", T, T, CACHE_METHOD, 0, 0, false},
		{GET, OK DATE_T "Cache-Control: max-age=60, no-store\r\n", T, T, CACHE_NO_STORE, 0, 0,
		 false},
		{GET "Cache-Control: no-store\r\n", OK DATE_T "Cache-Control: max-age=60\r\n", T, T,
		 CACHE_NO_STORE, 0, 0, false},
		{GET, OK DATE_T "Cache-Control: max-age=60, private\r\n", T, T, CACHE_PRIVATE, 0, 0,
		 false},
		{GET, OK DATE_T "Cache-Control: private=\"x, y\", max-age=60\r\n", T, T, CACHE_PRIVATE, 0,
		 0, false},
		{GET, OK DATE_T "Cache-Control: max-age=60, no-cache\r\n", T, T, CACHE_NO_CACHE, 0, 0,
		 false},
		{GET, OK DATE_T "Cache-Control: max-age=60\r\nSet-Cookie: a=b\r\n", T, T,
		 CACHE_SET_COOKIE, 0, 0, false},
		{GET, OK DATE_T "Cache-Control: max-age=60\r\nVary: Accept, *\r\n", T, T, CACHE_VARY_ANY,
		 0, 0, false},
		{GET, OK DATE_T, T, T, CACHE_NO_LIFETIME, 0, 0, false},
		{GET, OK DATE_T "Cache-Control: public\r\n", T, T, CACHE_NO_LIFETIME, 0, 0, false},
		{GET, "HTTP/1.1 302 Found\r\n" DATE_T "Last-Modified: Sun, 06 Nov 1984 08:49:37 GMT\r\n", T,
		 T, CACHE_STATUS, 0, 0, false},
		/* Credentials: only an answer marked for sharing (RFC 9111 3.5). */
		{GET "Authorization: Basic dTpw\r\n", OK DATE_T "Cache-Control: max-age=60\r\n", T, T,
		 CACHE_AUTHORIZATION, 0, 0, false},
		{GET "Authorization: Basic dTpw\r\n", OK DATE_T "Cache-Control: max-age=60, public\r\n", T,
		 T, CACHE_SHAREABLE, 60, 0, false},
		{GET "Authorization: Basic dTpw\r\n", OK DATE_T "Cache-Control: s-maxage=60\r\n", T, T,
		 CACHE_SHAREABLE, 60, 0, false},
		{GET "Authorization: Basic dTpw\r\n",
		 OK DATE_T "Cache-Control: max-age=60, must-revalidate\r\n", T, T, CACHE_SHAREABLE, 60, 0,
		 false},
		/* A request's no-cache asks for a fresh answer: that one may still be kept. */
		{GET "Cache-Control: no-cache\r\n", OK DATE_T "Cache-Control: max-age=60\r\n", T, T,
		 CACHE_SHAREABLE, 60, 0, false},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		const struct judge_case *c = &cases[i];
		struct parsed q, r;
		struct cache_life life = {-1, -1, false};
		enum cache_verdict v;

		parse(&q, HTTP_REQUEST, c->request, "");
		parse(&r, HTTP_RESPONSE, c->response, "");
		v = cache_judge(&q.head, q.text, &r.head, r.text, c->asked, c->arrived, &life);
		if (v != c->verdict)
			fail_msg("case %zu: %s, expected %s\n%s%s", i, cache_verdict_name(v),
			         cache_verdict_name(c->verdict), c->request, c->response);
		if (v == CACHE_SHAREABLE &&
		    (life.lifetime != c->lifetime || life.initial_age != c->age ||
		     life.heuristic != c->heuristic))
			fail_msg("case %zu: lifetime %lld age %lld heuristic %d, expected %lld %lld %d", i,
			         (long long)life.lifetime, (long long)life.initial_age, life.heuristic,
			         (long long)c->lifetime, (long long)c->age, c->heuristic);
	}
}

/* Fresh while its age, grown by its time held, is below its lifetime. */
static void
freshness_runs_out(void **state)
{
	const struct cache_life life = {.lifetime = 60, .initial_age = 10};

	(void)state;
	assert_true(cache_fresh(&life, T, T));
	assert_true(cache_fresh(&life, T, T + 49));
	assert_false(cache_fresh(&life, T, T + 50));
	/* A clock that went back does not make it younger than it arrived. */
	assert_true(cache_fresh(&life, T, T - 1000));
}

/* What the asker's own Cache-Control allows of a held answer 10 s old, fresh for 60. */
static void
requests_set_their_own_limits(void **state)
{
	static const struct {
		const char *fields;
		int64_t held;         /* seconds since it arrived */
		bool serves;
	} cases[] = {
		{"", 0, true},
		{"", 49, true},
		{"", 50, false},
		{"Cache-Control: max-stale=3600\r\n", 50, false},
		{"Cache-Control: no-cache\r\n", 0, false},
		{"Pragma: no-cache\r\n", 0, false},
		{"Pragma: no-cache\r\nCache-Control: max-age=30\r\n", 0, true},
		{"Cache-Control: max-age=30\r\n", 20, true},
		{"Cache-Control: max-age=30\r\n", 21, false},
		{"Cache-Control: max-age=0\r\n", 0, false},
		{"Cache-Control: max-age=5, max-age=50\r\n", 0, false},
		{"Cache-Control: min-fresh=40\r\n", 10, true},
		{"Cache-Control: min-fresh=40\r\n", 11, false},
		{"Cache-Control: no-store\r\n", 0, true},
	};
	const struct cache_life life = {.lifetime = 60, .initial_age = 10};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct parsed q;

		parse(&q, HTTP_REQUEST, GET, cases[i].fields);
		if (cache_serves(&q.head, q.text, &life, T, T + cases[i].held) != cases[i].serves)
			fail_msg("case %zu (%s, held %lld s): expected %d", i, cases[i].fields,
			         (long long)cases[i].held, cases[i].serves);
	}
}

static void
directives_of_a_request(void **state)
{
	struct parsed q;
	struct cache_control cc;

	(void)state;
	parse(&q, HTTP_REQUEST, GET "Cache-Control: max-stale, min-fresh=5, only-if-cached\r\n", "");
	cache_control_read(&q.head, q.text, &cc);
	assert_true(cc.only_if_cached);
	assert_int_equal(cc.min_fresh, 5);
	assert_int_equal(cc.max_stale, 2147483648LL);
	assert_int_equal(cc.max_age, -1);
	assert_false(cc.no_cache);
	/* Pragma speaks only where Cache-Control is silent (RFC 9111 5.4). */
	parse(&q, HTTP_REQUEST, GET "Pragma: no-cache\r\n", "");
	cache_control_read(&q.head, q.text, &cc);
	assert_true(cc.no_cache);
	parse(&q, HTTP_REQUEST, GET "Pragma: no-cache\r\nCache-Control: max-age=5\r\n", "");
	cache_control_read(&q.head, q.text, &cc);
	assert_false(cc.no_cache);
	assert_int_equal(cc.max_age, 5);
}

static void
verdicts_have_names(void **state)
{
	(void)state;
	for (int v = 0; v < CACHE_VERDICTS; v++)
		assert_non_null(cache_verdict_name((enum cache_verdict)v));
	assert_string_equal(cache_verdict_name(CACHE_VERDICTS), "unknown");
	assert_string_equal(cache_verdict_name(CACHE_SET_COOKIE), "set_cookie");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(dates_in_every_form),
		cmocka_unit_test(verdicts),
		cmocka_unit_test(freshness_runs_out),
		cmocka_unit_test(requests_set_their_own_limits),
		cmocka_unit_test(directives_of_a_request),
		cmocka_unit_test(verdicts_have_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
