/*
 * Who may use the proxy: --allow ranges (a peer outside them closed at
 * accept), Basic proxy authentication from --auth-file (plain requests and
 * CONNECT alike, with real curl too), the file re-read on SIGHUP, and the
 * refusal to start as an open proxy.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "origin.h"

static struct proxy px;

/* base64("alice:open sesame") and base64("alice:new secret"). */
#define ALICE_OLD "Basic YWxpY2U6b3BlbiBzZXNhbWU="
#define ALICE_NEW "Basic YWxpY2U6bmV3IHNlY3JldA=="
/* The header line that carries credentials. */
#define AUTH(credentials) "Proxy-Authorization: " credentials "\r\n"

/* Writes the users file; a new one in a fresh directory unless rewrite names it. */
static const char *
users_file(const char *rewrite, const char *text, mode_t mode)
{
	static char path[512];
	FILE *f;

	if (!rewrite)
		snprintf(path, sizeof(path), "%s/users", harness_temp_dir());
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
	return path;
}

/*
 * A peer outside --allow is closed right after accept: it gets not a
 * byte, holds no client slot, and the origin hears nothing of it.
 */
static void
clients_outside_allow_are_closed_at_once(void)
{
	static const char *const outside[] = {"--allow", "10.0.0.0/8", "--allow", "fd00::/8", NULL};
	static const char *const inside[] = {"--allow", "10.0.0.0/8", "--allow", "127.0.0.1",
	                                     NULL};
	struct origin *og = origin_start(origin_handle_ok, NULL);
	struct client c;

	proxy_start(&px, outside);
	client_open(&c, px.port);
	assert_client_eof(&c, 2000);
	client_close(&c);
	client_open(&c, px.port);
	send_get(&c, og, "/");
	assert_client_eof(&c, 2000);
	client_close(&c);
	/* A burst of refusals leaves a bounded log. */
	for (int i = 0; i < 50; i++) {
		client_open(&c, px.port);
		assert_client_eof(&c, 2000);
		client_close(&c);
	}
	if (proxy_log_count(&px, "may not connect") > 15)
		fail_msg("%u log lines for 52 refusals in a burst",
		         proxy_log_count(&px, "may not connect"));
	if (proxy_log_count(&px, "may not connect") < 1)
		fail_msg("the refusals were not logged");
	assert_int_equal(origin_connection_count(og), 0);
	proxy_stop(&px);

	proxy_start(&px, inside);
	expect_get(px.port, og, "/", 200, "ok");
	proxy_stop(&px);
}

static void
missing_or_wrong_credentials_get_407(void)
{
	const char *users = users_file(NULL, "alice:open sesame\n", 0600);
	const char *args[] = {"--auth-file", users, NULL};
	struct origin *og = origin_start(origin_handle_ok, NULL);
	const struct origin_request *seen;
	struct response r;
	char url[128];

	proxy_start(&px, args);
	origin_url(og, "/", url, sizeof(url));
	fetch(px.port, "GET", url, &r);
	assert_status(&r, 407);
	assert_non_null(resp_header(&r, "Proxy-Authenticate"));
	assert_string_equal(resp_header(&r, "Proxy-Authenticate"), "Basic realm=\"keepalive-proxy\"");
	response_free(&r);
	fetch_from(px.port, NULL, "GET", url, AUTH("Basic YWxpY2U6d3Jvbmc="), &r); /* alice:wrong */
	assert_status(&r, 407);
	response_free(&r);
	assert_int_equal(origin_connection_count(og), 0);
	fetch_from(px.port, NULL, "GET", url, AUTH(ALICE_OLD), &r);
	assert_status(&r, 200);
	assert_body(&r, "ok");
	response_free(&r);
	/* The credentials are for the proxy: the origin never sees them. */
	seen = origin_last_request(og);
	assert_null(headers_get(&seen->head.headers, "Proxy-Authorization"));
	assert_int_equal(proxy_log_count(&px, "can be read by every user"), 0);
	proxy_stop(&px);
}

static void
connect_needs_credentials_too(void)
{
	const char *users = users_file(NULL, "alice:open sesame\n", 0600);
	const char *args[] = {"--auth-file", users, "--connect-ports", "*", NULL};
	struct origin *og = origin_start_raw(origin_echo_all, NULL);
	struct client c;
	struct response r;
	char authority[64];

	proxy_start(&px, args);
	snprintf(authority, sizeof(authority), "127.0.0.1:%d", origin_port(og));
	assert_int_equal(client_connect(&c, px.port, authority, &r), 407);
	assert_non_null(resp_header(&r, "Proxy-Authenticate"));
	response_free(&r);
	client_close(&c);
	assert_int_equal(origin_connection_count(og), 0);

	client_open(&c, px.port);
	client_sendf(&c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n" AUTH(ALICE_OLD) "\r\n", authority,
	             authority);
	read_response_ok(&c, &r, RESP_CONNECT);
	assert_status(&r, 200);
	response_free(&r);
	client_close(&c);
	proxy_stop(&px);
}

/* Real curl: -U sends the credentials after the 407; without them curl fails. */
static void
curl_with_and_without_credentials(void)
{
	const char *users = users_file(NULL, "alice:open sesame\n", 0600);
	const char *args[] = {"--auth-file", users, NULL};
	const char *curl = require_program("curl", "KP_CURL");
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char proxy_url[64], url[128], out[512];

	proxy_start(&px, args);
	snprintf(proxy_url, sizeof(proxy_url), "http://127.0.0.1:%d", px.port);
	origin_url(og, "/", url, sizeof(url));
	snprintf(out, sizeof(out), "%s/body", harness_temp_dir());
	{
		const char *argv[] = {curl, "-sS", "-f", "-o", out, "-x", proxy_url, "-U",
		                      "alice:open sesame", url, NULL};

		assert_int_equal(run_process(argv, NULL, 10000), 0);
	}
	{
		/* -f: an HTTP error (the 407) is exit status 22. */
		const char *argv[] = {curl, "-sS", "-f", "-o", out, "-x", proxy_url, url, NULL};

		assert_int_equal(run_process(argv, NULL, 10000), 22);
	}
	proxy_stop(&px);
}

static void
sighup_rereads_the_file(void)
{
	const char *users = users_file(NULL, "alice:open sesame\n", 0600);
	const char *args[] = {"--auth-file", users, NULL};
	struct origin *og = origin_start(origin_handle_ok, NULL);
	struct response r;
	char url[128];

	proxy_start(&px, args);
	origin_url(og, "/", url, sizeof(url));
	users_file(users, "alice:new secret\n", 0600);
	kill(px.pid, SIGHUP);
	for (int i = 0; i < 100 && proxy_log_count(&px, "SIGHUP") == 0; i++)
		sleep_ms(10);
	sleep_ms(50);
	fetch_from(px.port, NULL, "GET", url, AUTH(ALICE_OLD), &r);
	assert_status(&r, 407);
	response_free(&r);
	fetch_from(px.port, NULL, "GET", url, AUTH(ALICE_NEW), &r);
	assert_status(&r, 200);
	assert_body(&r, "ok");
	response_free(&r);
	/* A broken file on reload keeps the users read before. */
	users_file(users, "no colon here\n", 0600);
	kill(px.pid, SIGHUP);
	sleep_ms(200);
	fetch_from(px.port, NULL, "GET", url, AUTH(ALICE_NEW), &r);
	assert_status(&r, 200);
	assert_body(&r, "ok");
	response_free(&r);
	assert_int_equal(proxy_log_count(&px, "stay in force"), 1);
	proxy_stop(&px);
}

static void
exposed_file_warned_about(void)
{
	const char *users = users_file(NULL, "alice:open sesame\n", 0644);
	const char *args[] = {"--auth-file", users, NULL};

	proxy_start(&px, args);
	assert_int_equal(proxy_log_count(&px, "can be read by every user"), 1);
	proxy_stop(&px);
}

/* The daemon's user ids, from /proc. */
static unsigned
daemon_uid(void)
{
	char path[64], *status, *line;
	unsigned uid = ~0u;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)px.pid);
	status = read_file_all(path, NULL);
	assert_non_null(status);
	line = strstr(status, "\nUid:");
	if (line)
		sscanf(line, "\nUid: %u", &uid);
	free(status);
	return uid;
}

/* As root, -u drops to the user once the port is bound; it still serves. */
static void
u_drops_root(void)
{
	static const char *const args[] = {"-u", "nobody", NULL};
	struct origin *og;

	if (geteuid() != 0)
		skip();
	og = origin_start(origin_handle_ok, NULL);
	proxy_start(&px, args);
	/*
	 * Answered once the loop runs, which is after the drop: the port
	 * listens before it, so the uid read first could still be root's.
	 */
	expect_get(px.port, og, "/", 200, "ok");
	assert_int_not_equal(daemon_uid(), 0);
	proxy_stop(&px);
}

static void
unknown_user_refused_at_start(void)
{
	char port[16], log_path[512];
	const char *argv[] = {getenv("KP_BINARY"), "-p", port, "-u", "no-such-user-kp", NULL};
	char *log;

	snprintf(port, sizeof(port), "%d", free_port());
	snprintf(log_path, sizeof(log_path), "%s/start.log", harness_temp_dir());
	assert_int_equal(run_process(argv, log_path, 5000), 1);
	log = read_file_all(log_path, NULL);
	assert_non_null(log);
	assert_non_null(strstr(log, "no-such-user-kp"));
	free(log);
}

/* Listening beyond loopback with no rule for who may use it: refused at start. */
static void
open_proxy_refused_at_start(void)
{
	char port[16], log_path[512];
	const char *argv[] = {getenv("KP_BINARY"), "-p", port, "-b", "0.0.0.0", NULL};
	char *log;

	snprintf(port, sizeof(port), "%d", free_port());
	snprintf(log_path, sizeof(log_path), "%s/start.log", harness_temp_dir());
	assert_int_equal(run_process(argv, log_path, 5000), 2);
	log = read_file_all(log_path, NULL);
	assert_non_null(log);
	assert_non_null(strstr(log, "--allow"));
	free(log);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(clients_outside_allow_are_closed_at_once),
		E2E_TEST(missing_or_wrong_credentials_get_407),
		E2E_TEST(connect_needs_credentials_too),
		E2E_TEST(curl_with_and_without_credentials),
		E2E_TEST(sighup_rereads_the_file),
		E2E_TEST(exposed_file_warned_about),
		E2E_TEST(open_proxy_refused_at_start),
		E2E_TEST(u_drops_root),
		E2E_TEST(unknown_user_refused_at_start),
	};

	return E2E_RUN("access", tests);
}
