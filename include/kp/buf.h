/*
 * Fixed-size byte buffers recycled through a free list, so that the request
 * path allocates nothing in the steady state and an idle connection holds no
 * buffer at all (it takes one when bytes arrive and gives it back when empty).
 */
#ifndef KP_BUF_H
#define KP_BUF_H

#include <stddef.h>

struct buf {
	size_t start;      /* first unconsumed byte */
	size_t end;        /* one past the last byte held */
	struct buf *next;  /* free-list link; meaningless while in use */
	char data[];       /* buf_capacity() bytes */
};

/* Sets the size of every buffer; call once before the first buf_get(). */
void buf_init(size_t capacity);
size_t buf_capacity(void);

/* An empty buffer, or NULL when memory is exhausted. */
struct buf *buf_get(void);
/* Returns b to the free list (b may be NULL). */
void buf_put(struct buf *b);
/* Frees the free list; for a clean exit under leak checkers. */
void buf_drain_free_list(void);

/*
 * Frees the spare buffers nobody took since the previous call (the free
 * list's low-water mark), so memory a burst needed goes back while a
 * steady load keeps its working set. Call every few seconds. Returns how
 * many were freed.
 */
unsigned buf_trim(void);
/* Spare buffers on the free list now. */
unsigned buf_spares(void);

static inline size_t
buf_len(const struct buf *b)
{
	return b->end - b->start;
}

static inline char *
buf_head(struct buf *b)
{
	return b->data + b->start;
}

static inline char *
buf_tail(struct buf *b)
{
	return b->data + b->end;
}

static inline size_t
buf_room(const struct buf *b)
{
	return buf_capacity() - b->end;
}

static inline void
buf_consume(struct buf *b, size_t n)
{
	b->start += n;
	if (b->start == b->end)
		b->start = b->end = 0;
}

/* Moves the held bytes to the front so that buf_room() is as large as it can be. */
void buf_compact(struct buf *b);

#endif
