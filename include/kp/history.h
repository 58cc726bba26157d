/*
 * The last minutes of the counters the dashboard charts, kept in the
 * daemon so that a page opened late still draws them: a sample every
 * --stats-interval seconds (10) in a fixed ring of HISTORY_SAMPLES, taken
 * by one timer, with no allocation. Each sample holds the cumulative
 * counters; the page turns the differences between neighbours into rates.
 * 91 samples are 90 intervals, 15 minutes at 10 s, in 91 x 56 = 5,096
 * bytes (5,216 with the timer). Only a stats listener reads it, so only
 * one starts it.
 */
#ifndef KP_HISTORY_H
#define KP_HISTORY_H

#include <stdint.h>

#include <ev.h>

#include "kp/clock.h"
#include "kp/stats.h"

#define HISTORY_SAMPLES 91

/* The counters at one moment: requests by how they were served, bytes, time saved. */
struct history_sample {
	uint64_t pooled;     /* requests on an idle pooled connection (requests_on_reused) */
	uint64_t freed;      /* ... on one that freed up while they waited (requests_on_freed) */
	uint64_t fresh;      /* ... on a connection that had just connected (requests_on_new) */
	uint64_t readahead;  /* ... from memory fetched ahead (readahead_hits + readahead_joins) */
	uint64_t local;      /* ... answered by the proxy itself (responses_local) */
	uint64_t bytes;      /* bytes sent to clients (bytes_to_clients) */
	double saved;        /* estimated seconds saved (saved_seconds) */
};

struct history {
	struct clock_timer timer;       /* the next sample; not armed: stopped */
	double interval;                /* seconds between samples */
	ev_tstamp taken_at;             /* when the newest sample was taken */
	uint64_t taken;                 /* samples taken since the start; the newest is taken - 1 */
	unsigned next;                  /* the slot the next sample goes into */
	struct history_sample ring[HISTORY_SAMPLES];   /* slot next - 1 the newest, wrapping */
};

/* Takes the first sample now, then one every interval seconds on clock's time. */
void history_start(struct history *h, struct clock *clock, double interval);
void history_stop(struct history *h);

/* The counters of kp_stats now, as a sample. */
void history_sample_now(struct history_sample *s);
/* Adds s as the newest sample, taken at now; the oldest goes when the ring is full. */
void history_add(struct history *h, const struct history_sample *s, ev_tstamp now);

/* Samples held (at most HISTORY_SAMPLES), and the i-th of them, oldest first. */
unsigned history_count(const struct history *h);
const struct history_sample *history_at(const struct history *h, unsigned i);

/*
 * The samples as one JSON object: "interval", "taken", "age" (seconds since
 * the newest at now), and one array per counter, oldest first.
 */
void history_json(const struct history *h, struct stats_text *t, ev_tstamp now);

#endif
