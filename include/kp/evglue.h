/*
 * Glue between libev watchers and the objects that embed them: recovering
 * the owner from a watcher (container_of, which list.h defines for links
 * and watchers alike), and arming a read/write watcher pair from two
 * booleans so callers state what they wait for instead of toggling.
 */
#ifndef KP_EVGLUE_H
#define KP_EVGLUE_H

#include <stdbool.h>

#include <ev.h>

#include "kp/list.h"

static inline void
io_watch(struct ev_loop *loop, ev_io *rio, ev_io *wio, bool readable, bool writable)
{
	if (readable != (bool)ev_is_active(rio))
		(readable ? ev_io_start : ev_io_stop)(loop, rio);
	if (writable != (bool)ev_is_active(wio))
		(writable ? ev_io_start : ev_io_stop)(loop, wio);
}

#endif
