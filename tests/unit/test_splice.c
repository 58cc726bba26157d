/*
 * The byte mover: bytes arrive whole and in order through the pipe, through
 * the buffer, and across a switch from one to the other when the kernel
 * answers EINVAL; pipes go back to the pool only when empty.
 * splice(2) and fcntl(2) are wrapped (-Wl,--wrap=) so a test can make them
 * fail.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "kp/buf.h"
#include "kp/splice.h"
#include "kp/stats.h"

ssize_t __real_splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
                      unsigned int flags);
ssize_t __wrap_splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
                      unsigned int flags);

static int splice_einval_from;   /* calls from this one on fail with EINVAL; 0: never */
static int splice_calls;
static int setpipe_refusals;     /* F_SETPIPE_SZ calls still to fail with EPERM */

int __real_fcntl(int fd, int cmd, ...);
int __wrap_fcntl(int fd, int cmd, ...);

int
__wrap_fcntl(int fd, int cmd, ...)
{
	va_list ap;
	long arg;

	va_start(ap, cmd);
	arg = va_arg(ap, long);   /* every command the mover uses takes an int or none */
	va_end(ap);
	if (cmd == F_SETPIPE_SZ && setpipe_refusals > 0) {
		setpipe_refusals--;
		errno = EPERM;   /* what fs.pipe-user-pages-soft answers */
		return -1;
	}
	return __real_fcntl(fd, cmd, arg);
}

ssize_t
__wrap_splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
              unsigned int flags)
{
	splice_calls++;
	if (splice_einval_from && splice_calls >= splice_einval_from) {
		errno = EINVAL;
		return -1;
	}
	return __real_splice(fd_in, off_in, fd_out, off_out, len, flags);
}

/*
 * src[1] is written by the test and read by the mover through src_end (on
 * src[0]); the mover writes to dst_end (on dst[1]) and the test reads dst[0].
 */
struct wires {
	int src[2];
	int dst[2];
	struct conn src_end, dst_end;
};

static int
setup(void **state)
{
	static struct wires w;

	buf_init(4096);
	pipes_init(65536, 4, NULL);
	splice_einval_from = 0;
	splice_calls = 0;
	setpipe_refusals = 0;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, w.src), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, w.dst), 0);
	conn_init(&w.src_end, EV_DEFAULT, w.src[0], &conn_tcp_ops, NULL);
	conn_init(&w.dst_end, EV_DEFAULT, w.dst[1], &conn_tcp_ops, NULL);
	*state = &w;
	return 0;
}

static int
teardown(void **state)
{
	struct wires *w = *state;

	close(w->src[0]);
	close(w->src[1]);
	close(w->dst[0]);
	close(w->dst[1]);
	pipes_shutdown();
	buf_drain_free_list();
	return 0;
}

static void
fill_pattern(char *p, size_t n, size_t from)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (char)((from + i) * 7 + 3);
}

/* Moves everything the source holds to the destination; returns bytes read back. */
static size_t
shuttle(struct mover *m, struct wires *w, char *out, size_t cap)
{
	size_t got = 0, moved;
	ssize_t n;

	for (int rounds = 0; rounds < 10000; rounds++) {
		enum move_status pulled = mover_pull(m, &w->src_end, SIZE_MAX, &moved);

		assert_true(pulled == MOVE_OK || pulled == MOVE_AGAIN || pulled == MOVE_FULL);
		while (mover_held(m)) {
			enum move_status pushed = mover_push(m, &w->dst_end, &moved);

			assert_true(pushed == MOVE_OK || pushed == MOVE_AGAIN);
			while ((n = read(w->dst[0], out + got, cap - got)) > 0)
				got += (size_t)n;
		}
		if (pulled == MOVE_AGAIN)
			break;
	}
	while ((n = read(w->dst[0], out + got, cap - got)) > 0)
		got += (size_t)n;
	return got;
}

static void
spliced_bytes_arrive_whole_and_the_pipe_goes_back(void **state)
{
	struct wires *w = *state;
	static char in[60000], out[60000];
	struct mover m;

	fill_pattern(in, sizeof(in), 0);
	assert_int_equal(write(w->src[1], in, sizeof(in)), (ssize_t)sizeof(in));
	mover_init(&m, false);
	assert_int_equal(shuttle(&m, w, out, sizeof(out)), sizeof(in));
	assert_memory_equal(in, out, sizeof(in));
	assert_false(m.copy);
	/* Empty now: the pipe is back in the pool, the mover holds none. */
	assert_null(m.pipe);
	assert_int_equal(pipes_pooled(), 1);
	mover_release(&m);
}

static void
einval_on_pull_falls_back_to_copying(void **state)
{
	struct wires *w = *state;
	static char in[20000], out[20000];
	struct mover m;

	fill_pattern(in, sizeof(in), 100);
	assert_int_equal(write(w->src[1], in, sizeof(in)), (ssize_t)sizeof(in));
	splice_einval_from = 1;
	mover_init(&m, false);
	assert_int_equal(shuttle(&m, w, out, sizeof(out)), sizeof(in));
	assert_memory_equal(in, out, sizeof(in));
	assert_true(m.copy);
	mover_release(&m);
}

static void
einval_on_push_delivers_what_the_pipe_holds_in_order(void **state)
{
	struct wires *w = *state;
	static char in[30000], out[30000];
	struct mover m;
	size_t moved, got = 0;
	ssize_t n;

	fill_pattern(in, sizeof(in), 5);
	assert_int_equal(write(w->src[1], in, 10000), 10000);
	mover_init(&m, false);
	/* The first 10000 bytes go into the pipe by a real splice... */
	assert_int_equal(mover_pull(&m, &w->src_end, SIZE_MAX, &moved), MOVE_OK);
	assert_int_equal(moved, 10000);
	/* ...then splice stops working: out of the pipe and on through the buffer. */
	splice_einval_from = splice_calls + 1;
	assert_int_equal(write(w->src[1], in + 10000, 20000), 20000);
	for (int i = 0; i < 1000 && got < sizeof(in); i++) {
		mover_pull(&m, &w->src_end, SIZE_MAX, &moved);
		while (mover_held(&m) && mover_push(&m, &w->dst_end, &moved) == MOVE_OK)
			;
		while ((n = read(w->dst[0], out + got, sizeof(out) - got)) > 0)
			got += (size_t)n;
	}
	assert_int_equal(got, sizeof(in));
	assert_memory_equal(in, out, sizeof(in));
	assert_true(m.copy);
	mover_release(&m);
}

static void
preloaded_bytes_go_first(void **state)
{
	struct wires *w = *state;
	struct mover m;
	struct buf *b = buf_get();
	char out[64] = {0};
	size_t moved;
	ssize_t n;

	memcpy(buf_tail(b), "HTTP/1.1 101 x\r\n\r\n", 18);
	b->end += 18;
	mover_init(&m, false);
	assert_true(mover_preload(&m, b));
	assert_int_equal(write(w->src[1], "frame", 5), 5);
	assert_int_equal(mover_pull(&m, &w->src_end, SIZE_MAX, &moved), MOVE_OK);
	assert_int_equal(mover_held(&m), 23);
	while (mover_held(&m))
		assert_int_equal(mover_push(&m, &w->dst_end, &moved), MOVE_OK);
	n = read(w->dst[0], out, sizeof(out));
	assert_int_equal(n, 23);
	assert_memory_equal(out, "HTTP/1.1 101 x\r\n\r\nframe", 23);
	mover_release(&m);
}

static void
a_pipe_holding_bytes_is_never_pooled(void **state)
{
	struct wires *w = *state;
	struct mover m;
	size_t moved;
	uint64_t open_before;

	assert_int_equal(write(w->src[1], "stale bytes", 11), 11);
	mover_init(&m, false);
	assert_int_equal(mover_pull(&m, &w->src_end, SIZE_MAX, &moved), MOVE_OK);
	assert_non_null(m.pipe);
	open_before = kp_stats.pipes_open;
	mover_release(&m);
	assert_int_equal(pipes_pooled(), 0);
	assert_int_equal(kp_stats.pipes_open, open_before - 1);
}

static void
pull_respects_the_limit_and_reports_eof(void **state)
{
	struct wires *w = *state;
	struct mover m;
	size_t moved;

	assert_int_equal(write(w->src[1], "0123456789", 10), 10);
	shutdown(w->src[1], SHUT_WR);
	mover_init(&m, false);
	assert_int_equal(mover_pull(&m, &w->src_end, 4, &moved), MOVE_OK);
	assert_int_equal(moved, 4);
	assert_int_equal(mover_pull(&m, &w->src_end, SIZE_MAX, &moved), MOVE_OK);
	assert_int_equal(moved, 6);
	assert_int_equal(mover_pull(&m, &w->src_end, SIZE_MAX, &moved), MOVE_EOF);
	mover_release(&m);
}

/* A pipe refused its size makes do with the default; the next asks again. */
static void
a_refused_pipe_size_is_that_pipes_alone(void **state)
{
	struct wires *w = *state;
	struct mover a, b;
	size_t moved;

	pipes_shutdown();
	pipes_init(1 << 20, 4, NULL);
	mover_init(&a, false);
	mover_init(&b, false);
	setpipe_refusals = 1;
	assert_int_equal(write(w->src[1], "first", 5), 5);
	assert_int_equal(mover_pull(&a, &w->src_end, SIZE_MAX, &moved), MOVE_OK);
	assert_int_equal(moved, 5);
	assert_int_equal(a.pipe->size, (size_t)fcntl(a.pipe->wr, F_GETPIPE_SZ));
	assert_true(a.pipe->size < (1 << 20));
	/* a holds its pipe, so b gets a new one, and the full size. */
	assert_int_equal(write(w->dst[0], "second", 6), 6);
	assert_int_equal(mover_pull(&b, &w->dst_end, SIZE_MAX, &moved), MOVE_OK);
	assert_int_equal(moved, 6);
	assert_int_equal(b.pipe->size, 1 << 20);
	assert_true(mover_has_room(&a));
	mover_release(&a);
	mover_release(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(spliced_bytes_arrive_whole_and_the_pipe_goes_back,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(einval_on_pull_falls_back_to_copying, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(einval_on_push_delivers_what_the_pipe_holds_in_order,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(preloaded_bytes_go_first, setup, teardown),
		cmocka_unit_test_setup_teardown(a_pipe_holding_bytes_is_never_pooled, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(pull_respects_the_limit_and_reports_eof, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(a_refused_pipe_size_is_that_pipes_alone, setup,
		                                teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
