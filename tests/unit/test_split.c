/*
 * Splitting a download (ra_split) without an origin: the rules that need
 * the clock, or an answer cut at a chosen byte, or the memory full at a
 * chosen moment. Piece sizes, the back-off and its ten minutes, the memory
 * of URLs that answer whole; a fetch ended mid-body and resumed from the
 * next byte; resumes without progress; a later piece of another version;
 * memory full during a resume and for the next piece, and the retry timer
 * that goes on once it is back; a client's own range.
 *
 * ra_split.c is included, so that a download's connections can be looked
 * at; its pieces run on the fetch rig (fetch_rig.h), which records each
 * fetch and lets the test answer it, cut it, or leave it. Time is the rig's
 * manual clock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kp/buf.h"
#include "kp/clock.h"
#include "kp/config.h"
#include "kp/dispatch.h"
#include "kp/evglue.h"
#include "kp/hostpattern.h"
#include "kp/log.h"
#include "kp/memconn.h"
#include "kp/ra_origins.h"
#include "kp/ra_split.h"
#include "kp/ranges.h"
#include "kp/stats.h"

/*
 * Allocations in ra_split.c fail on demand: the n-th from now (0: none).
 * Declared above, so that the module's own includes are already read.
 */
static unsigned fail_alloc_in;

static bool
alloc_fails(void)
{
	return fail_alloc_in && --fail_alloc_in == 0;
}

static void *
split_calloc(size_t n, size_t size)
{
	return alloc_fails() ? NULL : calloc(n, size);
}

static struct buf *
split_buf_get(void)
{
	return alloc_fails() ? NULL : buf_get();
}

#define calloc split_calloc
#define buf_get split_buf_get
#include "../../src/readahead/ra_split.c"
#undef calloc
#undef buf_get

#include "fetch_rig.h"

#define MEMORY (1u << 20)
#define HALF (MEMORY / 2)

/* The object split downloads ask for: longer than a few pieces of any size below. */
#define SPLIT_OBJ (1024u * 1024)

/* An answer's fields beside Content-Range and Content-Length: two versions of the object. */
#define V1 "Content-Type: application/octet-stream\r\nETag: \"v1\"\r\n"
#define V2 "Content-Type: application/octet-stream\r\nETag: \"v2\"\r\n"

static int
setup(void **state)
{
	(void)state;
	return rig_setup(MEMORY);
}

static int
teardown(void **state)
{
	(void)state;
	rig_teardown();
	return 0;
}

static struct ra_split *
split_new(size_t split_size, unsigned connections)
{
	struct ra_split *sp;

	rig.cfg.split[0] = "o.example";
	rig.cfg.nsplit = 1;
	rig.cfg.split_size = split_size;
	rig.cfg.split_connections = connections;
	sp = ra_split_new(&rig.env, rig.fe);
	assert_non_null(sp);
	return sp;
}

/* The client's GET (Range spec or NULL) reaches ra_split: its source, or NULL. */
static struct source *
split_asks(struct ra_split *sp, const struct asker *a, const char *range)
{
	struct text_head req;
	struct source *src;
	char range_line[128] = "";

	if (range)
		snprintf(range_line, sizeof(range_line), "Range: bytes=%s\r\n", range);
	head_parse(&req, HTTP_REQUEST, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", a->url,
	           a->target.authority, range_line);
	src = ra_split_serve(sp, &a->ask, &req.h, req.text);
	if (src)
		src->reader = &rig.reader;
	return src;
}

/* What a split download's client was given, head and body. */
static struct {
	char got[SPLIT_OBJ + 4096];
	size_t len;
} taken;

/* A client's request (Range spec or NULL) for the split object: its source, nothing asked or taken before. */
static struct source *
split_download_of(struct ra_split *sp, struct asker *a, const char *range)
{
	struct source *src;

	fakes.n = 0;
	taken.len = 0;
	asker_init(a, "192.0.2.1", 40000, "http://o.example/big");
	src = split_asks(sp, a, range);
	assert_non_null(src);
	return src;
}

static struct source *
split_download(struct ra_split *sp, struct asker *a)
{
	return split_download_of(sp, a, NULL);
}

/* The bytes a started fetch asked for, from its Range. */
static struct byte_range
asked_range(const struct started *s)
{
	const char *r = strstr(s->head, "\r\nRange: bytes=");
	unsigned long long first, last;

	assert_non_null(r);
	assert_int_equal(sscanf(r, "\r\nRange: bytes=%llu-%llu", &first, &last), 2);
	return (struct byte_range){first, last};
}

/* The origin answers a piece with the whole object of length bytes: status, fields, body. */
static void
answer_whole(struct ra_piece *p, int status, const char *fields, uint64_t length)
{
	char head[512];
	int n = snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\n%sContent-Length: %llu\r\n\r\n",
	                 status, http_status_reason(status), fields, (unsigned long long)length);

	answer_begins(p);
	arrive(p, head, (size_t)n);
	arrive_body(p, 0, length);
	answer_ends(p, status);
}

/* The head of piece p's 206 (of an object of complete bytes) arrives, and body bytes of it. */
static void
answer_part(struct ra_piece *p, const char *fields, uint64_t complete, uint64_t body)
{
	char head[1024];
	struct byte_range r = piece_range(p);

	answer_begins(p);
	arrive(p, head, range_head(head, sizeof(head), fields, r.first, r.last, complete));
	arrive_body(p, r.first, body);
}

/* The client reads what src yields now; the status that stopped it. */
static enum move_status
split_read(struct source *src)
{
	size_t n;
	enum move_status ms = read_all(src, taken.got + taken.len, sizeof(taken.got) - taken.len, &n);

	taken.len += n;
	return ms;
}

/* The body the client got so far, the head skipped: its length, and a check of every byte from first. */
static uint64_t
body_taken(uint64_t first)
{
	const char *body = memmem(taken.got, taken.len, "\r\n\r\n", 4), *end;

	assert_non_null(body);
	body += 4;
	end = taken.got + taken.len;
	for (const char *c = body; c < end; c++)
		if (*c != pattern(first + (uint64_t)(c - body)))
			fail_msg("byte %td of the body is not the object's", c - body);
	return (uint64_t)(end - body);
}

/*
 * The client reads src to its end while the origin answers every fetch
 * started from *answered on, as a V1 object of complete bytes; loop
 * iterations and the clock go on between reads. The body it got (the head
 * skipped) is checked byte for byte from first; its length is returned.
 */
static uint64_t
split_read_from(struct source *src, unsigned *answered, uint64_t complete, uint64_t first)
{
	enum move_status ms = MOVE_AGAIN;

	for (unsigned round = 0; round < 1000 && ms != MOVE_EOF; round++) {
		/* Pieces dropped before their answer came (given way, past the end) are not answered. */
		for (; *answered < fakes.n; (*answered)++)
			if (piece_fetching(fakes.started[*answered].piece))
				answer_of(fakes.started[*answered].piece, V1, complete);
		if ((ms = split_read(src)) == MOVE_EOF)
			break;
		assert_int_equal(ms, MOVE_AGAIN);
		rig_iteration_ends();
		clock_advance(&rig.clock, 0.05);
	}
	assert_int_equal(ms, MOVE_EOF);
	return body_taken(first);
}

static uint64_t
split_read_through(struct source *src, unsigned *answered, uint64_t complete)
{
	return split_read_from(src, answered, complete, 0);
}

/* The download behind a source of ra_split's. */
static struct download *
download_of(struct source *src)
{
	return container_of(src, struct download, m.src);
}

/* The client's download ends; nothing of it stays counted. */
static void
download_ends(struct ra_split *sp, struct source *src)
{
	client_done(src);
	rig_iteration_ends();
	assert_int_equal(kp_stats.fetch_memory_bytes, 0);
	assert_int_equal(sp->downloads, 0);
}

/* Another client (192.0.2.<n>) holds bytes of the memory, as a shelf or a series would. */
static void
others_hold(unsigned n, size_t bytes)
{
	struct asker other;
	struct ra_key k;
	char ip[32];

	snprintf(ip, sizeof(ip), "198.51.100.%u", n);
	asker_init(&other, ip, 40000, "http://o.example/other");
	ra_key_make(&k, &other.ask, other.target.path, other.target.path_len);
	assert_true(ra_memory_charge(rig.fe, &k, bytes));
}

static void
others_let_go(unsigned n, size_t bytes)
{
	struct asker other;
	struct ra_key k;
	char ip[32];

	snprintf(ip, sizeof(ip), "198.51.100.%u", n);
	asker_init(&other, ip, 40000, "http://o.example/other");
	ra_key_make(&k, &other.ask, other.target.path, other.target.path_len);
	ra_memory_discharge(rig.fe, &k, bytes);
}

/*
 * Other clients take every byte of the memory left: the half of one, and
 * the rest by another. What they took is returned, to give back.
 */
static size_t
others_fill_the_memory(void)
{
	size_t rest;

	others_hold(1, HALF);
	rest = MEMORY - rig_charged();
	others_hold(2, rest);
	assert_int_equal(rig_charged(), MEMORY);
	return rest;
}

/* ---- piece sizes ---------------------------------------------------------------- */

/*
 * Rule: no piece is longer than --split-size, whatever the connections
 * and the memory make of the rest (an origin may serve nothing longer at
 * full speed); the pieces cover the object in order, each byte once.
 */
static void
pieces_are_never_longer_than_the_split_size(void **state)
{
	static const struct {
		size_t split_size;
		unsigned connections;
	} rows[] = {
		{64 * 1024, 1}, {64 * 1024, 4}, {128 * 1024, 2}, {256 * 1024, 4}, {448 * 1024, 1},
		{448 * 1024, 2},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ra_split *sp = split_new(rows[i].split_size, rows[i].connections);
		unsigned answered = 0;
		uint64_t next = 0;
		struct asker a;
		struct source *src;

		src = split_download(sp, &a);
		assert_int_equal(split_read_through(src, &answered, SPLIT_OBJ), SPLIT_OBJ);
		for (unsigned f = 0; f < fakes.n; f++) {
			struct byte_range r = asked_range(&fakes.started[f]);

			if (r.last - r.first + 1 > rows[i].split_size || r.first != next)
				fail_msg("row %zu: piece %u asked bytes %llu-%llu", i, f,
				         (unsigned long long)r.first, (unsigned long long)r.last);
			next = r.last + 1;
		}
		assert_true(next >= SPLIT_OBJ);
		download_ends(sp, src);
		ra_split_free(sp);
	}
}

/* ---- the back-off --------------------------------------------------------------- */

/*
 * Rule: a 403 to a piece on the second connection backs the host off to one
 * connection for ten minutes, by the clock; the piece is asked again, with
 * If-Range, on one, and the client gets every byte.
 */
static void
refused_second_connection_backs_off_for_ten_minutes(void **state)
{
	struct ra_split *sp = split_new(64 * 1024, 2);
	unsigned answered;
	struct asker a;
	struct source *src;

	(void)state;
	src = split_download(sp, &a);
	assert_int_equal(connections_for(sp, &a.target), 2);
	assert_string_equal(fetched_since(0), "/big bytes=0-65535, /big bytes=65536-131071");
	answer_of(fakes.started[0].piece, V1, SPLIT_OBJ);
	answer_status(fakes.started[1].piece, 403);
	answered = fakes.n;
	assert_int_equal(split_read(src), MOVE_AGAIN);
	assert_int_equal(kp_stats.split_backoffs, 1);
	assert_int_equal(connections_for(sp, &a.target), 1);
	/* The host's other connections are closed, under the key its fetches go by. */
	assert_int_equal(fakes.shrunk, 1);
	assert_string_equal(fakes.shrunk_key, a.ask.dispatch_key);
	assert_int_equal(fakes.shrunk_to, 1);
	/* The refused piece again, on one connection, of the version the first piece was. */
	assert_true(fakes.n > answered);
	assert_int_equal(asked_range(&fakes.started[fakes.n - 1]).first, 65536);
	assert_non_null(strstr(fakes.started[fakes.n - 1].head, "\r\nIf-Range: \"v1\"\r\n"));
	/*
	 * What was asked on the refused connection's behalf is dropped, not
	 * answered. The pieces after the refetch go where it went, a pooled
	 * or freed connection or behind a busy one, never a new one: one
	 * connection.
	 */
	answered = fakes.n;
	answer_of(fakes.started[answered - 1].piece, V1, SPLIT_OBJ);
	assert_int_equal(split_read(src), MOVE_AGAIN);
	assert_string_equal(fetched_since(answered), "/big bytes=131072-196607, /big bytes=196608-262143");
	assert_int_equal(fakes.started[answered].how, DISPATCH_AHEAD);
	assert_int_equal(fakes.started[answered + 1].how, DISPATCH_AHEAD);
	assert_int_equal(split_read_through(src, &answered, SPLIT_OBJ), SPLIT_OBJ);
	assert_int_equal(kp_stats.split_mismatches, 0);
	assert_int_equal(kp_stats.split_resumes, 1);
	download_ends(sp, src);
	clock_advance(&rig.clock, 599);
	assert_int_equal(connections_for(sp, &a.target), 1);
	clock_advance(&rig.clock, 2);
	assert_int_equal(connections_for(sp, &a.target), 2);
	ra_split_free(sp);
}

/*
 * Rule: a refusal of the first piece, before the object's length and
 * version are known, backs off like any other: the host's other
 * connections are closed, and the first piece is asked again on one (bare:
 * no validator yet), not passed to the origin as the client sent it.
 */
static void
refused_first_piece_backs_off_and_is_asked_again(void **state)
{
	struct ra_split *sp = split_new(64 * 1024, 4);
	unsigned answered;
	struct asker a;
	struct source *src;

	(void)state;
	src = split_download(sp, &a);
	assert_int_equal(fakes.n, 4);
	for (unsigned i = 0; i < 4; i++)
		answer_status(fakes.started[i].piece, 403);
	answered = fakes.n;
	assert_int_equal(split_read(src), MOVE_AGAIN);
	assert_int_equal(kp_stats.split_backoffs, 1);
	assert_int_equal(kp_stats.split_declined, 0);
	assert_int_equal(fakes.shrunk, 1);
	assert_int_equal(connections_for(sp, &a.target), 1);
	assert_int_equal(fakes.n, answered + 1);
	assert_string_equal(fetched_since(answered), "/big bytes=0-65535");
	assert_null(strstr(fakes.started[answered].head, "If-Range"));
	assert_int_equal(fakes.started[answered].how, DISPATCH_ANY);
	assert_int_equal(split_read_through(src, &answered, SPLIT_OBJ), SPLIT_OBJ);
	assert_int_equal(kp_stats.split_downloads, 1);
	download_ends(sp, src);
	ra_split_free(sp);
}

/*
 * Rule: a URL that answers a bounded Range with the whole object is not
 * split for ten minutes, by the clock, and the origin answers the client
 * itself (the source fails before a byte); unless the answer was encoded,
 * which says nothing of the object's other answers. The host's other URLs
 * are still split.
 */
static void
whole_answer_keeps_the_host_unsplit_for_ten_minutes(void **state)
{
	static const struct {
		const char *fields;
		bool remembered;
	} rows[] = {
		{V1, true},
		{"Content-Encoding: gzip\r\n" V1, false},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ra_split *sp = split_new(64 * 1024, 1);
		struct asker a;
		struct source *src;

		src = split_download(sp, &a);
		assert_string_equal(fetched_since(0), "/big bytes=0-65535");
		answer_whole(fakes.started[0].piece, 200, rows[i].fields, 4000);
		assert_int_equal(split_read(src), MOVE_ERROR);
		assert_int_equal(taken.len, 0);
		assert_int_equal(kp_stats.split_declined, i + 1);
		client_done(src);
		rig_iteration_ends();
		src = split_asks(sp, &a, NULL);
		if (rows[i].remembered) {
			struct asker other;
			struct source *elsewhere;

			assert_null(src);
			assert_int_equal(fakes.n, 1);
			asker_init(&other, "192.0.2.1", 40000, "http://o.example/other");
			elsewhere = split_asks(sp, &other, NULL);
			assert_non_null(elsewhere);
			assert_string_equal(fetched_since(1), "/other bytes=0-65535");
			client_done(elsewhere);
			rig_iteration_ends();
			fakes.n = 1;
			clock_advance(&rig.clock, 599);
			assert_null(split_asks(sp, &a, NULL));
			clock_advance(&rig.clock, 2);
			src = split_asks(sp, &a, NULL);
		}
		assert_non_null(src);
		assert_int_equal(fakes.n, 2);
		download_ends(sp, src);
		ra_split_free(sp);
	}
}

/* ---- breaks, resumes and versions ----------------------------------------------- */

/*
 * Rule: a fetch that ends in the middle of its body is resumed from the
 * next byte the client needs, with If-Range, on a connection of its own,
 * and the client sees one continuous answer. The rest of the broken
 * piece's memory is given back before the rest is asked.
 */
static void
cut_mid_body_resumes_from_the_next_byte(void **state)
{
	struct ra_split *sp = split_new(64 * 1024, 1);
	unsigned answered;
	struct asker a;
	struct source *src;
	struct byte_range resumed;

	(void)state;
	src = split_download(sp, &a);
	answer_part(fakes.started[0].piece, V1, SPLIT_OBJ, 10000);
	assert_int_equal(split_read(src), MOVE_AGAIN);
	assert_int_equal(body_taken(0), 10000);
	/* The piece behind it is on its way, on the same connection. */
	assert_string_equal(fetched_since(1), "/big bytes=65536-131071");
	answered = fakes.n;
	answer_cut(fakes.started[0].piece, "reset");
	assert_int_equal(split_read(src), MOVE_AGAIN);
	assert_int_equal(kp_stats.split_resumes, 1);
	assert_int_equal(fakes.n, answered + 1);
	resumed = asked_range(&fakes.started[answered]);
	assert_int_equal(resumed.first, 10000);
	assert_int_equal(resumed.last, 65535);
	assert_non_null(strstr(fakes.started[answered].head, "\r\nIf-Range: \"v1\"\r\n"));
	assert_int_equal(fakes.started[answered].how, DISPATCH_ANY);
	assert_string_equal(download_of(src)->word, "split, 1 resume");
	answered = 1;
	assert_int_equal(split_read_through(src, &answered, SPLIT_OBJ), SPLIT_OBJ);
	assert_int_equal(kp_stats.split_mismatches, 0);
	download_ends(sp, src);
	ra_split_free(sp);
}

/*
 * Rule: RESUMES_MAX resumes of one piece in a row, none of which brought a
 * byte, and the client is cut off where it is (a reset, as a broken origin
 * would leave it); a resume that brings bytes starts the count again.
 */
static void
resumes_without_progress_cut_the_client_off(void **state)
{
	struct ra_split *sp = split_new(64 * 1024, 1);
	struct asker a;
	struct source *src;
	enum move_status ms = MOVE_AGAIN;
	unsigned resumes = 0;

	(void)state;
	src = split_download(sp, &a);
	answer_part(fakes.started[0].piece, V1, SPLIT_OBJ, 1000);
	assert_int_equal(split_read(src), MOVE_AGAIN);
	answer_cut(fakes.started[0].piece, "reset");
	/* The first resume brings 500 bytes: progress. */
	assert_int_equal(split_read(src), MOVE_AGAIN);
	answer_part(fakes.started[fakes.n - 1].piece, V1, SPLIT_OBJ, 500);
	assert_int_equal(split_read(src), MOVE_AGAIN);
	answer_cut(fakes.started[fakes.n - 1].piece, "reset");
	/* Then none brings a byte. */
	while (ms == MOVE_AGAIN && resumes < 10) {
		ms = split_read(src);
		if (ms != MOVE_AGAIN)
			break;
		resumes++;
		answer_cut(fakes.started[fakes.n - 1].piece, "reset");
	}
	assert_int_equal(ms, MOVE_ERROR);
	assert_int_equal(resumes, RESUMES_MAX);
	assert_int_equal(kp_stats.split_resumes, 1 + RESUMES_MAX);
	assert_int_equal(body_taken(0), 1500);
	download_ends(sp, src);
	ra_split_free(sp);
}

/*
 * Rule: a later piece that comes back of another version (its ETag), or as
 * another range, cuts the client off at the first byte of that piece: it
 * never gets bytes of two versions.
 */
static void
later_piece_of_another_version_cuts_the_client_off(void **state)
{
	static const struct {
		const char *rule;
		const char *fields;
		int status;
	} rows[] = {
		{"another ETag", V2, 206},
		{"the whole object (If-Range failed)", V2, 200},
		{"a refusal on one connection", NULL, 403},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ra_split *sp = split_new(64 * 1024, 1);
		struct asker a;
		struct source *src;
		enum move_status ms;

		memset(&kp_stats, 0, sizeof(kp_stats));
		src = split_download(sp, &a);
		answer_of(fakes.started[0].piece, V1, SPLIT_OBJ);
		assert_int_equal(split_read(src), MOVE_AGAIN);
		if (rows[i].status == 206)
			answer_of(fakes.started[1].piece, rows[i].fields, SPLIT_OBJ);
		else if (rows[i].status == 200)
			answer_whole(fakes.started[1].piece, 200, rows[i].fields, 70000);
		else
			answer_status(fakes.started[1].piece, rows[i].status);
		ms = split_read(src);
		if (ms != MOVE_ERROR || body_taken(0) != 65536 || kp_stats.split_mismatches != 1)
			fail_msg("%s: %d after %llu bytes, %llu mismatches", rows[i].rule, (int)ms,
			         (unsigned long long)body_taken(0),
			         (unsigned long long)kp_stats.split_mismatches);
		download_ends(sp, src);
		ra_split_free(sp);
	}
}

/* ---- memory ---------------------------------------------------------------------- */

/*
 * Rule: memory full when the piece read now must be asked again: what is
 * asked ahead gives way to it; with nothing left to give, the reader waits
 * (parked, no busy loop) and the retry timer asks again once memory is
 * back, and the client gets every byte.
 *
 * The first piece's head came and not a byte more; its rest is asked with
 * an If-Range it did not carry, so it needs a few bytes more than the
 * piece gave back, and other clients hold every byte of the memory.
 */
static void
memory_full_during_a_resume_gives_way_then_waits(void **state)
{
	static const struct {
		const char *rule;
		unsigned connections;
		bool waits;
	} rows[] = {
		{"a piece ahead gives way", 2, false},
		{"nothing to give: the reader waits for the timer", 1, true},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ra_split *sp = split_new(64 * 1024, rows[i].connections);
		unsigned answered = 0;
		struct asker a;
		struct source *src;
		struct download *d;
		size_t filled;

		memset(&kp_stats, 0, sizeof(kp_stats));
		src = split_download(sp, &a);
		d = download_of(src);
		filled = others_fill_the_memory();
		answer_part(fakes.started[0].piece, V1, SPLIT_OBJ, 0);
		answer_cut(fakes.started[0].piece, "reset");
		answered = fakes.n;
		assert_int_equal(split_read(src), MOVE_AGAIN);
		if (rows[i].waits != d->m.parked || rows[i].waits != (fakes.n == answered) ||
		    kp_stats.split_resumes != !rows[i].waits)
			fail_msg("%s: %s, %u asked, %llu resumes", rows[i].rule,
			         d->m.parked ? "parked" : "reading", fakes.n - answered,
			         (unsigned long long)kp_stats.split_resumes);
		if (rows[i].waits) {
			/* The timer finds no room yet: still waiting, asking nothing. */
			clock_advance(&rig.clock, THROTTLE_RETRY);
			assert_true(d->m.parked);
			assert_int_equal(fakes.n, answered);
			assert_true(clock_timer_armed(&d->retry));
			others_let_go(2, filled);
			clock_advance(&rig.clock, THROTTLE_RETRY);
			assert_false(d->m.parked);
			assert_int_equal(fakes.n, answered + 1);
			assert_int_equal(asked_range(&fakes.started[answered]).first, 0);
		} else {
			/* The piece ahead was dropped for it, and is asked again after. */
			assert_int_equal(fakes.n, answered + 1);
			assert_int_equal(asked_range(&fakes.started[answered]).first, 0);
			assert_false(piece_fetching(fakes.started[1].piece));
			others_let_go(2, filled);
		}
		assert_int_equal(split_read_through(src, &answered, SPLIT_OBJ), SPLIT_OBJ);
		download_ends(sp, src);
		others_let_go(1, HALF);
		assert_int_equal(rig_charged(), 0);
		ra_split_free(sp);
	}
}

/*
 * Rule: no room for the next piece when the client is done with the one it
 * read: the reader waits, parked, and the retry timer asks the piece once
 * memory is back and moves the reader on; meanwhile the timer asks nothing
 * twice and spins no loop.
 */
static void
no_room_for_the_next_piece_waits_for_memory(void **state)
{
	struct ra_split *sp = split_new(64 * 1024, 1);
	unsigned answered;
	struct asker a;
	struct source *src;
	struct download *d;
	size_t filled;

	(void)state;
	src = split_download(sp, &a);
	d = download_of(src);
	/* Memory full before the first head: the piece behind it finds no room. */
	filled = others_fill_the_memory();
	answer_of(fakes.started[0].piece, V1, SPLIT_OBJ);
	assert_int_equal(split_read(src), MOVE_AGAIN);
	assert_int_equal(body_taken(0), 65536);
	/*
	 * The first piece's memory went back when the client was done with it,
	 * but the next one asks with an If-Range the first did not carry.
	 */
	assert_int_equal(fakes.n, 1);
	assert_true(d->m.parked);
	assert_true(clock_timer_armed(&d->retry));
	clock_advance(&rig.clock, THROTTLE_RETRY);
	assert_int_equal(fakes.n, 1);
	assert_true(d->m.parked);
	others_let_go(2, filled);
	clock_advance(&rig.clock, THROTTLE_RETRY);
	assert_false(d->m.parked);
	assert_true(fakes.n > 1);
	assert_int_equal(asked_range(&fakes.started[1]).first, 65536);
	answered = 1;
	assert_int_equal(split_read_through(src, &answered, SPLIT_OBJ), SPLIT_OBJ);
	download_ends(sp, src);
	others_let_go(1, HALF);
	ra_split_free(sp);
}

/*
 * Rule: when memory comes back, the piece the parked reader waits for may
 * end as it is asked (its request failed at once): the reader is told to
 * read again, whether it waited in a resume or for the next piece, and
 * learns the download cannot go on rather than waiting for a byte that
 * will never come.
 */
static void
parked_reader_is_woken_for_a_piece_that_failed_at_once(void **state)
{
	static const struct {
		const char *rule;
		bool cut;            /* the first piece is cut mid-body: the reader waits in a resume */
	} rows[] = {
		{"waiting for the next piece", false},
		{"waiting in a resume", true},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ra_split *sp = split_new(64 * 1024, 1);
		enum move_status ms = MOVE_AGAIN;
		struct asker a;
		struct source *src;
		struct download *d;
		size_t filled;

		memset(&kp_stats, 0, sizeof(kp_stats));
		src = split_download(sp, &a);
		d = download_of(src);
		filled = others_fill_the_memory();
		if (rows[i].cut) {
			answer_part(fakes.started[0].piece, V1, SPLIT_OBJ, 0);
			answer_cut(fakes.started[0].piece, "reset");
		} else {
			answer_of(fakes.started[0].piece, V1, SPLIT_OBJ);
		}
		assert_int_equal(split_read(src), MOVE_AGAIN);
		if (!d->m.parked)
			fail_msg("%s: the reader is not parked", rows[i].rule);
		rig_iteration_ends();
		rig.reader_woken = 0;
		others_let_go(2, filled);
		fakes.fail_starts = true;
		clock_advance(&rig.clock, THROTTLE_RETRY);
		rig_iteration_ends();
		if (rig.reader_woken != 1)
			fail_msg("%s: the reader was told %u times to read again", rows[i].rule,
			         rig.reader_woken);
		/* Every piece asked again fails too: the client is cut off, not left waiting. */
		for (unsigned round = 0; round < 20 && ms == MOVE_AGAIN; round++)
			ms = split_read(src);
		assert_int_equal(ms, MOVE_ERROR);
		fakes.fail_starts = false;
		download_ends(sp, src);
		others_let_go(1, HALF);
		ra_split_free(sp);
	}
}

/*
 * Rule: a piece whose request the proxy answers itself before the asking
 * returns (a pipelined write cut short) keeps its place in the download:
 * nothing else is asked in its stead meanwhile, it is asked again when
 * its turn comes, and the client gets every byte in order.
 */
static void
piece_refused_as_it_is_asked_keeps_its_place(void **state)
{
	struct ra_split *sp = split_new(64 * 1024, 1);
	unsigned answered = 0;
	struct asker a;
	struct source *src;

	(void)state;
	/* On one connection the second piece is asked, pipelined, with the first. */
	fakes.refuse_start_no = 2;
	src = split_download(sp, &a);
	assert_int_equal(split_read_through(src, &answered, SPLIT_OBJ), SPLIT_OBJ);
	assert_int_equal(kp_stats.split_resumes, 1);
	fakes.refuse_start_no = 0;
	download_ends(sp, src);
	ra_split_free(sp);
}

/* ---- the client's own range ------------------------------------------------------- */

/*
 * Rule: a client's range (open, or bounded and longer than a piece) is
 * answered with a 206 of exactly its bytes, Content-Range and
 * Content-Length its own; a bounded range no longer than a piece is the
 * origin's to answer.
 */
static void
client_range_is_answered_with_a_206(void **state)
{
	static const struct {
		const char *range;
		uint64_t first, last;     /* the body the client gets */
		const char *content_range;
	} rows[] = {
		{"100000-", 100000, SPLIT_OBJ - 1, "Content-Range: bytes 100000-1048575/1048576\r\n"},
		{"1000-299999", 1000, 299999, "Content-Range: bytes 1000-299999/1048576\r\n"},
		{"1000-2000000", 1000, SPLIT_OBJ - 1, "Content-Range: bytes 1000-1048575/1048576\r\n"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ra_split *sp = split_new(64 * 1024, 1);
		char length[64];
		unsigned answered = 0;
		struct asker a;
		struct source *src;

		src = split_download_of(sp, &a, rows[i].range);
		assert_int_equal(split_read_from(src, &answered, SPLIT_OBJ, rows[i].first),
		                 rows[i].last - rows[i].first + 1);
		assert_memory_equal(taken.got, "HTTP/1.1 206 ", 13);
		snprintf(length, sizeof(length), "Content-Length: %llu\r\n",
		         (unsigned long long)(rows[i].last - rows[i].first + 1));
		if (!memmem(taken.got, taken.len, rows[i].content_range, strlen(rows[i].content_range)) ||
		    !memmem(taken.got, taken.len, length, strlen(length)))
			fail_msg("%s: %.*s", rows[i].range, (int)(strstr(taken.got, "\r\n\r\n") - taken.got),
			         taken.got);
		download_ends(sp, src);
		ra_split_free(sp);
	}
	{
		struct ra_split *sp = split_new(64 * 1024, 1);
		struct asker a;

		asker_init(&a, "192.0.2.1", 40000, "http://o.example/big");
		assert_null(split_asks(sp, &a, "0-65535"));
		ra_split_free(sp);
	}
}

/* ---- what is not split --------------------------------------------------------------- */

/*
 * Rule: a first piece that cannot be split is the origin's to answer: the
 * client's source fails before its first byte (its request goes to the
 * origin as it would without the proxy), the download is counted declined,
 * and nothing more is asked.
 */
static void
first_piece_not_to_split_is_declined(void **state)
{
	static const struct {
		const char *rule;
		const char *head;        /* NULL: no answer at all */
	} rows[] = {
		{"another range", "HTTP/1.1 206 Partial Content\r\nETag: \"v1\"\r\n"
		 "Content-Range: bytes 100-65635/1048576\r\nContent-Length: 65536\r\n\r\n"},
		{"a 416", "HTTP/1.1 416 Range Not Satisfiable\r\n"
		 "Content-Range: bytes */1048576\r\nContent-Length: 0\r\n\r\n"},
		{"a 404", "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"},
		{"no validator", "HTTP/1.1 206 Partial Content\r\n"
		 "Content-Range: bytes 0-65535/1048576\r\nContent-Length: 65536\r\n\r\n"},
		{"an encoding", "HTTP/1.1 206 Partial Content\r\nETag: \"v1\"\r\n"
		 "Content-Encoding: gzip\r\nContent-Range: bytes 0-65535/1048576\r\n"
		 "Content-Length: 65536\r\n\r\n"},
		{"no-transform", "HTTP/1.1 206 Partial Content\r\nETag: \"v1\"\r\n"
		 "Cache-Control: public, no-transform\r\nContent-Range: bytes 0-65535/1048576\r\n"
		 "Content-Length: 65536\r\n\r\n"},
		{"no answer", NULL},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ra_split *sp = split_new(64 * 1024, 1);
		struct ra_piece *p;
		struct asker a;
		struct source *src;
		enum move_status ms;

		memset(&kp_stats, 0, sizeof(kp_stats));
		src = split_download(sp, &a);
		p = fakes.started[0].piece;
		if (rows[i].head) {
			answer_begins(p);
			arrive(p, rows[i].head, strlen(rows[i].head));
			answer_ends(p, atoi(rows[i].head + 9));
		} else {
			answer_refused_locally(p, 502);
		}
		ms = split_read(src);
		if (ms != MOVE_ERROR || taken.len != 0 || kp_stats.split_declined != 1 || fakes.n != 1)
			fail_msg("%s: %d, %zu bytes taken, %llu declined, %u asked", rows[i].rule, (int)ms,
			         taken.len, (unsigned long long)kp_stats.split_declined, fakes.n);
		assert_true(src->held);
		download_ends(sp, src);
		ra_split_free(sp);
	}
}

/*
 * Rule: only a plain GET for the whole object, an open range or a bounded
 * one longer than a piece is split, and only while memory allows its first
 * piece; anything else is forwarded as it is (ra_split_serve: NULL).
 */
static void
requests_not_to_split_are_forwarded(void **state)
{
	static const struct {
		const char *rule;
		const char *fields;      /* the method's line's method, then fields of the head */
		unsigned fail_alloc;     /* the n-th allocation in ra_split.c fails; 0: none */
		bool memory_full;
	} rows[] = {
		{"a HEAD", "HEAD|", 0, false},
		{"a body", "GET|Content-Length: 3\r\n", 0, false},
		{"conditional", "GET|If-None-Match: \"v1\"\r\n", 0, false},
		{"two ranges", "GET|Range: bytes=0-99999,200000-\r\n", 0, false},
		{"a suffix", "GET|Range: bytes=-100000\r\n", 0, false},
		{"a range no longer than a piece", "GET|Range: bytes=0-65535\r\n", 0, false},
		{"no memory for the download", "GET|", 1, false},
		{"no buffer for its request", "GET|", 2, false},
		{"no room for the first piece", "GET|", 0, true},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ra_split *sp = split_new(64 * 1024, 1);
		struct text_head req;
		struct source *src;
		struct asker a;
		size_t filled = 0;

		const char *bar = strchr(rows[i].fields, '|');

		asker_init(&a, "192.0.2.1", 40000, "http://o.example/big");
		head_parse(&req, HTTP_REQUEST, "%.*s %s HTTP/1.1\r\nHost: %s\r\n%s\r\n",
		           (int)(bar - rows[i].fields), rows[i].fields, a.url, a.target.authority,
		           bar + 1);
		fakes.n = 0;
		if (rows[i].memory_full)
			filled = others_fill_the_memory();
		fail_alloc_in = rows[i].fail_alloc;
		src = ra_split_serve(sp, &a.ask, &req.h, req.text);
		fail_alloc_in = 0;
		if (src || sp->downloads)
			fail_msg("%s: split", rows[i].rule);
		if (rows[i].memory_full) {
			others_let_go(2, filled);
			others_let_go(1, HALF);
		}
		rig_iteration_ends();
		assert_int_equal(rig_charged(), 0);
		ra_split_free(sp);
	}
	/* A split that cannot even be set up: no memory, and the proxy goes on without it. */
	fail_alloc_in = 1;
	assert_null(ra_split_new(&rig.env, rig.fe));
	fail_alloc_in = 0;
}

/*
 * Rule: a request that leaves a buffer no room for a piece's Range and
 * If-Range is forwarded as it is: no piece of it could ever be asked.
 */
static void
request_too_large_for_its_pieces_is_forwarded(void **state)
{
	struct ra_split *sp = split_new(64 * 1024, 1);
	size_t room = buf_capacity() - PIECE_FIELDS_ROOM;
	bool split_so_far = true;
	char cookie[4096];
	struct text_head req;
	struct asker a;

	(void)state;
	asker_init(&a, "192.0.2.1", 40000, "http://o.example/big");
	for (size_t len = room - 100; len < room + 100; len += 10) {
		struct source *src;

		memset(cookie, 'c', len);
		cookie[len] = '\0';
		head_parse(&req, HTTP_REQUEST, "GET %s HTTP/1.1\r\nHost: %s\r\nCookie: %s\r\n\r\n",
		           a.url, a.target.authority, cookie);
		src = ra_split_serve(sp, &a.ask, &req.h, req.text);
		/* Split up to a length, then never: the pieces' fields would not fit. */
		if (src && !split_so_far)
			fail_msg("a request with a cookie of %zu bytes was split, a shorter one not", len);
		if (!src && len == room - 100)
			fail_msg("a request with a cookie of %zu bytes was not split", len);
		split_so_far = src != NULL;
		if (src) {
			src->reader = &rig.reader;
			download_ends(sp, src);
		}
	}
	assert_false(split_so_far);
	ra_split_free(sp);
}

/*
 * Rule: the client's head is written once the first piece's head says the
 * object's length; without a buffer for it the download is declined
 * before the client's first byte.
 */
static void
no_buffer_for_the_clients_head_declines(void **state)
{
	struct ra_split *sp = split_new(64 * 1024, 1);
	struct asker a;
	struct source *src;

	(void)state;
	src = split_download(sp, &a);
	answer_of(fakes.started[0].piece, V1, SPLIT_OBJ);
	fail_alloc_in = 1;
	assert_int_equal(split_read(src), MOVE_ERROR);
	fail_alloc_in = 0;
	assert_int_equal(taken.len, 0);
	assert_int_equal(kp_stats.split_declined, 1);
	download_ends(sp, src);
	ra_split_free(sp);
}

/*
 * Rule: on several connections the first pieces are asked before the
 * object's length is known; once it is, those past the client's end are
 * dropped, the last one ends there, and the client gets the object whole.
 */
static void
short_object_on_several_connections(void **state)
{
	struct ra_split *sp = split_new(64 * 1024, 4);
	const uint64_t length = 100000;
	unsigned answered = 1;
	struct asker a;
	struct source *src;

	(void)state;
	src = split_download(sp, &a);
	assert_string_equal(fetched_since(0), "/big bytes=0-65535, /big bytes=65536-131071, "
	                                      "/big bytes=131072-196607, /big bytes=196608-262143");
	answer_of(fakes.started[0].piece, V1, length);
	assert_int_equal(split_read(src), MOVE_AGAIN);
	for (unsigned i = 2; i < 4; i++)
		assert_false(piece_fetching(fakes.started[i].piece));
	/* The first piece was read whole; the second, asked to 131071, is read to 99999 only. */
	assert_int_equal(download_of(src)->count, 1);
	assert_int_equal(slot_at(download_of(src), 0)->first, 65536);
	assert_int_equal(slot_at(download_of(src), 0)->last, length - 1);
	assert_int_equal(split_read_through(src, &answered, length), length);
	assert_int_equal(kp_stats.split_downloads, 1);
	download_ends(sp, src);
	ra_split_free(sp);
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		TEST(pieces_are_never_longer_than_the_split_size),
		TEST(refused_second_connection_backs_off_for_ten_minutes),
		TEST(refused_first_piece_backs_off_and_is_asked_again),
		TEST(whole_answer_keeps_the_host_unsplit_for_ten_minutes),
		TEST(cut_mid_body_resumes_from_the_next_byte),
		TEST(resumes_without_progress_cut_the_client_off),
		TEST(later_piece_of_another_version_cuts_the_client_off),
		TEST(memory_full_during_a_resume_gives_way_then_waits),
		TEST(no_room_for_the_next_piece_waits_for_memory),
		TEST(parked_reader_is_woken_for_a_piece_that_failed_at_once),
		TEST(piece_refused_as_it_is_asked_keeps_its_place),
		TEST(client_range_is_answered_with_a_206),
		TEST(first_piece_not_to_split_is_declined),
		TEST(requests_not_to_split_are_forwarded),
		TEST(request_too_large_for_its_pieces_is_forwarded),
		TEST(no_buffer_for_the_clients_head_declines),
		TEST(short_object_on_several_connections),
	};
	int failed;

	/* A buffer holds a head of the most the rig parses, and no more. */
	buf_init(RIG_HEAD_MAX);
	failed = cmocka_run_group_tests(tests, NULL, NULL);
	buf_drain_free_list();
	return failed;
}
