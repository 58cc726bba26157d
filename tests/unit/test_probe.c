/*
 * The URL probe of --check-host: what it connects to, a round trip measured
 * on loopback, and the two ways it ends without one (refused, no answer).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kp/probe.h"

static void
assert_target(const char *url, const char *host, unsigned port)
{
	struct probe_target t;
	char why[160];

	if (probe_parse_url(url, &t, why, sizeof(why)) != 0)
		fail_msg("%s: %s", url, why);
	assert_string_equal(t.host, host);
	assert_int_equal(t.port, port);
}

static void
assert_refused_url(const char *url)
{
	struct probe_target t;
	char why[160];

	if (probe_parse_url(url, &t, why, sizeof(why)) == 0)
		fail_msg("%s: taken as %s port %u", url, t.host, t.port);
	assert_non_null(strstr(why, "is not an http:// or https:// URL"));
}

static void
test_parse(void **state)
{
	(void)state;
	assert_target("http://example.com/v.mp4", "example.com", 80);
	assert_target("HTTPS://example.com", "example.com", 443);
	assert_target("https://example.com:8443?x=1", "example.com", 8443);
	assert_target("http://[2001:db8::1]:8080/", "2001:db8::1", 8080);
	assert_target("http://[::1]/", "::1", 80);
	/* Credentials are not the host, even when the password holds ':' or '@'. */
	assert_target("http://user:p@ss:w@cdn.example:81/x", "cdn.example", 81);
	assert_target("http://192.0.2.7#frag", "192.0.2.7", 80);

	assert_refused_url("ftp://example.com/");
	assert_refused_url("example.com");
	assert_refused_url("http://");
	assert_refused_url("http:///path");
	assert_refused_url("http://host:/");
	assert_refused_url("http://host:0/");
	assert_refused_url("http://host:65536/");
	assert_refused_url("http://host:80x/");
	assert_refused_url("http://[::1/");
	assert_refused_url("http://[::1]x/");
}

/* A listener on a port the kernel picks; backlog as given. */
static int
listener(int backlog, unsigned *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, backlog), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

static void
test_loopback_rtt(void **state)
{
	struct kp_config cfg;
	unsigned port;
	int fd = listener(16, &port);
	double rtt = -1;
	char url[64], why[160];

	(void)state;
	config_defaults(&cfg);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/file", port);
	if (probe_rtt(url, &cfg, 5, &rtt, why, sizeof(why)) != 0)
		fail_msg("%s: %s", url, why);
	assert_true(rtt > 0 && rtt < 1000);
	close(fd);
}

static void
test_refused(void **state)
{
	struct kp_config cfg;
	unsigned port;
	double rtt = -1;
	char url[64], why[160];

	(void)state;
	config_defaults(&cfg);
	/* A port that was just free: nothing listens there now. */
	close(listener(1, &port));
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/", port);
	assert_int_equal(probe_rtt(url, &cfg, 5, &rtt, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "127.0.0.1:"));
	/*
	 * qemu-user hands getsockopt(SO_ERROR)'s value through untranslated, so
	 * on an emulated target the host's ECONNREFUSED (111 on x86-64) arrives.
	 */
	if (!strstr(why, strerror(ECONNREFUSED)) && !strstr(why, "error 111"))
		fail_msg("the reason does not say the connect was refused: %s", why);
	assert_true(rtt == -1);
	assert_int_equal(probe_rtt("gopher://x/", &cfg, 5, &rtt, why, sizeof(why)), -1);
}

/* A listener whose accept queue is full drops the SYN: the probe gives up in time. */
static void
test_no_answer(void **state)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct kp_config cfg;
	unsigned port;
	int fd = listener(0, &port), fill[4];
	double rtt = -1;
	char url[64], why[160];

	(void)state;
	config_defaults(&cfg);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)port);
	for (int i = 0; i < 4; i++) {
		fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		connect(fill[i], (struct sockaddr *)&sa, sizeof(sa));
	}
	usleep(50000);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/", port);
	assert_int_equal(probe_rtt(url, &cfg, 0.3, &rtt, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "no answer within 0.3 s"));
	for (int i = 0; i < 4; i++)
		close(fill[i]);
	close(fd);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_loopback_rtt),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_no_answer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
