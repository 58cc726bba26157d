/*
 * Upstream reuse: many short client connections share one warm upstream
 * connection, and requests/responses are rewritten the way a forward proxy
 * must (origin-form target, Host from the URI, hop-by-hop fields removed, Via
 * added, everything else untouched).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harness.h"
#include "origin.h"

static struct proxy px;

static void
handle(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	const char *t = req->head.target;
	char body[256];

	(void)arg;
	if (strncmp(t, "/item/", 6) == 0) {
		snprintf(body, sizeof(body), "item %s", t + 6);
		origin_reply(c, 200, "X-Kind: item\r\n", body);
	} else if (strcmp(t, "/hop") == 0) {
		origin_sendf(c, "HTTP/1.1 200 OK\r\n"
		                "Server: kp-origin\r\n"
		                "Connection: keep-alive, X-Drop\r\n"
		                "X-Drop: 1\r\n"
		                "Keep-Alive: timeout=5, max=100\r\n"
		                "Proxy-Connection: keep-alive\r\n"
		                "Upgrade: h2c\r\n"
		                "X-Keep: a\r\n"
		                "Cache-Control: max-age=60\r\n"
		                "X-Keep: b\r\n"
		                "Content-Length: 2\r\n"
		                "\r\n"
		                "ok");
	} else {
		snprintf(body, sizeof(body), "%s %s len=%llu", req->head.method, t,
		         (unsigned long long)req->body.len);
		origin_reply(c, 200, NULL, body);
	}
}

/* The names and values of fields, minus those in skip (NULL-terminated). */
static void
expect_fields(const struct header_list *got, const char *const skip[], const char *const want[][2],
              size_t nwant)
{
	size_t j = 0;
	bool ok = true;

	for (size_t i = 0; i < got->n; i++) {
		bool skipped = false;

		for (size_t k = 0; skip[k]; k++)
			skipped |= strcasecmp(got->v[i].name, skip[k]) == 0;
		if (skipped)
			continue;
		if (j >= nwant || strcasecmp(got->v[i].name, want[j][0]) != 0 ||
		    strcmp(got->v[i].value, want[j][1]) != 0)
			ok = false;
		j++;
	}
	if (!ok || j != nwant) {
		print_error("fields differ from what was expected (in order):\n  expected:\n");
		for (size_t i = 0; i < nwant; i++)
			print_error("    %s: %s\n", want[i][0], want[i][1]);
		print_error("  got (all fields):\n");
		for (size_t i = 0; i < got->n; i++)
			print_error("    %s: %s\n", got->v[i].name, got->v[i].value);
		fail();
	}
}

static void
fifty_clients_share_one_upstream(void)
{
	struct origin *og = origin_start(handle, NULL);

	proxy_start(&px, NULL);
	for (int i = 0; i < 50; i++) {
		struct client c;
		struct response r;
		char want[64], path[32];

		client_open(&c, px.port);
		/* Half of the clients announce that they close; it must not matter upstream. */
		snprintf(path, sizeof(path), "/item/%d", i);
		send_request(&c, "GET", og, path, "HTTP/1.1",
		             i % 2 ? "User-Agent: kp-e2e\r\nConnection: close\r\n"
		                   : "User-Agent: kp-e2e\r\n");
		read_response_ok(&c, &r, 0);
		assert_status(&r, 200);
		snprintf(want, sizeof(want), "item %d", i);
		assert_body(&r, want);
		assert_string_equal(resp_header(&r, "X-Kind"), "item");
		response_free(&r);
		client_close(&c);
	}
	assert_int_equal(origin_request_count(og), 50);
	for (unsigned i = 0; i < 50; i++) {
		const struct origin_request *q = origin_request_at(og, i);
		char want[64];

		snprintf(want, sizeof(want), "/item/%u", i);
		assert_string_equal(q->head.target, want);
		assert_int_equal(q->seq, i + 1);
	}
	assert_int_equal(origin_connection_count(og), 1);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
pool_is_keyed_by_host_and_port(void)
{
	struct origin *a = origin_start(handle, NULL);
	struct origin *b = origin_start(handle, NULL);

	proxy_start(&px, NULL);
	for (int i = 0; i < 10; i++) {
		char path[64], want[64];

		snprintf(want, sizeof(want), "item %d", i);
		snprintf(path, sizeof(path), "/item/%d", i);
		expect_get(px.port, i % 2 ? b : a, path, 200, want);
	}
	assert_int_equal(origin_request_count(a), 5);
	assert_int_equal(origin_request_count(b), 5);
	assert_int_equal(origin_connection_count(a), 1);
	assert_int_equal(origin_connection_count(b), 1);
	assert_origin_clean(a);
	assert_origin_clean(b);
	proxy_stop(&px);
}

static void
http10_client_with_keepalive(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct response r;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	for (int i = 0; i < 2; i++) {
		char want[64], path[32];

		snprintf(path, sizeof(path), "/item/%d", i);
		send_request(&c, "GET", og, path, "HTTP/1.0", "Connection: keep-alive\r\n");
		read_response_ok(&c, &r, 0);
		assert_status(&r, 200);
		snprintf(want, sizeof(want), "item %d", i);
		assert_body(&r, want);
		/* An HTTP/1.0 client only keeps the connection if told so. */
		if (!headers_has_token(&r.head.headers, "Connection", "keep-alive")) {
			print_error(
				"response to an HTTP/1.0 keep-alive request lacks Connection: keep-alive\n");
			response_print(&r);
			fail();
		}
		assert_null(resp_header(&r, "Transfer-Encoding"));
		response_free(&r);
	}
	/* Without keep-alive, HTTP/1.0 means one request per connection. */
	send_request(&c, "GET", og, "/item/last", "HTTP/1.0", NULL);
	expect_response(&c, 200, "item last");
	assert_client_eof(&c, 3000);
	client_close(&c);

	assert_int_equal(origin_request_count(og), 3);
	assert_int_equal(origin_connection_count(og), 1);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
request_rewritten_for_origin(void)
{
	struct origin *og = origin_start(handle, NULL);
	int op = origin_port(og);
	struct client c;
	char want_host[64], via[512];
	const struct origin_request *q;
	static const char *const skip[] = {"Host", "Connection", "Via", NULL};
	static const char *const want[][2] = {
		{"User-Agent", "kp-e2e/1.0"},
		{"X-Rep", "one"},
		{"Accept", "*/*"},
		{"X-Rep", "two"},
		{"Cache-Control", "no-cache"},
		{"X-Empty", ""},
		{"X-Spaces", "a  b\tc"},
	};
	static const char *const hop[] = {
		"X-Foo", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization",
		"TE",    "Trailer",    "Upgrade"};

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	client_sendf(&c,
	             "GET http://127.0.0.1:%d/path/x?a=1&b=two%%20words HTTP/1.1\r\n"
	             "Host: wrong.example:1234\r\n"
	             "User-Agent: kp-e2e/1.0\r\n"
	             "X-Rep: one\r\n"
	             "Connection: X-Foo, keep-alive\r\n"
	             "X-Foo: 1\r\n"
	             "Keep-Alive: timeout=5\r\n"
	             "Proxy-Connection: keep-alive\r\n"
	             "Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"
	             "TE: trailers\r\n"
	             "Trailer: X-T\r\n"
	             "Upgrade: websocket\r\n"
	             "Accept: */*\r\n"
	             "X-Rep: two\r\n"
	             "Via: 1.0 fred\r\n"
	             "Cache-Control: no-cache\r\n"
	             "X-Empty:\r\n"
	             "X-Spaces: a  b\tc\r\n"
	             "\r\n",
	             op);
	expect_response(&c, 200, NULL);

	q = origin_last_request(og);
	assert_string_equal(q->head.method, "GET");
	assert_string_equal(q->head.target, "/path/x?a=1&b=two%20words");
	assert_int_equal(q->head.major, 1);
	assert_int_equal(q->head.minor, 1);
	snprintf(want_host, sizeof(want_host), "127.0.0.1:%d", op);
	assert_int_equal(headers_count(&q->head.headers, "Host"), 1);
	assert_string_equal(headers_get(&q->head.headers, "Host"), want_host);
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++) {
		if (headers_get(&q->head.headers, hop[i])) {
			print_error("hop-by-hop field %s reached the origin: %s\n", hop[i],
			            headers_get(&q->head.headers, hop[i]));
			fail();
		}
	}
	/* The proxy asks for keep-alive and names nothing else. */
	assert_true(headers_has_token(&q->head.headers, "Connection", "keep-alive"));
	assert_false(headers_has_token(&q->head.headers, "Connection", "X-Foo"));
	assert_false(headers_has_token(&q->head.headers, "Connection", "close"));
	/* Via: the client's entry first, then the proxy's own. */
	headers_join(&q->head.headers, "Via", via, sizeof(via));
	if (strncmp(via, "1.0 fred, 1.1 ", 14) != 0) {
		print_error("Via at the origin is \"%s\"; expected \"1.0 fred, 1.1 <proxy>\"\n",
		            via);
		fail();
	}
	expect_fields(&q->head.headers, skip, want, sizeof(want) / sizeof(want[0]));

	/* An absolute URI without a path asks for "/". */
	client_sendf(&c, "GET http://127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", op, op);
	expect_response(&c, 200, NULL);
	assert_string_equal(origin_last_request(og)->head.target, "/");
	client_close(&c);

	assert_int_equal(origin_connection_count(og), 1);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
response_hop_by_hop_removed(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct response r;
	char via[256];
	static const char *const skip[] = {"Connection", "Keep-Alive", "Via", "Content-Length",
	                                   NULL};
	static const char *const want[][2] = {
		{"Server", "kp-origin"},
		{"X-Keep", "a"},
		{"Cache-Control", "max-age=60"},
		{"X-Keep", "b"},
	};

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	for (int round = 0; round < 2; round++) {
		send_get(&c, og, "/hop");
		read_response_ok(&c, &r, 0);
		assert_status(&r, 200);
		assert_body(&r, "ok");
		assert_null(resp_header(&r, "X-Drop"));
		assert_null(resp_header(&r, "Proxy-Connection"));
		assert_null(resp_header(&r, "Upgrade"));
		assert_false(headers_has_token(&r.head.headers, "Connection", "X-Drop"));
		if (resp_header(&r, "Keep-Alive") &&
		    strcmp(resp_header(&r, "Keep-Alive"), "timeout=5, max=100") == 0) {
			print_error("the origin's Keep-Alive field reached the client\n");
			response_print(&r);
			fail();
		}
		headers_join(&r.head.headers, "Via", via, sizeof(via));
		if (strncmp(via, "1.1 ", 4) != 0) {
			print_error("Via in the response is \"%s\"; expected \"1.1 <proxy>\"\n",
			            via);
			fail();
		}
		expect_fields(&r.head.headers, skip, want, sizeof(want) / sizeof(want[0]));
		response_free(&r);
	}
	client_close(&c);
	assert_int_equal(origin_connection_count(og), 1);
	assert_origin_clean(og);
	proxy_stop(&px);
}

static void
every_method_forwarded(void)
{
	static const char *const methods[] = {"GET",    "HEAD",    "POST",  "PUT",
	                                      "DELETE", "OPTIONS", "PATCH", "TRACE"};
	struct origin *og = origin_start(handle, NULL);
	int op = origin_port(og);

	proxy_start(&px, NULL);
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		const char *m = methods[i];
		bool with_body =
			strcmp(m, "POST") == 0 || strcmp(m, "PUT") == 0 || strcmp(m, "PATCH") == 0;
		bool head = strcmp(m, "HEAD") == 0;
		struct client c;
		struct response r;
		char want[128];
		const struct origin_request *q;

		client_open(&c, px.port);
		client_sendf(
			&c,
			"%s http://127.0.0.1:%d/m/%zu HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n%s",
			m, op, i, op, with_body ? "Content-Length: 11\r\n" : "",
			with_body ? "hello world" : "");
		read_response_ok(&c, &r, head ? RESP_HEAD : 0);
		assert_status(&r, 200);
		snprintf(want, sizeof(want), "%s /m/%zu len=%d", m, i, with_body ? 11 : 0);
		if (head)
			assert_int_equal(r.body.len, 0);
		else
			assert_body(&r, want);
		response_free(&r);
		client_close(&c);

		q = origin_last_request(og);
		assert_string_equal(q->head.method, m);
		snprintf(want, sizeof(want), "/m/%zu", i);
		assert_string_equal(q->head.target, want);
		if (with_body) {
			assert_int_equal(q->body.len, 11);
			assert_string_equal(q->body.data, "hello world");
		}
	}
	assert_int_equal(origin_connection_count(og), 1);
	assert_origin_clean(og);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(fifty_clients_share_one_upstream),
		E2E_TEST(pool_is_keyed_by_host_and_port),
		E2E_TEST(http10_client_with_keepalive),
		E2E_TEST(request_rewritten_for_origin),
		E2E_TEST(response_hop_by_hop_removed),
		E2E_TEST(every_method_forwarded),
	};

	return E2E_RUN("e2e_reuse", tests);
}
