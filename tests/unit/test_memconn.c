/*
 * A response held in memory, through its ends as an exchange sees them:
 * sends into the writer, readers at their own offsets, readiness raised as
 * events in a real loop (run without waiting: every event here is fed), the
 * end, a failure, the bound, and readers let go of.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kp/buf.h"
#include "kp/evglue.h"
#include "kp/memconn.h"

/* An exchange's stand-in: counts what its reader end tells it. */
struct test_reader {
	struct source_reader r;
	struct memsource m;
	unsigned calls;
	int revents;
	unsigned done;
};

/* Readers live here, not on a test's stack, so a failed test's can still be closed. */
struct fixture {
	struct ev_loop *loop;
	struct memstore store;
	struct test_reader readers[4];
	unsigned writer_calls;
	int writer_revents;
};

static void
writer_io(struct conn *c, int revents)
{
	struct fixture *f = container_of(c, struct fixture, store.writer);

	f->writer_calls++;
	f->writer_revents = revents;
}

static void
reader_event(struct source_reader *r, int revents)
{
	struct test_reader *t = container_of(r, struct test_reader, r);

	t->calls++;
	t->revents = revents;
}

static void
reader_done(struct memsource *m)
{
	container_of(m, struct test_reader, m)->done++;
}

static struct fixture *
make_store(void **state, size_t bound)
{
	struct fixture *f = *state;

	memstore_init(&f->store, f->loop, bound, writer_io);
	return f;
}

static int
setup(void **state)
{
	static struct fixture f;

	memset(&f, 0, sizeof(f));
	f.loop = ev_loop_new(EVFLAG_AUTO);
	assert_non_null(f.loop);
	*state = &f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	memstore_free(&f->store);
	for (size_t i = 0; i < sizeof(f->readers) / sizeof(f->readers[0]); i++)
		if (f->readers[i].m.src.ops)
			memsource_close(&f->readers[i].m);
	ev_loop_destroy(f->loop);
	return 0;
}

static int
group_setup(void **state)
{
	(void)state;
	buf_init(4096);
	return 0;
}

static int
group_teardown(void **state)
{
	(void)state;
	buf_drain_free_list();
	return 0;
}

static void
run(struct fixture *f)
{
	ev_run(f->loop, EVRUN_NOWAIT);
}

static void
open_reader(struct fixture *f, struct test_reader *t)
{
	memset(t, 0, sizeof(*t));
	t->r.event = reader_event;
	t->m.done = reader_done;
	memsource_open(&t->m, &f->store);
	t->m.src.reader = &t->r;
}

static void
send_str(struct fixture *f, const char *s)
{
	assert_int_equal(conn_send_two(&f->store.writer, s, strlen(s), NULL, 0), strlen(s));
}

/* Reads exactly what is expected, in one read. */
static void
read_expect(struct test_reader *t, const char *expect)
{
	char got[256];
	size_t n;

	assert_true(strlen(expect) <= sizeof(got));
	assert_int_equal(conn_read(&t->m.src.conn, got, strlen(expect), &n), MOVE_OK);
	assert_int_equal(n, strlen(expect));
	assert_memory_equal(got, expect, n);
}

static enum move_status
read_one(struct test_reader *t)
{
	char byte;
	size_t n;

	return conn_read(&t->m.src.conn, &byte, 1, &n);
}

static bool
is_linked(const struct memstore *s, const struct memsource *m)
{
	const struct kp_list *prev = &s->readers;
	bool found = false;

	KP_LIST_EACH(it, &s->readers, const struct memsource, link) {
		assert_ptr_equal(it->link.prev, prev);
		prev = &it->link;
		found = found || it == m;
	}
	assert_ptr_equal(s->readers.prev, prev);
	return found;
}

/* ---- readers -------------------------------------------------------------- */

static void
test_readers_at_own_offsets(void **state)
{
	struct fixture *f = make_store(state, 1 << 20);
	struct test_reader *a = &f->readers[0], *b = &f->readers[1], *c = &f->readers[2];

	send_str(f, "HTTP/1.1 200 OK\r\n");
	open_reader(f, a);
	read_expect(a, "HTTP/");
	send_str(f, "Content-Length: 2\r\n\r\n");
	open_reader(f, b);
	read_expect(b, "HTTP/1.1 200 OK\r\nContent");
	read_expect(a, "1.1 200");
	send_str(f, "ok");
	assert_int_equal(conn_shutdown_write(&f->store.writer), 0);
	/* Opened after the end: still from the first byte. */
	open_reader(f, c);
	read_expect(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
	assert_int_equal(read_one(c), MOVE_EOF);
	read_expect(b, "-Length: 2\r\n\r\nok");
	read_expect(a, " OK\r\nContent-Length: 2\r\n\r\nok");
	assert_int_equal(f->store.len, strlen("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
	assert_int_equal(a->m.offset, f->store.len);
	memsource_close(&a->m);
	memsource_close(&b->m);
	memsource_close(&c->m);
}

static void
test_caught_up_reader_is_woken(void **state)
{
	struct fixture *f = make_store(state, 1 << 20);
	struct test_reader *a = &f->readers[0], *idle = &f->readers[1];
	struct conn *ac = &a->m.src.conn;

	open_reader(f, a);
	open_reader(f, idle);
	send_str(f, "abc");
	read_expect(a, "abc");
	ac->readable = true;
	assert_int_equal(read_one(a), MOVE_AGAIN);
	assert_false(ac->readable);
	assert_false(ac->eof);

	/* Waiting with nothing to read: no event. */
	conn_watch(ac, true, false);
	run(f);
	assert_int_equal(a->calls, 0);

	send_str(f, "de");
	/* Fed, not called from inside the send. */
	assert_int_equal(a->calls, 0);
	run(f);
	assert_int_equal(a->calls, 1);
	assert_int_equal(a->revents, EV_READ);
	assert_true(ac->readable);
	/* A reader not waiting hears nothing. */
	assert_int_equal(idle->calls, 0);
	read_expect(a, "de");
	assert_int_equal(read_one(a), MOVE_AGAIN);

	/* Asking while bytes are already held: told at once. */
	conn_watch(&idle->m.src.conn, true, false);
	run(f);
	assert_int_equal(idle->calls, 1);
	assert_int_equal(idle->revents, EV_READ);
	read_expect(idle, "abcde");

	/* An empty send wakes nobody. */
	assert_int_equal(conn_send_two(&f->store.writer, NULL, 0, NULL, 0), 0);
	run(f);
	assert_int_equal(a->calls, 1);
	memsource_close(&a->m);
	memsource_close(&idle->m);
}

static void
test_end_reads_as_eof(void **state)
{
	struct fixture *f = make_store(state, 1 << 20);
	struct test_reader *a = &f->readers[0], *b = &f->readers[1];

	open_reader(f, a);
	open_reader(f, b);
	send_str(f, "body");
	read_expect(a, "body");
	assert_int_equal(read_one(a), MOVE_AGAIN);
	conn_watch(&a->m.src.conn, true, false);
	run(f);
	assert_int_equal(a->calls, 0);

	assert_int_equal(conn_shutdown_write(&f->store.writer), 0);
	assert_int_equal(f->store.state, MEMSTORE_ENDED);
	run(f);
	assert_int_equal(a->calls, 1);
	assert_int_equal(read_one(a), MOVE_EOF);
	assert_true(a->m.src.conn.eof);
	assert_false(a->m.src.conn.reset);
	/* Behind the end, the bytes before it still come first. */
	read_expect(b, "body");
	assert_int_equal(read_one(b), MOVE_EOF);

	/* Nothing more goes in, and a failure now changes nothing. */
	errno = 0;
	assert_int_equal(conn_send_two(&f->store.writer, "x", 1, NULL, 0), -1);
	assert_int_equal(errno, EPIPE);
	memstore_fail(&f->store);
	assert_int_equal(f->store.state, MEMSTORE_ENDED);
	memsource_close(&a->m);
	memsource_close(&b->m);
}

static void
test_failure_resets_past_held_bytes(void **state)
{
	struct fixture *f = make_store(state, 1 << 20);
	struct test_reader *a = &f->readers[0], *b = &f->readers[1];

	open_reader(f, a);
	open_reader(f, b);
	send_str(f, "abcdef");
	read_expect(a, "abc");
	read_expect(b, "abcdef");
	assert_int_equal(read_one(b), MOVE_AGAIN);
	conn_watch(&b->m.src.conn, true, false);

	memstore_fail(&f->store);
	assert_int_equal(f->store.state, MEMSTORE_FAILED);
	run(f);
	assert_int_equal(b->calls, 1);
	errno = 0;
	assert_int_equal(read_one(b), MOVE_ERROR);
	assert_int_equal(errno, ECONNRESET);
	assert_true(b->m.src.conn.eof);
	assert_true(b->m.src.conn.reset);

	/* What was held before the cut is read before the cut. */
	read_expect(a, "def");
	errno = 0;
	assert_int_equal(read_one(a), MOVE_ERROR);
	assert_int_equal(errno, ECONNRESET);

	errno = 0;
	assert_int_equal(conn_send_two(&f->store.writer, "x", 1, NULL, 0), -1);
	assert_int_equal(errno, EPIPE);
	memsource_close(&a->m);
	memsource_close(&b->m);
}

/* ---- the bound and the buffer --------------------------------------------- */

static void
test_send_past_bound_takes_nothing(void **state)
{
	struct fixture *f = make_store(state, 10);
	struct test_reader *a = &f->readers[0];
	char got[16];
	size_t n;

	open_reader(f, a);
	send_str(f, "123456");
	errno = 0;
	assert_int_equal(conn_send_two(&f->store.writer, "abcde", 5, NULL, 0), -1);
	assert_int_equal(errno, EMSGSIZE);
	assert_int_equal(f->store.len, 6);
	/* Two parts that together pass it: neither goes in. */
	errno = 0;
	assert_int_equal(conn_send_two(&f->store.writer, "abc", 3, "de", 2), -1);
	assert_int_equal(errno, EMSGSIZE);
	assert_int_equal(f->store.len, 6);
	/* Up to the bound exactly, in two parts, in order. */
	assert_int_equal(conn_send_two(&f->store.writer, "78", 2, "9!", 2), 4);
	assert_int_equal(f->store.len, 10);
	errno = 0;
	assert_int_equal(conn_send_two(&f->store.writer, NULL, 0, "x", 1), -1);
	assert_int_equal(errno, EMSGSIZE);
	/* Never more room than the bound, however small. */
	assert_int_equal(f->store.cap, 10);

	assert_int_equal(conn_read(&a->m.src.conn, got, sizeof(got), &n), MOVE_OK);
	assert_int_equal(n, 10);
	assert_memory_equal(got, "123456789!", 10);
	assert_int_equal(read_one(a), MOVE_AGAIN);
	memsource_close(&a->m);
}

static unsigned char
pattern(size_t i)
{
	return (unsigned char)(i * 7 + i / 251);
}

static void
test_buffer_grows(void **state)
{
	struct fixture *f = make_store(state, 1 << 20);
	enum { TOTAL = 100 * 1024, PIECE = 1000 };
	static char bytes[TOTAL];
	struct test_reader *a = &f->readers[0];
	struct buf *b;
	size_t read = 0, n;
	enum move_status r;

	for (size_t i = 0; i < TOTAL; i++)
		bytes[i] = (char)pattern(i);
	open_reader(f, a);
	for (size_t off = 0; off < TOTAL; off += PIECE) {
		size_t len = TOTAL - off < PIECE ? TOTAL - off : PIECE;
		size_t half = len / 3;

		const char *p = bytes + off;
		ssize_t sent = conn_send_two(&f->store.writer, p, half, p + half, len - half);

		assert_int_equal(sent, len);
	}
	assert_int_equal(f->store.len, TOTAL);
	assert_true(f->store.cap >= TOTAL);
	assert_true(f->store.cap <= f->store.bound);

	/* Read back through a buffer, as an exchange does. */
	assert_non_null(b = buf_get());
	a->m.src.in = b;
	while ((r = conn_fill(&a->m.src.conn, b, &n)) == MOVE_OK) {
		assert_true(read + buf_len(b) <= TOTAL);
		assert_memory_equal(buf_head(b), bytes + read, buf_len(b));
		read += buf_len(b);
		b->start = b->end;
	}
	assert_int_equal(r, MOVE_AGAIN);
	assert_int_equal(read, TOTAL);
	/* Closing gives the buffer back. */
	memsource_close(&a->m);
	assert_null(a->m.src.in);
}

/* A bound between two doublings is where the buffer stops. */
static void
test_buffer_stops_at_bound(void **state)
{
	struct fixture *f = make_store(state, 20000);
	static const char piece[1000];

	for (int i = 0; i < 20; i++)
		assert_int_equal(conn_send_two(&f->store.writer, piece, sizeof(piece), NULL, 0),
		                 sizeof(piece));
	assert_int_equal(f->store.len, 20000);
	assert_int_equal(f->store.cap, 20000);
	errno = 0;
	assert_int_equal(conn_send_two(&f->store.writer, piece, 1, NULL, 0), -1);
	assert_int_equal(errno, EMSGSIZE);
}

/* ---- the ends' other directions ------------------------------------------- */

static void
test_writer_writable_when_asked(void **state)
{
	struct fixture *f = make_store(state, 1 << 20);
	char byte;
	size_t n;

	run(f);
	assert_int_equal(f->writer_calls, 0);
	conn_watch(&f->store.writer, false, true);
	assert_int_equal(f->writer_calls, 0);
	run(f);
	assert_int_equal(f->writer_calls, 1);
	assert_int_equal(f->writer_revents, EV_WRITE);
	/* Once per asking. */
	run(f);
	assert_int_equal(f->writer_calls, 1);
	conn_watch(&f->store.writer, false, false);
	run(f);
	assert_int_equal(f->writer_calls, 1);
	/* Nothing ever comes from the store's side. */
	assert_int_equal(conn_read(&f->store.writer, &byte, 1, &n), MOVE_AGAIN);
}

static void
test_sends_to_reader_discarded(void **state)
{
	static const char req[] = "GET http://h/ HTTP/1.1\r\nHost: h\r\n\r\n";
	struct fixture *f = make_store(state, 1 << 20);
	struct test_reader *a = &f->readers[0];

	send_str(f, "stored");
	open_reader(f, a);
	assert_int_equal(conn_send_two(&a->m.src.conn, req, strlen(req), "body", 4),
	                 strlen(req) + 4);
	assert_int_equal(f->store.len, strlen("stored"));
	read_expect(a, "stored");

	/* Always writable, when asked. */
	conn_watch(&a->m.src.conn, false, true);
	run(f);
	assert_int_equal(a->calls, 1);
	assert_int_equal(a->revents, EV_WRITE);
	memsource_close(&a->m);
}

/* ---- letting go ------------------------------------------------------------ */

static void
test_close_unlinks_and_calls_done_once(void **state)
{
	struct fixture *f = make_store(state, 1 << 20);
	struct test_reader *a = &f->readers[0], *b = &f->readers[1], *c = &f->readers[2];

	open_reader(f, a);
	open_reader(f, b);
	open_reader(f, c);
	assert_true(is_linked(&f->store, &a->m));
	assert_true(is_linked(&f->store, &b->m));
	assert_true(is_linked(&f->store, &c->m));

	/* One in the middle, then the first and the last. */
	memsource_close(&b->m);
	assert_false(is_linked(&f->store, &b->m));
	assert_true(is_linked(&f->store, &a->m));
	assert_true(is_linked(&f->store, &c->m));
	assert_null(b->m.store);
	assert_null(b->m.src.reader);
	assert_int_equal(b->done, 1);
	memsource_close(&b->m);
	assert_int_equal(b->done, 1);

	memsource_close(&c->m);
	memsource_close(&a->m);
	assert_true(kp_list_empty(&f->store.readers));
	assert_int_equal(a->done, 1);
	assert_int_equal(c->done, 1);
}

static void
test_close_drops_fed_event(void **state)
{
	struct fixture *f = make_store(state, 1 << 20);
	struct test_reader *a = &f->readers[0];

	open_reader(f, a);
	conn_watch(&a->m.src.conn, true, false);
	send_str(f, "x");
	memsource_close(&a->m);
	assert_false(ev_is_pending(&a->m.src.conn.rio));
	run(f);
	assert_int_equal(a->calls, 0);
	assert_int_equal(a->done, 1);
	/* Its memory may be a new reader before the loop runs: nothing stale reaches that one. */
	open_reader(f, a);
	run(f);
	assert_int_equal(a->calls, 0);

	/* The writer's likewise, when the store goes. */
	conn_watch(&f->store.writer, false, true);
	memstore_free(&f->store);
	run(f);
	assert_int_equal(f->writer_calls, 0);
}

static void
test_free_resets_open_readers(void **state)
{
	struct fixture *f = make_store(state, 1 << 20);
	struct test_reader *a = &f->readers[0], *b = &f->readers[1];

	open_reader(f, a);
	open_reader(f, b);
	send_str(f, "abc");
	read_expect(a, "abc");
	assert_int_equal(read_one(a), MOVE_AGAIN);
	conn_watch(&a->m.src.conn, true, false);

	memstore_free(&f->store);
	assert_true(kp_list_empty(&f->store.readers));
	assert_null(a->m.store);
	assert_null(b->m.store);
	run(f);
	assert_int_equal(a->calls, 1);
	errno = 0;
	assert_int_equal(read_one(a), MOVE_ERROR);
	assert_int_equal(errno, ECONNRESET);
	/* The bytes went with the store. */
	errno = 0;
	assert_int_equal(read_one(b), MOVE_ERROR);
	assert_int_equal(errno, ECONNRESET);

	/* Its exchange still lets go of it later, and hears of that once. */
	memsource_close(&a->m);
	memsource_close(&b->m);
	assert_int_equal(a->done, 1);
	assert_int_equal(b->done, 1);
}

static void
test_source_ops(void **state)
{
	struct fixture *f = make_store(state, 1 << 20);
	struct test_reader *a = &f->readers[0], *b = &f->readers[1];
	struct test_reader *c = &f->readers[2], *d = &f->readers[3];

	open_reader(f, a);
	open_reader(f, b);
	open_reader(f, c);
	open_reader(f, d);
	a->m.src.ops->release(&a->m.src, true);
	b->m.src.ops->release(&b->m.src, false);
	c->m.src.ops->close(&c->m.src);
	/* Nothing to detach from: the reader stays until it is closed. */
	d->m.src.ops->detach(&d->m.src);
	assert_true(is_linked(&f->store, &d->m));
	assert_int_equal(d->done, 0);
	assert_ptr_equal(KP_LIST_FIRST(&f->store.readers, struct memsource, link), &d->m);
	assert_ptr_equal(KP_LIST_LAST(&f->store.readers, struct memsource, link), &d->m);

	assert_int_equal(a->done, 1);
	assert_int_equal(b->done, 1);
	assert_int_equal(c->done, 1);
	assert_null(a->m.store);
	assert_null(b->m.src.reader);
	assert_null(c->m.store);

	d->m.src.ops->close(&d->m.src);
	assert_int_equal(d->done, 1);
	assert_true(kp_list_empty(&f->store.readers));
}

/* ---- slices ---------------------------------------------------------------- */

static unsigned prepare_calls;

/*
 * A slice's owner: once the store holds a head ending in an empty line,
 * serve "SLICE\n" and then the first 5 bytes behind the head; a head that
 * starts with "BAD" is refused.
 */
static enum memsource_step
prepare_five(struct memsource *m)
{
	const char *data = m->store->data;
	const char *end = data ? memmem(data, m->store->len, "\n\n", 2) : NULL;

	prepare_calls++;
	if (!end)
		return MEMSOURCE_NOT_YET;
	if (m->store->len >= 3 && memcmp(data, "BAD", 3) == 0)
		return MEMSOURCE_CUT;
	assert_non_null(m->prefix = buf_get());
	memcpy(buf_tail(m->prefix), "SLICE\n", 6);
	m->prefix->end += 6;
	m->offset = (size_t)(end + 2 - data);
	m->until = m->offset + 5;
	return MEMSOURCE_READ;
}

static void
open_slice(struct fixture *f, struct test_reader *t)
{
	memset(t, 0, sizeof(*t));
	t->r.event = reader_event;
	t->m.done = reader_done;
	memsource_open_slice(&t->m, &f->store, prepare_five);
	t->m.src.reader = &t->r;
	prepare_calls = 0;
}

/* A slice is its prefix, then its window of the store, then an end, whatever follows. */
static void
test_slice_serves_prefix_and_window(void **state)
{
	struct fixture *f = make_store(state, 1 << 20);
	struct test_reader *t = &f->readers[0];

	open_slice(f, t);
	assert_true(t->m.src.held);
	send_str(f, "head\n");
	assert_int_equal(read_one(t), MOVE_AGAIN);
	send_str(f, "\n0123");
	read_expect(t, "SLICE\n");
	read_expect(t, "0123");
	assert_int_equal(read_one(t), MOVE_AGAIN);
	send_str(f, "456789");
	read_expect(t, "4");
	/* The window is over: an end, though the store goes on and is still open. */
	assert_int_equal(read_one(t), MOVE_EOF);
	memsource_close(&t->m);
}

/* Until the store holds more, an unprepared slice is not tried again: no busy loop. */
static void
test_slice_waits_without_spinning(void **state)
{
	struct fixture *f = make_store(state, 1 << 20);
	struct test_reader *t = &f->readers[0];

	open_slice(f, t);
	send_str(f, "hea");
	assert_int_equal(read_one(t), MOVE_AGAIN);
	assert_int_equal(prepare_calls, 1);
	conn_watch(&t->m.src.conn, true, false);
	run(f);
	run(f);
	assert_int_equal(t->calls, 0);
	send_str(f, "d\n\nxyzzy");
	run(f);
	assert_int_equal(t->calls, 1);
	read_expect(t, "SLICE\n");
	read_expect(t, "xyzzy");
	assert_int_equal(prepare_calls, 2);
	memsource_close(&t->m);
}

/* A head the owner refuses, or a store cut before one: a reset, before any byte. */
static void
test_slice_refused_or_cut_resets(void **state)
{
	struct fixture *f = make_store(state, 1 << 20);
	struct test_reader *t = &f->readers[0], *u = &f->readers[1];

	open_slice(f, t);
	send_str(f, "BAD head\n\nbody");
	errno = 0;
	assert_int_equal(read_one(t), MOVE_ERROR);
	assert_int_equal(errno, ECONNRESET);
	memsource_close(&t->m);

	memstore_free(&f->store);
	make_store(state, 1 << 20);
	open_slice(f, u);
	send_str(f, "half a he");
	memstore_fail(&f->store);
	errno = 0;
	assert_int_equal(read_one(u), MOVE_ERROR);
	assert_int_equal(errno, ECONNRESET);
	memsource_close(&u->m);
}

/* Each test with a fresh loop and store of its own. */
#define STORE_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		STORE_TEST(test_readers_at_own_offsets),
		STORE_TEST(test_caught_up_reader_is_woken),
		STORE_TEST(test_end_reads_as_eof),
		STORE_TEST(test_failure_resets_past_held_bytes),
		STORE_TEST(test_send_past_bound_takes_nothing),
		STORE_TEST(test_buffer_grows),
		STORE_TEST(test_buffer_stops_at_bound),
		STORE_TEST(test_writer_writable_when_asked),
		STORE_TEST(test_sends_to_reader_discarded),
		STORE_TEST(test_close_unlinks_and_calls_done_once),
		STORE_TEST(test_close_drops_fed_event),
		STORE_TEST(test_free_resets_open_readers),
		STORE_TEST(test_source_ops),
		STORE_TEST(test_slice_serves_prefix_and_window),
		STORE_TEST(test_slice_waits_without_spinning),
		STORE_TEST(test_slice_refused_or_cut_resets),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
