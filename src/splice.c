#include "kp/splice.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kp/net.h"
#include "kp/stats.h"

static struct {
	size_t size;        /* capacity to ask for each new pipe */
	unsigned max_free;
	unsigned nfree;
	struct kp_pipe *free;
	struct fd_budget *fds;
} pipes = {65536, 16, 0, NULL, NULL};

void
pipes_init(size_t pipe_size, unsigned max_free, struct fd_budget *fds)
{
	pipes.max_free = max_free;
	pipes.size = pipe_size ? pipe_size : 65536;
	pipes.fds = fds;
}

unsigned
pipes_pooled(void)
{
	return pipes.nfree;
}

static void
pipe_close(struct kp_pipe *p)
{
	close(p->rd);
	close(p->wr);
	free(p);
	kp_stats.pipes_open--;
	if (pipes.fds)
		pipes.fds->pipes--;
}

static struct kp_pipe *
pipe_get(void)
{
	struct kp_pipe *p = pipes.free;
	int fds[2];
	int got;

	if (p) {
		pipes.free = p->next;
		pipes.nfree--;
		return p;
	}
	p = malloc(sizeof(*p));
	if (!p)
		return NULL;
	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0) {
		free(p);
		return NULL;
	}
	p->rd = fds[0];
	p->wr = fds[1];
	/*
	 * The kernel may round up, or refuse: above fs.pipe-max-size, or once an
	 * unprivileged user's pipes pass fs.pipe-user-pages-soft. A refusal is
	 * this pipe's alone; the next may get the full size again.
	 */
	got = fcntl(p->wr, F_SETPIPE_SZ, (int)pipes.size);
	if (got < 0)
		got = fcntl(p->wr, F_GETPIPE_SZ);
	p->size = got > 0 ? (size_t)got : 4096;
	kp_stats.pipes_open++;
	if (pipes.fds)
		pipes.fds->pipes++;
	return p;
}

static void
pipe_put(struct kp_pipe *p)
{
	if (pipes.nfree >= pipes.max_free) {
		pipe_close(p);
		return;
	}
	p->next = pipes.free;
	pipes.free = p;
	pipes.nfree++;
}

void
pipes_shutdown(void)
{
	while (pipes.free) {
		struct kp_pipe *p = pipes.free;

		pipes.free = p->next;
		pipe_close(p);
	}
	pipes.nfree = 0;
}

void
mover_init(struct mover *m, bool copy)
{
	m->pipe = NULL;
	m->in_pipe = 0;
	m->buf = NULL;
	m->copy = copy;
	m->full = false;
}

static void
give_back_pipe_if_empty(struct mover *m)
{
	if (m->pipe && m->in_pipe == 0) {
		pipe_put(m->pipe);
		m->pipe = NULL;
	}
}

void
mover_release(struct mover *m)
{
	if (m->pipe) {
		/* Bytes still inside would leak into the next user's stream. */
		if (m->in_pipe)
			pipe_close(m->pipe);
		else
			pipe_put(m->pipe);
		m->pipe = NULL;
	}
	m->in_pipe = 0;
	buf_put(m->buf);
	m->buf = NULL;
}

bool
mover_preload(struct mover *m, struct buf *b)
{
	if (!b || buf_len(b) == 0) {
		buf_put(b);
		return true;
	}
	if (!m->buf) {
		m->buf = b;
		return true;
	}
	buf_compact(m->buf);
	if (buf_room(m->buf) < buf_len(b)) {
		buf_put(b);
		return false;
	}
	memcpy(buf_tail(m->buf), buf_head(b), buf_len(b));
	m->buf->end += buf_len(b);
	buf_put(b);
	return true;
}

size_t
mover_held(const struct mover *m)
{
	return (m->buf ? buf_len(m->buf) : 0) + m->in_pipe;
}

bool
mover_has_room(const struct mover *m)
{
	if (m->copy)
		return !m->buf || buf_len(m->buf) < buf_capacity();
	return !m->full && m->in_pipe < (m->pipe ? m->pipe->size : pipes.size);
}

static enum move_status
pull_copy(struct mover *m, struct conn *src, size_t max, size_t *moved)
{
	enum move_status r;

	if (!m->buf && !(m->buf = buf_get()))
		return MOVE_ERROR;
	if (buf_room(m->buf) == 0)
		buf_compact(m->buf);
	if (buf_room(m->buf) == 0)
		return MOVE_FULL;
	/* The end's own read: a TLS end decrypts, a memory end copies. */
	r = conn_read(src, buf_tail(m->buf), buf_room(m->buf) < max ? buf_room(m->buf) : max,
	              moved);
	if (r == MOVE_OK) {
		m->buf->end += *moved;
		kp_stats.bytes_copied += (uint64_t)*moved;
	}
	return r;
}

/* What a splice from src says about it, in its facts. */
static void
note_facts(struct conn *src, enum move_status r)
{
	if (r == MOVE_EOF)
		src->eof = true;
	else if (r == MOVE_ERROR)
		src->eof = src->reset = true;
	else if (r == MOVE_AGAIN)
		src->readable = false;
}

static enum move_status
splice_in(struct mover *m, struct conn *src, size_t max, size_t *moved)
{
	size_t room;
	ssize_t n;

	*moved = 0;
	if (m->copy)
		return pull_copy(m, src, max, moved);
	if (!m->pipe && !(m->pipe = pipe_get()))
		return pull_copy(m, src, max, moved);   /* out of fds: copy this time */
	room = m->pipe->size - m->in_pipe;
	if (room > max)
		room = max;
	if (room == 0 || m->full)
		return MOVE_FULL;
	n = splice(src->fd, NULL, m->pipe->wr, NULL, room, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (n > 0) {
		m->in_pipe += (size_t)n;
		*moved = (size_t)n;
		kp_stats.bytes_spliced += (uint64_t)n;
		return MOVE_OK;
	}
	if (n < 0 && errno == EINVAL) {
		/* This pair of fds cannot splice: the same path carries on copying. */
		m->copy = true;
		give_back_pipe_if_empty(m);
		if (m->in_pipe == 0)
			return pull_copy(m, src, max, moved);
		return MOVE_FULL;   /* drain what the pipe holds first */
	}
	give_back_pipe_if_empty(m);
	if (n == 0)
		return MOVE_EOF;
	if (!net_would_block())
		return MOVE_ERROR;
	/*
	 * EAGAIN means the socket is empty or the pipe has no free slot: a slot
	 * holds one socket fragment, so a pipe can be full well below its byte
	 * capacity. With bytes in the pipe, call it full until a push drains
	 * some; waiting on the socket meanwhile would spin on its readability.
	 */
	if (m->in_pipe) {
		m->full = true;
		return MOVE_FULL;
	}
	return MOVE_AGAIN;
}

enum move_status
mover_pull(struct mover *m, struct conn *src, size_t max, size_t *moved)
{
	enum move_status r;

	if (src->eof) {
		*moved = 0;
		return src->reset ? MOVE_ERROR : MOVE_EOF;
	}
	if (m->copy)
		return pull_copy(m, src, max, moved);
	r = splice_in(m, src, max, moved);
	note_facts(src, r);
	return r;
}

/* Copy fallback for bytes already in a pipe: through the buffer. */
static enum move_status
refill_from_pipe(struct mover *m)
{
	ssize_t n;

	if (!m->buf && !(m->buf = buf_get()))
		return MOVE_ERROR;
	buf_compact(m->buf);
	n = read(m->pipe->rd, buf_tail(m->buf), buf_room(m->buf) < m->in_pipe ? buf_room(m->buf)
	                                                                       : m->in_pipe);
	if (n <= 0)
		return MOVE_ERROR;
	m->buf->end += (size_t)n;
	m->in_pipe -= (size_t)n;
	m->full = false;
	give_back_pipe_if_empty(m);
	return MOVE_OK;
}

enum move_status
mover_push(struct mover *m, struct conn *dst, size_t *moved)
{
	ssize_t n;

	*moved = 0;
	if (m->copy && m->in_pipe && (!m->buf || buf_len(m->buf) == 0) &&
	    refill_from_pipe(m) != MOVE_OK)
		return MOVE_ERROR;
	if (m->buf && buf_len(m->buf)) {
		n = conn_send_two(dst, NULL, 0, buf_head(m->buf), buf_len(m->buf));
		if (n > 0) {
			buf_consume(m->buf, (size_t)n);
			*moved = (size_t)n;
			return MOVE_OK;
		}
		return n == 0 ? MOVE_AGAIN : MOVE_ERROR;
	}
	if (m->in_pipe == 0)
		return MOVE_AGAIN;
	n = splice(m->pipe->rd, NULL, dst->fd, NULL, m->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (n > 0) {
		m->in_pipe -= (size_t)n;
		m->full = false;
		*moved = (size_t)n;
		give_back_pipe_if_empty(m);
		return MOVE_OK;
	}
	if (n < 0 && errno == EINVAL) {
		m->copy = true;
		return refill_from_pipe(m) == MOVE_OK ? mover_push(m, dst, moved) : MOVE_ERROR;
	}
	return n < 0 && net_would_block() ? MOVE_AGAIN : MOVE_ERROR;
}
