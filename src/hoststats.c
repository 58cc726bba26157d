#include "kp/hoststats.h"

#include <inttypes.h>
#include <string.h>

#include "kp/table.h"

/* The slot holding key, or -1. */
static int
slot_of(const struct hoststats *hs, const char *key, uint32_t hash)
{
	for (unsigned i = 0; i < hs->used; i++)
		if (hs->slot[i].hash == hash && strcmp(hs->slot[i].key, key) == 0)
			return (int)i;
	return -1;
}

/* A slot for a host not in the table: a free one, or the least recently counted. */
static struct hoststats_slot *
slot_for(struct hoststats *hs)
{
	struct hoststats_slot *oldest;

	if (hs->used < HOSTSTATS_SLOTS)
		return &hs->slot[hs->used++];
	oldest = &hs->slot[0];
	for (unsigned i = 1; i < HOSTSTATS_SLOTS; i++)
		if (hs->slot[i].used < oldest->used)
			oldest = &hs->slot[i];
	hs->forgotten++;
	return oldest;
}

void
hoststats_count(struct hoststats *hs, const char *key, const struct host_counts *add)
{
	size_t len = strlen(key);
	uint32_t hash;
	struct hoststats_slot *s;
	int i;

	if (len >= HOSTSTATS_KEY)
		return;
	hash = table_hash(key);
	if ((i = slot_of(hs, key, hash)) >= 0) {
		s = &hs->slot[i];
	} else {
		s = slot_for(hs);
		memset(&s->counts, 0, sizeof(s->counts));
		s->hash = hash;
		memcpy(s->key, key, len + 1);
	}
	s->used = ++hs->tick;
	s->counts.requests += add->requests;
	s->counts.reused += add->reused;
	s->counts.readahead += add->readahead;
	s->counts.readahead_bytes += add->readahead_bytes;
	s->counts.saved_seconds += add->saved_seconds;
}

const struct host_counts *
hoststats_find(const struct hoststats *hs, const char *key)
{
	int i = slot_of(hs, key, table_hash(key));

	return i >= 0 ? &hs->slot[i].counts : NULL;
}

void
hoststats_json(struct stats_text *t, const char *key, size_t idle, const struct host_counts *c)
{
	static const struct host_counts none;

	if (!c)
		c = &none;
	stats_json_key(t, key);
	stats_printf(t,
	             "{\"idle\": %zu, \"requests\": %" PRIu64 ", \"reused\": %" PRIu64
	             ", \"readahead\": %" PRIu64 ", \"readahead_bytes\": %" PRIu64
	             ", \"saved_seconds\": %.6f}",
	             idle, c->requests, c->reused, c->readahead, c->readahead_bytes,
	             c->saved_seconds);
}
