/*
 * The slab: objects packed block by block, zeroed when taken, blocks given
 * back once empty (one kept against churn), and objects that outlive a
 * burst packed together rather than strewn among the ones that did not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kp/slab.h"

/* A pooled connection's size, give or take. */
struct obj {
	char bytes[544];
};

#define MANY 200

static void
objects_are_zeroed_aligned_and_distinct(void **state)
{
	struct slab s;
	struct obj *o[MANY];

	(void)state;
	slab_init(&s, sizeof(struct obj));
	assert_true(s.per_block > 1);
	for (int i = 0; i < MANY; i++) {
		assert_non_null(o[i] = slab_get(&s));
		assert_int_equal((uintptr_t)o[i] % 16, 0);
		for (size_t k = 0; k < sizeof(o[i]->bytes); k++)
			assert_int_equal(o[i]->bytes[k], 0);
		memset(o[i], 0xa5, sizeof(*o[i]));
	}
	/* No two overlap. */
	for (int i = 0; i < MANY; i++)
		for (int j = i + 1; j < MANY; j++)
			assert_true((char *)o[j] >= (char *)(o[i] + 1) ||
			            (char *)(o[j] + 1) <= (char *)o[i]);
	assert_int_equal(s.blocks, (MANY + s.per_block - 1) / s.per_block);
	for (int i = 0; i < MANY; i++)
		slab_put(&s, o[i]);
	/* Every block emptied: all gone but the spare. */
	assert_int_equal(s.blocks, 1);
	/* A slot given back is zeroed again when taken. */
	o[0] = slab_get(&s);
	assert_int_equal(o[0]->bytes[0], 0);
	assert_int_equal(o[0]->bytes[sizeof(o[0]->bytes) - 1], 0);
	slab_put(&s, o[0]);
	slab_put(&s, NULL);
	slab_drain(&s);
	assert_int_equal(s.blocks, 0);
}

/* One object coming and going at a block's edge does not map a block each time. */
static void
churn_at_an_edge_keeps_one_spare(void **state)
{
	struct slab s;
	struct obj *full[64], *o;
	unsigned n;

	(void)state;
	slab_init(&s, sizeof(struct obj));
	n = s.per_block;
	assert_true(n <= 64);
	for (unsigned i = 0; i < n; i++)
		full[i] = slab_get(&s);
	assert_int_equal(s.blocks, 1);
	for (int round = 0; round < 10; round++) {
		o = slab_get(&s);
		assert_int_equal(s.blocks, 2);
		slab_put(&s, o);
		assert_int_equal(s.blocks, 2);
	}
	for (unsigned i = 0; i < n; i++)
		slab_put(&s, full[i]);
	/* Both empty now: one is kept, the other unmapped. */
	assert_int_equal(s.blocks, 1);
	slab_drain(&s);
	assert_int_equal(s.blocks, 0);
}

/*
 * Objects taken one after another share blocks; after most are given back
 * the survivors fill a freed slot before a new block is mapped.
 */
static void
freed_slots_are_reused_before_new_blocks(void **state)
{
	struct slab s;
	struct obj *o[MANY];
	unsigned blocks;

	(void)state;
	slab_init(&s, sizeof(struct obj));
	for (int i = 0; i < MANY; i++)
		o[i] = slab_get(&s);
	blocks = s.blocks;
	/* Every other one goes: each block keeps about half. */
	for (int i = 0; i < MANY; i += 2) {
		slab_put(&s, o[i]);
		o[i] = NULL;
	}
	assert_int_equal(s.blocks, blocks);
	/* As many again fit in the holes: no block is added. */
	for (int i = 0; i < MANY; i += 2)
		o[i] = slab_get(&s);
	assert_int_equal(s.blocks, blocks);
	for (int i = 0; i < MANY; i++)
		slab_put(&s, o[i]);
	slab_drain(&s);
	assert_int_equal(s.blocks, 0);
}

/* Tiny objects still hold the free list's link. */
static void
tiny_objects_work(void **state)
{
	struct slab s;
	char *a, *b, *keep;

	(void)state;
	slab_init(&s, 1);
	keep = slab_get(&s);
	a = slab_get(&s);
	b = slab_get(&s);
	assert_true(b - a >= (ptrdiff_t)sizeof(void *) || a - b >= (ptrdiff_t)sizeof(void *));
	/* The last given back is the first taken again, the other one after it. */
	slab_put(&s, a);
	slab_put(&s, b);
	assert_ptr_equal(slab_get(&s), b);
	assert_ptr_equal(slab_get(&s), a);
	slab_put(&s, a);
	slab_put(&s, b);
	slab_put(&s, keep);
	slab_drain(&s);
	assert_int_equal(s.blocks, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(objects_are_zeroed_aligned_and_distinct),
		cmocka_unit_test(churn_at_an_edge_keeps_one_spare),
		cmocka_unit_test(freed_slots_are_reused_before_new_blocks),
		cmocka_unit_test(tiny_objects_work),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
