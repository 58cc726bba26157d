#include "kp/table.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a: short keys, no adversary worth SipHash. */
uint32_t
table_hash_more(uint32_t h, const void *p, size_t len)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 16777619u;
	return h;
}

uint32_t
table_hash(const char *key)
{
	return table_hash_more(TABLE_HASH_START, key, strlen(key));
}

int
table_init(struct table *t)
{
	t->nbuckets = 64;
	t->count = 0;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	return t->buckets ? 0 : -1;
}

void
table_free(struct table *t)
{
	free(t->buckets);
	t->buckets = NULL;
	t->nbuckets = t->count = 0;
}

static struct table_node **
find_slot(const struct table *t, const char *key, uint32_t hash)
{
	struct table_node **slot = &t->buckets[hash & (t->nbuckets - 1)];

	while (*slot && ((*slot)->hash != hash || !(*slot)->key || strcmp((*slot)->key, key) != 0))
		slot = &(*slot)->chain;
	return slot;
}

struct table_node *
table_find(const struct table *t, const char *key)
{
	return *find_slot(t, key, table_hash(key));
}

static void
grow(struct table *t)
{
	size_t n = t->nbuckets * 2;
	struct table_node **b = calloc(n, sizeof(*b));

	if (!b)
		return;   /* longer chains, still correct */
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct table_node *node = t->buckets[i], *next;

		for (; node; node = next) {
			next = node->chain;
			node->chain = b[node->hash & (n - 1)];
			b[node->hash & (n - 1)] = node;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = n;
}

struct table_node *
table_find_value(const struct table *t, uint32_t hash,
                 bool (*is)(const struct table_node *n, const void *value), const void *value)
{
	struct table_node *n = t->buckets[hash & (t->nbuckets - 1)];

	while (n && (n->hash != hash || n->key || !is(n, value)))
		n = n->chain;
	return n;
}

void
table_add_value(struct table *t, struct table_node *n, uint32_t hash)
{
	struct table_node **bucket;

	n->hash = hash;
	n->key = NULL;
	bucket = &t->buckets[hash & (t->nbuckets - 1)];
	n->chain = *bucket;
	*bucket = n;
	if (++t->count > t->nbuckets)
		grow(t);
}

void
table_add(struct table *t, struct table_node *n)
{
	struct table_node **bucket;

	n->hash = table_hash(n->key);
	bucket = &t->buckets[n->hash & (t->nbuckets - 1)];
	n->chain = *bucket;
	*bucket = n;
	if (++t->count > t->nbuckets)
		grow(t);
}

void *
table_get(struct table *t, const char *key, size_t size, size_t node_offset)
{
	struct table_node *n = table_find(t, key);
	size_t len;
	char *record;

	if (n)
		return (char *)n - node_offset;
	len = strlen(key);
	record = calloc(1, size + len + 1);
	if (!record)
		return NULL;
	memcpy(record + size, key, len + 1);
	n = (struct table_node *)(record + node_offset);
	n->key = record + size;
	table_add(t, n);
	return record;
}

void
table_remove(struct table *t, struct table_node *n)
{
	struct table_node **slot = &t->buckets[n->hash & (t->nbuckets - 1)];

	while (*slot && *slot != n)
		slot = &(*slot)->chain;
	if (*slot) {
		*slot = n->chain;
		t->count--;
	}
}

void
table_each(struct table *t, void (*fn)(struct table_node *n, void *arg), void *arg)
{
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct table_node *node = t->buckets[i], *next;

		for (; node; node = next) {
			next = node->chain;
			fn(node, arg);
		}
	}
}
