/*
 * The list: an empty head, links zeroed or unlinked recognised as on no
 * list, insertion at either end and beside a link, unlinking without the
 * head (and twice), first and last, the walks (one of them removing as it
 * goes), an object on two lists at once, and a static head.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kp/list.h"

struct item {
	int id;
	struct kp_list by_age;     /* the first list */
	struct kp_list by_size;    /* the second, in another order */
};

/* The ids on the list at head through by_age, first to last, as "1 2 3". */
static const char *
ids(const struct kp_list *head)
{
	static char out[4][128];
	static unsigned turn;
	char *s = out[turn++ % 4];
	size_t n = 0;

	s[0] = '\0';
	KP_LIST_EACH(it, head, const struct item, by_age)
		n += (size_t)snprintf(s + n, sizeof(out[0]) - n, "%s%d", n ? " " : "", it->id);
	return s;
}

/* Every link's neighbours point back at it, both ways round, and count links. */
static size_t
check_links(const struct kp_list *head)
{
	size_t n = 0;

	for (const struct kp_list *l = head->next; l != head; l = l->next, n++)
		assert_ptr_equal(l->next->prev, l);
	assert_ptr_equal(head->next->prev, head);
	assert_ptr_equal(head->prev->next, head);
	return n;
}

static void
empty_head(void **state)
{
	struct kp_list head;

	(void)state;
	kp_list_init(&head);
	assert_true(kp_list_empty(&head));
	assert_null(kp_list_first(&head));
	assert_null(kp_list_last(&head));
	assert_null(KP_LIST_FIRST(&head, struct item, by_age));
	assert_null(KP_LIST_LAST(&head, struct item, by_age));
	assert_string_equal(ids(&head), "");
	KP_LIST_EACH_SAFE(it, next, &head, struct item, by_age)
		fail_msg("item %d on an empty list", it->id);
	assert_int_equal(check_links(&head), 0);
}

/* Zeroed memory is a link on no list; unlinking it, or unlinking twice, changes nothing. */
static void
linked_is_one_test(void **state)
{
	struct kp_list head;
	struct item a, b;

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(&b, 0xa5, sizeof(b));
	kp_list_init_link(&b.by_age);
	kp_list_init(&head);
	assert_false(kp_list_linked(&a.by_age));
	assert_false(kp_list_linked(&b.by_age));
	kp_list_unlink(&a.by_age);
	assert_false(kp_list_linked(&a.by_age));

	kp_list_insert_tail(&head, &a.by_age);
	kp_list_insert_tail(&head, &b.by_age);
	assert_true(kp_list_linked(&a.by_age));
	kp_list_unlink(&a.by_age);
	assert_false(kp_list_linked(&a.by_age));
	assert_null(a.by_age.prev);
	assert_null(a.by_age.next);
	kp_list_unlink(&a.by_age);
	assert_int_equal(check_links(&head), 1);
	assert_ptr_equal(KP_LIST_FIRST(&head, struct item, by_age), &b);

	kp_list_unlink(&b.by_age);
	assert_true(kp_list_empty(&head));
	/* Back on a list after leaving it. */
	kp_list_insert_head(&head, &a.by_age);
	assert_string_equal(ids(&head), "0");
}

/* Oldest first takes new ones at the tail; newest first at the head. */
static void
insertion_order(void **state)
{
	struct kp_list oldest_first, newest_first;
	struct item it[5];

	(void)state;
	memset(it, 0, sizeof(it));
	kp_list_init(&oldest_first);
	kp_list_init(&newest_first);
	for (int i = 0; i < 5; i++) {
		it[i].id = i + 1;
		kp_list_insert_tail(&oldest_first, &it[i].by_age);
		kp_list_insert_head(&newest_first, &it[i].by_size);
	}
	assert_string_equal(ids(&oldest_first), "1 2 3 4 5");
	assert_int_equal(check_links(&oldest_first), 5);
	assert_int_equal(check_links(&newest_first), 5);
	assert_ptr_equal(KP_LIST_FIRST(&oldest_first, struct item, by_age), &it[0]);
	assert_ptr_equal(KP_LIST_LAST(&oldest_first, struct item, by_age), &it[4]);
	assert_ptr_equal(KP_LIST_FIRST(&newest_first, struct item, by_size), &it[4]);
	assert_ptr_equal(KP_LIST_LAST(&newest_first, struct item, by_size), &it[0]);
	assert_ptr_equal(kp_list_first(&oldest_first), &it[0].by_age);
	assert_ptr_equal(kp_list_last(&oldest_first), &it[4].by_age);
	assert_ptr_equal(KP_LIST_ENTRY(kp_list_first(&newest_first), struct item, by_size), &it[4]);
	{
		int want = 5;

		KP_LIST_EACH(x, &newest_first, struct item, by_size)
			assert_int_equal(x->id, want--);
		assert_int_equal(want, 0);
	}
}

/* Beside a link, and beside the head (which is either end). */
static void
insert_beside(void **state)
{
	struct kp_list head;
	struct item it[6];

	(void)state;
	memset(it, 0, sizeof(it));
	for (int i = 0; i < 6; i++)
		it[i].id = i + 1;
	kp_list_init(&head);
	kp_list_insert_after(&head, &it[2].by_age);            /* 3 */
	kp_list_insert_before(&it[2].by_age, &it[0].by_age);   /* 1 3 */
	kp_list_insert_after(&it[0].by_age, &it[1].by_age);    /* 1 2 3 */
	kp_list_insert_before(&head, &it[4].by_age);           /* 1 2 3 5 */
	kp_list_insert_after(&it[2].by_age, &it[3].by_age);    /* 1 2 3 4 5 */
	kp_list_insert_after(&it[4].by_age, &it[5].by_age);    /* 1 2 3 4 5 6 */
	assert_string_equal(ids(&head), "1 2 3 4 5 6");
	assert_int_equal(check_links(&head), 6);
}

/* Unlinking takes the link alone: first, last and middle, the neighbours closing up. */
static void
unlink_without_head(void **state)
{
	struct kp_list head;
	struct item it[5];

	(void)state;
	memset(it, 0, sizeof(it));
	kp_list_init(&head);
	for (int i = 0; i < 5; i++) {
		it[i].id = i + 1;
		kp_list_insert_tail(&head, &it[i].by_age);
	}
	kp_list_unlink(&it[2].by_age);
	assert_string_equal(ids(&head), "1 2 4 5");
	kp_list_unlink(&it[0].by_age);
	assert_string_equal(ids(&head), "2 4 5");
	kp_list_unlink(&it[4].by_age);
	assert_string_equal(ids(&head), "2 4");
	assert_int_equal(check_links(&head), 2);
	assert_ptr_equal(KP_LIST_FIRST(&head, struct item, by_age), &it[1]);
	assert_ptr_equal(KP_LIST_LAST(&head, struct item, by_age), &it[3]);
	/* The neighbour of an end is the head: NULL as an entry. */
	assert_null(KP_LIST_ENTRY_OR_NULL(it[3].by_age.next, &head, struct item, by_age));
	assert_null(KP_LIST_ENTRY_OR_NULL(it[1].by_age.prev, &head, struct item, by_age));
	assert_ptr_equal(KP_LIST_ENTRY_OR_NULL(it[1].by_age.next, &head, struct item, by_age),
	                 &it[3]);
	kp_list_unlink(&it[1].by_age);
	kp_list_unlink(&it[3].by_age);
	assert_true(kp_list_empty(&head));
	assert_int_equal(check_links(&head), 0);
}

/* The removal-safe walk: the body may unlink what it is given, even every one. */
static void
walk_that_unlinks(void **state)
{
	struct kp_list head;
	struct item it[7];
	int seen = 0;

	(void)state;
	memset(it, 0, sizeof(it));
	kp_list_init(&head);
	for (int i = 0; i < 7; i++) {
		it[i].id = i + 1;
		kp_list_insert_tail(&head, &it[i].by_age);
	}
	KP_LIST_EACH_SAFE(x, next, &head, struct item, by_age) {
		seen++;
		if (x->id % 2 == 0) {
			kp_list_unlink(&x->by_age);
			memset(x, 0xa5, sizeof(*x));   /* as if freed */
		}
	}
	assert_int_equal(seen, 7);
	assert_string_equal(ids(&head), "1 3 5 7");
	KP_LIST_EACH_SAFE(x, next, &head, struct item, by_age)
		kp_list_unlink(&x->by_age);
	assert_true(kp_list_empty(&head));
	for (int i = 0; i < 7; i += 2)
		assert_false(kp_list_linked(&it[i].by_age));
}

/* Two links, two lists, two orders; leaving one leaves the other as it was. */
static void
one_object_two_lists(void **state)
{
	struct kp_list age, size;
	struct item it[4];

	(void)state;
	memset(it, 0, sizeof(it));
	kp_list_init(&age);
	kp_list_init(&size);
	for (int i = 0; i < 4; i++) {
		it[i].id = i + 1;
		kp_list_insert_tail(&age, &it[i].by_age);
		kp_list_insert_head(&size, &it[i].by_size);
	}
	kp_list_unlink(&it[1].by_size);
	assert_string_equal(ids(&age), "1 2 3 4");
	assert_true(kp_list_linked(&it[1].by_age));
	assert_int_equal(check_links(&size), 3);
	assert_ptr_equal(KP_LIST_FIRST(&size, struct item, by_size), &it[3]);
	kp_list_unlink(&it[3].by_age);
	assert_ptr_equal(KP_LIST_FIRST(&size, struct item, by_size), &it[3]);
	assert_string_equal(ids(&age), "1 2 3");
}

/* A static head starts empty, with no call. */
static struct kp_list everyone = KP_LIST_INIT(everyone);

static void
static_head(void **state)
{
	struct item a = {.id = 9};

	(void)state;
	assert_true(kp_list_empty(&everyone));
	assert_null(KP_LIST_FIRST(&everyone, struct item, by_age));
	kp_list_insert_tail(&everyone, &a.by_age);
	assert_string_equal(ids(&everyone), "9");
	kp_list_unlink(&a.by_age);
	assert_true(kp_list_empty(&everyone));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(empty_head),
		cmocka_unit_test(linked_is_one_test),
		cmocka_unit_test(insertion_order),
		cmocka_unit_test(insert_beside),
		cmocka_unit_test(unlink_without_head),
		cmocka_unit_test(walk_that_unlinks),
		cmocka_unit_test(one_object_two_lists),
		cmocka_unit_test(static_head),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
