/*
 * The host:port table shared by the pool and the dispatch queues, and the
 * Happy Eyeballs address order (RFC 8305 4) that connects follow.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kp/evglue.h"
#include "kp/table.h"
#include "kp/upstream.h"

struct record {
	struct table_node node;
	char key[32];
	bool seen;
};

static void
mark_and_remove(struct table_node *n, void *arg)
{
	struct record *r = container_of(n, struct record, node);

	r->seen = true;
	table_remove(arg, n);
}

/* Enough records to make the table grow several times; every one stays findable. */
static void
add_find_remove_across_growth(void **state)
{
	enum { N = 1000 };
	static struct record recs[N];
	struct table t;

	(void)state;
	assert_int_equal(table_init(&t), 0);
	for (int i = 0; i < N; i++) {
		snprintf(recs[i].key, sizeof(recs[i].key), "host%d.example:%d", i, 80 + i % 3);
		recs[i].node.key = recs[i].key;
		recs[i].seen = false;
		table_add(&t, &recs[i].node);
	}
	assert_int_equal(t.count, N);
	assert_true(t.nbuckets >= N);
	for (int i = 0; i < N; i++)
		assert_ptr_equal(table_find(&t, recs[i].key), &recs[i].node);
	assert_null(table_find(&t, "host0.example:81"));
	for (int i = 0; i < N; i += 2)
		table_remove(&t, &recs[i].node);
	assert_int_equal(t.count, N / 2);
	for (int i = 0; i < N; i++)
		assert_true((table_find(&t, recs[i].key) != NULL) == (i % 2 == 1));
	/* table_each visits each remaining record once, and fn may remove it. */
	table_each(&t, mark_and_remove, &t);
	assert_int_equal(t.count, 0);
	for (int i = 0; i < N; i++)
		assert_true(recs[i].seen == (i % 2 == 1));
	table_free(&t);
}

static union net_addr
addr(const char *text)
{
	union net_addr a;

	memset(&a, 0, sizeof(a));
	if (inet_pton(AF_INET6, text, &a.in6.sin6_addr) == 1)
		a.sa.sa_family = AF_INET6;
	else if (inet_pton(AF_INET, text, &a.in.sin_addr) == 1)
		a.sa.sa_family = AF_INET;
	else
		fail_msg("bad test address %s", text);
	return a;
}

/*
 * Orders the first n of in and compares them with want. The slots past n
 * hold a filler that must stay as it was, and the count must not change.
 */
static void
order_is(const char *const in[], const char *const want[], unsigned n)
{
	struct dns_addrs a, filler;

	memset(&filler, 0xa5, sizeof(filler));
	a = filler;
	a.count = n;
	for (unsigned i = 0; i < n; i++)
		a.addr[i] = addr(in[i]);
	upstream_order_addrs(&a);
	if (a.count != n)
		fail_msg("%u addresses became %u", n, a.count);
	for (unsigned i = 0; i < n; i++) {
		union net_addr w = addr(want[i]);

		if (a.addr[i].sa.sa_family != w.sa.sa_family ||
		    (w.sa.sa_family == AF_INET6
		             ? memcmp(&a.addr[i].in6.sin6_addr, &w.in6.sin6_addr, 16)
		             : memcmp(&a.addr[i].in.sin_addr, &w.in.sin_addr, 4)))
			fail_msg("position %u: expected %s", i, want[i]);
	}
	for (unsigned i = n; i < DNS_MAX_ADDRS; i++)
		if (memcmp(&a.addr[i], &filler.addr[i], sizeof(a.addr[i])) != 0)
			fail_msg("ordering %u address(es) wrote to slot %u", n, i);
}

static void
families_alternate_ipv6_first(void **state)
{
	static const char *const in[] = {"192.0.2.1", "192.0.2.2", "2001:db8::1", "192.0.2.3",
	                                 "2001:db8::2"};
	static const char *const want[] = {"2001:db8::1", "192.0.2.1", "2001:db8::2", "192.0.2.2",
	                                   "192.0.2.3"};

	(void)state;
	order_is(in, want, 5);
}

static void
one_family_keeps_the_resolver_order(void **state)
{
	static const char *const v4[] = {"192.0.2.9", "192.0.2.1", "192.0.2.5"};
	static const char *const v6[] = {"2001:db8::9", "2001:db8::1"};

	(void)state;
	order_is(v4, v4, 3);
	order_is(v6, v6, 2);
}

/* Nothing to order: no address stays none, and one stays itself, of either family. */
static void
empty_and_single_lists_stay_as_they_are(void **state)
{
	static const char *const v4[] = {"192.0.2.7"};
	static const char *const v6[] = {"2001:db8::7"};

	(void)state;
	order_is(NULL, NULL, 0);
	order_is(v4, v4, 1);
	order_is(v6, v6, 1);
}

static void
more_ipv6_than_ipv4(void **state)
{
	static const char *const in[] = {"2001:db8::1", "2001:db8::2", "2001:db8::3", "192.0.2.1"};
	static const char *const want[] = {"2001:db8::1", "192.0.2.1", "2001:db8::2",
	                                   "2001:db8::3"};

	(void)state;
	order_is(in, want, 4);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(add_find_remove_across_growth),
		cmocka_unit_test(families_alternate_ipv6_first),
		cmocka_unit_test(one_family_keeps_the_resolver_order),
		cmocka_unit_test(empty_and_single_lists_stay_as_they_are),
		cmocka_unit_test(more_ipv6_than_ipv4),
	};

	return cmocka_run_group_tests_name("table", tests, NULL, NULL);
}
