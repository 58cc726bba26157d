/*
 * table_hash: the one string hash behind the host tables, the DNS cache,
 * the leaf certificate cache and the upstream session slots.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kp/table.h"

/* The published FNV-1a (32-bit) values: a changed constant shows here, not as slow lookups. */
static void
it_is_fnv1a(void **state)
{
	(void)state;
	assert_int_equal(table_hash(""), 0x811c9dc5u);
	assert_int_equal(table_hash("a"), 0xe40c292cu);
	assert_int_equal(table_hash("foobar"), 0xbf9cf968u);
}

/* Bytes past 0x7f count as themselves, not sign-extended. */
static void
high_bytes_are_unsigned(void **state)
{
	(void)state;
	assert_int_equal(table_hash("\xff"), (0x811c9dc5u ^ 0xffu) * 16777619u);
}

/* A table files a node under the same hash a cache with its own slots computes. */
static void
the_table_uses_it(void **state)
{
	struct table t;
	struct table_node n = {.key = "example.com:443"};

	(void)state;
	assert_int_equal(table_init(&t), 0);
	table_add(&t, &n);
	assert_int_equal(n.hash, table_hash("example.com:443"));
	assert_ptr_equal(table_find(&t, "example.com:443"), &n);
	table_remove(&t, &n);
	table_free(&t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(it_is_fnv1a),
		cmocka_unit_test(high_bytes_are_unsigned),
		cmocka_unit_test(the_table_uses_it),
	};

	return cmocka_run_group_tests_name("hash", tests, NULL, NULL);
}
