#include "kp/memconn.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kp/evglue.h"

/* The first allocation: a response head and the start of a body. */
#define MEMSTORE_FIRST 16384

/* ---- readiness ------------------------------------------------------------ */

static size_t
held_for(const struct memsource *m)
{
	size_t end;

	if (!m->store)
		return 0;
	end = m->store->len < m->until ? m->store->len : m->until;
	return end > m->offset ? end - m->offset : 0;
}

/* Would a read now return something other than "nothing yet"? */
static bool
reader_ready(const struct memsource *m)
{
	if (m->parked)
		return false;
	if (!m->store || m->store->state != MEMSTORE_OPEN)
		return true;
	/* A chained reader at its window's end: its owner says what comes next. */
	if (m->more && m->prepared && m->offset == m->until)
		return true;
	/* Unprepared: worth another try only once the store holds more than at the last. */
	if (!m->prepared)
		return m->store->len > m->tried_at;
	return (m->prefix && buf_len(m->prefix)) || held_for(m) > 0 || m->offset == m->until;
}

/*
 * Readiness is an event fed into the loop, not a call from here: the
 * writer's send that made a reader readable is still on the stack, and the
 * exchange reading must not run inside it.
 */
static void
wake_reader(struct memsource *m)
{
	struct conn *c = &m->src.conn;

	if (c->want_read && reader_ready(m))
		ev_feed_event(c->loop, &c->rio, EV_READ);
}

static void
wake_readers(struct memstore *s)
{
	KP_LIST_EACH(m, &s->readers, struct memsource, link)
		wake_reader(m);
}

/* ---- the writer ----------------------------------------------------------- */

static struct memstore *
store_of(struct conn *c)
{
	return container_of(c, struct memstore, writer);
}

static ssize_t
writer_recv(struct conn *c, void *p, size_t len)
{
	(void)c;
	(void)p;
	(void)len;
	errno = EAGAIN;   /* nothing ever comes from the store's side */
	return -1;
}

static int
grow(struct memstore *s, size_t need)
{
	size_t cap = s->cap ? s->cap : MEMSTORE_FIRST;
	char *data;

	while (cap < need)
		cap *= 2;
	if (cap > s->bound)
		cap = s->bound;
	if (!(data = realloc(s->data, cap)))
		return -1;
	s->data = data;
	s->cap = cap;
	return 0;
}

static ssize_t
writer_sendv(struct conn *c, const struct iovec *iov, int iovcnt)
{
	struct memstore *s = store_of(c);
	size_t total = 0;

	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	if (s->state != MEMSTORE_OPEN) {
		errno = EPIPE;
		return -1;
	}
	/* All or nothing: a store that kept half a send would hold a response cut anywhere. */
	if (total > s->bound - s->len) {
		errno = EMSGSIZE;
		return -1;
	}
	if (s->len + total > s->cap && grow(s, s->len + total) < 0) {
		errno = ENOMEM;
		return -1;
	}
	for (int i = 0; i < iovcnt; i++) {
		memcpy(s->data + s->len, iov[i].iov_base, iov[i].iov_len);
		s->len += iov[i].iov_len;
	}
	if (total)
		wake_readers(s);
	return (ssize_t)total;
}

static void
writer_end_writes(struct conn *c)
{
	struct memstore *s = store_of(c);

	if (s->state == MEMSTORE_OPEN) {
		s->state = MEMSTORE_ENDED;
		wake_readers(s);
	}
}

/*
 * A fed event not yet delivered is dropped when it is no longer wanted, as
 * a socket's watcher that is stopped would not fire either.
 */
static void
feed_or_forget(struct conn *c, ev_io *w, short revents, bool wanted)
{
	if (wanted)
		ev_feed_event(c->loop, w, revents);
	else
		ev_clear_pending(c->loop, w);
}

static void
writer_watch(struct conn *c, bool readable, bool writable)
{
	(void)readable;
	feed_or_forget(c, &c->wio, EV_WRITE, writable);
}

static bool
always_alive(struct conn *c)
{
	(void)c;
	return true;
}

static const struct conn_ops writer_ops = {
	.recv = writer_recv,
	.sendv = writer_sendv,
	.idle_alive = always_alive,
	.end_writes = writer_end_writes,
	.watch = writer_watch,
	.can_splice = false,
};

void
memstore_init(struct memstore *s, struct ev_loop *loop, size_t bound, conn_io_fn on_io)
{
	memset(s, 0, sizeof(*s));
	kp_list_init(&s->readers);
	s->bound = bound;
	s->state = MEMSTORE_OPEN;
	conn_init(&s->writer, loop, -1, &writer_ops, on_io);
}

void
memstore_fail(struct memstore *s)
{
	if (s->state == MEMSTORE_OPEN) {
		s->state = MEMSTORE_FAILED;
		wake_readers(s);
	}
}

void
memstore_free(struct memstore *s)
{
	struct memsource *m;

	memstore_fail(s);
	conn_close(&s->writer);
	while ((m = KP_LIST_FIRST(&s->readers, struct memsource, link)) != NULL) {
		kp_list_unlink(&m->link);
		m->store = NULL;
		wake_reader(m);
	}
	free(s->data);
	s->data = NULL;
	s->len = s->cap = 0;
}

/* ---- readers -------------------------------------------------------------- */

static struct memsource *
reader_of(struct conn *c)
{
	return container_of(c, struct memsource, src.conn);
}

/*
 * What the reader does next, as its owner said: read on, wait for more in
 * the store or for the owner (parked), read again from where it was moved,
 * or end (EOF, a reset). -1 with errno EAGAIN or ECONNRESET, 0 for EOF,
 * 1 to read on.
 */
static int
take_step(struct memsource *m, enum memsource_step step)
{
	switch (step) {
	case MEMSOURCE_READ:
	case MEMSOURCE_MOVED:
		return 1;
	case MEMSOURCE_NOT_YET:
		/* A store that can no longer grow will never hold more. */
		if (m->store->state == MEMSTORE_OPEN) {
			m->tried_at = m->store->len;
			errno = EAGAIN;
			return -1;
		}
		errno = ECONNRESET;
		return -1;
	case MEMSOURCE_WAIT:
		memsource_park(m);
		errno = EAGAIN;
		return -1;
	case MEMSOURCE_END:
		return 0;
	case MEMSOURCE_CUT:
		break;
	}
	errno = ECONNRESET;
	return -1;
}

/* A slice's head, once the store holds enough to write it (prepare: READ). */
static enum memsource_step
prepare(struct memsource *m)
{
	enum memsource_step step;

	if (m->prepared)
		return MEMSOURCE_READ;
	if (!m->store)
		return MEMSOURCE_CUT;
	step = m->prepare(m);
	if (step == MEMSOURCE_READ)
		m->prepared = true;
	return step;
}

static ssize_t
reader_recv(struct conn *c, void *p, size_t len)
{
	struct memsource *m = reader_of(c);

	for (;;) {
		enum memsource_step step;
		size_t n;
		int r;

		if (m->parked) {
			errno = EAGAIN;
			return -1;
		}
		step = prepare(m);
		if (step != MEMSOURCE_READ) {
			if ((r = take_step(m, step)) <= 0)
				return r;
			continue;   /* moved: prepare what it reads now */
		}
		if (m->prefix && buf_len(m->prefix)) {
			n = buf_len(m->prefix) < len ? buf_len(m->prefix) : len;
			memcpy(p, buf_head(m->prefix), n);
			buf_consume(m->prefix, n);
			return (ssize_t)n;
		}
		n = held_for(m);
		if (n == 0) {
			bool at_end = m->store && (m->store->state == MEMSTORE_ENDED || m->offset == m->until);
			bool cut = !m->store || m->store->state == MEMSTORE_FAILED;

			if (m->more && (at_end || cut)) {
				step = m->more(m, at_end ? WINDOW_READ : WINDOW_FAILED);
				if ((r = take_step(m, step)) <= 0)
					return r;
				continue;
			}
			/* A slice ends where its window does, whatever the store holds beyond. */
			if (at_end)
				return 0;
			errno = cut ? ECONNRESET : EAGAIN;
			return -1;
		}
		if (n > len)
			n = len;
		memcpy(p, m->store->data + m->offset, n);
		m->offset += n;
		return (ssize_t)n;
	}
}

static ssize_t
reader_sendv(struct conn *c, const struct iovec *iov, int iovcnt)
{
	size_t total = 0;

	(void)c;
	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	return (ssize_t)total;
}

static void
reader_watch(struct conn *c, bool readable, bool writable)
{
	feed_or_forget(c, &c->wio, EV_WRITE, writable);
	feed_or_forget(c, &c->rio, EV_READ, readable && reader_ready(reader_of(c)));
}

static void
reader_release(struct conn *c)
{
	struct memsource *m = reader_of(c);

	kp_list_unlink(&m->link);
	m->store = NULL;
}

static const struct conn_ops reader_ops = {
	.recv = reader_recv,
	.sendv = reader_sendv,
	.idle_alive = always_alive,
	.release = reader_release,
	.watch = reader_watch,
	.can_splice = false,
};

static void
reader_io(struct conn *c, int revents)
{
	struct memsource *m = reader_of(c);

	if (m->src.reader)
		m->src.reader->event(m->src.reader, revents);
}

/* ---- a reader as a source -------------------------------------------------- */

void
memsource_close(struct memsource *m)
{
	bool was_open = m->src.conn.ops == &reader_ops && m->src.reader;

	conn_close(&m->src.conn);
	buf_put(m->src.in);
	m->src.in = NULL;
	buf_put(m->prefix);
	m->prefix = NULL;
	m->src.reader = NULL;
	if (was_open && m->done)
		m->done(m);
}

static void
source_release(struct source *src, bool reusable)
{
	(void)reusable;   /* a stored response is read once per reader */
	memsource_close(container_of(src, struct memsource, src));
}

static void
source_close(struct source *src)
{
	memsource_close(container_of(src, struct memsource, src));
}

/* A stored response never switches protocols (it was never asked to): nothing to detach. */
static void
source_detach(struct source *src)
{
	(void)src;
}

static const struct source_ops memsource_ops = {
	.release = source_release,
	.close = source_close,
	.detach = source_detach,
};

void
memsource_open(struct memsource *m, struct memstore *s)
{
	void (*done)(struct memsource *) = m->done;
	void *owner = m->owner;

	memset(m, 0, sizeof(*m));
	m->done = done;
	m->owner = owner;
	m->store = s;
	m->until = SIZE_MAX;
	m->prepared = true;
	kp_list_insert_head(&s->readers, &m->link);
	conn_init(&m->src.conn, s->writer.loop, -1, &reader_ops, reader_io);
	m->src.keep_alive_hint = -1;
	m->src.ops = &memsource_ops;
}

void
memsource_move(struct memsource *m, struct memstore *s,
               enum memsource_step (*prepare_fn)(struct memsource *m))
{
	reader_release(&m->src.conn);
	m->store = s;
	m->offset = 0;
	m->until = SIZE_MAX;
	m->prepare = prepare_fn;
	m->prepared = false;
	m->tried_at = 0;
	m->parked = false;
	kp_list_insert_head(&s->readers, &m->link);
}

void
memsource_park(struct memsource *m)
{
	reader_release(&m->src.conn);
	m->parked = true;
}

void
memsource_wake(struct memsource *m)
{
	wake_reader(m);
}

void
memsource_open_slice(struct memsource *m, struct memstore *s,
                     enum memsource_step (*prepare_fn)(struct memsource *m))
{
	memsource_open(m, s);
	m->prepare = prepare_fn;
	m->prepared = false;
	m->src.held = true;
}
