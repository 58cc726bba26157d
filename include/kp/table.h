/*
 * A hash table of records keyed by strings, intrusive: the record embeds a
 * table_node followed by nothing the table knows about, and the owner
 * recovers it with container_of. The idle pool and the dispatch queues each
 * keep one keyed by "host:port" and look a key up once per request; the leaf
 * certificate cache keeps one keyed by host name.
 */
#ifndef KP_TABLE_H
#define KP_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct table_node {
	struct table_node *chain;   /* next in the bucket */
	uint32_t hash;
	const char *key;            /* owned by the record, lives as long as it */
};

struct table {
	struct table_node **buckets;
	size_t nbuckets;            /* a power of two */
	size_t count;
};

/*
 * The hash every string-keyed lookup in the daemon uses (FNV-1a), for
 * caches that keep their own slots rather than a table.
 */
uint32_t table_hash(const char *key);

/* 0, or -1 when memory is exhausted. */
int table_init(struct table *t);
/* Frees the buckets only: the records are the owner's. */
void table_free(struct table *t);

struct table_node *table_find(const struct table *t, const char *key);
/* Adds n (key already set, not present yet). Grows when it can; never fails. */
void table_add(struct table *t, struct table_node *n);
void table_remove(struct table *t, struct table_node *n);

/*
 * The record for key, or a new zeroed one of size bytes followed by a copy
 * of the key, which the record's node then points at; NULL when memory is
 * exhausted. node_offset: where the record embeds its table_node. Use
 * TABLE_GET, which works both out from the record's type.
 */
void *table_get(struct table *t, const char *key, size_t size, size_t node_offset);
#define TABLE_GET(t, key, type, member) \
	((type *)table_get((t), (key), sizeof(type), offsetof(type, member)))

/* Calls fn on every node; fn may remove (and free) the node it is given. */
void table_each(struct table *t, void (*fn)(struct table_node *n, void *arg), void *arg);

#endif
