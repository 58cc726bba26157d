/*
 * Stale pooled connections: the origin closes or resets a connection the
 * proxy keeps in its pool. Clients must not notice (fresh connection or one
 * transparent retry of an idempotent request), but a non-idempotent request
 * whose body went out must not be repeated.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

enum stale_mode {
	CLOSE_WHEN_IDLE,          /* answer, then close 100 ms later if nothing came */
	CLOSE_AT_ONCE,            /* answer, then close at once (no Connection: close) */
	RESET_ON_REUSE,           /* first request on a connection answered, later ones reset */
	CLOSE_ON_REUSE,           /* first request on a connection answered, later ones closed (FIN)
	                             unanswered */
	RESET_ALWAYS_AFTER_FIRST, /* like RESET_ON_REUSE, and every later connection resets */
};

static struct proxy px;

static void
reply_with_target(struct origin_conn *c, const struct origin_request *req)
{
	char body[128];

	snprintf(body, sizeof(body), "body of %s", req->head.target);
	origin_reply(c, 200, NULL, body);
}

static void
handle(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	enum stale_mode mode = *(const enum stale_mode *)arg;

	if (strcmp(req->head.method, "POST") == 0 && mode != CLOSE_WHEN_IDLE &&
	    mode != CLOSE_AT_ONCE) {
		/* The whole request, body included, has been read: the origin got it. */
		if (mode == CLOSE_ON_REUSE)
			origin_close(c);
		else
			origin_reset(c);
		return;
	}
	switch (mode) {
	case CLOSE_WHEN_IDLE:
		reply_with_target(c, req);
		origin_close_when_idle(c, 100);
		break;
	case CLOSE_AT_ONCE:
		reply_with_target(c, req);
		origin_close(c);
		break;
	case RESET_ON_REUSE:
		if (req->seq >= 2)
			origin_reset(c);
		else
			reply_with_target(c, req);
		break;
	case CLOSE_ON_REUSE:
		if (req->seq >= 2)
			origin_close(c);
		else
			reply_with_target(c, req);
		break;
	case RESET_ALWAYS_AFTER_FIRST:
		if (origin_conn_no(c) == 1 && req->seq == 1)
			reply_with_target(c, req);
		else
			origin_reset(c);
		break;
	}
}

static void
idle_close_by_origin_is_noticed(void)
{
	static enum stale_mode mode = CLOSE_WHEN_IDLE;
	struct origin *og = origin_start(handle, &mode);

	proxy_start(&px, NULL);
	for (unsigned i = 1; i <= 5; i++) {
		char path[32], body[48];

		snprintf(path, sizeof(path), "/round/%u", i);
		snprintf(body, sizeof(body), "body of %s", path);
		expect_get(px.port, og, path, 200, body);
		/* Let the origin close the pooled connection while it is idle. */
		sleep_ms(400);
	}
	/* Each round needed a new connection; no request was lost or doubled. */
	assert_int_equal(origin_connection_count(og), 5);
	assert_int_equal(origin_request_count(og), 5);
	assert_origin_clean(og);
	proxy_assert_alive(&px);
	proxy_stop(&px);
}

static void
close_right_after_response_races(void)
{
	static enum stale_mode mode = CLOSE_AT_ONCE;
	struct origin *og = origin_start(handle, &mode);

	proxy_start(&px, NULL);
	/* Back to back: the next request may meet the connection before its FIN is seen. */
	for (unsigned i = 1; i <= 20; i++) {
		char path[32], body[48];

		snprintf(path, sizeof(path), "/race/%u", i);
		snprintf(body, sizeof(body), "body of %s", path);
		expect_get(px.port, og, path, 200, body);
	}
	for (unsigned i = 1; i <= 20; i++) {
		char path[32];

		snprintf(path, sizeof(path), "/race/%u", i);
		assert_int_equal(origin_count_requests(og, "GET", path), 1);
	}
	assert_int_equal(origin_connection_count(og), 20);
	assert_origin_clean(og);
	proxy_stop(&px);
}

/* The pooled connection fails on reuse; GET and HEAD are retried on a new one. */
static void
idempotent_retried(enum stale_mode *mode)
{
	struct origin *og = origin_start(handle, mode);
	struct response r;
	char url[128];

	proxy_start(&px, NULL);
	expect_get(px.port, og, "/first", 200, "body of /first");
	/* Reuses connection 1, which fails; retried on a new connection. */
	expect_get(px.port, og, "/second", 200, "body of /second");
	assert_int_equal(origin_count_requests(og, "GET", "/second"), 2);
	assert_int_equal(origin_connection_count(og), 2);
	/* Same for HEAD. */
	fetch(px.port, "HEAD", origin_url(og, "/third", url, sizeof(url)), &r);
	assert_status(&r, 200);
	assert_int_equal(r.body.len, 0);
	response_free(&r);
	assert_int_equal(origin_count_requests(og, "HEAD", "/third"), 2);
	assert_int_equal(origin_connection_count(og), 3);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
reset_on_reuse_get_is_retried(void)
{
	static enum stale_mode mode = RESET_ON_REUSE;

	idempotent_retried(&mode);
}

static void
close_on_reuse_get_is_retried(void)
{
	static enum stale_mode mode = CLOSE_ON_REUSE;

	idempotent_retried(&mode);
}

/* The POST reached the origin, which then failed: not repeated, 502. */
static void
post_not_retried(enum stale_mode *mode)
{
	struct origin *og = origin_start(handle, mode);
	struct client c;
	struct response r;
	double t0;

	proxy_start(&px, NULL);
	expect_get(px.port, og, "/warm", 200, "body of /warm");
	client_open(&c, px.port);
	send_request(&c, "POST", og, "/submit", "HTTP/1.1",
	             "Content-Length: 1000\r\nContent-Type: application/octet-stream\r\n");
	client_send_pattern(&c, 1000);
	t0 = now_s();
	read_response_ok(&c, &r, 0);
	assert_status(&r, 502);
	assert_true(now_s() - t0 < 5.0);
	response_free(&r);
	client_close(&c);
	/* The origin received the POST exactly once. */
	assert_int_equal(origin_count_requests(og, "POST", "/submit"), 1);
	{
		const struct origin_request *q = origin_last_request(og);

		assert_string_equal(q->head.target, "/submit");
		assert_int_equal(q->body.len, 1000);
		assert_true(q->body_complete);
	}
	/* And the proxy carries on. */
	expect_get(px.port, og, "/after", 200, "body of /after");
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
reset_post_is_not_retried(void)
{
	static enum stale_mode mode = RESET_ON_REUSE;

	post_not_retried(&mode);
}

static void
closed_post_is_not_retried(void)
{
	static enum stale_mode mode = CLOSE_ON_REUSE;

	post_not_retried(&mode);
}

static void
retry_happens_only_once(void)
{
	static enum stale_mode mode = RESET_ALWAYS_AFTER_FIRST;
	struct origin *og = origin_start(handle, &mode);

	proxy_start(&px, NULL);
	expect_get(px.port, og, "/first", 200, "body of /first");
	/* Pooled connection resets, the retry's fresh connection resets too: give up. */
	expect_get(px.port, og, "/doomed", 502, NULL);
	assert_int_equal(origin_count_requests(og, "GET", "/doomed"), 2);
	assert_int_equal(origin_connection_count(og), 2);
	assert_origin_clean(og);
	proxy_assert_alive(&px);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(idle_close_by_origin_is_noticed),
		E2E_TEST(close_right_after_response_races),
		E2E_TEST(reset_on_reuse_get_is_retried),
		E2E_TEST(close_on_reuse_get_is_retried),
		E2E_TEST(reset_post_is_not_retried),
		E2E_TEST(closed_post_is_not_retried),
		E2E_TEST(retry_happens_only_once),
	};

	return E2E_RUN("e2e_stale", tests);
}
