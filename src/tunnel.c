#include "kp/tunnel.h"

#include <stdint.h>

/* Bytes one direction may read per call before yielding to other connections. */
#define TUNNEL_BUDGET (1u << 20)

void
tunnel_init(struct tunnel *t, bool copy)
{
	mover_init(&t->to_origin.mover, copy);
	mover_init(&t->to_client.mover, copy);
	t->to_origin.state = t->to_client.state = TUNNEL_FLOWING;
	t->to_origin.bytes = t->to_client.bytes = 0;
}

void
tunnel_release(struct tunnel *t)
{
	mover_release(&t->to_origin.mover);
	mover_release(&t->to_client.mover);
}

/*
 * A blocked destination does not stop the source being read while the mover
 * has room: what tunnel_wants() asks readiness for, this must act on, or a
 * readable socket would wake the loop over and over for nothing. The budget
 * only stops reading; delivering what is held and passing an EOF on always
 * happen, since nothing else would bring the loop back for them.
 */
static enum tunnel_status
pump_direction(struct tunnel_dir *d, struct conn *src, struct conn *dst, uint64_t *moved)
{
	uint64_t budget = TUNNEL_BUDGET;
	size_t n;

	for (;;) {
		bool progress = false;

		if (mover_held(&d->mover)) {
			switch (mover_push(&d->mover, dst, &n)) {
			case MOVE_OK:
				d->bytes += n;
				*moved += n;
				progress = true;
				break;
			case MOVE_AGAIN:
			case MOVE_FULL:
				break;
			case MOVE_EOF:
			case MOVE_ERROR:
				return TUNNEL_FAILED;
			}
		}
		if (d->state == TUNNEL_DRAINING && !mover_held(&d->mover)) {
			/* Everything before the EOF is delivered: pass the EOF on. */
			if (conn_shutdown_write(dst) < 0)
				return TUNNEL_FAILED;
			d->state = TUNNEL_SHUT;
		}
		if (budget > 0 && d->state == TUNNEL_FLOWING && mover_has_room(&d->mover)) {
			switch (mover_pull(&d->mover, src, SIZE_MAX, &n)) {
			case MOVE_OK:
				budget = n < budget ? budget - n : 0;
				progress = true;
				break;
			case MOVE_EOF:
				d->state = TUNNEL_DRAINING;
				progress = true;
				break;
			case MOVE_AGAIN:
			case MOVE_FULL:
				break;
			case MOVE_ERROR:
				return TUNNEL_FAILED;
			}
		}
		if (!progress)
			return TUNNEL_OPEN;
	}
}

enum tunnel_status
tunnel_pump(struct tunnel *t, struct conn *client, struct conn *origin, uint64_t *moved)
{
	*moved = 0;
	if (pump_direction(&t->to_origin, client, origin, moved) == TUNNEL_FAILED ||
	    pump_direction(&t->to_client, origin, client, moved) == TUNNEL_FAILED)
		return TUNNEL_FAILED;
	if (t->to_origin.state == TUNNEL_SHUT && t->to_client.state == TUNNEL_SHUT)
		return TUNNEL_FINISHED;
	return TUNNEL_OPEN;
}

struct tunnel_interest
tunnel_wants(const struct tunnel *t)
{
	struct tunnel_interest w;

	w.client_read = t->to_origin.state == TUNNEL_FLOWING && mover_has_room(&t->to_origin.mover);
	w.origin_write = mover_held(&t->to_origin.mover) > 0;
	w.origin_read = t->to_client.state == TUNNEL_FLOWING && mover_has_room(&t->to_client.mover);
	w.client_write = mover_held(&t->to_client.mover) > 0;
	return w;
}
