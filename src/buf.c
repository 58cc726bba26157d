#include "kp/buf.h"

#include <stdlib.h>
#include <string.h>

/*
 * Enough spare buffers to absorb a burst without going back to malloc, few
 * enough that a spike of traffic does not pin its memory forever.
 */
#define BUF_FREE_LIST_MAX 256

static size_t capacity = 16384;
static struct buf *free_list;
static unsigned free_count;
static unsigned free_low;     /* fewest spares since the last buf_trim() */

void
buf_init(size_t cap)
{
	buf_drain_free_list();
	capacity = cap;
}

size_t
buf_capacity(void)
{
	return capacity;
}

struct buf *
buf_get(void)
{
	struct buf *b = free_list;

	if (b) {
		free_list = b->next;
		if (--free_count < free_low)
			free_low = free_count;
	} else {
		b = malloc(sizeof(*b) + capacity);
		if (!b)
			return NULL;
	}
	b->start = b->end = 0;
	b->next = NULL;
	return b;
}

void
buf_put(struct buf *b)
{
	if (!b)
		return;
	if (free_count >= BUF_FREE_LIST_MAX) {
		free(b);
		return;
	}
	b->next = free_list;
	free_list = b;
	free_count++;
}

void
buf_drain_free_list(void)
{
	while (free_list) {
		struct buf *b = free_list;

		free_list = b->next;
		free(b);
	}
	free_count = 0;
	free_low = 0;
}

unsigned
buf_trim(void)
{
	unsigned idle = free_low < free_count ? free_low : free_count, freed = 0;

	for (; freed < idle; freed++) {
		struct buf *b = free_list;

		free_list = b->next;
		free(b);
	}
	free_count -= freed;
	free_low = free_count;
	return freed;
}

unsigned
buf_spares(void)
{
	return free_count;
}

void
buf_compact(struct buf *b)
{
	size_t n = buf_len(b);

	if (b->start == 0)
		return;
	memmove(b->data, b->data + b->start, n);
	b->start = 0;
	b->end = n;
}
