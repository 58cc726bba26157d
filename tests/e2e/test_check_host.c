/*
 * keepalive-proxy --check-host on this very machine, whatever it is like:
 * it must answer 0 or 1 with a whole report, never fail; the exit code
 * follows the findings; a URL is probed; and the daemon's start-up line
 * names a setting that caps the path it was given.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

/* Runs the binary with args; its exit code, and what it printed in *text (freed by the caller). */
static int
check_host(char **text, const char *const args[])
{
	const char *argv[16] = {getenv("KP_BINARY")};
	char log[512];
	size_t n = 1;
	int rc;

	if (!argv[0])
		fail_msg("KP_BINARY is not set; run this through ctest");
	for (; args[n - 1]; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	path_join(log, sizeof(log), harness_temp_dir(), "out");
	rc = run_process(argv, log, 20000);
	if (!(*text = read_file_all(log, NULL)))
		fail_msg("no output from --check-host");
	return rc;
}

static void
assert_has(const char *text, const char *part)
{
	if (!strstr(text, part))
		fail_msg("the report lacks \"%s\":\n%s", part, text);
}

static void
text_report_on_this_host(void)
{
	char *text;
	int rc = check_host(&text, (const char *const[]){"--check-host", NULL});

	if (rc != 0 && rc != 1)
		fail_msg("--check-host exited %d:\n%s", rc, text);
	assert_has(text, "Host check for one download over 200 ms at 500 Mbit/s");
	assert_has(text, "net.ipv4.tcp_rmem max ");
	assert_has(text, rc ? "(exit 1)" : "Nothing limits this path");
	assert_has(text, "Nothing on this host was changed.\n");
	free(text);
}

static void
json_report_on_this_host(void)
{
	char *text;
	int rc = check_host(&text, (const char *const[]){"--check-host", "--json", NULL});
	size_t len;

	if (rc != 0 && rc != 1)
		fail_msg("--check-host --json exited %d:\n%s", rc, text);
	len = strlen(text);
	assert_true(strncmp(text, "{\"path\": {\"rtt_ms\": 200, ", 25) == 0);
	assert_true(len > 5 && strcmp(text + len - 5, "\n ]}\n") == 0);
	assert_has(text, rc ? "\"limited\": true" : "\"limited\": false");
	assert_has(text, "{\"key\": \"tcp_rmem\", ");
	assert_has(text, "{\"key\": \"tls\", ");
	free(text);
}

/* 1 ms at 1 Mbit/s: no host's buffers cap that, so nothing the defaults set limits. */
static void
short_slow_path_is_never_limited(void)
{
	char *text;
	int rc = check_host(&text, (const char *const[]){"--check-host", "--rtt", "1", "--rate",
	                                                 "1", NULL});

	if (rc != 0)
		fail_msg("exit %d for a path nothing limits:\n%s", rc, text);
	assert_has(text, "over 1 ms (--rtt) at 1 Mbit/s (--rate)");
	free(text);
}

/* A flag the host cannot grant limits, whatever else it is like: exit 1. */
static void
limit_gives_exit_1(void)
{
	char *text;
	int rc = check_host(&text, (const char *const[]){"--check-host", "--rtt", "1", "--rate",
	                                                 "1", "--congestion", "kpnosuchcc", NULL});

	if (rc != 1)
		fail_msg("exit %d with a congestion control no kernel has:\n%s", rc, text);
	assert_has(text, "\nlimits  --congestion kpnosuchcc: the kernel does not offer it");
	assert_has(text, "modprobe tcp_kpnosuchcc");
	free(text);
}

static void
url_is_probed(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t salen = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char url[64], want[96], *text;
	int rc;

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &salen), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/video.mp4", ntohs(sa.sin_port));
	rc = check_host(&text, (const char *const[]){"--check-host", url, NULL});
	close(fd);
	if (rc != 0 && rc != 1)
		fail_msg("exit %d:\n%s", rc, text);
	snprintf(want, sizeof(want), "a TCP connect to %s took", url);
	assert_has(text, want);
	assert_has(text, "(probe)");
	free(text);
}

static void
usage_mistakes_exit_2(void)
{
	char *text;

	assert_int_equal(check_host(&text, (const char *const[]){"--json", NULL}), 2);
	assert_has(text, "--json goes with --check-host");
	free(text);
	assert_int_equal(check_host(&text, (const char *const[]){"--check-host", "--rtt", "0",
	                                                         NULL}),
	                 2);
	free(text);
}

/* The daemon tells at start, in one line, when the host caps the path it was given. */
static void
start_up_line(void)
{
	struct proxy px;

	/* 60 s at 1 Tbit/s: no receive maximum carries that. */
	proxy_start(&px, (const char *const[]){"--rtt", "60000", "--rate", "1000000", NULL});
	assert_int_equal(proxy_log_count(&px, "this host limits downloads: net.ipv4.tcp_rmem max "),
	                 1);
	assert_int_equal(proxy_log_count(&px, "(keepalive-proxy --check-host for the fix)"), 1);
	proxy_stop(&px);

	proxy_start(&px, (const char *const[]){"--rtt", "1", "--rate", "1", NULL});
	assert_int_equal(proxy_log_count(&px, "this host limits downloads"), 0);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(text_report_on_this_host),
		E2E_TEST(json_report_on_this_host),
		E2E_TEST(short_slow_path_is_never_limited),
		E2E_TEST(limit_gives_exit_1),
		E2E_TEST(url_is_probed),
		E2E_TEST(usage_mistakes_exit_2),
		E2E_TEST(start_up_line),
	};

	return E2E_RUN("e2e_check_host", tests);
}
