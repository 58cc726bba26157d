/*
 * Absolute-form request-targets (RFC 9112 3.2.2): what the proxy connects
 * to, what it sends as Host, and what it refuses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kp/http.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct good_case {
	const char *url;
	const char *host;
	unsigned port;
	const char *key;
	const char *authority;
	const char *path;
	bool ipv6;
};

static const struct good_case good[] = {
	{"http://example.com/a?b=c", "example.com", 80, "example.com:80", "example.com",
	 "/a?b=c", false},
	{"http://example.com:8080/x/y", "example.com", 8080, "example.com:8080",
	 "example.com:8080", "/x/y", false},
	{"HTTP://EXAMPLE.COM/Mixed/Case", "example.com", 80, "example.com:80", "EXAMPLE.COM",
	 "/Mixed/Case", false},
	{"hTtP://Example.Com:81/", "example.com", 81, "example.com:81", "Example.Com:81", "/",
	 false},
	{"http://[::1]:8080/x", "::1", 8080, "[::1]:8080", "[::1]:8080", "/x", true},
	{"http://[::1]/", "::1", 80, "[::1]:80", "[::1]", "/", true},
	{"http://[2001:DB8::A]/p", "2001:db8::a", 80, "[2001:db8::a]:80", "[2001:DB8::A]", "/p",
	 true},
	{"http://[::ffff:192.0.2.1]:81/", "::ffff:192.0.2.1", 81, "[::ffff:192.0.2.1]:81",
	 "[::ffff:192.0.2.1]:81", "/", true},
	{"http://example.com", "example.com", 80, "example.com:80", "example.com", "/", false},
	{"http://example.com:8080", "example.com", 8080, "example.com:8080", "example.com:8080",
	 "/", false},
	{"http://h?q=1", "h", 80, "h:80", "h", "?q=1", false},
	{"http://h/a#frag", "h", 80, "h:80", "h", "/a", false},
	{"http://h/a?x=1#frag?y", "h", 80, "h:80", "h", "/a?x=1", false},
	{"http://h#frag", "h", 80, "h:80", "h", "/", false},
	{"http://h?q#f", "h", 80, "h:80", "h", "?q", false},
	{"http://h:/", "h", 80, "h:80", "h", "/", false},
	{"http://h:", "h", 80, "h:80", "h", "/", false},
	{"http://h:1/", "h", 1, "h:1", "h:1", "/", false},
	{"http://h:65535/", "h", 65535, "h:65535", "h:65535", "/", false},
	{"http://192.0.2.7:3128/x", "192.0.2.7", 3128, "192.0.2.7:3128", "192.0.2.7:3128", "/x",
	 false},
	{"http://a-b.c_d~e.example/", "a-b.c_d~e.example", 80, "a-b.c_d~e.example:80",
	 "a-b.c_d~e.example", "/", false},
	{"http://h/a@b:c", "h", 80, "h:80", "h", "/a@b:c", false},
	{"http://h/%41%20", "h", 80, "h:80", "h", "/%41%20", false},
};

static void
test_good_targets(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(good); i++) {
		const struct good_case *c = &good[i];
		struct http_target t;
		int r;

		memset(&t, 0x5a, sizeof(t));
		r = http_parse_target(c->url, strlen(c->url), &t);
		if (r != 0)
			fail_msg("%s: status %d", c->url, r);
		assert_string_equal(t.host, c->host);
		assert_int_equal(t.port, c->port);
		assert_string_equal(t.key, c->key);
		assert_string_equal(t.authority, c->authority);
		assert_int_equal(t.ipv6_literal, c->ipv6);
		assert_non_null(t.path);
		if (t.path_len != strlen(c->path) || memcmp(t.path, c->path, t.path_len) != 0)
			fail_msg("%s: path \"%.*s\", expected \"%s\"", c->url, (int)t.path_len, t.path,
			         c->path);
		/* A non-empty path is the client's bytes, not a copy. */
		if (strcmp(c->path, "/") != 0 || strchr(c->url + 7, '/'))
			assert_true(t.path >= c->url && t.path + t.path_len <= c->url + strlen(c->url));
	}
}

static void
test_target_not_nul_terminated(void **state)
{
	/* The target lies inside a message: the parser must stop at len. */
	static const char msg[] = "http://example.com:8080/p?q HTTP/1.1\r\n";
	size_t len = strlen("http://example.com:8080/p?q");
	struct http_target t;

	(void)state;
	assert_int_equal(http_parse_target(msg, len, &t), 0);
	assert_string_equal(t.key, "example.com:8080");
	assert_int_equal(t.path_len, 4);
	assert_memory_equal(t.path, "/p?q", 4);

	assert_int_equal(http_parse_target(msg, strlen("http://example.com"), &t), 0);
	assert_string_equal(t.key, "example.com:80");
	assert_int_equal(t.path_len, 1);
	assert_memory_equal(t.path, "/", 1);
}

static void
test_longest_host(void **state)
{
	char url[400], host[300];
	struct http_target t;

	(void)state;
	memset(host, 'a', 255);
	host[255] = '\0';
	snprintf(url, sizeof(url), "http://%s:8080/", host);
	assert_int_equal(http_parse_target(url, strlen(url), &t), 0);
	assert_string_equal(t.host, host);
	assert_int_equal(strlen(t.authority), 255 + 5);
	assert_int_equal(strlen(t.key), 255 + 5);

	memset(host, 'a', 256);
	host[256] = '\0';
	snprintf(url, sizeof(url), "http://%s/", host);
	assert_int_equal(http_parse_target(url, strlen(url), &t), 400);
}

struct bad_case {
	const char *url;
	int status;
};

static const struct bad_case bad[] = {
	{"/path", 400},
	{"/", 400},
	{"*", 400},
	{"", 400},
	{"example.com/x", 400},
	{"http:/h/", 400},
	{"http:", 400},
	{"http:h", 400},
	{"https://h/", 501},
	{"HTTPS://h/", 501},
	{"ftp://h/", 501},
	{"ws://h/", 501},
	{"httpx://h/", 501},
	{"http://user@h/", 400},
	{"http://user:pw@h:80/", 400},
	{"http://@h/", 400},
	{"http://h:0/", 400},
	{"http://h:00/", 400},
	{"http://h:65536/", 400},
	{"http://h:99999999999999999999/", 400},
	{"http://h:abc/", 400},
	{"http://h:80a/", 400},
	{"http://h:-1/", 400},
	{"http://h: 80/", 400},
	{"http://h:80:80/", 400},
	{"http:///", 400},
	{"http://", 400},
	{"http://:80/", 400},
	{"http://?q", 400},
	{"http://[]/", 400},
	{"http://ex ample.com/", 400},
	{"http://ex!ample.com/", 400},
	{"http://ex%41mple.com/", 400},
	{"http://exa\"mple/", 400},
	{"http://h\\x/", 400},
	{"http://[::1/", 400},
	{"http://[::1", 400},
	{"http://[::g]/", 400},
	{"http://[::1]x/", 400},
	{"http://[::1]:0/", 400},
	{"http://[::1]:65536/", 400},
};

static void
test_bad_targets(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		struct http_target t;
		int r = http_parse_target(bad[i].url, strlen(bad[i].url), &t);

		if (r != bad[i].status)
			fail_msg("\"%s\": status %d, expected %d", bad[i].url, r, bad[i].status);
	}
}

static void
test_nul_in_host(void **state)
{
	static const char url[] = "http://ex\0ample.com/";
	struct http_target t;

	(void)state;
	assert_int_equal(http_parse_target(url, sizeof(url) - 1, &t), 400);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_targets),
		cmocka_unit_test(test_target_not_nul_terminated),
		cmocka_unit_test(test_longest_host),
		cmocka_unit_test(test_bad_targets),
		cmocka_unit_test(test_nul_in_host),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
