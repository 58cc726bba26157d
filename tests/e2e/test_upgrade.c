/*
 * Protocol upgrades (WebSocket style) through the proxy: the request reaches
 * the origin with "Upgrade: websocket" and "Connection: upgrade"; a 101
 * answer reaches the client with its Upgrade field, and the connection then
 * carries raw bytes both ways, including bytes the origin sent right behind
 * its 101 head. The upgraded upstream connection is never pooled. An upgrade
 * request answered with 200 is an ordinary exchange.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harness.h"
#include "origin.h"

#define GREETING "greetings from the upgraded origin\n"
#define WS_KEY "dGhlIHNhbXBsZSBub25jZQ=="
#define WS_ACCEPT "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
#define SMALL_ECHO 4096u
#define BIG_ECHO (3u * 1024u * 1024u + 7u)

static struct proxy px;

/* The origin's upgraded connection; set by its thread, then done. */
static struct {
	atomic_bool done;
	unsigned conn_no;
	uint64_t echoed;
	int echo_rc;
} ws;

static void
handle(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	const char *t = req->head.target;

	(void)arg;
	if (strcmp(t, "/ws") == 0) {
		/* The 101 head and the first bytes of the new protocol in one send. */
		ws.conn_no = origin_conn_no(c);
		origin_sendf(c, "HTTP/1.1 101 Switching Protocols\r\n"
		                "Upgrade: websocket\r\n"
		                "Connection: Upgrade\r\n"
		                "Sec-WebSocket-Accept: " WS_ACCEPT "\r\n"
		                "\r\n" GREETING);
		ws.echo_rc = origin_echo(c, 10000, &ws.echoed);
		atomic_store(&ws.done, true);
	} else if (strcmp(t, "/ws-declined") == 0) {
		origin_reply(c, 200, "Content-Type: text/plain\r\n", "no upgrade here");
	} else {
		char body[128];

		snprintf(body, sizeof(body), "plain %s", t);
		origin_reply(c, 200, NULL, body);
	}
}

/* What a client adds to a GET to ask for a WebSocket. */
#define UPGRADE_FIELDS                                                                             \
	"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: " WS_KEY                  \
	"\r\nSec-WebSocket-Version: 13\r\n"

/* What the origin saw of the upgrade request. */
static void
assert_upgrade_forwarded(struct origin *og)
{
	const struct origin_request *q = NULL;

	for (unsigned i = 0; i < origin_request_count(og); i++)
		if (strcmp(origin_request_at(og, i)->head.target, "/ws") == 0)
			q = origin_request_at(og, i);
	if (!q)
		fail_msg("the upgrade request did not reach the origin");
	if (!headers_has_token(&q->head.headers, "Connection", "upgrade") ||
	    !headers_get(&q->head.headers, "Upgrade") ||
	    strcasecmp(headers_get(&q->head.headers, "Upgrade"), "websocket") != 0) {
		print_error("the origin got the upgrade request without \"Connection: upgrade\" "
		            "and \"Upgrade: websocket\"; its fields:\n");
		for (size_t i = 0; i < q->head.headers.n; i++)
			print_error("  %s: %s\n", q->head.headers.v[i].name,
			            q->head.headers.v[i].value);
		fail();
	}
	assert_string_equal(headers_get(&q->head.headers, "Sec-WebSocket-Key"), WS_KEY);
	assert_string_equal(headers_get(&q->head.headers, "Sec-WebSocket-Version"), "13");
}

/* The 101 at the client, the greeting sent behind it, then a short echo. */
static void
upgraded(struct client *c)
{
	struct response r;
	struct body got;
	int rc;

	read_response_ok(c, &r, 0);
	if (r.head.status != 101 || !resp_header(&r, "Upgrade") ||
	    strcasecmp(resp_header(&r, "Upgrade"), "websocket") != 0 ||
	    !headers_has_token(&r.head.headers, "Connection", "upgrade")) {
		print_error(
			"expected 101 with \"Upgrade: websocket\" and \"Connection: upgrade\"\n");
		response_print(&r);
		fail();
	}
	assert_string_equal(resp_header(&r, "Sec-WebSocket-Accept"), WS_ACCEPT);
	response_free(&r);

	body_init(&got, 256);
	rc = client_recv_exact(c, strlen(GREETING), &got);
	if (rc != WIRE_OK || strcmp(got.data, GREETING) != 0) {
		print_error("the bytes the origin sent behind its 101 head: %s, \"%s\"\n",
		            wire_strerror(rc), got.data);
		body_free(&got);
		fail_msg("expected \"%s\" right after the 101 head", GREETING);
	}
	body_free(&got);

	/* A few KiB there and back, one after the other. */
	client_send_pattern(c, SMALL_ECHO);
	body_init(&got, 16);
	rc = client_recv_exact(c, SMALL_ECHO, &got);
	if (rc != WIRE_OK || !got.pattern_ok) {
		body_free(&got);
		fail_msg("echo of %u bytes: %s, %llu bytes%s", SMALL_ECHO, wire_strerror(rc),
		         (unsigned long long)got.len, got.pattern_ok ? "" : ", corrupted");
	}
	body_free(&got);
}

/*
 * Megabytes both ways at once; the client's end of stream then comes back
 * as the origin's, and the origin's end of the upgraded connection finishes.
 */
static void
bulk_then_end(struct client *c)
{
	struct body got;
	struct exchange x;
	char desc[256];
	double deadline = now_s() + 5.0;

	body_init(&got, 16);
	client_exchange(c, BIG_ECHO, &got, &x);
	if (x.send_err || x.recv_rc != WIRE_OK || got.len != BIG_ECHO || !got.pattern_ok) {
		print_error("client: %s\n",
		            exchange_describe(&x, BIG_ECHO, &got, desc, sizeof(desc)));
		body_free(&got);
		fail_msg("%u bytes did not echo intact through the upgraded connection", BIG_ECHO);
	}
	body_free(&got);
	while (!atomic_load(&ws.done) && now_s() < deadline)
		sleep_ms(5);
	if (!atomic_load(&ws.done))
		fail_msg("the origin's end of the upgraded connection did not see the end of the "
		         "client's stream");
	if (ws.echo_rc != WIRE_OK)
		fail_msg("the origin's echo ended with %s after %llu bytes",
		         wire_strerror(ws.echo_rc), (unsigned long long)ws.echoed);
	assert_int_equal(ws.echoed, SMALL_ECHO + BIG_ECHO);
}

static void
start(void)
{
	memset(&ws, 0, sizeof(ws));
}

static void
upgrade_then_raw_bytes(void)
{
	struct origin *og;
	struct client c;
	const struct origin_request *q;

	start();
	og = origin_start(handle, NULL);
	proxy_start(&px, NULL);
	client_open(&c, px.port);
	send_request(&c, "GET", og, "/ws", "HTTP/1.1", UPGRADE_FIELDS);
	upgraded(&c);
	assert_upgrade_forwarded(og);
	bulk_then_end(&c);
	client_close(&c);

	/* The next request to the same origin needs a connection of its own. */
	expect_get(px.port, og, "/after", 200, "plain /after");
	q = origin_last_request(og);
	assert_string_equal(q->head.target, "/after");
	if (q->conn_no == ws.conn_no)
		fail_msg("the request after the upgrade arrived on the upgraded connection (%u)",
		         q->conn_no);
	assert_int_equal(q->seq, 1);
	assert_int_equal(origin_connection_count(og), 2);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
upgrade_on_reused_connection(void)
{
	struct origin *og;
	struct client c, other;
	const struct origin_request *q;

	start();
	og = origin_start(handle, NULL);
	proxy_start(&px, NULL);
	/* A pooled connection first: the upgrade may take it. */
	expect_get(px.port, og, "/before", 200, "plain /before");
	client_open(&c, px.port);
	send_request(&c, "GET", og, "/ws", "HTTP/1.1", UPGRADE_FIELDS);
	upgraded(&c);
	assert_upgrade_forwarded(og);

	/* While the upgraded connection is in use, plain requests go elsewhere. */
	client_open(&other, px.port);
	send_get(&other, og, "/during");
	expect_response(&other, 200, "plain /during");
	client_close(&other);
	q = origin_last_request(og);
	if (q->conn_no == ws.conn_no)
		fail_msg("a plain request went to the upgraded connection (%u)", q->conn_no);

	/* The tunnel still works (a misdirected request would have shown up in the echo). */
	bulk_then_end(&c);
	client_close(&c);
	expect_get(px.port, og, "/after", 200, "plain /after");
	q = origin_last_request(og);
	assert_string_equal(q->head.target, "/after");
	if (q->conn_no == ws.conn_no)
		fail_msg("the request after the upgrade arrived on the upgraded connection (%u)",
		         q->conn_no);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
declined_upgrade_is_a_normal_response(void)
{
	struct origin *og;
	struct client c;

	start();
	og = origin_start(handle, NULL);
	proxy_start(&px, NULL);
	client_open(&c, px.port);
	send_request(&c, "GET", og, "/ws-declined", "HTTP/1.1", UPGRADE_FIELDS);
	expect_response(&c, 200, "no upgrade here");
	/* Still HTTP on the same client connection. */
	send_get(&c, og, "/next");
	expect_response(&c, 200, "plain /next");
	client_close(&c);
	assert_int_equal(origin_request_count(og), 2);
	assert_origin_clean(og);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(upgrade_then_raw_bytes),
		E2E_TEST(upgrade_on_reused_connection),
		E2E_TEST(declined_upgrade_is_a_normal_response),
	};

	return E2E_RUN("e2e_upgrade", tests);
}
