#include "kp/clock.h"

#include <stddef.h>

#include "kp/evglue.h"

static void
loop_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct clock_timer *t = container_of(w, struct clock_timer, ev);

	(void)loop;
	(void)revents;
	t->fire(t);
}

void
clock_init(struct clock *c, struct ev_loop *loop)
{
	c->loop = loop;
	c->now = 0;
	kp_list_init(&c->armed);
}

void
clock_init_manual(struct clock *c, ev_tstamp start)
{
	c->loop = NULL;
	c->now = start;
	kp_list_init(&c->armed);
}

void
clock_timer_init(struct clock_timer *t, struct clock *c, clock_timer_fn fire)
{
	t->fire = fire;
	t->clock = c;
	if (c->loop) {
		ev_init(&t->ev, loop_timer_cb);
		return;
	}
	t->due = 0;
	kp_list_init_link(&t->armed);
}

void
clock_timer_start(struct clock_timer *t, double seconds)
{
	struct clock *c = t->clock;

	if (c->loop) {
		/* Set each time: a stopped one-shot keeps only what was left of it. */
		ev_timer_stop(c->loop, &t->ev);
		ev_timer_set(&t->ev, seconds > 0 ? seconds : 0., 0.);
		ev_timer_start(c->loop, &t->ev);
		return;
	}
	kp_list_unlink(&t->armed);
	t->due = c->now + (seconds > 0 ? seconds : 0);
	kp_list_insert_head(&c->armed, &t->armed);
}

void
clock_timer_stop(struct clock_timer *t)
{
	if (t->clock->loop)
		ev_timer_stop(t->clock->loop, &t->ev);
	else
		kp_list_unlink(&t->armed);
}

bool
clock_timer_armed(const struct clock_timer *t)
{
	return t->clock->loop ? ev_is_active(&t->ev) : kp_list_linked(&t->armed);
}

/* The armed timer due first, if it is due by until. */
static struct clock_timer *
earliest_due(const struct clock *c, ev_tstamp until)
{
	struct clock_timer *best = NULL;

	KP_LIST_EACH(t, &c->armed, struct clock_timer, armed)
		if (t->due <= until && (!best || t->due < best->due))
			best = t;
	return best;
}

void
clock_advance(struct clock *c, double seconds)
{
	ev_tstamp until = c->now + seconds;
	struct clock_timer *t;

	/* A callback may arm timers that fall due on the way too: look again each time. */
	while ((t = earliest_due(c, until)) != NULL) {
		if (t->due > c->now)
			c->now = t->due;
		kp_list_unlink(&t->armed);
		t->fire(t);
	}
	c->now = until;
}
