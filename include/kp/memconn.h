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
#include "kp/list.h"
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
	struct kp_list readers;        /* open readers, newest first, to wake when bytes come */
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

/* What a reader's owner says of the store it reads, or of what follows it. */
enum memsource_step {
	MEMSOURCE_READ,      /* prepared: prefix and window set, read on (prepare only) */
	MEMSOURCE_NOT_YET,   /* too little in the store yet; asked again once it holds more
	                      * (prepare only, while the store may still grow) */
	MEMSOURCE_MOVED,     /* the owner moved the reader to another store: read there */
	MEMSOURCE_WAIT,      /* nothing to read until the owner calls memsource_wake() */
	MEMSOURCE_END,       /* the response ends here: EOF (more only) */
	MEMSOURCE_CUT,       /* it is cut off here: a reset (before its first byte, the request
	                      * goes to the origin, the source being held) */
};

/* Why a chained reader's window came to an end, as its owner is told (memsource.more). */
enum memsource_window_end {
	WINDOW_READ,         /* every byte of it was read: the store ended, or the window did */
	WINDOW_FAILED,       /* its store failed (the fetch was cut) before the window's end */
};

/*
 * A reader: a source (source.h) whose end reads the store, from its start
 * or, as a slice, a window of it behind a head of the owner's making.
 */
struct memsource {
	struct source src;             /* src.conn reads from the store; sends are discarded */
	struct memstore *store;        /* NULL once closed */
	size_t offset;                 /* next byte of the store to read */
	size_t until;                  /* the store's bytes up to here only; SIZE_MAX: all */
	struct buf *prefix;            /* bytes served before the store's (a slice's head) */
	/*
	 * A slice is prepared once the store holds what the owner needs to
	 * write its head: READ (prefix, offset and until set), NOT_YET, or
	 * what the owner did instead (MOVED, WAIT, CUT). NULL: nothing to do.
	 */
	enum memsource_step (*prepare)(struct memsource *m);
	bool prepared;
	bool parked;                   /* a chained reader between stores (memsource_park) */
	size_t tried_at;               /* the store's length when prepare last said "not yet" */
	struct kp_list link;           /* in the store's readers while open */
	/*
	 * A reader that goes on in another store (a split download's pieces):
	 * asked what follows when its window is read to the end or its store
	 * failed, and told which: MOVED (memsource_move), WAIT, END or CUT.
	 * NULL: the window's end is the response's.
	 */
	enum memsource_step (*more)(struct memsource *m, enum memsource_window_end why);
	/* Called once the exchange let go of it (released or closed); may be NULL. */
	void (*done)(struct memsource *m);
	void *owner;                   /* the owner's, for its hooks */
};

/*
 * Opens m on s at offset 0. What was sent to it (the request an exchange
 * writes first) is discarded: the response was asked for when the store
 * was filled. done and owner, set before, are kept.
 */
void memsource_open(struct memsource *m, struct memstore *s);
/*
 * The same as a slice: nothing is read until prepare says the store holds
 * enough and has set the prefix and the window. The source is marked held
 * (source.h): failing before its first byte sends the request elsewhere.
 */
void memsource_open_slice(struct memsource *m, struct memstore *s,
                          enum memsource_step (*prepare)(struct memsource *m));
/*
 * A chained reader goes on in store s, from its start, through prepare
 * (which sets the window; the prefix, if any is left, still comes first).
 */
void memsource_move(struct memsource *m, struct memstore *s,
                    enum memsource_step (*prepare)(struct memsource *m));
/*
 * A chained reader waits between stores (its owner has none to give it
 * yet): it reads nothing until memsource_move.
 */
void memsource_park(struct memsource *m);
/* There is more for a chained reader that was told to wait: it is made readable. */
void memsource_wake(struct memsource *m);

/* Closes the reader (also what its source ops do). */
void memsource_close(struct memsource *m);

#endif
