/*
 * Objects of one size that may live long (idle clients, pooled upstream
 * connections), packed into blocks of their own, mapped apart from the
 * heap.
 *
 * From the C library's heap such an object is carved wherever there is
 * room, which during a burst is between the buffers and request states the
 * burst allocates and soon frees. A page still holding one small object
 * cannot be given back, so after the burst every few hundred bytes of
 * connection would pin a 4 KiB page. Here they share blocks with their own
 * kind only: what stays resident is about what they take.
 */
#ifndef KP_SLAB_H
#define KP_SLAB_H

#include <stddef.h>

#include "kp/list.h"

struct slab_block;

struct slab {
	size_t size;                 /* bytes per object, rounded up for alignment */
	unsigned per_block;          /* objects a block holds */
	struct kp_list partial;      /* blocks with a free slot, the last one freed into first */
	/*
	 * One empty block kept back, so that an object coming and going at a
	 * block's edge does not allocate and free a block each time.
	 */
	struct slab_block *spare;
	unsigned blocks;             /* blocks allocated, the spare included */
};

/* For objects of size bytes (at most a few KiB). */
void slab_init(struct slab *s, size_t size);
/* A zeroed object, or NULL when memory is exhausted. */
void *slab_get(struct slab *s);
/* Gives p (from slab_get() on s, or NULL) back; an emptied block is freed. */
void slab_put(struct slab *s, void *p);
/* Frees the spare block; for a clean exit, once every object is back. */
void slab_drain(struct slab *s);

#endif
