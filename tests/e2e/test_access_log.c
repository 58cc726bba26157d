/*
 * The access log: one line per request (client, method, URL without its
 * query unless --log-query, status, bytes, duration, new/pooled/local/
 * tunnel), written within a second, and a fresh file after SIGHUP once the
 * old one was moved away (logrotate); --pidfile and --syslog beside it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

static struct proxy px;

static void
one_line_per_request(void)
{
	char log[512], moved[520], line[256], authority[64];
	const char *args[] = {"--access-log", log, "--connect-ports", "*", NULL};
	struct origin *og = origin_start(origin_handle_ok, NULL);
	struct origin *raw = origin_start_raw(origin_echo_all, NULL);
	struct client c;
	struct response r;
	char *text;

	snprintf(log, sizeof(log), "%s/access.log", harness_temp_dir());
	proxy_start(&px, args);
	expect_get(px.port, og, "/first?token=secret", 200, "ok");
	expect_get(px.port, og, "/second", 200, "ok");
	snprintf(authority, sizeof(authority), "127.0.0.1:%d", origin_port(raw));
	open_tunnel(&c, px.port, authority);
	client_close(&c);
	request_once(px.port, NULL, "GET /relative HTTP/1.1\r\nHost: x\r\n\r\n", &r);
	assert_status(&r, 400);
	response_free(&r);
	text = wait_file_lines(log, 4, 3000);
	snprintf(line, sizeof(line), " 127.0.0.1:");
	assert_non_null(strstr(text, line));
	snprintf(line, sizeof(line), " GET http://127.0.0.1:%d/first 200 2 ", origin_port(og));
	if (!strstr(text, line))
		fail_msg("no line with '%s' in:\n%s", line, text);
	assert_null(strstr(text, "token=secret"));
	assert_non_null(strstr(text, "ms new\n"));
	assert_non_null(strstr(text, "ms pooled\n"));
	snprintf(line, sizeof(line), " CONNECT %s 200 ", authority);
	assert_non_null(strstr(text, line));
	assert_non_null(strstr(text, "ms tunnel\n"));
	assert_non_null(strstr(text, " GET /relative 400 "));
	free(text);

	/* logrotate: move the file, SIGHUP, and the next line goes to a new one. */
	snprintf(moved, sizeof(moved), "%s.1", log);
	assert_int_equal(rename(log, moved), 0);
	kill(px.pid, SIGHUP);
	sleep_ms(200);
	expect_get(px.port, og, "/third", 200, "ok");
	text = wait_file_lines(log, 1, 3000);
	assert_non_null(strstr(text, "/third 200"));
	free(text);
	proxy_stop(&px);
}

static void
query_kept_when_asked(void)
{
	char log[512];
	const char *args[] = {"--access-log", log, "--log-query", NULL};
	struct origin *og = origin_start(origin_handle_ok, NULL);
	char *text;

	snprintf(log, sizeof(log), "%s/access.log", harness_temp_dir());
	proxy_start(&px, args);
	expect_get(px.port, og, "/q?page=2", 200, "ok");
	text = wait_file_lines(log, 1, 3000);
	assert_non_null(strstr(text, "/q?page=2 200"));
	free(text);
	proxy_stop(&px);
}

/* --pidfile holds the daemon's pid while it runs and is gone after. */
static void
pidfile_written_and_removed(void)
{
	char path[512];
	const char *args[] = {"--pidfile", path, NULL};
	char *text;

	snprintf(path, sizeof(path), "%s/kp.pid", harness_temp_dir());
	proxy_start(&px, args);
	text = read_file_all(path, NULL);
	assert_non_null(text);
	assert_int_equal(atol(text), (long)px.pid);
	free(text);
	proxy_stop(&px);
	assert_null(read_file_all(path, NULL));
}

/* --syslog: the daemon's own lines leave stderr. */
static void
syslog_takes_the_log(void)
{
	static const char *const args[] = {"--syslog", NULL};
	char *log;

	proxy_start(&px, args);
	proxy_stop(&px);
	log = read_file_all(px.log_path, NULL);
	assert_non_null(log);
	assert_null(strstr(log, "listening on"));
	free(log);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(one_line_per_request),
		E2E_TEST(query_kept_when_asked),
		E2E_TEST(pidfile_written_and_removed),
		E2E_TEST(syslog_takes_the_log),
	};

	return E2E_RUN("access_log", tests);
}
