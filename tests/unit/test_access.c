/*
 * Who may use the proxy: CIDR ranges and their matching (IPv4, IPv6,
 * IPv4-mapped), the auth file's format, and Basic credentials checked
 * against it, as tables.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "kp/auth.h"
#include "kp/cidr.h"
#include "kp/config.h"
#include "kp/policy.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static struct sockaddr_storage
sockaddr_of(const char *text)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, text, &((struct sockaddr_in *)&ss)->sin_addr) == 1)
		ss.ss_family = AF_INET;
	else if (inet_pton(AF_INET6, text, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1)
		ss.ss_family = AF_INET6;
	else
		fail_msg("bad test address %s", text);
	return ss;
}

struct match_case {
	const char *range, *addr;
	bool match;
};

static const struct match_case matches[] = {
	{"192.168.1.0/24", "192.168.1.77", true},
	{"192.168.1.0/24", "192.168.2.1", false},
	{"192.168.1.77", "192.168.1.77", true},
	{"192.168.1.77", "192.168.1.78", false},
	{"10.1.2.3/8", "10.200.0.1", true},          /* host bits ignored */
	{"0.0.0.0/0", "203.0.113.9", true},
	{"0.0.0.0/0", "2001:db8::1", false},        /* an IPv4 rule never matches IPv6 */
	{"::/0", "2001:db8::1", true},
	{"::/0", "203.0.113.9", false},
	{"172.16.0.0/12", "172.31.255.255", true},
	{"172.16.0.0/12", "172.32.0.0", false},
	{"192.168.1.0/25", "192.168.1.127", true},
	{"192.168.1.0/25", "192.168.1.128", false},
	{"fd00::/8", "fd12:3456::1", true},
	{"fd00::/8", "fe80::1", false},
	{"fe80::/10", "febf::1", true},
	{"fe80::/10", "fec0::1", false},
	{"2001:db8::/33", "2001:db8:7fff::1", true},
	{"2001:db8::/33", "2001:db8:8000::1", false},
	{"192.168.1.0/24", "::ffff:192.168.1.5", true},   /* IPv4-mapped */
	{"::1", "::1", true},
	{"::1", "::2", false},
};

static void
ranges_match(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(matches); i++) {
		struct sockaddr_storage ss = sockaddr_of(matches[i].addr);
		struct cidr c;

		assert_int_equal(cidr_parse(matches[i].range, &c), 0);
		if (cidr_match(&c, (struct sockaddr *)&ss) != matches[i].match)
			fail_msg("%s in %s: expected %s", matches[i].addr, matches[i].range,
			         matches[i].match ? "match" : "no match");
	}
}

static void
bad_ranges_refused(void **state)
{
	static const char *const bad[] = {"", "/8", "10.0.0.0/", "10.0.0.0/33", "::/129",
	                                  "10.0.0.0/-1", "10.0.0.0/8x", "example.com",
	                                  "10.0.0", "1.2.3.4.5", "::1::2", "10.0.0.0/ 8"};
	struct cidr c;

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad); i++)
		if (cidr_parse(bad[i], &c) == 0)
			fail_msg("'%s' parsed as a range", bad[i]);
}

static void
loopback_recognised(void **state)
{
	static const struct {
		const char *addr;
		bool loopback;
	} cases[] = {
		{"127.0.0.1", true}, {"127.255.0.9", true}, {"::1", true},
		{"::ffff:127.0.0.1", true}, {"128.0.0.1", false}, {"::", false},
		{"0.0.0.0", false}, {"10.0.0.1", false}, {"::2", false},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct sockaddr_storage ss = sockaddr_of(cases[i].addr);

		assert_int_equal(cidr_is_loopback((struct sockaddr *)&ss), cases[i].loopback);
	}
}

static const char *
write_temp(const char *text, mode_t mode)
{
	static char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/kp-unit-auth-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	fchmod(fd, mode);
	close(fd);
	return path;
}

/* "Basic " + base64 of text, for the test. */
static const char *
basic(const char *text)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	static char out[512];
	size_t len = strlen(text), n = 0;

	n += (size_t)snprintf(out, sizeof(out), "Basic ");
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)(uint8_t)text[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t)(uint8_t)text[i + 1] << 8;
		if (i + 2 < len)
			v |= (uint8_t)text[i + 2];
		out[n++] = alphabet[v >> 18 & 63];
		out[n++] = alphabet[v >> 12 & 63];
		out[n++] = i + 1 < len ? alphabet[v >> 6 & 63] : '=';
		out[n++] = i + 2 < len ? alphabet[v & 63] : '=';
	}
	out[n] = '\0';
	return out;
}

/* One check from an address of its own, so that no other check's failures limit it. */
static bool
passes(const struct auth *a, const char *value)
{
	static uint32_t last = 0x0a000000;
	struct sockaddr_in sin = {.sin_family = AF_INET};

	sin.sin_addr.s_addr = htonl(++last);
	return auth_check(a, value, strlen(value), (struct sockaddr *)&sin, 0, NULL) ==
	       AUTH_GRANTED;
}

static void
credentials_checked(void **state)
{
	const char *path = write_temp("# proxy users\n\nalice:wonder land\nbob:p:a:ss\r\n"
	                              "carol:x\n",
	                              0600);
	char why[128];
	struct auth *a = auth_load(path, why, sizeof(why));
	const char *good[] = {"alice:wonder land", "bob:p:a:ss", "carol:x"};
	const char *bad[] = {"alice:wonder", "alice:wonder land ", "alice:Wonder land",
	                     "bob:p:a:s", "carol:", "carol", "dave:x", ":x", "",
	                     "alice:wonder landalice:wonder land"};

	(void)state;
	unlink(path);
	assert_non_null(a);
	assert_int_equal(auth_users(a), 3);
	for (size_t i = 0; i < ARRAY_LEN(good); i++) {
		const char *v = basic(good[i]);

		if (!passes(a, v))
			fail_msg("%s refused", good[i]);
	}
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		const char *v = basic(bad[i]);

		if (passes(a, v))
			fail_msg("'%s' accepted", bad[i]);
	}
	/* The scheme is case-insensitive; other schemes and broken base64 are refused. */
	assert_true(passes(a, "bAsIc   Y2Fyb2w6eA==  "));
	assert_false(passes(a, "Bearer Y2Fyb2w6eA=="));
	assert_false(passes(a, "BasicY2Fyb2w6eA=="));
	assert_false(passes(a, "Basic Y2Fyb2w6eA="));
	assert_false(passes(a, "Basic Y2Fy=2w6eA=="));
	assert_false(passes(a, "Basic Y2Fyb2w6eA!="));
	assert_false(passes(a, "Basic "));
	assert_false(passes(a, ""));
	auth_free(a);
}

static void
bad_files_refused(void **state)
{
	static const struct {
		const char *text, *says;
	} cases[] = {
		{"alice\n", "line 1"},
		{"# only a comment\n", "no user"},
		{"", "no user"},
		{"ok:1\n:nouser\n", "line 2"},
	};
	char why[128];

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		const char *path = write_temp(cases[i].text, 0600);
		struct auth *a = auth_load(path, why, sizeof(why));

		unlink(path);
		if (a || !strstr(why, cases[i].says))
			fail_msg("case %zu: %s (expected a refusal saying %s)", i,
			         a ? "loaded" : why, cases[i].says);
	}
	assert_null(auth_load("/nonexistent/kp-users", why, sizeof(why)));
}

static void
exposed_file_noticed(void **state)
{
	const char *path = write_temp("a:b\n", 0600);

	(void)state;
	assert_false(auth_file_exposed(path));
	chmod(path, 0644);
	assert_true(auth_file_exposed(path));
	chmod(path, 0640);
	assert_false(auth_file_exposed(path));
	chmod(path, 0604);
	assert_true(auth_file_exposed(path));
	unlink(path);
}

static void
destination_rules(void **state)
{
	static const struct {
		const char *dst;
		bool restricted, allowed;
	} cases[] = {
		{"127.0.0.1", false, true},    {"127.0.0.1", true, false},
		{"127.9.9.9", true, false},    {"::1", true, false},
		{"::ffff:127.0.0.1", true, false},
		{"169.254.169.254", true, false}, {"fe80::1", true, false},
		{"0.0.0.0", true, false},      {"::", true, false},
		{"224.0.0.1", true, false},    {"ff02::1", true, false},
		{"198.51.100.7", true, false}, /* this machine's own, below */
		{"198.51.100.8", true, true},  {"203.0.113.5", true, true},
		{"10.0.0.1", true, false},     /* --deny-dest, for everyone */
		{"10.0.0.1", false, false},    {"10.0.0.2", false, true},
		{"169.254.0.5", true, true},   /* --allow-dest */
		{"2001:db8::5", true, true},
	};
	struct kp_config cfg;
	struct cidr own[1];

	(void)state;
	config_defaults(&cfg);
	assert_int_equal(cidr_parse("198.51.100.7", &own[0]), 0);
	assert_int_equal(cidr_parse("10.0.0.1", &cfg.deny_dest[cfg.ndeny_dest++]), 0);
	assert_int_equal(cidr_parse("169.254.0.0/24", &cfg.allow_dest[cfg.nallow_dest++]), 0);
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct sockaddr_storage ss = sockaddr_of(cases[i].dst);

		if (policy_dest_allowed(&cfg, own, 1, cases[i].restricted, (struct sockaddr *)&ss) !=
		    cases[i].allowed)
			fail_msg("%s for a %s client: expected %s", cases[i].dst,
			         cases[i].restricted ? "LAN" : "local",
			         cases[i].allowed ? "allowed" : "refused");
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ranges_match),
		cmocka_unit_test(bad_ranges_refused),
		cmocka_unit_test(loopback_recognised),
		cmocka_unit_test(credentials_checked),
		cmocka_unit_test(bad_files_refused),
		cmocka_unit_test(exposed_file_noticed),
		cmocka_unit_test(destination_rules),
	};

	return cmocka_run_group_tests_name("access", tests, NULL, NULL);
}
