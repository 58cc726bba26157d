/*
 * What becomes of a response: the plan for every kind of asker against
 * every kind of response head, as one table; then the heads written from a
 * few of those plans, byte for byte; then whether the asker's connection
 * stays open after a response the proxy frames itself.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kp/plan.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- response heads, as an origin sends them ------------------------------- */

static const char r200_length[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
static const char r200_empty[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
static const char r200_chunked[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
static const char r200_gzip[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n";
static const char r200_gzip_chunked[] =
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
static const char r206_gzip_chunked_split[] =
        "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-99/1000\r\n"
        "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n";
static const char r200_chunked_upper[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: CHUNKED\r\n\r\n";
static const char r200_until_close[] =
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n";
static const char r200_close[] =
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n";
static const char r200_chunked_close[] =
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
static const char r200_timeout[] =
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nKeep-Alive: timeout=5\r\n\r\n";
static const char r10_200[] = "HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n";
static const char r10_200_keep[] =
        "HTTP/1.0 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\n";
static const char r10_200_until_close[] = "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n";
static const char r100[] = "HTTP/1.1 100 Continue\r\n\r\n";
static const char r103[] = "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n";
static const char r101[] =
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
static const char r204[] = "HTTP/1.1 204 No Content\r\n\r\n";
static const char r204_close[] = "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n";
static const char r206[] =
        "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-4/10\r\nContent-Length: 5\r\n\r\n";
static const char r304[] =
        "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 100\r\n\r\n";
static const char r404_chunked[] = "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n";

struct parsed {
	struct http_parser parser;
	struct http_head head;
};

static void
parse_response(struct parsed *ps, const char *text)
{
	http_parser_init(&ps->parser, HTTP_RESPONSE, 32768, 8192);
	http_parser_start(&ps->parser, &ps->head);
	if (http_parse_head(&ps->parser, text, strlen(text)) != HTTP_PARSE_DONE)
		fail_msg("head not parsed (%s):\n%s", http_parser_error_text(&ps->parser), text);
}

/* ---- the table ------------------------------------------------------------ */

struct expect {
	enum plan_action action;
	enum body_kind body;
	bool upstream_reusable;
	bool dechunk;
	bool client_keep_alive;
	uint8_t client_minor;
	bool upgrade;
	bool no_via;
};

struct plan_case {
	const char *name;
	struct plan_request req;
	const char *head;
	struct expect expect;
};

/*
 * Askers. Fields: method, minor, keep_alive, upgrade, request_sent,
 * canonical, draining.
 */
#define GET11 {HTTP_GET, 1, true, false, true, false, false}
#define GET11_CLOSE {HTTP_GET, 1, false, false, true, false, false}
#define GET11_DRAIN {HTTP_GET, 1, true, false, true, false, true}
#define GET11_UP {HTTP_GET, 1, true, true, true, false, false}
#define GET11_UP_UNSENT {HTTP_GET, 1, true, true, false, false, false}
#define GET10 {HTTP_GET, 0, true, false, true, false, false}
#define GET10_CLOSE {HTTP_GET, 0, false, false, true, false, false}
#define HEAD11 {HTTP_HEAD, 1, true, false, true, false, false}
#define HEAD10 {HTTP_HEAD, 0, true, false, true, false, false}
#define POST11_UNSENT {HTTP_POST, 1, true, false, false, false, false}
#define MEM {HTTP_GET, 1, false, false, true, true, false}
#define MEM_10 {HTTP_GET, 0, false, false, true, true, false}
#define MEM_DRAIN {HTTP_GET, 1, false, false, true, true, true}

/*
 * Expected: action, body, upstream_reusable, dechunk, client_keep_alive,
 * client_minor, upgrade, no_via.
 */
static const struct plan_case cases[] = {
	/* Framed bodies: both connections stay as their owners asked. */
	{"1.1 client, length", GET11, r200_length,
	 {PLAN_FINAL, BODY_LENGTH, true, false, true, 1, false, false}},
	{"1.1 client, chunked", GET11, r200_chunked,
	 {PLAN_FINAL, BODY_CHUNKED, true, false, true, 1, false, false}},
	{"1.1 client, length 0", GET11, r200_empty,
	 {PLAN_FINAL, BODY_NONE, true, false, true, 1, false, false}},
	{"1.1 client, 206", GET11, r206,
	 {PLAN_FINAL, BODY_LENGTH, true, false, true, 1, false, false}},
	{"1.1 client, 404 chunked", GET11, r404_chunked,
	 {PLAN_FINAL, BODY_CHUNKED, true, false, true, 1, false, false}},
	{"1.1 client, Keep-Alive: timeout=5", GET11, r200_timeout,
	 {PLAN_FINAL, BODY_LENGTH, true, false, true, 1, false, false}},
	{"1.1 client that closes, length", GET11_CLOSE, r200_length,
	 {PLAN_FINAL, BODY_LENGTH, true, false, false, 1, false, false}},
	{"1.0 client, length", GET10, r200_length,
	 {PLAN_FINAL, BODY_LENGTH, true, false, true, 0, false, false}},
	{"1.0 client that closes, length", GET10_CLOSE, r200_length,
	 {PLAN_FINAL, BODY_LENGTH, true, false, false, 0, false, false}},
	/* HTTP/1.0 knows no chunks: de-chunked, and the close ends the body. */
	{"1.0 client, chunked", GET10, r200_chunked,
	 {PLAN_FINAL, BODY_CHUNKED, true, true, false, 0, false, false}},
	{"1.0 client that closes, chunked", GET10_CLOSE, r200_chunked,
	 {PLAN_FINAL, BODY_CHUNKED, true, true, false, 0, false, false}},
	/*
	 * A coding besides chunked: an HTTP/1.1 client gets it with its field,
	 * nobody else: de-chunked, it would pass for the payload.
	 */
	{"1.1 client, gzip, chunked", GET11, r200_gzip_chunked,
	 {PLAN_FINAL, BODY_CHUNKED, true, false, true, 1, false, false}},
	{"1.0 client, gzip, chunked", GET10, r200_gzip_chunked,
	 {PLAN_REFUSE, BODY_CHUNKED, false, false, false, 0, false, false}},
	{"1.0 client, 206 gzip then chunked in two fields", GET10, r206_gzip_chunked_split,
	 {PLAN_REFUSE, BODY_CHUNKED, false, false, false, 0, false, false}},
	{"1.0 client, Transfer-Encoding: gzip", GET10, r200_gzip,
	 {PLAN_REFUSE, BODY_UNTIL_CLOSE, false, false, false, 0, false, false}},
	{"memory, gzip, chunked", MEM, r200_gzip_chunked,
	 {PLAN_REFUSE, BODY_CHUNKED, false, false, false, 1, false, true}},
	{"memory, 206 gzip then chunked in two fields", MEM, r206_gzip_chunked_split,
	 {PLAN_REFUSE, BODY_CHUNKED, false, false, false, 1, false, true}},
	{"memory, Transfer-Encoding: gzip", MEM, r200_gzip,
	 {PLAN_REFUSE, BODY_UNTIL_CLOSE, false, false, false, 1, false, true}},
	{"memory, CHUNKED in capitals is chunked alone", MEM, r200_chunked_upper,
	 {PLAN_FINAL, BODY_CHUNKED, true, true, true, 1, false, true}},
	{"HEAD from 1.0, gzip, chunked: no body to carry it", HEAD10, r200_gzip_chunked,
	 {PLAN_FINAL, BODY_NONE, true, false, true, 0, false, false}},
	/* Delimited by the close: neither connection outlives it. */
	{"1.1 client, until close", GET11, r200_until_close,
	 {PLAN_FINAL, BODY_UNTIL_CLOSE, false, false, false, 1, false, false}},
	{"1.1 client, Transfer-Encoding: gzip", GET11, r200_gzip,
	 {PLAN_FINAL, BODY_UNTIL_CLOSE, false, false, false, 1, false, false}},
	{"1.0 client, until close", GET10, r200_until_close,
	 {PLAN_FINAL, BODY_UNTIL_CLOSE, false, false, false, 0, false, false}},
	{"1.1 client, 1.0 origin until close", GET11, r10_200_until_close,
	 {PLAN_FINAL, BODY_UNTIL_CLOSE, false, false, false, 1, false, false}},
	/* The origin's wish about its connection is no word on the client's. */
	{"1.1 client, origin's Connection: close", GET11, r200_close,
	 {PLAN_FINAL, BODY_LENGTH, false, false, true, 1, false, false}},
	{"1.1 client, origin's Connection: close, chunked", GET11, r200_chunked_close,
	 {PLAN_FINAL, BODY_CHUNKED, false, false, true, 1, false, false}},
	{"1.1 client, 204 with Connection: close", GET11, r204_close,
	 {PLAN_FINAL, BODY_NONE, false, false, true, 1, false, false}},
	{"1.1 client, 1.0 origin without keep-alive", GET11, r10_200,
	 {PLAN_FINAL, BODY_LENGTH, false, false, true, 1, false, false}},
	{"1.1 client, 1.0 origin with keep-alive", GET11, r10_200_keep,
	 {PLAN_FINAL, BODY_LENGTH, true, false, true, 1, false, false}},
	/* No body, whatever the head says of one. */
	{"1.1 client, 204", GET11, r204,
	 {PLAN_FINAL, BODY_NONE, true, false, true, 1, false, false}},
	{"1.1 client, 304 with a length", GET11, r304,
	 {PLAN_FINAL, BODY_NONE, true, false, true, 1, false, false}},
	{"HEAD, length", HEAD11, r200_length,
	 {PLAN_FINAL, BODY_NONE, true, false, true, 1, false, false}},
	{"HEAD, chunked", HEAD11, r200_chunked,
	 {PLAN_FINAL, BODY_NONE, true, false, true, 1, false, false}},
	{"HEAD, no length", HEAD11, r200_until_close,
	 {PLAN_FINAL, BODY_NONE, true, false, true, 1, false, false}},
	{"HEAD from 1.0, chunked: nothing to de-chunk", HEAD10, r200_chunked,
	 {PLAN_FINAL, BODY_NONE, true, false, true, 0, false, false}},
	/* A final answer before the request was whole still ends the exchange normally. */
	{"POST not sent whole, length", POST11_UNSENT, r200_length,
	 {PLAN_FINAL, BODY_LENGTH, true, false, true, 1, false, false}},
	/* Stopping: the client is told, the origin's connection may still go back. */
	{"draining, length", GET11_DRAIN, r200_length,
	 {PLAN_FINAL, BODY_LENGTH, true, false, false, 1, false, false}},
	{"draining, chunked", GET11_DRAIN, r200_chunked,
	 {PLAN_FINAL, BODY_CHUNKED, true, false, false, 1, false, false}},
	{"draining, 1xx", GET11_DRAIN, r100,
	 {PLAN_INTERIM, BODY_NONE, false, false, true, 1, false, false}},
	/* Memory: HTTP/1.1, whole bodies, no Via, no word on a connection. */
	{"memory, length", MEM, r200_length,
	 {PLAN_FINAL, BODY_LENGTH, true, false, true, 1, false, true}},
	{"memory, chunked", MEM, r200_chunked,
	 {PLAN_FINAL, BODY_CHUNKED, true, true, true, 1, false, true}},
	{"memory, until close", MEM, r200_until_close,
	 {PLAN_FINAL, BODY_UNTIL_CLOSE, false, false, true, 1, false, true}},
	{"memory, origin's Connection: close", MEM, r200_close,
	 {PLAN_FINAL, BODY_LENGTH, false, false, true, 1, false, true}},
	{"memory says 1.0, still written as 1.1", MEM_10, r200_chunked,
	 {PLAN_FINAL, BODY_CHUNKED, true, true, true, 1, false, true}},
	{"memory while draining", MEM_DRAIN, r200_chunked,
	 {PLAN_FINAL, BODY_CHUNKED, true, true, true, 1, false, true}},
	/* Interim responses: passed on to 1.1 clients only. */
	{"1.1 client, 100", GET11, r100,
	 {PLAN_INTERIM, BODY_NONE, false, false, true, 1, false, false}},
	{"1.1 client, 103", GET11, r103,
	 {PLAN_INTERIM, BODY_NONE, false, false, true, 1, false, false}},
	{"POST not sent whole, 100", POST11_UNSENT, r100,
	 {PLAN_INTERIM, BODY_NONE, false, false, true, 1, false, false}},
	{"1.0 client, 100", GET10, r100,
	 {PLAN_INTERIM_DROPPED, BODY_NONE, false, false, true, 0, false, false}},
	{"1.0 client, 103", GET10, r103,
	 {PLAN_INTERIM_DROPPED, BODY_NONE, false, false, true, 0, false, false}},
	{"memory, 103", MEM, r103,
	 {PLAN_INTERIM_DROPPED, BODY_NONE, false, false, true, 1, false, true}},
	/* Switching protocols: only when asked, and only once the request went whole. */
	{"upgrade asked, 101", GET11_UP, r101,
	 {PLAN_SWITCH, BODY_NONE, false, false, false, 1, true, false}},
	{"upgrade asked, request not sent whole, 101", GET11_UP_UNSENT, r101,
	 {PLAN_REFUSE, BODY_NONE, false, false, false, 1, false, false}},
	{"upgrade not asked, 101", GET11, r101,
	 {PLAN_REFUSE, BODY_NONE, false, false, false, 1, false, false}},
	{"1.0 client, 101 unasked", GET10, r101,
	 {PLAN_REFUSE, BODY_NONE, false, false, false, 0, false, false}},
	{"memory, 101", MEM, r101,
	 {PLAN_REFUSE, BODY_NONE, false, false, false, 1, false, true}},
	/* Asked to upgrade, answered plainly: the origin's connection is in doubt. */
	{"upgrade asked, 200 length", GET11_UP, r200_length,
	 {PLAN_FINAL, BODY_LENGTH, false, false, true, 1, false, false}},
	{"upgrade asked, 200 chunked", GET11_UP, r200_chunked,
	 {PLAN_FINAL, BODY_CHUNKED, false, false, true, 1, false, false}},
	{"upgrade asked, 100", GET11_UP, r100,
	 {PLAN_INTERIM, BODY_NONE, false, false, true, 1, false, false}},
};

static void
check_field(size_t row, const char *name, const char *field, long got, long want)
{
	if (got != want)
		fail_msg("row %zu (%s): %s is %ld, expected %ld", row, name, field, got, want);
}

static void
test_plan_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		const struct plan_case *c = &cases[i];
		const struct expect *e = &c->expect;
		struct parsed ps;
		struct plan p;

		parse_response(&ps, c->head);
		p = plan_response(&c->req, &ps.head);
		check_field(i, c->name, "action", p.action, e->action);
		check_field(i, c->name, "body", p.body, e->body);
		check_field(i, c->name, "upstream_reusable", p.upstream_reusable,
		            e->upstream_reusable);
		check_field(i, c->name, "write.dechunk", p.write.dechunk, e->dechunk);
		check_field(i, c->name, "write.client_keep_alive", p.write.client_keep_alive,
		            e->client_keep_alive);
		check_field(i, c->name, "write.client_minor", p.write.client_minor,
		            e->client_minor);
		check_field(i, c->name, "write.upgrade", p.write.upgrade, e->upgrade);
		check_field(i, c->name, "write.no_via", p.write.no_via, e->no_via);
		/* A refusal carries the 502's text; nothing else does. */
		if ((p.action == PLAN_REFUSE) != (p.why != NULL))
			fail_msg("row %zu (%s): why is %s", i, c->name, p.why ? p.why : "NULL");
	}
}

/* ---- the head written for the asker ------------------------------------- */

struct head_case {
	const char *name;
	struct plan_request req;
	const char *head;
	enum plan_action action;
	const char *written;
};

static const struct head_case head_cases[] = {
	{"1.1 client keeps its connection: hop-by-hop fields go, Via comes", GET11,
	 "HTTP/1.1 200 OK\r\n"
	 "Content-Length: 5\r\n"
	 "Keep-Alive: timeout=5\r\n"
	 "Connection: keep-alive\r\n"
	 "X-A: b\r\n"
	 "\r\n",
	 PLAN_FINAL,
	 "HTTP/1.1 200 OK\r\n"
	 "Content-Length: 5\r\n"
	 "X-A: b\r\n"
	 "Via: 1.1 keepalive-proxy\r\n"
	 "\r\n"},
	{"1.0 client, chunked: Transfer-Encoding dropped, closed", GET10,
	 "HTTP/1.1 200 OK\r\n"
	 "Transfer-Encoding: chunked\r\n"
	 "Content-Type: text/plain\r\n"
	 "\r\n",
	 PLAN_FINAL,
	 "HTTP/1.1 200 OK\r\n"
	 "Content-Type: text/plain\r\n"
	 "Via: 1.1 keepalive-proxy\r\n"
	 "Connection: close\r\n"
	 "\r\n"},
	{"1.0 client keeps its connection: said so", GET10,
	 "HTTP/1.0 200 OK\r\n"
	 "Content-Length: 5\r\n"
	 "Connection: keep-alive\r\n"
	 "\r\n",
	 PLAN_FINAL,
	 "HTTP/1.1 200 OK\r\n"
	 "Content-Length: 5\r\n"
	 "Via: 1.0 keepalive-proxy\r\n"
	 "Connection: keep-alive\r\n"
	 "\r\n"},
	{"memory, chunked: no Transfer-Encoding, no Via, no Connection", MEM,
	 "HTTP/1.1 200 OK\r\n"
	 "Transfer-Encoding: chunked\r\n"
	 "Content-Type: text/plain\r\n"
	 "Connection: close\r\n"
	 "\r\n",
	 PLAN_FINAL,
	 "HTTP/1.1 200 OK\r\n"
	 "Content-Type: text/plain\r\n"
	 "\r\n"},
	{"draining: the client is told the connection closes", GET11_DRAIN,
	 "HTTP/1.1 404 Not Found\r\n"
	 "Transfer-Encoding: chunked\r\n"
	 "\r\n",
	 PLAN_FINAL,
	 "HTTP/1.1 404 Not Found\r\n"
	 "Transfer-Encoding: chunked\r\n"
	 "Via: 1.1 keepalive-proxy\r\n"
	 "Connection: close\r\n"
	 "\r\n"},
	{"101 asked for: Upgrade kept, Connection says so", GET11_UP, r101, PLAN_SWITCH,
	 "HTTP/1.1 101 Switching Protocols\r\n"
	 "Upgrade: websocket\r\n"
	 "Via: 1.1 keepalive-proxy\r\n"
	 "Connection: upgrade\r\n"
	 "\r\n"},
	{"1xx passed on: no word on the connection", GET11, r103, PLAN_INTERIM,
	 "HTTP/1.1 103 Early Hints\r\n"
	 "Link: </a.css>; rel=preload\r\n"
	 "Via: 1.1 keepalive-proxy\r\n"
	 "\r\n"},
};

static void
test_written_heads(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(head_cases); i++) {
		const struct head_case *c = &head_cases[i];
		struct parsed ps;
		struct plan p;
		char out[1024];
		ssize_t n;

		parse_response(&ps, c->head);
		p = plan_response(&c->req, &ps.head);
		check_field(i, c->name, "action", p.action, c->action);
		n = http_write_response_head(out, sizeof(out), &ps.head, c->head, &p.write);
		if (n < 0 || (size_t)n != strlen(c->written) ||
		    memcmp(out, c->written, (size_t)n) != 0)
			fail_msg("row %zu (%s): wrote\n%.*s\nexpected\n%s", i, c->name,
			         n < 0 ? 0 : (int)n, out, c->written);
	}
}

/* ---- the asker's connection after a response of the proxy's framing ---- */

struct keep_case {
	struct plan_request req;
	bool framed;
	bool expect;
};

static const struct keep_case keep_cases[] = {
	{GET11, true, true},
	{GET11, false, false},
	{GET11_CLOSE, true, false},
	{GET11_DRAIN, true, false},
	{GET11_DRAIN, false, false},
	{GET10, true, true},
	{GET10_CLOSE, true, false},
	{POST11_UNSENT, true, true},
	/* Only what the asker asked for and the framing count, not its version or kind. */
	{MEM, true, false},
	{{HTTP_GET, 1, true, false, true, true, false}, true, true},
};

static void
test_keeps_asker(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(keep_cases); i++) {
		const struct keep_case *c = &keep_cases[i];

		if (plan_keeps_asker(&c->req, c->framed) != c->expect)
			fail_msg("row %zu: expected %s", i, c->expect ? "kept" : "closed");
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_table),
		cmocka_unit_test(test_written_heads),
		cmocka_unit_test(test_keeps_asker),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
