/*
 * Body framing: Content-Length, chunked (with extensions and trailers), and
 * read-until-close bodies, fed whole, byte by byte and split at every point.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kp/framing.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Bytes of the next message on the connection; the framer must not take them. */
#define TAIL "GET http://next.example/ HTTP/1.1\r\n"

struct message {
	const char *name;
	enum body_kind kind;
	uint64_t length;     /* BODY_LENGTH only */
	const char *wire;    /* the body as sent */
	const char *data;    /* the payload it carries */
};

static const struct message messages[] = {
	{"length", BODY_LENGTH, 11, "hello world", "hello world"},
	{"length one byte", BODY_LENGTH, 1, "x", "x"},
	{"chunked several chunks, extension, upper hex, trailer", BODY_CHUNKED, 0,
	 "5;name=val\r\nhello\r\n"
	 "10\r\n0123456789abcdef\r\n"
	 "1A\r\nABCDEFGHIJKLMNOPQRSTUVWXYZ\r\n"
	 "0\r\nX-T: 1\r\n\r\n",
	 "hello0123456789abcdefABCDEFGHIJKLMNOPQRSTUVWXYZ"},
	{"chunked empty", BODY_CHUNKED, 0, "0\r\n\r\n", ""},
	{"chunked lower hex, quoted extension, two trailers", BODY_CHUNKED, 0,
	 "a\r\n0123456789\r\n"
	 "3 ;q=\"a b\"\r\nxyz\r\n"
	 "0;last\r\nA: 1\r\nB: 2\r\n\r\n",
	 "0123456789xyz"},
	{"chunked payload that looks like framing", BODY_CHUNKED, 0,
	 "7\r\n0\r\n\r\n\r\n\r\n0\r\n\r\n", "0\r\n\r\n\r\n"},
	{"chunked leading zeros", BODY_CHUNKED, 0,
	 "0000000000000000000004\r\nabcd\r\n0\r\n\r\n", "abcd"},
};

struct run {
	char payload[256];
	size_t payload_len;
	size_t consumed;     /* bytes of the stream the framer took */
	size_t payload_spans;
	size_t framing_spans;
};

/*
 * Feeds msg followed by TAIL to a fresh framer. The stream "arrives" up to
 * each offset in cuts (ascending, the last one the whole stream); after each
 * arrival the framer is run over the unconsumed bytes until it wants more.
 */
static void
run_cuts(const struct message *msg, const size_t *cuts, size_t ncuts, struct run *r)
{
	char stream[512];
	size_t wire_len = strlen(msg->wire);
	size_t total = wire_len + strlen(TAIL);
	struct framer f;

	assert_true(total <= sizeof(stream));
	memcpy(stream, msg->wire, wire_len);
	memcpy(stream + wire_len, TAIL, strlen(TAIL));
	memset(r, 0, sizeof(*r));
	framer_init(&f, msg->kind, msg->length);
	assert_false(framer_done(&f));

	for (size_t c = 0; c < ncuts; c++) {
		size_t avail = cuts[c];

		assert_true(avail <= total);
		for (;;) {
			enum span_kind kind = (enum span_kind)-1;
			ssize_t n = framer_next(&f, stream + r->consumed, avail - r->consumed, &kind);

			if (n < 0)
				fail_msg("%s: framing error at offset %zu (avail %zu)", msg->name,
				         r->consumed, avail);
			if (n == 0)
				break;
			assert_true(r->consumed + (size_t)n <= wire_len);
			if (kind == SPAN_PAYLOAD) {
				assert_true(r->payload_len + (size_t)n <= sizeof(r->payload));
				memcpy(r->payload + r->payload_len, stream + r->consumed, (size_t)n);
				r->payload_len += (size_t)n;
				r->payload_spans++;
			} else {
				assert_int_equal(kind, SPAN_FRAMING);
				r->framing_spans++;
			}
			r->consumed += (size_t)n;
			/* Done exactly at the end of the message, never before. */
			if (framer_done(&f) != (r->consumed == wire_len))
				fail_msg("%s: done=%d at offset %zu of %zu", msg->name,
				         framer_done(&f), r->consumed, wire_len);
		}
	}
	assert_true(framer_done(&f));
	assert_int_equal(r->consumed, wire_len);
	assert_int_equal(r->payload_len, strlen(msg->data));
	assert_memory_equal(r->payload, msg->data, r->payload_len);
	/* The next message's bytes stay where they are. */
	{
		enum span_kind kind;

		assert_int_equal(framer_next(&f, stream + wire_len, total - wire_len, &kind), 0);
		assert_true(framer_done(&f));
	}
}

static void
test_messages_whole(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(messages); i++) {
		size_t total = strlen(messages[i].wire) + strlen(TAIL);
		struct run r;

		run_cuts(&messages[i], &total, 1, &r);
	}
}

static void
test_messages_byte_by_byte(void **state)
{
	size_t cuts[512];

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(messages); i++) {
		size_t total = strlen(messages[i].wire) + strlen(TAIL);
		struct run r;

		assert_true(total <= ARRAY_LEN(cuts));
		for (size_t k = 0; k < total; k++)
			cuts[k] = k + 1;
		run_cuts(&messages[i], cuts, total, &r);
	}
}

static void
test_messages_every_two_piece_split(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(messages); i++) {
		size_t wire_len = strlen(messages[i].wire);
		size_t total = wire_len + strlen(TAIL);

		for (size_t k = 0; k <= wire_len; k++) {
			size_t cuts[2] = {k, total};
			struct run r;

			run_cuts(&messages[i], cuts, 2, &r);
		}
	}
}

static void
test_chunked_spans(void **state)
{
	static const char wire[] = "5;name=val\r\nhello\r\n1A\r\nABCDEFGHIJKLMNOPQRSTUVWXYZ\r\n"
	                           "0\r\nX-T: 1\r\n\r\n";
	static const struct {
		enum span_kind kind;
		const char *bytes;
		int64_t left_after;
	} expect[] = {
		{SPAN_FRAMING, "5;name=val\r\n", 5},
		{SPAN_PAYLOAD, "hello", FRAME_CHUNK_END},
		{SPAN_FRAMING, "\r\n", FRAME_CHUNK_SIZE},
		{SPAN_FRAMING, "1A\r\n", 26},
		{SPAN_PAYLOAD, "ABCDEFGHIJKLMNOPQRSTUVWXYZ", FRAME_CHUNK_END},
		{SPAN_FRAMING, "\r\n", FRAME_CHUNK_SIZE},
		{SPAN_FRAMING, "0\r\n", FRAME_TRAILER},
		{SPAN_FRAMING, "X-T: 1\r\n", FRAME_TRAILER},
		{SPAN_FRAMING, "\r\n", FRAME_DONE},
	};
	struct framer f;
	size_t off = 0;

	(void)state;
	framer_init(&f, BODY_CHUNKED, 0);
	assert_true(f.chunked);
	assert_int_equal(f.left, FRAME_CHUNK_SIZE);
	for (size_t i = 0; i < ARRAY_LEN(expect); i++) {
		enum span_kind kind;
		ssize_t n = framer_next(&f, wire + off, sizeof(wire) - 1 - off, &kind);

		assert_int_equal(n, strlen(expect[i].bytes));
		assert_int_equal(kind, expect[i].kind);
		assert_memory_equal(wire + off, expect[i].bytes, (size_t)n);
		assert_int_equal(f.left, expect[i].left_after);
		off += (size_t)n;
	}
	assert_int_equal(off, sizeof(wire) - 1);
	assert_true(framer_done(&f));
}

static void
test_length_split_across_calls(void **state)
{
	const char body[] = "0123456789";
	struct framer f;
	enum span_kind kind;

	(void)state;
	framer_init(&f, BODY_LENGTH, 10);
	assert_false(f.chunked);
	assert_int_equal(framer_payload_left(&f), 10);

	assert_int_equal(framer_next(&f, body, 4, &kind), 4);
	assert_int_equal(kind, SPAN_PAYLOAD);
	assert_int_equal(framer_payload_left(&f), 6);
	assert_false(framer_done(&f));

	/* More bytes held than the body has left: only the body is taken. */
	assert_int_equal(framer_next(&f, "456789NEXT", 10, &kind), 6);
	assert_int_equal(kind, SPAN_PAYLOAD);
	assert_true(framer_done(&f));
	assert_int_equal(framer_payload_left(&f), 0);
	assert_int_equal(framer_next(&f, "NEXT", 4, &kind), 0);
}

static void
test_zero_length_and_none(void **state)
{
	struct framer f;
	enum span_kind kind;

	(void)state;
	framer_init(&f, BODY_LENGTH, 0);
	assert_true(framer_done(&f));
	assert_int_equal(framer_payload_left(&f), 0);
	assert_int_equal(framer_next(&f, "GET", 3, &kind), 0);

	framer_init(&f, BODY_NONE, 1234);
	assert_true(framer_done(&f));
	assert_int_equal(framer_next(&f, "GET", 3, &kind), 0);

	/* Nothing held is never an error and never progress. */
	framer_init(&f, BODY_CHUNKED, 0);
	assert_int_equal(framer_next(&f, "", 0, &kind), 0);
	assert_int_equal(f.left, FRAME_CHUNK_SIZE);
	framer_init(&f, BODY_LENGTH, 5);
	assert_int_equal(framer_next(&f, "", 0, &kind), 0);
	assert_int_equal(framer_payload_left(&f), 5);
}

static void
test_until_close(void **state)
{
	char big[10000];
	struct framer f;
	enum span_kind kind = SPAN_FRAMING;

	(void)state;
	memset(big, 'z', sizeof(big));
	framer_init(&f, BODY_UNTIL_CLOSE, 0);
	assert_int_equal(f.left, FRAME_UNTIL_CLOSE);
	assert_false(f.chunked);
	/* Framing-like bytes are payload too: nothing ends this body but the close. */
	assert_int_equal(framer_next(&f, "0\r\n\r\n", 5, &kind), 5);
	assert_int_equal(kind, SPAN_PAYLOAD);
	assert_false(framer_done(&f));
	assert_int_equal(framer_next(&f, big, sizeof(big), &kind), sizeof(big));
	assert_int_equal(kind, SPAN_PAYLOAD);
	assert_false(framer_done(&f));
	assert_int_equal(framer_next(&f, big, 1, &kind), 1);
	assert_false(framer_done(&f));
	/* Not a counted body, so nothing may be spliced on a count. */
	assert_int_equal(framer_payload_left(&f), 0);
	framer_payload_moved(&f, 100);
	assert_int_equal(f.left, FRAME_UNTIL_CLOSE);
	assert_false(framer_done(&f));
}

static void
test_payload_moved_length(void **state)
{
	struct framer f;
	enum span_kind kind;

	(void)state;
	framer_init(&f, BODY_LENGTH, 100);
	framer_payload_moved(&f, 40);
	assert_int_equal(framer_payload_left(&f), 60);
	assert_false(framer_done(&f));
	assert_int_equal(framer_next(&f, "abcdefghij", 10, &kind), 10);
	assert_int_equal(framer_payload_left(&f), 50);
	framer_payload_moved(&f, 0);
	assert_int_equal(framer_payload_left(&f), 50);
	framer_payload_moved(&f, 50);
	assert_true(framer_done(&f));
	assert_int_equal(f.left, FRAME_DONE);
	/* Done stays done. */
	framer_payload_moved(&f, 0);
	assert_true(framer_done(&f));
}

static void
test_payload_moved_chunked(void **state)
{
	static const char wire[] = "8\r\n12345678\r\n3\r\nabc\r\n0\r\n\r\n";
	struct framer f;
	enum span_kind kind;
	size_t off = 0;
	ssize_t n;

	(void)state;
	framer_init(&f, BODY_CHUNKED, 0);
	/* Nothing is payload before a size line was read. */
	assert_int_equal(framer_payload_left(&f), 0);
	framer_payload_moved(&f, 0);
	assert_int_equal(f.left, FRAME_CHUNK_SIZE);

	n = framer_next(&f, wire, sizeof(wire) - 1, &kind);
	assert_int_equal(n, 3);
	assert_int_equal(kind, SPAN_FRAMING);
	off += (size_t)n;
	assert_int_equal(framer_payload_left(&f), 8);

	/* Part of the chunk moves by splice, the rest through framer_next(). */
	framer_payload_moved(&f, 5);
	off += 5;
	assert_int_equal(framer_payload_left(&f), 3);
	n = framer_next(&f, wire + off, sizeof(wire) - 1 - off, &kind);
	assert_int_equal(n, 3);
	assert_int_equal(kind, SPAN_PAYLOAD);
	assert_memory_equal(wire + off, "678", 3);
	off += 3;
	assert_int_equal(f.left, FRAME_CHUNK_END);

	n = framer_next(&f, wire + off, sizeof(wire) - 1 - off, &kind);
	assert_int_equal(n, 2);
	off += 2;
	n = framer_next(&f, wire + off, sizeof(wire) - 1 - off, &kind);
	assert_int_equal(n, 3);
	off += 3;
	assert_int_equal(framer_payload_left(&f), 3);

	/* The whole chunk moves at once: the CRLF after it is still expected. */
	framer_payload_moved(&f, 3);
	off += 3;
	assert_int_equal(f.left, FRAME_CHUNK_END);
	assert_int_equal(framer_payload_left(&f), 0);
	assert_false(framer_done(&f));
	/* In a framing state a move changes nothing. */
	framer_payload_moved(&f, 0);
	assert_int_equal(f.left, FRAME_CHUNK_END);

	n = framer_next(&f, wire + off, sizeof(wire) - 1 - off, &kind);
	assert_int_equal(n, 2);
	off += 2;
	n = framer_next(&f, wire + off, sizeof(wire) - 1 - off, &kind);
	assert_int_equal(n, 3);
	off += 3;
	assert_int_equal(f.left, FRAME_TRAILER);
	n = framer_next(&f, wire + off, sizeof(wire) - 1 - off, &kind);
	assert_int_equal(n, 2);
	off += 2;
	assert_int_equal(off, sizeof(wire) - 1);
	assert_true(framer_done(&f));
}

/* Runs the framer over wire until it fails, stalls or finishes. */
static ssize_t
run_until_stop(const char *wire, size_t len, struct framer *f)
{
	size_t off = 0;

	framer_init(f, BODY_CHUNKED, 0);
	while (!framer_done(f)) {
		enum span_kind kind;
		ssize_t n = framer_next(f, wire + off, len - off, &kind);

		if (n <= 0)
			return n;
		off += (size_t)n;
	}
	return (ssize_t)off;
}

static void
test_chunked_malformed(void **state)
{
	static const char *const cases[] = {
		"zz\r\nhello\r\n0\r\n\r\n",              /* size not hex */
		"\r\n",                                   /* empty size line */
		"5x\r\nhello\r\n0\r\n\r\n",               /* junk after the size */
		"-5\r\nhello\r\n0\r\n\r\n",
		"+5\r\nhello\r\n0\r\n\r\n",
		";ext\r\nhello\r\n0\r\n\r\n",             /* extension without size */
		"0x5\r\nhello\r\n0\r\n\r\n",
		"5 5\r\nhello\r\n0\r\n\r\n",
		"5;a\x01" "b\r\nhello\r\n0\r\n\r\n",      /* control byte in extension */
		"5\r\nhelloX\r\n0\r\n\r\n",               /* data longer than its size */
		"5\r\nhello\rX0\r\n\r\n",                 /* CR without LF after data */
		"5\r\nhel\r\n0\r\n\r\n",                 /* data shorter than its size */
		"0\r\nX: 1\r\n continued\r\n\r\n",        /* obsolete line folding */
		"0\r\n: no name\r\n\r\n",
		/* Bare LF anywhere in the framing: parsers disagree there (smuggling). */
		"5\nhello\r\n0\r\n\r\n",
		"5\r\nhello\n0\r\n\r\n",
		"5\r\nhell\r\n0\r\n\r\n",             /* "hell\r" then a bare LF */
		"5\r\nhello\r\n0\n\r\n",
		"5\r\nhello\r\n0\r\nX: 1\n\r\n",
		"5\r\nhello\r\n0\r\n\n",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct framer f;
		ssize_t r = run_until_stop(cases[i], strlen(cases[i]), &f);

		if (r != -1)
			fail_msg("case %zu (%s): expected -1, got %zd", i, cases[i], r);
	}
}

static void
test_chunk_size_overflow(void **state)
{
	/* Seventeen hex digits: more than 64 bits, or at least more than 2^60. */
	static const char *const cases[] = {
		"FFFFFFFFFFFFFFFFF\r\n",
		"fffffffffffffffff\r\n",
		"20000000000000000\r\n",
		"10000000000000000\r\n",   /* exactly 2^64: must not wrap to a last-chunk */
		"10000000000000005\r\n",   /* 2^64 + 5: must not wrap to a 5-byte chunk */
		"1000000000000000F\r\n",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct framer f;
		enum span_kind kind;
		ssize_t n;

		framer_init(&f, BODY_CHUNKED, 0);
		n = framer_next(&f, cases[i], strlen(cases[i]), &kind);
		if (n != -1)
			fail_msg("chunk size %.17s: expected -1, got %zd (left %lld)", cases[i], n,
			         (long long)f.left);
	}
}

static void
test_size_line_length_limit(void **state)
{
	char line[FRAME_MAX_LINE + 16];
	struct framer f;
	enum span_kind kind;

	(void)state;
	/* "1;aaaa..." with no LF yet. */
	memset(line, 'a', sizeof(line));
	line[0] = '1';
	line[1] = ';';

	framer_init(&f, BODY_CHUNKED, 0);
	assert_int_equal(framer_next(&f, line, FRAME_MAX_LINE - 1, &kind), 0);
	assert_int_equal(f.left, FRAME_CHUNK_SIZE);
	assert_int_equal(framer_next(&f, line, FRAME_MAX_LINE, &kind), -1);
	assert_int_equal(framer_next(&f, line, sizeof(line), &kind), -1);

	/* A line of exactly FRAME_MAX_LINE bytes, LF included, is still fine. */
	line[FRAME_MAX_LINE - 2] = '\r';
	line[FRAME_MAX_LINE - 1] = '\n';
	framer_init(&f, BODY_CHUNKED, 0);
	assert_int_equal(framer_next(&f, line, sizeof(line), &kind), FRAME_MAX_LINE);
	assert_int_equal(kind, SPAN_FRAMING);
	assert_int_equal(framer_payload_left(&f), 1);
}

static void
test_trailer_line_length_limit(void **state)
{
	char line[FRAME_MAX_LINE + 16];
	struct framer f;
	enum span_kind kind;

	(void)state;
	memset(line, 'x', sizeof(line));
	memcpy(line, "X-Long: ", 8);
	framer_init(&f, BODY_CHUNKED, 0);
	assert_int_equal(framer_next(&f, "0\r\n", 3, &kind), 3);
	assert_int_equal(f.left, FRAME_TRAILER);
	assert_int_equal(framer_next(&f, line, FRAME_MAX_LINE - 1, &kind), 0);
	assert_int_equal(framer_next(&f, line, sizeof(line), &kind), -1);
}

static void
test_chunk_end_needs_both_bytes(void **state)
{
	struct framer f;
	enum span_kind kind;

	(void)state;
	framer_init(&f, BODY_CHUNKED, 0);
	assert_int_equal(framer_next(&f, "2\r\nok", 5, &kind), 3);
	assert_int_equal(framer_next(&f, "ok", 2, &kind), 2);
	assert_int_equal(f.left, FRAME_CHUNK_END);
	/* A lone CR may be followed by its LF in the next read. */
	assert_int_equal(framer_next(&f, "\r", 1, &kind), 0);
	assert_int_equal(f.left, FRAME_CHUNK_END);
	assert_int_equal(framer_next(&f, "\r\n", 2, &kind), 2);
	assert_int_equal(kind, SPAN_FRAMING);
	assert_int_equal(f.left, FRAME_CHUNK_SIZE);
	/* An incomplete size line waits. */
	assert_int_equal(framer_next(&f, "0", 1, &kind), 0);
	assert_int_equal(framer_next(&f, "0\r", 2, &kind), 0);
	assert_int_equal(framer_next(&f, "0\r\n", 3, &kind), 3);
	assert_int_equal(f.left, FRAME_TRAILER);
	assert_int_equal(framer_next(&f, "\r", 1, &kind), 0);
	assert_false(framer_done(&f));
	assert_int_equal(framer_next(&f, "\r\n", 2, &kind), 2);
	assert_true(framer_done(&f));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_messages_whole),
		cmocka_unit_test(test_messages_byte_by_byte),
		cmocka_unit_test(test_messages_every_two_piece_split),
		cmocka_unit_test(test_chunked_spans),
		cmocka_unit_test(test_length_split_across_calls),
		cmocka_unit_test(test_zero_length_and_none),
		cmocka_unit_test(test_until_close),
		cmocka_unit_test(test_payload_moved_length),
		cmocka_unit_test(test_payload_moved_chunked),
		cmocka_unit_test(test_chunked_malformed),
		cmocka_unit_test(test_chunk_size_overflow),
		cmocka_unit_test(test_size_line_length_limit),
		cmocka_unit_test(test_trailer_line_length_limit),
		cmocka_unit_test(test_chunk_end_needs_both_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
