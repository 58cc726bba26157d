/*
 * Which CONNECTs are intercepted: host patterns, and the memory of clients
 * that refused our certificate.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kp/hostpattern.h"
#include "kp/intercept.h"

static void
exact_names_match_case_blind_and_ignore_a_final_dot(void **state)
{
	(void)state;
	assert_true(host_pattern_match("cdn.example.com", "cdn.example.com"));
	assert_true(host_pattern_match("cdn.example.com", "CDN.Example.COM"));
	assert_true(host_pattern_match("cdn.example.com.", "cdn.example.com"));
	assert_true(host_pattern_match("cdn.example.com", "cdn.example.com."));
	assert_false(host_pattern_match("cdn.example.com", "example.com"));
	assert_false(host_pattern_match("cdn.example.com", "xcdn.example.com"));
	assert_false(host_pattern_match("cdn.example.com", "cdn.example.com.evil"));
	assert_false(host_pattern_match("example.com", "a.example.com"));
}

static void
wildcards_cover_names_below_at_any_depth_but_not_the_domain(void **state)
{
	(void)state;
	assert_true(host_pattern_match("*.example.com", "a.example.com"));
	assert_true(host_pattern_match("*.example.com", "a.b.c.example.com"));
	assert_true(host_pattern_match("*.example.com", "A.EXAMPLE.COM."));
	assert_false(host_pattern_match("*.example.com", "example.com"));
	assert_false(host_pattern_match("*.example.com", "badexample.com"));
	assert_false(host_pattern_match("*.example.com", ".example.com"));
	assert_false(host_pattern_match("*.example.com", "a.example.com.evil"));
	assert_false(host_pattern_match("*.example.com", "example.org"));
}

static void
ip_literals_match_by_value(void **state)
{
	(void)state;
	assert_true(host_pattern_match("192.0.2.7", "192.0.2.7"));
	assert_false(host_pattern_match("192.0.2.7", "192.0.2.70"));
	assert_true(host_pattern_match("2001:db8::1", "2001:DB8:0:0::1"));
	assert_false(host_pattern_match("2001:db8::1", "2001:db8::2"));
	/* An IPv4 pattern is not a name, and a name is not an address. */
	assert_false(host_pattern_match("192.0.2.7", "192.0.2.7.example.com"));
	assert_false(host_pattern_match("*.2.7", "192.0.2.7"));
}

static void
bad_patterns_are_refused_with_a_reason(void **state)
{
	(void)state;
	assert_null(host_pattern_problem("cdn.example.com"));
	assert_null(host_pattern_problem("*.example.com"));
	assert_null(host_pattern_problem("192.0.2.7"));
	assert_null(host_pattern_problem("::1"));
	assert_null(host_pattern_problem("under_score.example.com"));
	assert_non_null(host_pattern_problem(""));
	assert_non_null(host_pattern_problem("*"));
	assert_non_null(host_pattern_problem("*."));
	assert_non_null(host_pattern_problem("*example.com"));
	assert_non_null(host_pattern_problem("a.*.example.com"));
	assert_non_null(host_pattern_problem("**.example.com"));
	assert_non_null(host_pattern_problem("exa mple.com"));
	assert_non_null(host_pattern_problem("a..b"));
	assert_non_null(host_pattern_problem(".example.com"));
	assert_non_null(host_pattern_problem("example.com:443"));
	assert_non_null(host_pattern_problem("[::1]"));
}

static void
any_of_several_patterns(void **state)
{
	const char *const patterns[] = {"a.example.com", "*.cdn.example.net", "192.0.2.1"};

	(void)state;
	assert_true(host_patterns_match(patterns, 3, "a.example.com"));
	assert_true(host_patterns_match(patterns, 3, "x.cdn.example.net"));
	assert_true(host_patterns_match(patterns, 3, "192.0.2.1"));
	assert_false(host_patterns_match(patterns, 3, "b.example.com"));
	assert_false(host_patterns_match(patterns, 0, "a.example.com"));
}

static struct sockaddr_in
v4(const char *addr, uint16_t port)
{
	struct sockaddr_in sa;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, addr, &sa.sin_addr), 1);
	return sa;
}

static void
refusals_are_per_client_address_and_host_and_expire(void **state)
{
	static struct intercept_memory m;
	struct sockaddr_in alice = v4("192.168.1.10", 40000);
	struct sockaddr_in alice_later = v4("192.168.1.10", 51234);
	struct sockaddr_in bob = v4("192.168.1.11", 40000);

	(void)state;
	intercept_memory_init(&m, 3600);
	assert_true(intercept_memory_add(&m, (struct sockaddr *)&alice, "a.example.com:443", 100));
	/* Noted once: the second refusal is not news. */
	assert_false(intercept_memory_add(&m, (struct sockaddr *)&alice, "a.example.com:443", 101));
	/* Another connection from the same machine: its port differs. */
	assert_true(intercept_memory_has(&m, (struct sockaddr *)&alice_later, "a.example.com:443",
	                                 200));
	assert_false(intercept_memory_has(&m, (struct sockaddr *)&bob, "a.example.com:443", 200));
	assert_false(intercept_memory_has(&m, (struct sockaddr *)&alice, "b.example.com:443", 200));
	assert_false(intercept_memory_has(&m, (struct sockaddr *)&alice, "a.example.com:8443", 200));
	/* An hour after the last refusal it is tried again. */
	assert_true(intercept_memory_has(&m, (struct sockaddr *)&alice, "a.example.com:443",
	                                 101 + 3599));
	assert_false(intercept_memory_has(&m, (struct sockaddr *)&alice, "a.example.com:443",
	                                  101 + 3601));
}

static void
a_full_memory_lets_the_oldest_go(void **state)
{
	static struct intercept_memory m;
	char key[64];

	(void)state;
	intercept_memory_init(&m, 3600);
	for (unsigned i = 0; i <= INTERCEPT_REFUSALS; i++) {
		struct sockaddr_in client = v4("10.0.0.1", 1000);

		snprintf(key, sizeof(key), "host%u.example:443", i);
		assert_true(intercept_memory_add(&m, (struct sockaddr *)&client, key, 10.0 + i));
	}
	{
		struct sockaddr_in client = v4("10.0.0.1", 1000);

		/* host0 was added first, so it expires first and made room. */
		assert_false(intercept_memory_has(&m, (struct sockaddr *)&client, "host0.example:443",
		                                  500));
		assert_true(intercept_memory_has(&m, (struct sockaddr *)&client, "host1.example:443",
		                                 500));
		snprintf(key, sizeof(key), "host%u.example:443", INTERCEPT_REFUSALS);
		assert_true(intercept_memory_has(&m, (struct sockaddr *)&client, key, 500));
	}
}

static void
ipv6_clients_are_told_apart(void **state)
{
	static struct intercept_memory m;
	struct sockaddr_in6 a, b;

	(void)state;
	memset(&a, 0, sizeof(a));
	a.sin6_family = AF_INET6;
	b = a;
	assert_int_equal(inet_pton(AF_INET6, "fd00::1", &a.sin6_addr), 1);
	assert_int_equal(inet_pton(AF_INET6, "fd00::2", &b.sin6_addr), 1);
	intercept_memory_init(&m, 60);
	intercept_memory_add(&m, (struct sockaddr *)&a, "h:443", 0);
	assert_true(intercept_memory_has(&m, (struct sockaddr *)&a, "h:443", 1));
	assert_false(intercept_memory_has(&m, (struct sockaddr *)&b, "h:443", 1));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(exact_names_match_case_blind_and_ignore_a_final_dot),
		cmocka_unit_test(wildcards_cover_names_below_at_any_depth_but_not_the_domain),
		cmocka_unit_test(ip_literals_match_by_value),
		cmocka_unit_test(bad_patterns_are_refused_with_a_reason),
		cmocka_unit_test(any_of_several_patterns),
		cmocka_unit_test(refusals_are_per_client_address_and_host_and_expire),
		cmocka_unit_test(a_full_memory_lets_the_oldest_go),
		cmocka_unit_test(ipv6_clients_are_told_apart),
	};

	return cmocka_run_group_tests_name("intercept", tests, NULL, NULL);
}
