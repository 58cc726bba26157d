#include "delayline_link.h"

#include <stdlib.h>
#include <string.h>

#define BITS_NS_PER_BYTE (8ull * DL_NS_PER_SEC)

void
dl_link_init(struct dl_link *l, uint64_t rate_bps, uint64_t delay_ns, uint64_t queue_bytes)
{
	memset(l, 0, sizeof(*l));
	l->rate_bps = rate_bps;
	l->delay_ns = delay_ns;
	l->queue_bytes = queue_bytes;
}

void
dl_link_set_loss(struct dl_link *l, double probability, uint64_t seed)
{
	/* 2^64 is exact as a double; a product that rounds up to it is clamped. */
	double threshold = probability * 18446744073709551616.0;

	l->prng = seed;
	if (!(probability > 0))
		l->loss_threshold = 0;
	else if (threshold >= 18446744073709551615.0)
		l->loss_threshold = UINT64_MAX;
	else
		l->loss_threshold = (uint64_t)threshold;
}

bool
dl_loss_draw(uint64_t *state, uint64_t threshold)
{
	/* splitmix64 (Steele, Lea, Flood 2014): one add and a mix per draw. */
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return z < threshold;
}

uint64_t
dl_link_backlog(const struct dl_link *l, uint64_t now)
{
	unsigned __int128 bit_ns;

	if (!l->rate_bps || l->busy_until <= now)
		return 0;
	/* 128 bits: a queue of seconds at tens of Gbit/s must not wrap. */
	bit_ns = (unsigned __int128)(l->busy_until - now) * l->rate_bps;
	return (uint64_t)((bit_ns + BITS_NS_PER_BYTE - 1) / BITS_NS_PER_BYTE);
}

bool
dl_link_offer(struct dl_link *l, uint64_t now, uint32_t len, uint64_t *deliver_at)
{
	uint64_t backlog;

	/*
	 * Loss on the path, before the bottleneck: a lost packet takes no room
	 * in the queue and no time on the link. No draw without loss, so a
	 * lossless link behaves exactly as before.
	 */
	if (l->loss_threshold && dl_loss_draw(&l->prng, l->loss_threshold)) {
		l->stats.lost++;
		l->stats.lost_bytes += len;
		return false;
	}
	backlog = dl_link_backlog(l, now);
	if (backlog + len > l->queue_bytes) {
		l->stats.drops++;
		l->stats.drop_bytes += len;
		return false;
	}
	if (l->busy_until <= now) {
		/* An idle bottleneck starts the new packet now, owing nothing. */
		l->busy_until = now;
		l->carry = 0;
	}
	if (l->rate_bps) {
		uint64_t bit_ns = (uint64_t)len * BITS_NS_PER_BYTE + l->carry;

		l->busy_until += bit_ns / l->rate_bps;
		l->carry = bit_ns % l->rate_bps;
	}
	*deliver_at = l->busy_until + l->delay_ns;
	l->stats.packets++;
	l->stats.bytes += len;
	backlog = dl_link_backlog(l, now);
	if (backlog > l->stats.max_backlog)
		l->stats.max_backlog = backlog;
	return true;
}

uint64_t
dl_default_queue(uint64_t rate_bps, uint64_t rtt_ns)
{
	unsigned __int128 bdp = (unsigned __int128)rate_bps * rtt_ns / BITS_NS_PER_BYTE;

	if (bdp < DL_MIN_DEFAULT_QUEUE)
		return DL_MIN_DEFAULT_QUEUE;
	return bdp > UINT64_MAX ? UINT64_MAX : (uint64_t)bdp;
}

static size_t
rec_size(size_t len)
{
	return (sizeof(struct dl_rec) + len + 7) & ~(size_t)7;
}

int
dl_ring_init(struct dl_ring *r, size_t size)
{
	memset(r, 0, sizeof(*r));
	r->size = size & ~(size_t)7;
	r->buf = malloc(r->size ? r->size : 8);
	return r->buf ? 0 : -1;
}

void
dl_ring_free(struct dl_ring *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

unsigned char *
dl_ring_reserve(struct dl_ring *r, size_t max_len)
{
	size_t need = rec_size(max_len);

	if (!r->count) {
		/* Empty: start over at 0, where the most room is contiguous. */
		r->head = r->tail = r->end = 0;
	}
	if (r->end) {
		/* Wrapped: free room lies between the lower part and head. */
		if (r->head - r->tail < need)
			return NULL;
	} else if (r->size - r->tail < need) {
		/*
		 * The upper part is too short; wrap if the room below head is
		 * enough. Recording the wrap now is harmless when nothing gets
		 * committed: the lower part is simply empty.
		 */
		if (r->head < need)
			return NULL;
		r->end = r->tail;
		r->tail = 0;
	}
	return ((struct dl_rec *)(r->buf + r->tail))->data;
}

void
dl_ring_commit(struct dl_ring *r, uint32_t len, uint64_t deliver_at)
{
	struct dl_rec *rec = (struct dl_rec *)(r->buf + r->tail);

	rec->deliver_at = deliver_at;
	rec->len = len;
	rec->reserved = 0;
	r->tail += rec_size(len);
	r->count++;
	r->bytes += len;
}

const struct dl_rec *
dl_ring_peek(struct dl_ring *r)
{
	if (!r->count)
		return NULL;
	if (r->end && r->head == r->end) {
		/* A wrap whose upper part was empty: the oldest record is at 0. */
		r->head = 0;
		r->end = 0;
	}
	return (const struct dl_rec *)(r->buf + r->head);
}

void
dl_ring_pop(struct dl_ring *r)
{
	const struct dl_rec *rec = dl_ring_peek(r);

	r->head += rec_size(rec->len);
	r->count--;
	r->bytes -= rec->len;
	if (!r->count) {
		r->head = r->tail = r->end = 0;
	} else if (r->end && r->head == r->end) {
		r->head = 0;
		r->end = 0;
	}
}
