#include "kp/history.h"

#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include "kp/evglue.h"

/* The counters of a sample by name, as /stats names its arrays. */
static const struct {
	const char *name;
	size_t offset;
} counters[] = {
	{"pooled", offsetof(struct history_sample, pooled)},
	{"freed", offsetof(struct history_sample, freed)},
	{"new", offsetof(struct history_sample, fresh)},
	{"readahead", offsetof(struct history_sample, readahead)},
	{"local", offsetof(struct history_sample, local)},
	{"bytes", offsetof(struct history_sample, bytes)},
};

void
history_sample_now(struct history_sample *s)
{
	s->pooled = kp_stats.requests_on_reused;
	s->freed = kp_stats.requests_on_freed;
	s->fresh = kp_stats.requests_on_new;
	s->readahead = kp_stats.readahead_hits + kp_stats.readahead_joins;
	s->local = kp_stats.responses_local;
	s->bytes = kp_stats.bytes_to_clients;
	s->saved = kp_stats.saved_seconds;
}

void
history_add(struct history *h, const struct history_sample *s, ev_tstamp now)
{
	h->ring[h->next] = *s;
	h->next = (h->next + 1) % HISTORY_SAMPLES;
	h->taken++;
	h->taken_at = now;
}

unsigned
history_count(const struct history *h)
{
	return h->taken < HISTORY_SAMPLES ? (unsigned)h->taken : HISTORY_SAMPLES;
}

const struct history_sample *
history_at(const struct history *h, unsigned i)
{
	/* The oldest is where the next goes once the ring is full, slot 0 before. */
	unsigned oldest = h->taken < HISTORY_SAMPLES ? 0 : h->next;

	return &h->ring[(oldest + i) % HISTORY_SAMPLES];
}

static void
sample_due(struct clock_timer *t)
{
	struct history *h = container_of(t, struct history, timer);
	struct history_sample s;

	history_sample_now(&s);
	history_add(h, &s, clock_now(t->clock));
	/*
	 * From now, not from when it was due: a late loop stretches one
	 * interval by its lateness, which a chart of 90 cannot show.
	 */
	clock_timer_start(t, h->interval);
}

void
history_start(struct history *h, struct clock *clock, double interval)
{
	memset(h, 0, sizeof(*h));
	h->interval = interval;
	clock_timer_init(&h->timer, clock, sample_due);
	sample_due(&h->timer);
}

void
history_stop(struct history *h)
{
	if (h->timer.clock)
		clock_timer_stop(&h->timer);
}

void
history_json(const struct history *h, struct stats_text *t, ev_tstamp now)
{
	unsigned n = history_count(h);

	stats_printf(t, "{\"interval\": %g, \"taken\": %" PRIu64 ", \"age\": %.3f", h->interval,
	             h->taken, n ? now - h->taken_at : 0.0);
	for (size_t c = 0; c < sizeof(counters) / sizeof(counters[0]); c++) {
		stats_printf(t, ", \"%s\": [", counters[c].name);
		for (unsigned i = 0; i < n; i++) {
			const char *s = (const char *)history_at(h, i);
			uint64_t v;

			memcpy(&v, s + counters[c].offset, sizeof(v));
			stats_printf(t, "%s%" PRIu64, i ? ", " : "", v);
		}
		stats_printf(t, "]");
	}
	stats_printf(t, ", \"saved\": [");
	for (unsigned i = 0; i < n; i++)
		stats_printf(t, "%s%.6f", i ? ", " : "", history_at(h, i)->saved);
	stats_printf(t, "]}");
}
