/*
 * Answers the proxy writes itself honour the client's wish to close (RFC
 * 9112 9.6): after a request with "Connection: close", or an HTTP/1.0
 * request without "Connection: keep-alive", the refusal (400, 403, 407,
 * 502) is the last response, and the proxy closes at once rather than at
 * --client-timeout. A keep-alive request refused with 400 keeps its
 * connection for the next request.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "origin.h"

/* Only the close the client asked for can end a connection within a test. */
#define PATIENT "--client-timeout", "300"
#define PROMPT_MS 1000

static struct proxy px;

/* A users file (alice:open sesame) in a fresh directory. */
static const char *
users_file(void)
{
	static char path[512];

	snprintf(path, sizeof(path), "%s/users", harness_temp_dir());
	write_text_file(path, "alice:open sesame\n");
	assert_int_equal(chmod(path, 0600), 0);
	return path;
}

/*
 * Sends raw on a new connection and reads the answer: it must have status,
 * must not promise keep-alive, must say "Connection: close" if say_close,
 * and the proxy must close within PROMPT_MS. Everything that is wrong is
 * reported at once.
 */
static void
expect_last_response(const char *raw, int status, bool say_close)
{
	struct client c;
	struct response r;
	char conn[256], problems[512] = "";
	double t0;

	client_open(&c, px.port);
	client_sendf(&c, "%s", raw);
	read_response_ok(&c, &r, 0);
	assert_status(&r, status);
	headers_join(&r.head.headers, "Connection", conn, sizeof(conn));
	if (say_close && !headers_has_token(&r.head.headers, "Connection", "close"))
		snprintf(problems, sizeof(problems), "no \"Connection: close\" (Connection: \"%s\"); ",
		         conn);
	if (headers_has_token(&r.head.headers, "Connection", "keep-alive"))
		snprintf(problems + strlen(problems), sizeof(problems) - strlen(problems),
		         "\"Connection: %s\" promises keep-alive; ", conn);
	t0 = now_s();
	if (!client_eof(&c, PROMPT_MS))
		snprintf(problems + strlen(problems), sizeof(problems) - strlen(problems),
		         "the connection was still open %.1f s after the answer", now_s() - t0);
	response_free(&r);
	client_close(&c);
	if (problems[0])
		fail_msg("%d to \"%.*s\": %s", status, (int)strcspn(raw, "\r"), raw, problems);
}

static void
close_request_refused_407_closes(void)
{
	const char *args[] = {"--auth-file", users_file(), PATIENT, NULL};
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char raw[256], url[128];

	proxy_start(&px, args);
	/* alice:wrong */
	snprintf(raw, sizeof(raw),
	         "GET %s HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic YWxpY2U6d3Jvbmc=\r\n"
	         "Connection: close\r\n\r\n",
	         origin_url(og, "/", url, sizeof(url)));
	expect_last_response(raw, 407, true);
	assert_int_equal(origin_connection_count(og), 0);
	proxy_stop(&px);
}

static void
close_request_to_denied_destination_403_closes(void)
{
	static const char *const args[] = {"--deny-dest", "127.0.0.0/8", PATIENT, NULL};
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char raw[256], url[128];

	proxy_start(&px, args);
	snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
	         origin_url(og, "/", url, sizeof(url)));
	expect_last_response(raw, 403, true);
	assert_int_equal(origin_connection_count(og), 0);
	proxy_stop(&px);
}

/* ".invalid" names fail at once (RFC 6761), without any resolver. */
static void
close_request_to_unresolvable_name_502_closes(void)
{
	static const char *const args[] = {PATIENT, NULL};

	proxy_start(&px, args);
	expect_last_response("GET http://nonexistent.invalid/ HTTP/1.1\r\n"
	                     "Host: nonexistent.invalid\r\nConnection: close\r\n\r\n",
	                     502, true);
	proxy_stop(&px);
}

static void
close_request_in_origin_form_400_closes(void)
{
	static const char *const args[] = {PATIENT, NULL};

	proxy_start(&px, args);
	expect_last_response("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", 400,
	                     true);
	proxy_stop(&px);
}

static void
http10_request_in_origin_form_400_closes(void)
{
	static const char *const args[] = {PATIENT, NULL};

	proxy_start(&px, args);
	expect_last_response("GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", 400, false);
	proxy_stop(&px);
}

static void
http10_request_without_credentials_407_closes(void)
{
	const char *args[] = {"--auth-file", users_file(), PATIENT, NULL};
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char raw[256], url[128];

	proxy_start(&px, args);
	snprintf(raw, sizeof(raw), "GET %s HTTP/1.0\r\nHost: x\r\n\r\n",
	         origin_url(og, "/", url, sizeof(url)));
	expect_last_response(raw, 407, false);
	assert_int_equal(origin_connection_count(og), 0);
	proxy_stop(&px);
}

/* Without a wish to close, a 400 leaves the connection to the next request. */
static void
keep_alive_request_refused_400_keeps_connection(void)
{
	static const char *const args[] = {PATIENT, NULL};
	struct origin *og = origin_start(origin_handle_ok, NULL);
	struct client c;
	struct response r;
	char url[128];

	proxy_start(&px, args);
	client_open(&c, px.port);
	client_sendf(&c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
	read_response_ok(&c, &r, 0);
	assert_status(&r, 400);
	if (headers_has_token(&r.head.headers, "Connection", "close"))
		fail_msg("a keep-alive request refused with 400 was told \"Connection: close\"");
	response_free(&r);
	client_sendf(&c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", origin_url(og, "/", url, sizeof(url)));
	read_response_ok(&c, &r, 0);
	assert_status(&r, 200);
	assert_body(&r, "ok");
	response_free(&r);
	client_close(&c);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(close_request_refused_407_closes),
		E2E_TEST(close_request_to_denied_destination_403_closes),
		E2E_TEST(close_request_to_unresolvable_name_502_closes),
		E2E_TEST(close_request_in_origin_form_400_closes),
		E2E_TEST(http10_request_in_origin_form_400_closes),
		E2E_TEST(http10_request_without_credentials_407_closes),
		E2E_TEST(keep_alive_request_refused_400_keeps_connection),
	};

	return E2E_RUN("e2e_local_close", tests);
}
