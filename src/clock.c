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
	c->armed = NULL;
}

void
clock_init_manual(struct clock *c, ev_tstamp start)
{
	c->loop = NULL;
	c->now = start;
	c->armed = NULL;
}

void
clock_timer_init(struct clock_timer *t, struct clock *c, clock_timer_fn fire)
{
	ev_init(&t->ev, loop_timer_cb);
	t->fire = fire;
	t->clock = c;
	t->due = 0;
	t->prev = t->next = NULL;
}

static void
unlink_manual(struct clock_timer *t)
{
	struct clock *c = t->clock;

	if (t->due == 0)
		return;
	if (t->prev)
		t->prev->next = t->next;
	else
		c->armed = t->next;
	if (t->next)
		t->next->prev = t->prev;
	t->prev = t->next = NULL;
	t->due = 0;
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
	unlink_manual(t);
	t->due = c->now + (seconds > 0 ? seconds : 0);
	/* Never 0, which means "not armed": a clock may start at 0. */
	if (t->due == 0)
		t->due = 1e-9;
	t->next = c->armed;
	if (c->armed)
		c->armed->prev = t;
	c->armed = t;
}

void
clock_timer_stop(struct clock_timer *t)
{
	if (t->clock->loop)
		ev_timer_stop(t->clock->loop, &t->ev);
	else
		unlink_manual(t);
}

bool
clock_timer_armed(const struct clock_timer *t)
{
	return t->clock->loop ? ev_is_active(&t->ev) : t->due != 0;
}

/* The armed timer due first, if it is due by until. */
static struct clock_timer *
earliest_due(const struct clock *c, ev_tstamp until)
{
	struct clock_timer *best = NULL;

	for (struct clock_timer *t = c->armed; t; t = t->next)
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
		unlink_manual(t);
		t->fire(t);
	}
	c->now = until;
}
