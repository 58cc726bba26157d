/*
 * Error responses: bad requests (400), unsupported schemes (400/501),
 * CONNECT to a port not allowed (403) or a name that does not resolve (502), unreachable origins (502), a silent origin (504), oversized
 * URLs (414) and heads (431), an oversized response head (502). Each error
 * carries a short text/plain body, and the daemon keeps serving afterwards.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

static struct proxy px;
static const char *const timeout_args[] = {"--response-timeout", "2", NULL};

static void
handle(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	(void)arg;
	if (strcmp(req->head.target, "/silent") == 0) {
		origin_stay_silent(c, 20000);
	} else if (strcmp(req->head.target, "/huge-head") == 0) {
		static char field[40000 + 16];

		memcpy(field, "X-Big: ", 7);
		memset(field + 7, 'h', 40000);
		memcpy(field + 7 + 40000, "\r\n", 3);
		origin_reply(c, 200, field, "too big a head");
	} else {
		origin_reply(c, 200, NULL, "ok");
	}
}

/* A normal request still works. */
static void
still_serving(struct origin *og)
{
	proxy_assert_alive(&px);
	expect_get(px.port, og, "/ok", 200, "ok");
}

/*
 * Sends raw bytes on a new connection and reads the answer, which must have
 * one of two statuses and a short text/plain body. Returns false (after
 * printing why) if not.
 */
static bool
check_error_status(const char *raw, size_t len, int status, int alt_status)
{
	struct client c;
	struct response r;
	const char *ctype;
	bool ok = true;
	int rc;

	client_open(&c, px.port);
	/* The proxy may answer and close before reading everything. */
	(void)client_send(&c, raw, len);
	rc = client_read_response(&c, &r, 0);
	if (rc != WIRE_OK) {
		print_error("request \"%.120s%s\": reading the response failed: %s%s%s\n", raw,
		            len > 120 ? "..." : "", wire_strerror(rc), r.why[0] ? ": " : "", r.why);
		ok = false;
	} else if (r.head.status != status && r.head.status != alt_status) {
		if (alt_status != status)
			print_error("request \"%.120s%s\": expected status %d or %d, got %d\n", raw,
			            len > 120 ? "..." : "", status, alt_status, r.head.status);
		else
			print_error("request \"%.120s%s\": expected status %d, got %d\n", raw,
			            len > 120 ? "..." : "", status, r.head.status);
		response_print(&r);
		ok = false;
	} else {
		ctype = resp_header(&r, "Content-Type");
		if (!ctype || strncmp(ctype, "text/plain", 10) != 0 || r.body.len == 0) {
			print_error("error responses should carry a short text/plain body\n");
			response_print(&r);
			ok = false;
		}
	}
	response_free(&r);
	client_close(&c);
	return ok;
}

static void
expect_error_status(const char *raw, size_t len, int status, int alt_status)
{
	if (!check_error_status(raw, len, status, alt_status))
		fail();
}

static void
expect_error(const char *raw, int status)
{
	expect_error_status(raw, strlen(raw), status, status);
}

static void
malformed_requests_get_400(void)
{
	struct origin *og = origin_start(handle, NULL);
	int op = origin_port(og);
	char raw[512];
	static const char *const templates[] = {
		"GARBAGE\r\n\r\n",
		"GET http://127.0.0.1:%d/ HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nThis is not a header\r\n\r\n",
		"GET http://127.0.0.1:%d/ HTTP/1.1\r\nHost : 127.0.0.1:%d\r\n\r\n",
		"POST http://127.0.0.1:%d/ HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: abc\r\n\r\n",
		"POST http://127.0.0.1:%d/ HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: 5\r\n"
		"Content-Length: 6\r\n\r\nhello!",
		"GET http://127.0.0.1:%d/ HTTP/1.1 extra\r\nHost: 127.0.0.1:%d\r\n\r\n",
		"GET http://127.0.0.1:%d/ HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Bad\x01Name: 1\r\n\r\n",
	};
	size_t failures = 0;

	proxy_start(&px, NULL);
	for (size_t i = 0; i < sizeof(templates) / sizeof(templates[0]); i++) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		snprintf(raw, sizeof(raw), templates[i], op, op);
#pragma GCC diagnostic pop
		if (!check_error_status(raw, strlen(raw), 400, 400))
			failures++;
		still_serving(og);
	}
	if (failures)
		fail_msg("%zu of %zu malformed requests were not answered with 400", failures,
		         sizeof(templates) / sizeof(templates[0]));
	/* None of them reached the origin; only the still_serving requests did. */
	assert_int_equal(origin_request_count(og), sizeof(templates) / sizeof(templates[0]));
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
origin_form_gets_400(void)
{
	struct origin *og = origin_start(handle, NULL);
	char raw[256];

	proxy_start(&px, NULL);
	snprintf(raw, sizeof(raw), "GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", origin_port(og));
	expect_error(raw, 400);
	still_serving(og);
	snprintf(raw, sizeof(raw), "GET /index.html?x=1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
	         origin_port(og));
	expect_error(raw, 400);
	still_serving(og);
	assert_int_equal(origin_request_count(og), 2);
	proxy_stop(&px);
}

static void
unsupported_scheme_and_connect(void)
{
	struct origin *og = origin_start(handle, NULL);
	char raw[256];

	proxy_start(&px, NULL);
	snprintf(raw, sizeof(raw),
	         "GET ftp://127.0.0.1:%d/file.txt HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
	         origin_port(og), origin_port(og));
	expect_error_status(raw, strlen(raw), 400, 501);
	still_serving(og);
	/* CONNECT tunnels exist; by default they may reach port 443 only. */
	expect_error("CONNECT tunnel.invalid:443 HTTP/1.1\r\nHost: tunnel.invalid:443\r\n\r\n", 502);
	still_serving(og);
	snprintf(raw, sizeof(raw), "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
	         origin_port(og), origin_port(og));
	expect_error(raw, 403);
	still_serving(og);
	/* Only the still_serving requests reached the origin. */
	assert_int_equal(origin_request_count(og), 3);
	proxy_stop(&px);
}

static void
unresolvable_host_gets_502(void)
{
	struct origin *og = origin_start(handle, NULL);
	double t0;

	proxy_start(&px, NULL);
	t0 = now_s();
	expect_error(
		"GET http://nonexistent.invalid/ HTTP/1.1\r\nHost: nonexistent.invalid\r\n\r\n",
		502);
	if (now_s() - t0 > 5.0)
		fail_msg("502 for an unresolvable name took %.1f s", now_s() - t0);
	still_serving(og);
	proxy_stop(&px);
}

static void
refused_connection_gets_502(void)
{
	struct origin *og = origin_start(handle, NULL);
	int closed_port = free_port(); /* nothing listens there */
	char raw[256];
	double t0;

	proxy_start(&px, NULL);
	snprintf(raw, sizeof(raw),
	         "GET http://127.0.0.1:%d/x HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", closed_port,
	         closed_port);
	t0 = now_s();
	expect_error(raw, 502);
	if (now_s() - t0 > 3.0)
		fail_msg("502 for a refused connection took %.1f s", now_s() - t0);
	still_serving(og);
	proxy_stop(&px);
}

static void
silent_origin_gets_504(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client slow;
	struct response r;
	double t0, t_other;

	proxy_start(&px, timeout_args);
	client_open(&slow, px.port);
	send_get(&slow, og, "/silent");
	t0 = now_s();
	/* While that request waits, other clients are served at once. */
	assert_true(origin_wait_requests(og, 1, 3000));
	t_other = now_s();
	still_serving(og);
	if (now_s() - t_other > 1.0)
		fail_msg("a normal request took %.2f s while another waited for a silent origin",
		         now_s() - t_other);

	read_response_ok(&slow, &r, 0);
	assert_status(&r, 504);
	if (now_s() - t0 < 1.8 || now_s() - t0 > 4.5)
		fail_msg("504 after %.2f s with --response-timeout 2", now_s() - t0);
	assert_non_null(resp_header(&r, "Content-Type"));
	assert_true(r.body.len > 0);
	response_free(&r);
	client_close(&slow);
	still_serving(og);
	/* The timed-out upstream connection is dropped, not pooled. */
	if (!origin_wait_peer_closed(og, 1, 3000))
		fail_msg("the proxy did not close the upstream connection that timed out");
	proxy_stop(&px);
}

static void
long_url_gets_414(void)
{
	struct origin *og = origin_start(handle, NULL);
	size_t n = 9000;
	char *raw = malloc(n + 256);
	int len;

	assert_non_null(raw);
	proxy_start(&px, NULL);
	len = snprintf(raw, 64, "GET http://127.0.0.1:%d/", origin_port(og));
	memset(raw + len, 'a', n);
	len += (int)n;
	len += snprintf(raw + len, 200, " HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", origin_port(og));
	expect_error_status(raw, (size_t)len, 414, 414);
	free(raw);
	still_serving(og);
	assert_int_equal(origin_request_count(og), 1);
	proxy_stop(&px);
}

static void
huge_header_gets_431(void)
{
	struct origin *og = origin_start(handle, NULL);
	size_t n = 40000;
	char *raw = malloc(n + 256);
	int len;

	assert_non_null(raw);
	proxy_start(&px, NULL);
	len = snprintf(raw, 200,
	               "GET http://127.0.0.1:%d/ HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Big: ",
	               origin_port(og), origin_port(og));
	memset(raw + len, 'b', n);
	len += (int)n;
	len += snprintf(raw + len, 16, "\r\n\r\n");
	expect_error_status(raw, (size_t)len, 431, 431);
	free(raw);
	still_serving(og);
	assert_int_equal(origin_request_count(og), 1);
	proxy_stop(&px);
}

static void
url_limit_is_configurable(void)
{
	static const char *const args[] = {"--max-url-size", "100", NULL};
	struct origin *og = origin_start(handle, NULL);
	char raw[512], path[160];

	proxy_start(&px, args);
	/* Well under the limit: served. */
	expect_get(px.port, og, "/short", 200, "ok");
	memset(path, 'u', 150);
	path[150] = '\0';
	snprintf(raw, sizeof(raw),
	         "GET http://127.0.0.1:%d/%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
	         origin_port(og), path, origin_port(og));
	expect_error(raw, 414);
	still_serving(og);
	proxy_stop(&px);
}

static void
huge_response_head_gets_502(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct response r;
	char url[128];

	proxy_start(&px, NULL);
	fetch(px.port, "GET", origin_url(og, "/huge-head", url, sizeof(url)), &r);
	assert_status(&r, 502);
	assert_null(resp_header(&r, "X-Big"));
	response_free(&r);
	still_serving(og);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(malformed_requests_get_400),
		E2E_TEST(origin_form_gets_400),
		E2E_TEST(unsupported_scheme_and_connect),
		E2E_TEST(unresolvable_host_gets_502),
		E2E_TEST(refused_connection_gets_502),
		E2E_TEST(silent_origin_gets_504),
		E2E_TEST(long_url_gets_414),
		E2E_TEST(huge_header_gets_431),
		E2E_TEST(url_limit_is_configurable),
		E2E_TEST(huge_response_head_gets_502),
	};

	return E2E_RUN("e2e_errors", tests);
}
