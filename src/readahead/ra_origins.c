#include "kp/ra_origins.h"

#include <stdio.h>
#include <string.h>

#include "kp/table.h"

void
ra_origins_init(struct ra_origins *o, struct clock *clock)
{
	memset(o, 0, sizeof(*o));
	o->clock = clock;
}

static struct host_memo *
memo_find(const struct ra_origins *o, const char *host, enum host_note note)
{
	ev_tstamp now = clock_now(o->clock);

	for (unsigned i = 0; i < HOSTS_REMEMBERED; i++) {
		const struct host_memo *h = &o->hosts[note][i];

		if (h->until > now && strcmp(h->host, host) == 0)
			return (struct host_memo *)h;
	}
	return NULL;
}

bool
ra_origins_noted(const struct ra_origins *o, const char *host, enum host_note note)
{
	return memo_find(o, host, note) != NULL;
}

bool
ra_origins_note(struct ra_origins *o, const char *host, enum host_note note, double seconds)
{
	struct host_memo *h = memo_find(o, host, note), *oldest = &o->hosts[note][0];
	bool fresh = h == NULL;

	if (!h) {
		for (unsigned i = 0; i < HOSTS_REMEMBERED; i++)
			if (o->hosts[note][i].until < oldest->until)
				oldest = &o->hosts[note][i];
		h = oldest;
		snprintf(h->host, sizeof(h->host), "%s", host);
	}
	h->until = clock_now(o->clock) + seconds;
	return fresh;
}

static uint32_t
path_hash(const char *path, size_t len)
{
	return table_hash_more(TABLE_HASH_START, path, len);
}

void
ra_origins_answered_whole(struct ra_origins *o, const char *host, const char *path, size_t len)
{
	ev_tstamp now = clock_now(o->clock);
	uint32_t hash = path_hash(path, len);
	struct url_memo *u = &o->urls[0];

	for (unsigned i = 0; i < URLS_REMEMBERED; i++) {
		struct url_memo *m = &o->urls[i];

		if (m->until > now && m->path_hash == hash && strcmp(m->host, host) == 0) {
			u = m;
			break;
		}
		if (m->until < u->until)
			u = m;
	}
	snprintf(u->host, sizeof(u->host), "%s", host);
	u->path_hash = hash;
	u->until = now + NO_RANGES_SECONDS;
}

bool
ra_origins_answers_whole(const struct ra_origins *o, const char *host, const char *path,
                         size_t len)
{
	ev_tstamp now = clock_now(o->clock);
	uint32_t hash = path_hash(path, len);
	unsigned urls = 0;

	for (unsigned i = 0; i < URLS_REMEMBERED; i++) {
		const struct url_memo *u = &o->urls[i];

		if (u->until <= now || strcmp(u->host, host) != 0)
			continue;
		if (u->path_hash == hash)
			return true;
		urls++;
	}
	return urls >= WHOLE_URLS_FOR_HOST && !memo_find(o, host, HOST_RANGED);
}
