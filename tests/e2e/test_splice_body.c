/*
 * Response bodies on the splice path, compared with the copy path
 * (--no-splice) and with small pipes (--pipe-size 65536), the daemon's
 * counters showing which path the bytes took: Content-Length,
 * chunked (odd chunk sizes, extensions, trailers: passed on byte for byte to
 * HTTP/1.1, de-chunked for HTTP/1.0) and close-delimited bodies arrive intact
 * and the upstream connection is reused after a complete one; bodies of many
 * sizes back to back on one connection; a client that leaves mid-body makes
 * the proxy drop that upstream connection; an origin that resets mid-body
 * cuts the client off; the proxy serves the next request normally after
 * either.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

#define CL_BODY (48ull * 1024 * 1024)
#define EOF_BODY (8ull * 1024 * 1024 + 3)
#define HUGE_BODY (1024ull * 1024 * 1024)
#define RESET_BODY (8ull * 1024 * 1024)
#define RESET_AFTER (1024ull * 1024)
#define CHUNK_ROUNDS 12
#define EVEN_CHUNKED (1024u * 1024u + 17u)

/*
 * Body bytes that may be read into a buffer together with the response head
 * and stay off the splice path: splicing starts once that buffer is empty.
 * A few buffers' worth at most; generously bounded.
 */
#define WITH_HEAD_MAX (1024u * 1024u)

struct config {
	const char *name;
	const char *args[4];
	bool splices; /* bodies go through pipes */
};

static const struct config configs[] = {
	{"splice (default)", {NULL}, true},
	{"--no-splice", {"--no-splice", NULL}, false},
	{"--pipe-size 65536", {"--pipe-size", "65536", NULL}, true},
};

#define NCONFIGS (sizeof(configs) / sizeof(configs[0]))

static struct proxy px;
static int stats_port;

/* ---- The chunked stream: built once, sent by the origin, expected at the client ---- */

static const size_t chunk_sizes[] = {
	1,    2,    3,    5,     7,     13,    255,   256,    257,    1000,   4095,
	4096, 4097, 8191, 16385, 65535, 65536, 65537, 100003, 131072, 262143, 300 * 1024,
};

/* Send sizes the origin cuts the stream into, so that framing lands everywhere. */
static const size_t slice_sizes[] = {1, 7, 4096, 65521, 1000003, 3, 2, 131071};

static char *chunked_stream;
static size_t chunked_len;
static uint64_t chunked_payload;
static unsigned chunked_count;

static void
build_chunked_stream(void)
{
	size_t cap = 0, used = 0;
	uint64_t off = 0;
	unsigned i = 0;

	if (chunked_stream)
		return;
	for (unsigned r = 0; r < CHUNK_ROUNDS; r++)
		for (size_t k = 0; k < sizeof(chunk_sizes) / sizeof(chunk_sizes[0]); k++)
			cap += chunk_sizes[k] + 64;
	cap += 256;
	chunked_stream = malloc(cap);
	assert_non_null(chunked_stream);
	for (unsigned r = 0; r < CHUNK_ROUNDS; r++) {
		for (size_t k = 0; k < sizeof(chunk_sizes) / sizeof(chunk_sizes[0]); k++, i++) {
			size_t n = chunk_sizes[k];

			/* Every form a chunk-size line may take. */
			switch (i % 6) {
			case 0:
				used += (size_t)sprintf(chunked_stream + used, "%zx\r\n", n);
				break;
			case 1:
				used += (size_t)sprintf(chunked_stream + used, "%zX;name=value\r\n",
				                        n);
				break;
			case 2:
				used += (size_t)sprintf(chunked_stream + used, "%zx;ext\r\n", n);
				break;
			case 3:
				used += (size_t)sprintf(chunked_stream + used,
				                        "%zx ;q=\"quoted;value\"\r\n", n);
				break;
			case 4:
				used += (size_t)sprintf(chunked_stream + used, "000%zx\r\n", n);
				break;
			default:
				used += (size_t)sprintf(chunked_stream + used, "%zx;a=1;b=2\r\n",
				                        n);
				break;
			}
			pattern_fill(chunked_stream + used, off, n);
			used += n;
			off += n;
			memcpy(chunked_stream + used, "\r\n", 2);
			used += 2;
		}
	}
	used += (size_t)sprintf(chunked_stream + used,
	                        "0;last=yes\r\nX-Trailer-One: 1\r\nX-Checksum: %016llx\r\n\r\n",
	                        (unsigned long long)pattern_fnv(off));
	chunked_len = used;
	chunked_payload = off;
	chunked_count = i;
}

/* ---- Origin ---- */

static struct {
	atomic_int huge_result; /* 0 running, 1 the proxy cut it off, 2 sent completely */
} og_state;

static void
send_sliced(struct origin_conn *c, const char *data, size_t len)
{
	size_t off = 0;

	for (unsigned i = 0; off < len; i++) {
		size_t n = slice_sizes[i % (sizeof(slice_sizes) / sizeof(slice_sizes[0]))];

		if (n > len - off)
			n = len - off;
		if (!origin_send(c, data + off, n))
			return;
		off += n;
	}
}

static void
handle(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	const char *t = req->head.target;
	unsigned long long n;

	(void)arg;
	if (strcmp(t, "/cl") == 0) {
		origin_reply_pattern(c, 200, "Content-Type: application/octet-stream\r\n", CL_BODY);
	} else if (sscanf(t, "/size/%llu", &n) == 1) {
		origin_reply_pattern(c, 200, NULL, n);
	} else if (strcmp(t, "/chunked") == 0) {
		origin_sendf(c, "HTTP/1.1 200 OK\r\nTrailer: X-Trailer-One, X-Checksum\r\n"
		                "Transfer-Encoding: chunked\r\n\r\n");
		send_sliced(c, chunked_stream, chunked_len);
	} else if (strcmp(t, "/chunked-even") == 0) {
		/* Even chunks, each size line, payload and CRLF in a send of its own. */
		origin_reply_chunked_pattern(c, 200, NULL, EVEN_CHUNKED, 10000, "X-Done: 1\r\n");
	} else if (strcmp(t, "/eof") == 0) {
		origin_sendf(c,
		             "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n");
		origin_send_pattern(c, 0, EOF_BODY);
		origin_close(c);
	} else if (strcmp(t, "/huge") == 0) {
		bool ok = origin_reply_pattern(c, 200, NULL, HUGE_BODY);

		atomic_store(&og_state.huge_result, ok ? 2 : 1);
	} else if (strcmp(t, "/reset-mid") == 0) {
		origin_sendf(c, "HTTP/1.1 200 OK\r\nContent-Length: %llu\r\n\r\n",
		             (unsigned long long)RESET_BODY);
		origin_send_pattern(c, 0, RESET_AFTER);
		origin_pause(c, 100);
		origin_reset(c);
	} else {
		char body[128];

		snprintf(body, sizeof(body), "small %s", t);
		origin_reply(c, 200, NULL, body);
	}
}

/* ---- Client side ---- */

static void
expect_pattern_body(const struct config *cfg, const struct response *r, uint64_t len,
                    const char *what)
{
	char state[64];

	if (r->body.pattern_ok)
		snprintf(state, sizeof(state), ", intact");
	else
		snprintf(state, sizeof(state), ", first wrong byte at offset %llu",
		         (unsigned long long)r->body.pattern_bad);
	if (r->body.len != len || !r->body.pattern_ok)
		fail_msg("[%s] %s: %llu of %llu bytes%s", cfg->name, what,
		         (unsigned long long)r->body.len, (unsigned long long)len, state);
}

/* Starts the origin and the proxy, with a stats page, for one configuration. */
static struct origin *
start(const struct config *cfg)
{
	static char listen[64];
	const char *args[8] = {"--stats-listen", listen};
	struct origin *og;

	for (size_t i = 0; cfg->args[i]; i++)
		args[2 + i] = cfg->args[i];
	stats_port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", stats_port);
	print_message("[%s]\n", cfg->name);
	memset(&og_state, 0, sizeof(og_state));
	og = origin_start(handle, NULL);
	proxy_start(&px, args);
	return og;
}

/* What the proxy has moved so far, and what the origin has sent. */
struct moved {
	double spliced, copied;
	uint64_t sent;
};

static void
moved_now(struct origin *og, struct moved *m)
{
	int status;
	const char *text = stats_page(stats_port, "/metrics", &status);

	assert_int_equal(status, 200);
	m->spliced = metric_value(text, "keepalive_proxy_bytes_spliced_total");
	m->copied = metric_value(text, "keepalive_proxy_bytes_copied_total");
	m->sent = origin_bytes_sent(og);
}

/*
 * A body of len bytes went the configuration's way since before. With
 * splice, all of it but what came into the buffer with the head went
 * through a pipe, and nothing was copied; without, every byte the origin
 * sent (head and body) was copied, and nothing spliced.
 */
static void
expect_moved(const struct config *cfg, struct origin *og, const struct moved *before,
             uint64_t len, const char *what)
{
	struct moved after;
	double spliced, copied;

	moved_now(og, &after);
	spliced = after.spliced - before->spliced;
	copied = after.copied - before->copied;
	/* The origin counts a send once it returned, which can be after the proxy copied it. */
	if (!cfg->splices && origin_wait_bytes_sent(og, before->sent + (uint64_t)copied, 2000))
		after.sent = origin_bytes_sent(og);
	print_message("[%s] %s: %.0f bytes spliced, %.0f copied\n", cfg->name, what, spliced,
	              copied);
	if (cfg->splices ? spliced > (double)len || spliced < (double)(len - WITH_HEAD_MAX) ||
	                           copied != 0
	                 : spliced != 0 || copied != (double)(after.sent - before->sent))
		fail_msg("[%s] %s (%llu bytes, the origin sent %llu): %.0f bytes spliced, %.0f "
		         "copied; expected %s",
		         cfg->name, what, (unsigned long long)len,
		         (unsigned long long)(after.sent - before->sent), spliced, copied,
		         cfg->splices ? "all but what came with the head spliced, none copied"
		                      : "all copied, none spliced");
}

static void
finish(struct origin *og)
{
	assert_origin_clean(og);
	proxy_stop(&px);
	origin_stop(og);
}

static void
content_length_body(void)
{
	for (size_t i = 0; i < NCONFIGS; i++) {
		const struct config *cfg = &configs[i];
		struct origin *og = start(cfg);
		struct client c;
		struct response r;
		struct moved before;
		double t0 = now_s();

		moved_now(og, &before);
		client_open(&c, px.port);
		send_get(&c, og, "/cl");
		read_response_ok(&c, &r, 0);
		assert_status(&r, 200);
		assert_int_equal(r.framing, FRAMING_LENGTH);
		expect_pattern_body(cfg, &r, CL_BODY, "48 MiB Content-Length body");
		response_free(&r);
		expect_moved(cfg, og, &before, CL_BODY, "48 MiB Content-Length body");
		print_message("[%s] 48 MiB in %.2f s\n", cfg->name, now_s() - t0);
		/* The same client connection, the same upstream connection. */
		send_get(&c, og, "/next");
		expect_response(&c, 200, "small /next");
		client_close(&c);
		assert_int_equal(origin_connection_count(og), 1);
		finish(og);
	}
}

/* Where two byte strings first differ, shown with some context. */
static void
print_difference(const char *want, size_t want_len, const char *got, size_t got_len)
{
	size_t n = want_len < got_len ? want_len : got_len, at = 0;

	while (at < n && want[at] == got[at])
		at++;
	print_error("raw chunked stream: %zu bytes expected, %zu received; first difference at "
	            "byte %zu\n",
	            want_len, got_len, at);
	for (int side = 0; side < 2; side++) {
		const char *p = side ? got : want;
		size_t len = side ? got_len : want_len;
		size_t from = at > 40 ? at - 40 : 0;

		print_error("  %s: \"", side ? "received" : "expected");
		for (size_t k = from; k < len && k < at + 40; k++) {
			unsigned char ch = (unsigned char)p[k];

			if (ch >= 0x20 && ch < 0x7f && ch != '"')
				print_error("%c", ch);
			else
				print_error("\\x%02x", ch);
		}
		print_error("\"\n");
	}
}

static void
chunked_body(void)
{
	build_chunked_stream();
	print_message("chunked stream: %u chunks, %llu payload bytes, %zu bytes in all\n",
	              chunked_count, (unsigned long long)chunked_payload, chunked_len);
	for (size_t i = 0; i < NCONFIGS; i++) {
		const struct config *cfg = &configs[i];
		struct origin *og = start(cfg);
		struct client c;
		struct msg_head h;
		struct body raw;
		struct response r;
		char why[256];
		int rc;

		client_open(&c, px.port);
		send_get(&c, og, "/chunked");
		rc = wire_read_head(&c.w, false, 1u << 20, &h, why, sizeof(why));
		if (rc != WIRE_OK)
			fail_msg("[%s] chunked response head: %s %s", cfg->name, wire_strerror(rc),
			         why);
		assert_int_equal(h.status, 200);
		if (!headers_has_token(&h.headers, "Transfer-Encoding", "chunked"))
			fail_msg("[%s] the chunked response lost its Transfer-Encoding", cfg->name);
		msg_head_free(&h);
		/* To HTTP/1.1 the chunked framing passes unchanged: sizes, extensions, trailers. */
		body_init(&raw, chunked_len);
		rc = wire_recv_exact(&c.w, chunked_len, &raw, 3000);
		if (rc != WIRE_OK || raw.len != chunked_len ||
		    memcmp(raw.data, chunked_stream, chunked_len) != 0) {
			print_error("[%s] reading the chunked body raw: %s\n", cfg->name,
			            rc == WIRE_OK ? "complete" : wire_strerror(rc));
			print_difference(chunked_stream, chunked_len, raw.data, raw.kept);
			body_free(&raw);
			fail_msg("[%s] the chunked body did not arrive byte for byte", cfg->name);
		}
		body_free(&raw);
		/* Nothing beyond the message; the next response follows on the same connections. */
		send_get(&c, og, "/after-chunked");
		expect_response(&c, 200, "small /after-chunked");
		/* And once more, parsed. */
		send_get(&c, og, "/chunked");
		read_response_ok(&c, &r, 0);
		assert_int_equal(r.framing, FRAMING_CHUNKED);
		assert_int_equal(r.nchunks, chunked_count);
		expect_pattern_body(cfg, &r, chunked_payload, "chunked body");
		assert_non_null(headers_get(&r.trailers, "X-Checksum"));
		response_free(&r);
		send_get(&c, og, "/after-chunked-2");
		expect_response(&c, 200, "small /after-chunked-2");
		client_close(&c);
		assert_int_equal(origin_connection_count(og), 1);
		finish(og);
	}
}

/* GET path as HTTP/1.0: the body arrives de-chunked and the connection then closes. */
static void
get_dechunked(struct origin *og, const char *path, const struct config *cfg, uint64_t len)
{
	struct client c;
	struct response r;
	char what[128];

	client_open(&c, px.port);
	send_request(&c, "GET", og, path, "HTTP/1.0", NULL);
	read_response_ok(&c, &r, 0);
	assert_status(&r, 200);
	assert_null(resp_header(&r, "Transfer-Encoding"));
	snprintf(what, sizeof(what), "%s de-chunked for HTTP/1.0", path);
	expect_pattern_body(cfg, &r, len, what);
	response_free(&r);
	assert_client_eof(&c, 3000);
	client_close(&c);
}

static void
chunked_body_to_http10(void)
{
	build_chunked_stream();
	for (size_t i = 0; i < NCONFIGS; i++) {
		const struct config *cfg = &configs[i];
		struct origin *og = start(cfg);

		/* The upstream connection reads whole chunked bodies and is reused throughout. */
		for (int round = 0; round < 3; round++) {
			get_dechunked(og, "/chunked", cfg, chunked_payload);
			get_dechunked(og, "/chunked-even", cfg, EVEN_CHUNKED);
		}
		assert_int_equal(origin_connection_count(og), 1);
		finish(og);
	}
}

static void
close_delimited_body(void)
{
	for (size_t i = 0; i < NCONFIGS; i++) {
		const struct config *cfg = &configs[i];
		struct origin *og = start(cfg);
		struct client c;
		struct response r;
		struct moved before;

		moved_now(og, &before);
		client_open(&c, px.port);
		send_get(&c, og, "/eof");
		read_response_ok(&c, &r, 0);
		assert_status(&r, 200);
		assert_int_equal(r.framing, FRAMING_EOF);
		expect_pattern_body(cfg, &r, EOF_BODY, "close-delimited body");
		response_free(&r);
		assert_client_eof(&c, 3000);
		client_close(&c);
		expect_moved(cfg, og, &before, EOF_BODY, "close-delimited body");
		client_open(&c, px.port);
		send_get(&c, og, "/after-eof");
		expect_response(&c, 200, "small /after-eof");
		client_close(&c);
		assert_int_equal(origin_connection_count(og), 2);
		finish(og);
	}
}

static void
bodies_back_to_back(void)
{
	static const uint64_t sizes[] = {0,      1,      2,       3,     4095,   4096,
	                                 4097,   65535,  65536,   65537, 262143, 262144,
	                                 262145, 524289, 1048577, 7,     0,      1};

	for (size_t i = 0; i < NCONFIGS; i++) {
		const struct config *cfg = &configs[i];
		struct origin *og = start(cfg);
		struct client c;

		client_open(&c, px.port);
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			struct response r;
			char path[64], what[64];

			snprintf(path, sizeof(path), "/size/%llu", (unsigned long long)sizes[k]);
			snprintf(what, sizeof(what), "body %zu (%llu bytes)", k + 1,
			         (unsigned long long)sizes[k]);
			send_get(&c, og, path);
			read_response_ok(&c, &r, 0);
			assert_status(&r, 200);
			expect_pattern_body(cfg, &r, sizes[k], what);
			response_free(&r);
		}
		client_close(&c);
		assert_int_equal(origin_connection_count(og), 1);
		finish(og);
	}
}

static void
client_leaves_mid_body(void)
{
	for (size_t i = 0; i < NCONFIGS; i++) {
		const struct config *cfg = &configs[i];
		struct origin *og = start(cfg);
		struct client c;
		struct msg_head h;
		struct body part;
		char why[256];
		double t0, deadline;
		int rc;

		client_open(&c, px.port);
		send_get(&c, og, "/huge");
		rc = wire_read_head(&c.w, false, 1u << 20, &h, why, sizeof(why));
		if (rc != WIRE_OK)
			fail_msg("[%s] head of the 1 GiB response: %s %s", cfg->name,
			         wire_strerror(rc), why);
		assert_int_equal(h.status, 200);
		msg_head_free(&h);
		body_init(&part, 16);
		rc = client_recv_exact(&c, 1024 * 1024, &part);
		if (rc != WIRE_OK || !part.pattern_ok) {
			body_free(&part);
			fail_msg("[%s] the first MiB of the body: %s%s", cfg->name,
			         wire_strerror(rc), part.pattern_ok ? "" : ", corrupted");
		}
		body_free(&part);
		client_close(&c);
		t0 = now_s();
		deadline = t0 + 3.0;
		while (atomic_load(&og_state.huge_result) == 0 && now_s() < deadline)
			sleep_ms(5);
		if (atomic_load(&og_state.huge_result) != 1)
			fail_msg(
				"[%s] the client left after 1 MiB of a 1 GiB body, but %.1f s later "
				"the proxy %s its upstream connection (the origin has sent %llu "
				"bytes)",
				cfg->name, now_s() - t0,
				atomic_load(&og_state.huge_result) == 2 ? "had read all of" :
									  "still held",
				(unsigned long long)origin_bytes_sent(og));
		print_message("[%s] upstream cut off %.3f s after the client left, %llu bytes sent "
		              "by the origin\n",
		              cfg->name, now_s() - t0, (unsigned long long)origin_bytes_sent(og));
		client_open(&c, px.port);
		send_get(&c, og, "/after-abort");
		expect_response(&c, 200, "small /after-abort");
		client_close(&c);
		finish(og);
	}
}

static void
origin_resets_mid_body(void)
{
	for (size_t i = 0; i < NCONFIGS; i++) {
		const struct config *cfg = &configs[i];
		struct origin *og = start(cfg);
		struct client c;
		struct response r;
		int rc;

		client_open(&c, px.port);
		send_get(&c, og, "/reset-mid");
		rc = client_read_response(&c, &r, 0);
		if (rc != WIRE_TRUNC && rc != WIRE_IO) {
			print_error(
				"[%s] reading a response whose origin reset the connection after "
				"%llu of %llu body bytes: %s%s%s\n",
				cfg->name, (unsigned long long)RESET_AFTER,
				(unsigned long long)RESET_BODY, wire_strerror(rc),
				r.why[0] ? ": " : "", r.why);
			if (r.head.status)
				response_print(&r);
			response_free(&r);
			fail_msg("[%s] expected the client connection to end short of the body",
			         cfg->name);
		}
		assert_int_equal(r.head.status, 200);
		if (r.body.len > RESET_AFTER || !r.body.pattern_ok)
			fail_msg("[%s] short body: %llu bytes%s", cfg->name,
			         (unsigned long long)r.body.len,
			         r.body.pattern_ok ? "" : ", corrupted");
		print_message("[%s] client got %llu body bytes, then %s\n", cfg->name,
		              (unsigned long long)r.body.len, wire_strerror(rc));
		response_free(&r);
		client_close(&c);
		client_open(&c, px.port);
		send_get(&c, og, "/after-reset");
		expect_response(&c, 200, "small /after-reset");
		client_close(&c);
		finish(og);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(content_length_body),    E2E_TEST(chunked_body),
		E2E_TEST(chunked_body_to_http10), E2E_TEST(close_delimited_body),
		E2E_TEST(bodies_back_to_back),    E2E_TEST(client_leaves_mid_body),
		E2E_TEST(origin_resets_mid_body),
	};
	int rc = E2E_RUN("e2e_splice_body", tests);

	free(chunked_stream);
	return rc;
}
