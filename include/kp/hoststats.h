/*
 * Counters per origin (per dispatch key: scheme, host:port, LAN or not),
 * for the stats page: what each host's clients asked, how much of it a
 * warm connection or read-ahead served, and the time that saved.
 *
 * Bounded: a fixed table of HOSTSTATS_SLOTS hosts, allocated once, with
 * the key kept in the slot, so counting never allocates. A host not in the
 * table takes the slot of the one counted least recently, whose counters
 * are forgotten (and counted as such). Counting is a hash of the key and a
 * scan of the slots' hashes: no more than the lookup dispatch makes of
 * the same key for every request. 32 slots of 344 bytes: 11,032 bytes in
 * all (x86-64), allocated only with --stats-listen.
 */
#ifndef KP_HOSTSTATS_H
#define KP_HOSTSTATS_H

#include <stddef.h>
#include <stdint.h>

#include "kp/http.h"
#include "kp/stats.h"

#define HOSTSTATS_SLOTS 32
/* The longest dispatch key with its NUL (struct exchange's key_buf, checked there). */
#define HOSTSTATS_KEY HTTP_CONN_KEY_MAX

/* What one host's clients were served; responses count once they are complete. */
struct host_counts {
	uint64_t requests;          /* responses sent whole, over a connection or from memory */
	uint64_t reused;            /* ... over a connection used before (pooled or freed up) */
	uint64_t readahead;         /* ... from memory fetched ahead (read-ahead hits and joins) */
	uint64_t readahead_bytes;   /* body bytes of those */
	double saved_seconds;       /* estimated, as saved_seconds_total (stats_reuse_saving) */
};

struct hoststats_slot {
	struct host_counts counts;  /* since the host took the slot */
	uint64_t used;              /* the table's tick when last counted: the least is evicted */
	uint32_t hash;              /* table_hash(key), compared before the key */
	char key[HOSTSTATS_KEY];    /* "": free */
};

struct hoststats {
	unsigned used;              /* slots holding a host, the first ones */
	uint64_t tick;              /* counts so far, the clock of least recent use */
	uint64_t forgotten;         /* hosts evicted to make room for another */
	struct hoststats_slot slot[HOSTSTATS_SLOTS];
};

/* Adds what one response brought to key's counters; a key too long is not counted. */
void hoststats_count(struct hoststats *hs, const char *key, const struct host_counts *add);
/* key's counters, or NULL when the table holds none. */
const struct host_counts *hoststats_find(const struct hoststats *hs, const char *key);

/*
 * One host as the next member of a JSON object: its key, idle connections
 * to it, and its counters (NULL: none kept).
 */
void hoststats_json(struct stats_text *t, const char *key, size_t idle,
                    const struct host_counts *c);

#endif
