/*
 * Parent URLs, the rules that choose a parent per origin, the credentials
 * file, and the pool keys of connections through a parent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "kp/config.h"
#include "kp/dispatch.h"
#include "kp/parent.h"

/* Rule: each URL form parses to its kind, host, port and credentials; the label never shows them. */
static void
urls_parse_to_what_they_name(void **state)
{
	static const struct {
		const char *url;
		enum parent_kind kind;
		const char *host;
		unsigned port;
		const char *user, *password;
	} rows[] = {
		{"socks5h://127.0.0.1:9050", PARENT_SOCKS5H, "127.0.0.1", 9050, "", ""},
		{"SOCKS5://proxy.lan:1080/", PARENT_SOCKS5, "proxy.lan", 1080, "", ""},
		{"http://alice:s3cret@10.0.0.7:3128", PARENT_HTTP, "10.0.0.7", 3128, "alice", "s3cret"},
		{"http://[2001:db8::7]:8080", PARENT_HTTP, "2001:db8::7", 8080, "", ""},
		{"socks5h://bob@h:1", PARENT_SOCKS5H, "h", 1, "bob", ""},
		/* Percent-encoded, and the last '@' ends the credentials. */
		{"socks5h://u%3Ax:p%40ss@h:2", PARENT_SOCKS5H, "h", 2, "u:x", "p@ss"},
		{"http://u:p@ss@h:3", PARENT_HTTP, "h", 3, "u", "p@ss"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct parent_url u;
		const char *bad = parent_url_parse(rows[i].url, &u);

		if (bad)
			fail_msg("%s: %s", rows[i].url, bad);
		assert_int_equal(u.kind, rows[i].kind);
		assert_string_equal(u.host, rows[i].host);
		assert_int_equal(u.port, rows[i].port);
		assert_string_equal(u.user, rows[i].user);
		assert_string_equal(u.password, rows[i].password);
	}
}

/* Rule: a malformed URL is refused with words that do not quote its password. */
static void
malformed_urls_are_refused(void **state)
{
	static const char *const bad[] = {
		"ftp://h:21", "socks4://h:1080", "socks5h://h", "socks5h://h:0", "socks5h://h:65536",
		"socks5h://h:80x", "http://:3128", "http://h:3128/path", "http://[::1:3128",
		"http://@h:1", "http://u:pa%zzss@h:1", "http://u:p%00@h:1", "socks5h://h s:1", "",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct parent_url u;
		const char *why = parent_url_parse(bad[i], &u);

		if (!why)
			fail_msg("'%s' was taken", bad[i]);
		assert_null(strstr(why, "pa%zz"));
	}
}

static struct kp_config cfg;

static void
setup_config(void)
{
	config_defaults(&cfg);
}

static void
add_rule(const char *pattern, const char *url)
{
	cfg.parent_rules[cfg.nparent_rules].pattern = pattern;
	cfg.parent_rules[cfg.nparent_rules++].url = url;
}

/* Rule: the first matching rule wins, --direct included; then --parent; a name never matches a CIDR. */
static void
rules_choose_in_order(void **state)
{
	static struct parents ps;
	char why[256];

	(void)state;
	setup_config();
	add_rule("*.tor.example", "socks5h://127.0.0.1:9050");
	add_rule("intranet.example", NULL);
	add_rule("10.0.0.0/8", NULL);
	add_rule("*.example", "http://10.0.0.7:3128");
	cfg.parent_url = "socks5h://127.0.0.1:1080";
	assert_true(parents_init(&ps, &cfg, why, sizeof(why)));
	assert_int_equal(ps.count, 3);
	assert_string_equal(parents_route(&ps, "a.tor.example")->label, "socks5h://127.0.0.1:9050");
	assert_null(parents_route(&ps, "intranet.example"));
	assert_null(parents_route(&ps, "10.1.2.3"));
	assert_string_equal(parents_route(&ps, "www.example")->label, "http://10.0.0.7:3128");
	assert_string_equal(parents_route(&ps, "11.1.2.3")->label, "socks5h://127.0.0.1:1080");
	assert_string_equal(parents_route(&ps, "ten.example.org")->label,
	                    "socks5h://127.0.0.1:1080");
	assert_null(parents_route(NULL, "www.example"));
}

/* Rule: one parent named twice is one parent, so its connections are one pool. */
static void
a_parent_named_twice_is_one(void **state)
{
	static struct parents ps;
	char why[256];

	(void)state;
	setup_config();
	add_rule("a.example", "socks5h://127.0.0.1:9050");
	add_rule("b.example", "SOCKS5H://127.0.0.1:9050/");
	assert_true(parents_init(&ps, &cfg, why, sizeof(why)));
	assert_int_equal(ps.count, 1);
	assert_ptr_equal(parents_route(&ps, "a.example"), parents_route(&ps, "b.example"));
}

/*
 * Rule: a parent named without credentials takes those of its line in
 * --parent-credentials; an HTTP parent's field carries them in Basic.
 */
static void
credentials_come_from_the_file(void **state)
{
	static struct parents ps;
	char path[] = "/tmp/kp-parent-credsXXXXXX";
	int fd = mkstemp(path);
	const char lines[] = "# parents\n"
	                     "socks5h://carol:pw1@127.0.0.1:9050\n"
	                     "\n"
	                     "http://Aladdin:open%20sesame@10.0.0.7:3128\n";
	char why[256];
	const struct parent *p;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, lines, sizeof(lines) - 1), (ssize_t)(sizeof(lines) - 1));
	close(fd);
	setup_config();
	add_rule("*.onion", "socks5h://127.0.0.1:9050");
	cfg.parent_url = "http://10.0.0.7:3128";
	cfg.parent_credentials = path;
	assert_true(parents_init(&ps, &cfg, why, sizeof(why)));
	p = parents_route(&ps, "x.onion");
	assert_string_equal(p->hop.user, "carol");
	assert_string_equal(p->hop.password, "pw1");
	assert_string_equal(p->label, "socks5h://127.0.0.1:9050");
	p = parents_route(&ps, "example.com");
	/* RFC 7617's example pair. */
	assert_string_equal(p->authorization,
	                    "Proxy-Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==\r\n");
	assert_null(strstr(p->label, "Aladdin"));

	/* A line that is not a parent URL with credentials stops the start, naming the line. */
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "socks5h://127.0.0.1:9050\n", 25), 25);
	close(fd);
	assert_false(parents_init(&ps, &cfg, why, sizeof(why)));
	assert_non_null(strstr(why, "line 1"));
	unlink(path);
	cfg.parent_credentials = "/nonexistent/kp-credentials";
	assert_false(parents_init(&ps, &cfg, why, sizeof(why)));
	assert_non_null(strstr(why, "cannot read"));
}

/*
 * Rule: connections through a parent never share a pool with direct ones
 * or with another parent's; through an HTTP parent, plain requests of all
 * origins share the parent's.
 */
static void
pool_keys_name_the_parent(void **state)
{
	static struct parents ps;
	char why[256], key[DISPATCH_KEY_MAX];
	const struct parent *socks, *http;

	(void)state;
	setup_config();
	add_rule("*.a", "socks5h://127.0.0.1:9050");
	add_rule("*.b", "http://10.0.0.7:3128");
	assert_true(parents_init(&ps, &cfg, why, sizeof(why)));
	socks = parents_route(&ps, "x.a");
	http = parents_route(&ps, "x.b");
	assert_string_equal(dispatch_key_compose(key, "x.a:80", false, false, NULL, false), "x.a:80");
	assert_string_equal(dispatch_key_compose(key, "x.a:80", false, false, socks, false),
	                    "x.a:80 via parent 0");
	assert_string_equal(dispatch_key_compose(key, "x.a:443", true, true, socks, false),
	                    "https://x.a:443 (lan) via parent 0");
	assert_string_equal(dispatch_key_compose(key, "x.b:80", false, false, http, true),
	                    "http parent 1");
	assert_string_equal(dispatch_key_compose(key, "x.b:443", true, false, http, false),
	                    "https://x.b:443 via parent 1");
	/* The longest key fits: a 255-byte name, a port, every note. */
	{
		char host_port[HTTP_KEY_MAX];

		memset(host_port, 'n', 255);
		strcpy(host_port + 255, ":65535");
		dispatch_key_compose(key, host_port, true, true, socks, false);
		assert_non_null(strstr(key, " (lan) via parent 0"));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(urls_parse_to_what_they_name),
		cmocka_unit_test(malformed_urls_are_refused),
		cmocka_unit_test(rules_choose_in_order),
		cmocka_unit_test(a_parent_named_twice_is_one),
		cmocka_unit_test(credentials_come_from_the_file),
		cmocka_unit_test(pool_keys_name_the_parent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
