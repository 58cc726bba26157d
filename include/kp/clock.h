/*
 * Time and timers for the modules whose rules are worth testing without
 * waiting: the idle pool's expiry and sweep, dispatch's queue, an
 * exchange's deadlines. The daemon's clock is the event loop's (ev_now and
 * ev_timer); a test makes a manual clock and moves it with clock_advance(),
 * which fires what falls due in order, so a 50-second expiry is checked in
 * no time and without a race against a real clock.
 */
#ifndef KP_CLOCK_H
#define KP_CLOCK_H

#include <stdbool.h>

#include <ev.h>

#include "kp/list.h"

struct clock;
struct clock_timer;

typedef void (*clock_timer_fn)(struct clock_timer *t);

/*
 * Embedded in its owner, which it finds again with container_of. One of
 * the two kinds of clock is ever behind a timer, so they share room: every
 * client and pooled connection holds one.
 */
struct clock_timer {
	union {
		ev_timer ev;                 /* the loop's timer, on the daemon's clock */
		struct {                     /* on a manual clock */
			ev_tstamp due;           /* its firing time, while armed */
			struct kp_list armed;    /* on the clock's armed list: armed */
		};
	};
	clock_timer_fn fire;
	struct clock *clock;
};

struct clock {
	struct ev_loop *loop;            /* NULL: a manual clock */
	ev_tstamp now;                   /* a manual clock's time */
	/*
	 * A manual clock's armed timers, unordered: the most recently armed
	 * first, which is the one that fires first of those due together.
	 */
	struct kp_list armed;
};

/* The loop's own time. */
void clock_init(struct clock *c, struct ev_loop *loop);
/* A clock that stands at start until clock_advance() moves it. */
void clock_init_manual(struct clock *c, ev_tstamp start);

static inline ev_tstamp
clock_now(const struct clock *c)
{
	return c->loop ? ev_now(c->loop) : c->now;
}

void clock_timer_init(struct clock_timer *t, struct clock *c, clock_timer_fn fire);
/* Fires once, after seconds; an armed timer is moved. */
void clock_timer_start(struct clock_timer *t, double seconds);
void clock_timer_stop(struct clock_timer *t);
bool clock_timer_armed(const struct clock_timer *t);

/*
 * The one rule for a deadline that counts from the last activity (libev's
 * manual, "Be smart about timeouts"): bytes moving only note the time, and
 * a timer that fires before due, now, is started again for what is left.
 * Returns those seconds, or 0 when the deadline is reached (within a
 * millisecond, so that a timer is never started for nothing).
 */
static inline double
clock_deadline_left(ev_tstamp due, ev_tstamp now)
{
	return due - now > 0.001 ? due - now : 0;
}

/*
 * A manual clock moves on by seconds, firing every timer that falls due on
 * the way, earliest first, each with the clock standing at its due time.
 */
void clock_advance(struct clock *c, double seconds);

#endif
