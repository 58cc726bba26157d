/*
 * The arithmetic of kp-delayline, kept apart from the TUN plumbing so the
 * unit tests can drive it with made-up clocks.
 *
 * One direction of the emulated path is a drop-tail queue in front of a
 * bottleneck of fixed rate, followed by a fixed propagation delay. The whole
 * state of the queue and bottleneck is one number, busy_until: the moment the
 * bottleneck finishes serializing the last packet it accepted. Everything
 * else follows from it:
 *
 *   backlog at t     = (busy_until - t) * rate, in bytes not yet serialized
 *   lose a packet    at random, with the configured probability, before
 *                    it reaches the queue (it takes no room there)
 *   accept a packet  unless backlog + len > queue limit (then it is dropped)
 *   on accept        busy_until = max(busy_until, t) + len / rate
 *   deliver at       busy_until + delay
 *
 * deliver_at never decreases from one accepted packet to the next, so the
 * packets of one direction wait in plain arrival order: a FIFO of
 * variable-length records (struct dl_ring) is all the scheduling needed.
 *
 * Times are CLOCK_MONOTONIC nanoseconds, rates bits per second.
 *
 * Random loss comes from a seeded generator of the link's own (splitmix64),
 * so the same seed gives the same sequence of drop decisions: a lossy run
 * can be repeated decision for decision, though not packet for packet, since
 * which packet meets which decision depends on timing.
 */
#ifndef KP_DELAYLINE_LINK_H
#define KP_DELAYLINE_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DL_NS_PER_SEC 1000000000ull

/* The smallest default queue: below this a BDP-sized queue is mostly noise. */
#define DL_MIN_DEFAULT_QUEUE (64u * 1024u)

struct dl_link_stats {
	uint64_t packets; /* accepted */
	uint64_t bytes;   /* accepted */
	uint64_t drops;   /* refused by the queue limit */
	uint64_t drop_bytes;
	uint64_t lost; /* dropped at random (dl_link_set_loss), before the queue */
	uint64_t lost_bytes;
	uint64_t max_backlog; /* bytes queued right after an accept, at most */
};

struct dl_link {
	uint64_t rate_bps; /* 0: no bottleneck, only the delay */
	uint64_t delay_ns;
	uint64_t queue_bytes;
	uint64_t busy_until;
	/*
	 * What integer division left over from the serialization times of the
	 * current busy period, in bit-nanoseconds: carrying it keeps a long
	 * run at exactly the configured rate instead of drifting by up to a
	 * nanosecond per packet.
	 */
	uint64_t carry;
	/*
	 * Random loss: a packet is lost when the next number of the generator
	 * is below loss_threshold, i.e. with probability loss_threshold / 2^64
	 * (0: no loss; UINT64_MAX: as good as every packet).
	 */
	uint64_t loss_threshold;
	uint64_t prng; /* splitmix64 state */
	struct dl_link_stats stats;
};

void dl_link_init(struct dl_link *l, uint64_t rate_bps, uint64_t delay_ns, uint64_t queue_bytes);

/*
 * Loses each packet with the given probability (0 to 1; clamped), drawing
 * from a generator started at seed. Two links given the same seed make the
 * same decisions: give each direction a seed of its own.
 */
void dl_link_set_loss(struct dl_link *l, double probability, uint64_t seed);

/*
 * The random-loss decision alone: advances *state and says whether a packet
 * meeting this draw is lost at the given threshold (see loss_threshold).
 */
bool dl_loss_draw(uint64_t *state, uint64_t threshold);

/* Bytes accepted but not yet serialized at now, rounded up. */
uint64_t dl_link_backlog(const struct dl_link *l, uint64_t now);

/*
 * A packet of len bytes arrives at now (not before any earlier arrival).
 * Returns false when it is lost at random or the queue has no room for it;
 * otherwise true with the moment it leaves the far end in *deliver_at.
 */
bool dl_link_offer(struct dl_link *l, uint64_t now, uint32_t len, uint64_t *deliver_at);

/* One bandwidth-delay product in bytes, but never less than DL_MIN_DEFAULT_QUEUE. */
uint64_t dl_default_queue(uint64_t rate_bps, uint64_t rtt_ns);

/*
 * Packets waiting for their delivery time, oldest first, in one block of
 * memory: records of header and packet, each starting on an 8-byte boundary.
 * A writer reserves room for the largest packet it might read, reads straight
 * into it and commits only what it keeps, so a dropped packet costs no copy.
 * Records never straddle the end of the block: when the room at the end is
 * too small, writing continues at the start, and `end` remembers where the
 * records of the upper part stop.
 */
struct dl_rec {
	uint64_t deliver_at;
	uint32_t len;
	uint32_t reserved;
	unsigned char data[];
};

struct dl_ring {
	unsigned char *buf;
	size_t size;
	size_t head;  /* oldest record */
	size_t tail;  /* where the next record goes */
	size_t end;   /* 0, or where the upper part's records stop while wrapped */
	size_t count; /* records held */
	size_t bytes; /* packet bytes held, headers and padding not counted */
};

/* size is rounded down to a multiple of 8. Returns -1 when out of memory. */
int dl_ring_init(struct dl_ring *r, size_t size);
void dl_ring_free(struct dl_ring *r);

/* Room for a packet of up to max_len bytes, or NULL when the ring is too full. */
unsigned char *dl_ring_reserve(struct dl_ring *r, size_t max_len);

/* Keeps the len bytes written at the last reservation (len <= its max_len). */
void dl_ring_commit(struct dl_ring *r, uint32_t len, uint64_t deliver_at);

/* The oldest record, or NULL when empty. */
const struct dl_rec *dl_ring_peek(struct dl_ring *r);

/* Forgets the oldest record; the ring must not be empty. */
void dl_ring_pop(struct dl_ring *r);

#endif
