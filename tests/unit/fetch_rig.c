/*
 * The fetch engine with its exchange stood in for (fetch_rig.h). ra_fetch.c
 * is included, so that a piece can be answered through the engine's own
 * exchange_ops and looked into.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../src/readahead/ra_fetch.c"

#include "fetch_rig.h"

struct rig rig;
struct fakes fakes;

/* The connection a fetch's answer came over: no socket, so no TCP figures. */
static struct source origin_src = {.conn = {.fd = -1}};

/* ---- the exchange and dispatch, stood in for ------------------------------------- */

/* The stand-ins touch nothing of struct exchange beyond what ra_fetch.c itself reads. */
void
exchange_init(struct exchange *ex, const struct proxy_env *env, struct conn *down,
              struct buf **in, struct buf **out, const struct exchange_ops *ops, bool to_memory)
{
	(void)in;
	(void)out;
	assert_ptr_equal(env, &rig.env);
	assert_ptr_equal(ops, &fetch_ops);
	assert_true(to_memory);
	assert_ptr_equal(down, &piece_of(ex)->mem.writer);
}

int
exchange_start(struct exchange *ex, const struct http_target *target, const char *head,
               size_t len, enum dispatch_how how)
{
	struct started *s;

	(void)target;
	assert_true(fakes.n < RIG_MAX_STARTED);
	/* A head no buffer holds fails at once, as the exchange's does. */
	if (len > RIG_HEAD_MAX || fakes.fail_starts)
		return -1;
	s = &fakes.started[fakes.n++];
	assert_true(len < sizeof(s->head));
	s->piece = piece_of(ex);
	memcpy(s->head, head, len);
	s->head[len] = '\0';
	s->how = how;
	if (fakes.refuse_start_no == fakes.n)
		fetch_ops.reply(ex, 502, "a pipelined request could not be written whole", false);
	return 0;
}

void
exchange_release(struct exchange *ex)
{
	struct ra_piece *p = piece_of(ex);

	/* Released while fetching: dropped by its owner (ra_piece_drop releases it first). */
	if (p->state == PIECE_FETCHING)
		fakes.cut++;
	/* Released once dropped: it is being freed (piece_free), and the test forgets it. */
	else if (p->dropped)
		for (unsigned i = 0; i < fakes.n; i++)
			if (fakes.started[i].piece == p)
				fakes.started[i].piece = NULL;
	ex->priv.src = NULL;
}

uint16_t
exchange_status(const struct exchange *ex)
{
	return ex->priv.status;
}

struct conn_path
exchange_path(const struct exchange *ex)
{
	return ex->priv.src ? conn_path_figures(&ex->priv.src->conn) : (struct conn_path){0, 0};
}

void
dispatch_shrink_host(struct dispatch *d, const char *key, unsigned keep)
{
	(void)d;
	fakes.shrunk++;
	snprintf(fakes.shrunk_key, sizeof(fakes.shrunk_key), "%s", key);
	fakes.shrunk_to = keep;
}

void
exchange_promote(struct exchange *ex)
{
	(void)ex;
	fakes.promoted++;
}

void
exchange_watch(struct exchange *ex, bool *down_read, bool *down_write)
{
	(void)ex;
	*down_read = *down_write = false;
}

void
exchange_run(struct exchange *ex)
{
	(void)ex;
	fail_msg("a piece's memory woke an exchange the test stands in for");
}

/* ---- the world ---------------------------------------------------------------- */

static void
reader_event(struct source_reader *r, int revents)
{
	(void)r;
	(void)revents;
	rig.reader_woken++;
}

int
rig_setup(size_t memory)
{
	memset(&rig, 0, sizeof(rig));
	memset(&fakes, 0, sizeof(fakes));
	memset(&kp_stats, 0, sizeof(kp_stats));
	rig.loop = ev_loop_new(0);
	clock_init_manual(&rig.clock, 1000);
	/* Only what the engine, read-ahead and split read of the config (config.c has the defaults). */
	rig.cfg.fetch_memory = memory;
	rig.cfg.max_header_bytes = RIG_HEAD_MAX;
	rig.cfg.io_timeout = 60;
	rig.cfg.response_timeout = 60;
	rig.env.loop = rig.loop;
	rig.env.clock = &rig.clock;
	rig.env.cfg = &rig.cfg;
	rig.reader.event = reader_event;
	rig.fe = ra_fetcher_new(&rig.env);
	return rig.loop && rig.fe ? 0 : -1;
}

void
rig_teardown(void)
{
	ra_fetcher_free(rig.fe);
	ev_loop_destroy(rig.loop);
}

void
rig_iteration_ends(void)
{
	ev_run(rig.loop, EVRUN_NOWAIT);
}

void
rig_new_fetcher(void)
{
	ra_fetcher_free(rig.fe);
	assert_non_null(rig.fe = ra_fetcher_new(&rig.env));
}

size_t
rig_charged(void)
{
	return rig.fe->charged;
}

size_t
rig_share_charged(const struct ra_key *key)
{
	const struct ra_share *sh = share_find(rig.fe, key);

	return sh ? sh->charged : 0;
}

/* ---- clients ------------------------------------------------------------------ */

void
asker_init(struct asker *a, const char *ip, uint16_t port, const char *url)
{
	memset(a, 0, sizeof(*a));
	if (strchr(ip, ':')) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&a->addr;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		assert_int_equal(inet_pton(AF_INET6, ip, &sin6->sin6_addr), 1);
	} else {
		struct sockaddr_in *sin = (struct sockaddr_in *)&a->addr;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		assert_int_equal(inet_pton(AF_INET, ip, &sin->sin_addr), 1);
	}
	snprintf(a->url, sizeof(a->url), "%s", url);
	assert_int_equal(http_parse_target(a->url, strlen(a->url), &a->target), 0);
	a->ask.client = (const struct sockaddr *)&a->addr;
	a->ask.dispatch_key = a->target.key;
	a->ask.target = &a->target;
}

void
head_parse(struct text_head *m, llhttp_type_t type, const char *fmt, ...)
{
	struct http_parser ps;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m->text, sizeof(m->text), fmt, ap);
	va_end(ap);
	http_parser_init(&ps, type, RIG_HEAD_MAX, RIG_HEAD_MAX);
	http_parser_start(&ps, &m->h);
	assert_int_equal(http_parse_head(&ps, m->text, strlen(m->text)), HTTP_PARSE_DONE);
}

struct buf *
head_buf(const char *text)
{
	struct buf *b = buf_get();

	assert_non_null(b);
	assert_true(strlen(text) <= buf_room(b));
	memcpy(buf_tail(b), text, strlen(text));
	b->end += strlen(text);
	return b;
}

enum move_status
read_all(struct source *src, char *out, size_t cap, size_t *len)
{
	enum move_status ms;
	size_t got;

	*len = 0;
	while ((ms = conn_read(&src->conn, out + *len, cap - *len, &got)) == MOVE_OK)
		*len += got;
	/* As the exchange does: nothing now, so it waits to be told of more. */
	conn_watch(&src->conn, ms == MOVE_AGAIN, false);
	return ms;
}

void
client_done(struct source *src)
{
	src->ops->release(src, false);
}

const char *
fetched_since(unsigned from)
{
	static char out[4096];
	size_t len = 0;

	out[0] = '\0';
	for (unsigned i = from; i < fakes.n; i++) {
		const char *h = fakes.started[i].head;
		const char *sp = strchr(h + 4, ' ');
		const char *range = strstr(h, "\r\nRange: bytes=");
		int n;

		assert_non_null(sp);
		n = snprintf(out + len, sizeof(out) - len, "%s%.*s", i > from ? ", " : "",
		             (int)(sp - h - 4), h + 4);
		len += (size_t)n;
		if (range) {
			range += 2;
			n = snprintf(out + len, sizeof(out) - len, " %.*s",
			             (int)(strstr(range, "\r\n") - range - 7), range + 7);
			len += (size_t)n;
		}
		assert_true(len < sizeof(out));
	}
	return out;
}

/* ---- a piece ------------------------------------------------------------------- */

struct byte_range
piece_range(const struct ra_piece *p)
{
	return p->range;
}

bool
piece_is_whole(const struct ra_piece *p)
{
	return p->whole;
}

uint64_t
piece_expect(const struct ra_piece *p)
{
	return p->expect;
}

size_t
piece_charged(const struct ra_piece *p)
{
	return p->charged;
}

bool
piece_fetching(const struct ra_piece *p)
{
	return p && p->state == PIECE_FETCHING && !p->dropped;
}

char
pattern(uint64_t pos)
{
	return (char)('a' + pos % 23);
}

void
answer_begins(struct ra_piece *p)
{
	p->ex.priv.src = &origin_src;
	fetch_ops.heard(&p->ex);
}

void
arrive(struct ra_piece *p, const char *bytes, size_t len)
{
	assert_int_equal(conn_send_two(&p->mem.writer, bytes, len, NULL, 0), (ssize_t)len);
}

void
arrive_body(struct ra_piece *p, uint64_t first, uint64_t n)
{
	char chunk[4096];

	while (n > 0) {
		size_t k = n < sizeof(chunk) ? (size_t)n : sizeof(chunk);

		for (size_t i = 0; i < k; i++)
			chunk[i] = pattern(first + i);
		arrive(p, chunk, k);
		first += k;
		n -= k;
	}
}

void
answer_ends(struct ra_piece *p, int status)
{
	p->ex.priv.status = (uint16_t)status;
	fetch_ops.finished(&p->ex);
}

void
answer_cut(struct ra_piece *p, const char *why)
{
	fetch_ops.abort(&p->ex, why);
}

void
answer_refused_locally(struct ra_piece *p, int status)
{
	fetch_ops.reply(&p->ex, status, "the test's", false);
}

size_t
range_head(char *out, size_t cap, const char *fields, uint64_t first, uint64_t last,
           uint64_t complete)
{
	int n = snprintf(out, cap,
	                 "HTTP/1.1 206 Partial Content\r\n%sContent-Range: bytes %llu-%llu/%llu\r\n"
	                 "Content-Length: %llu\r\n\r\n",
	                 fields, (unsigned long long)first, (unsigned long long)last,
	                 (unsigned long long)complete, (unsigned long long)(last - first + 1));

	assert_true(n > 0 && (size_t)n < cap);
	return (size_t)n;
}

void
answer_of(struct ra_piece *p, const char *fields, uint64_t complete)
{
	char head[1024];
	uint64_t last = p->range.last < complete ? p->range.last : complete - 1;

	answer_begins(p);
	arrive(p, head, range_head(head, sizeof(head), fields, p->range.first, last, complete));
	arrive_body(p, p->range.first, last - p->range.first + 1);
	answer_ends(p, 206);
}

void
answer_status(struct ra_piece *p, int status)
{
	char head[128];
	int n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n", status,
	                 http_status_reason(status));

	answer_begins(p);
	arrive(p, head, (size_t)n);
	answer_ends(p, status);
}
