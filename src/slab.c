#include "kp/slab.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

/*
 * Under AddressSanitizer a slot given back is poisoned as freed memory
 * would be, so that a use after slab_put() is still caught, and blocks come
 * from the heap, where the leak checker sees them and the pointers in them.
 */
#if defined(__SANITIZE_ADDRESS__)
#define SLAB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLAB_ASAN 1
#endif
#endif
#ifdef SLAB_ASAN
#include <stdlib.h>

#include <sanitizer/asan_interface.h>
#define poison(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define poison(p, n) ((void)(p), (void)(n))
#define unpoison(p, n) ((void)(p), (void)(n))
#endif

/*
 * Mapped apart from the heap, where a block would sit among a burst's
 * short-lived allocations and keep the pages around it from going back,
 * and aligned to their size, so that an object finds its block by masking
 * its address. 16 KiB holds 30 pooled connections or 47 clients: big
 * enough that a block's own overhead does not count, small enough that a
 * block kept by one survivor costs little (only its touched pages count).
 */
#define SLAB_BLOCK 16384
#define SLAB_ALIGN 16

struct slab_block {
	struct kp_list partial;           /* on the slab's partial list: a slot is free */
	void *free;                       /* slots given back: each holds the next one's address */
	unsigned used;                    /* slots in use */
	unsigned fresh;                   /* slots handed out at least once since it was new */
};

#define SLAB_HEADER ((sizeof(struct slab_block) + SLAB_ALIGN - 1) & ~(size_t)(SLAB_ALIGN - 1))

static char *
slots(struct slab_block *b)
{
	return (char *)b + SLAB_HEADER;
}

static struct slab_block *
block_of(const void *p)
{
	return (struct slab_block *)((uintptr_t)p & ~(uintptr_t)(SLAB_BLOCK - 1));
}

void
slab_init(struct slab *s, size_t size)
{
	memset(s, 0, sizeof(*s));
	kp_list_init(&s->partial);
	if (size < sizeof(void *))
		size = sizeof(void *);
	s->size = (size + SLAB_ALIGN - 1) & ~(size_t)(SLAB_ALIGN - 1);
	s->per_block = (unsigned)((SLAB_BLOCK - SLAB_HEADER) / s->size);
}

#ifdef SLAB_ASAN
static void *
block_memory(void)
{
	void *p;

	return posix_memalign(&p, SLAB_BLOCK, SLAB_BLOCK) == 0 ? memset(p, 0, SLAB_BLOCK) : NULL;
}

static void
block_memory_free(void *p)
{
	free(p);
}
#else
/* Twice the size, so that an aligned block fits inside; the rest is given back at once. */
static void *
block_memory(void)
{
	size_t len = 2 * SLAB_BLOCK;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uintptr_t start = (uintptr_t)p, at;

	if (p == MAP_FAILED)
		return NULL;
	at = (start + SLAB_BLOCK - 1) & ~(uintptr_t)(SLAB_BLOCK - 1);
	if (at > start)
		munmap(p, at - start);
	if (at + SLAB_BLOCK < start + len)
		munmap((void *)(at + SLAB_BLOCK), start + len - (at + SLAB_BLOCK));
	return (void *)at;
}

static void
block_memory_free(void *p)
{
	munmap(p, SLAB_BLOCK);
}
#endif

static void
block_free(struct slab *s, struct slab_block *b)
{
	unpoison(slots(b), SLAB_BLOCK - SLAB_HEADER);
	block_memory_free(b);
	s->blocks--;
}

/* An empty block: its slots are handed out in order, so its pages are touched only as needed. */
static struct slab_block *
block_new(struct slab *s)
{
	struct slab_block *b = s->spare;

	if (b) {
		s->spare = NULL;
		return b;
	}
	if (!(b = block_memory()))
		return NULL;
	/* Fresh anonymous pages read as zeroes: the header starts empty. */
	poison(slots(b), SLAB_BLOCK - SLAB_HEADER);
	s->blocks++;
	return b;
}

void *
slab_get(struct slab *s)
{
	struct slab_block *b = KP_LIST_FIRST(&s->partial, struct slab_block, partial);
	char *p;

	if (!b) {
		if (!(b = block_new(s)))
			return NULL;
		kp_list_insert_head(&s->partial, &b->partial);
	}
	if (b->free) {
		p = b->free;
		unpoison(p, s->size);
		memcpy(&b->free, p, sizeof(b->free));
	} else {
		p = slots(b) + (size_t)b->fresh++ * s->size;
		unpoison(p, s->size);
	}
	if (++b->used == s->per_block)
		kp_list_unlink(&b->partial);
	memset(p, 0, s->size);
	return p;
}

void
slab_put(struct slab *s, void *p)
{
	struct slab_block *b;

	if (!p)
		return;
	b = block_of(p);
	/* It was full: it has a free slot again. */
	if (b->used == s->per_block)
		kp_list_insert_head(&s->partial, &b->partial);
	memcpy(p, &b->free, sizeof(b->free));
	b->free = p;
	poison(p, s->size);
	if (--b->used > 0)
		return;
	kp_list_unlink(&b->partial);
	if (!s->spare) {
		/* Reused from its first slot, as if new. */
		b->free = NULL;
		b->fresh = 0;
		s->spare = b;
		return;
	}
	block_free(s, b);
}

void
slab_drain(struct slab *s)
{
	if (!s->spare)
		return;
	block_free(s, s->spare);
	s->spare = NULL;
}
