/*
 * A response held in memory: one writer end that an exchange sends a
 * response into, as it would into a client, and any number of readers, each
 * at its own offset, from which later exchanges read it as from an origin,
 * while it is still arriving or after it ended. This is how the proxy keeps
 * a response it fetched before anyone asked (read-ahead).
 *
 * Neither end has a descriptor, so neither is ever spliced: an exchange
 * copies. The buffer grows as bytes come, up to a bound fixed when the
 * store is made; a send that would pass the bound fails (EMSGSIZE), which
 * the exchange treats as a downstream that went away. Readiness is raised
 * by the ends themselves, as events fed into the loop: the writer is always
 * writable, a reader is readable while bytes past its offset are held or
 * once the store ended or failed.
 */
#ifndef KP_MEMCONN_H
#define KP_MEMCONN_H

#include <stdbool.h>
#include <stddef.h>

#include <ev.h>

#include "kp/conn.h"
#include "kp/source.h"

struct memsource;

enum memstore_state {
	MEMSTORE_OPEN,     /* bytes may still come */
	MEMSTORE_ENDED,    /* the writer shut its end: a reader at the last byte sees EOF */
	MEMSTORE_FAILED,   /* cut off: a reader that reaches the cut sees a reset */
};

struct memstore {
	struct conn writer;            /* the end an exchange sends into */
	char *data;                    /* NULL until the first byte */
	size_t len;                    /* bytes written */
	size_t cap;                    /* bytes allocated */
	size_t bound;                  /* len never passes it */
	enum memstore_state state;
	struct memsource *readers;     /* open readers, to wake when bytes come */
};

/*
 * An empty store of at most bound bytes; on_io hears of the writer's
 * readiness (EV_WRITE whenever it is asked for).
 */
void memstore_init(struct memstore *s, struct ev_loop *loop, size_t bound, conn_io_fn on_io);
/* Cut it off (the fetch failed): readers past what is held see a reset. */
void memstore_fail(struct memstore *s);
/* Frees the bytes; open readers see a reset from now on. */
void memstore_free(struct memstore *s);

/* A reader: a source (source.h) whose end reads the store from its start. */
struct memsource {
	struct source src;             /* src.conn reads from the store; sends are discarded */
	struct memstore *store;        /* NULL once closed */
	size_t offset;                 /* next byte to read */
	struct memsource *prev, *next; /* the store's readers */
	/* Called once the exchange let go of it (released or closed); may be NULL. */
	void (*done)(struct memsource *m);
};

/*
 * Opens m on s at offset 0; responses heads of at most max_head bytes.
 * What was sent to it (the request an exchange writes first) is discarded:
 * the response was asked for when the store was filled.
 */
void memsource_open(struct memsource *m, struct memstore *s, size_t max_head);
/* Closes the reader (also what its source ops do). */
void memsource_close(struct memsource *m);

#endif
