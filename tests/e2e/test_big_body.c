/*
 * Large bodies in both directions, byte-exact: 64 MiB responses (with
 * Content-Length and chunked) and 64 MiB uploads (with Content-Length and
 * chunked), every byte checked against the pattern at its offset.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

#define BIG (64ull * 1024 * 1024)
#define UPLOAD_CHUNK 1000003u /* odd size: chunk boundaries never line up with buffers */

static struct proxy px;

static void
handle(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	const char *t = req->head.target;
	char body[128];

	(void)arg;
	if (strcmp(t, "/big") == 0) {
		origin_reply_pattern(c, 200, "Content-Type: application/octet-stream\r\n", BIG);
	} else if (strcmp(t, "/big-chunked") == 0) {
		origin_reply_chunked_pattern(c, 200, NULL, BIG, 256 * 1024 + 1, "X-End: yes\r\n");
	} else {
		snprintf(body, sizeof(body), "len=%llu pattern=%d",
		         (unsigned long long)req->body.len, req->body.pattern_ok);
		origin_reply(c, 200, NULL, body);
	}
}

static void
download(const char *path, enum framing framing)
{
	struct origin *og = origin_start(handle, NULL);
	struct response r;
	char url[128];
	double t0 = now_s();

	proxy_start(&px, NULL);
	fetch(px.port, "GET", origin_url(og, path, url, sizeof(url)), &r);
	assert_status(&r, 200);
	assert_int_equal(r.framing, framing);
	if (r.body.len != BIG || !r.body.pattern_ok)
		fail_msg("body: %llu of %llu bytes, %s at offset %llu",
		         (unsigned long long)r.body.len, (unsigned long long)BIG,
		         r.body.pattern_ok ? "intact" : "first wrong byte",
		         (unsigned long long)r.body.pattern_bad);
	response_free(&r);
	print_message("64 MiB %s download took %.2f s\n", path, now_s() - t0);
	/* A complete response: the connection went back to the pool. */
	expect_get(px.port, og, "/small", 200, "len=0 pattern=1");
	assert_int_equal(origin_connection_count(og), 1);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
download_64mib_content_length(void)
{
	download("/big", FRAMING_LENGTH);
}

static void
download_64mib_chunked(void)
{
	download("/big-chunked", FRAMING_CHUNKED);
}

static void
upload(bool chunked)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct response r;
	char url[128], want[128];
	const struct origin_request *q;
	double t0 = now_s();

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	client_sendf(&c, "PUT %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n",
	             origin_url(og, "/upload", url, sizeof(url)), origin_port(og));
	if (chunked) {
		client_sendf(&c, "Transfer-Encoding: chunked\r\n\r\n");
		client_send_pattern_chunked(&c, BIG, UPLOAD_CHUNK);
	} else {
		client_sendf(&c, "Content-Length: %llu\r\n\r\n", (unsigned long long)BIG);
		client_send_pattern(&c, BIG);
	}
	read_response_ok(&c, &r, 0);
	assert_status(&r, 200);
	snprintf(want, sizeof(want), "len=%llu pattern=1", (unsigned long long)BIG);
	assert_body(&r, want);
	response_free(&r);
	client_close(&c);
	print_message("64 MiB %s upload took %.2f s\n", chunked ? "chunked" : "Content-Length",
	              now_s() - t0);

	q = origin_last_request(og);
	assert_true(q->body_complete);
	assert_int_equal(q->body.len, BIG);
	assert_true(q->body.pattern_ok);
	assert_true(q->body.fnv == pattern_fnv(BIG));
	if (chunked) {
		/* Streamed through unchanged: the same chunks arrive. */
		assert_int_equal(q->framing, FRAMING_CHUNKED);
		assert_int_equal(q->nchunks, (BIG + UPLOAD_CHUNK - 1) / UPLOAD_CHUNK);
	} else {
		assert_int_equal(q->framing, FRAMING_LENGTH);
	}
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
upload_64mib_content_length(void)
{
	upload(false);
}

static void
upload_64mib_chunked(void)
{
	upload(true);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(download_64mib_content_length),
		E2E_TEST(download_64mib_chunked),
		E2E_TEST(upload_64mib_content_length),
		E2E_TEST(upload_64mib_chunked),
	};

	return E2E_RUN("e2e_big_body", tests);
}
