/*
 * Moving bytes from one connection end to another without looking at them:
 * through a pipe with splice(2), kernel to kernel, or (with --no-splice,
 * where either end is not a plain socket, or where the kernel refuses a
 * pair of fds with EINVAL) through a user-space buffer with the ends' own
 * operations. The caller decides how many bytes may move (framing); this
 * module only moves them.
 *
 * Pipes are a budget: a mover takes one from a small pool when it has bytes
 * to hold and gives it back the moment it is empty, so an idle tunnel or
 * connection holds none. A pipe that still holds bytes is never pooled.
 */
#ifndef KP_SPLICE_H
#define KP_SPLICE_H

#include <stdbool.h>
#include <stddef.h>

#include "kp/buf.h"
#include "kp/budget.h"
#include "kp/conn.h"

struct kp_pipe {
	int rd, wr;
	size_t size;            /* capacity the kernel granted this pipe */
	struct kp_pipe *next;   /* free-list link */
};

/*
 * Pipe capacity to ask for with F_SETPIPE_SZ (0: kernel default); pool
 * size; the budget whose pipe count this module keeps (NULL: none).
 */
void pipes_init(size_t pipe_size, unsigned max_free, struct fd_budget *fds);
/* Closes every pooled pipe. */
void pipes_shutdown(void);
unsigned pipes_pooled(void);

struct mover {
	struct kp_pipe *pipe;   /* held only while bytes are in it */
	size_t in_pipe;         /* bytes in the pipe */
	struct buf *buf;        /* bytes to write before the pipe's, or the copy path's */
	bool copy;              /* read/write instead of splice */
	bool full;              /* splice found the pipe full (its slots, not
	                         * only its bytes, run out); cleared by a push */
};

void mover_init(struct mover *m, bool copy);
/* Gives back an empty pipe, closes one that holds bytes, frees the buffer. */
void mover_release(struct mover *m);

/* Takes b (always) and its bytes, to be written before anything pulled later; false if they do not fit. */
bool mover_preload(struct mover *m, struct buf *b);

/* Bytes waiting to be written. */
size_t mover_held(const struct mover *m);
/* Can mover_pull() take bytes now? */
bool mover_has_room(const struct mover *m);

/*
 * Reads at most max bytes from src into the mover, and notes what it learnt
 * in src's facts (EOF, reset, read to EAGAIN). Splicing needs both ends to
 * be plain sockets: a mover made with copy for any other pair.
 */
enum move_status mover_pull(struct mover *m, struct conn *src, size_t max, size_t *moved);
/* Writes held bytes to dst, oldest first. */
enum move_status mover_push(struct mover *m, struct conn *dst, size_t *moved);

#endif
