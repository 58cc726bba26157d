/*
 * A hash table of records keyed by strings, intrusive: the record embeds a
 * table_node followed by nothing the table knows about, and the owner
 * recovers it with container_of. The idle pool and the dispatch queues each
 * keep one keyed by "host:port" and look a key up once per request; the leaf
 * certificate cache keeps one keyed by host name.
 */
#ifndef KP_TABLE_H
#define KP_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct table_node {
	struct table_node *chain;   /* next in the bucket */
	uint32_t hash;
	const char *key;            /* owned by the record, lives as long as it; NULL for a
	                             * record keyed by a value (table_add_value) */
};

struct table {
	struct table_node **buckets;
	size_t nbuckets;            /* a power of two */
	size_t count;
};

/*
 * The hash every lookup in the daemon uses (FNV-1a): of a string, and of
 * a key made of several parts, each fed in turn from TABLE_HASH_START.
 */
#define TABLE_HASH_START 2166136261u
uint32_t table_hash(const char *key);
uint32_t table_hash_more(uint32_t hash, const void *p, size_t len);

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

/*
 * Records keyed by a value rather than a string (read-ahead's keys: an
 * address, a dispatch key, a path): the caller hashes the value with
 * table_hash_more and says whether a node is the one.
 */
struct table_node *table_find_value(const struct table *t, uint32_t hash,
                                    bool (*is)(const struct table_node *n, const void *value),
                                    const void *value);
/* Adds n with that hash (its key stays NULL). Grows when it can; never fails. */
void table_add_value(struct table *t, struct table_node *n, uint32_t hash);

/* Calls fn on every node; fn may remove (and free) the node it is given. */
void table_each(struct table *t, void (*fn)(struct table_node *n, void *arg), void *arg);

#endif
