/*
 * The exchange's paths that ordinary traffic seldom takes, each provoked on
 * purpose. Responses: a head in pieces or cut short; heads that fit the
 * origin's buffer but not the client's once the proxy has written them; a
 * switch with more early bytes than the tunnel can take; a close-delimited
 * body whose end comes while a slow client takes nothing; a chunk-size
 * line longer than a buffer. Requests: a body that arrives while
 * connecting, split mid chunk-size line, malformed after the head went
 * out, or cut by the client's half-close; an origin that answers or resets
 * before the request is whole; a local answer after a body was read; a
 * CONNECT half-closed before its tunnel opens. Waits: a connect not done
 * in time, and fetches ahead pipelined behind a slow answer, waited for
 * and joined by a client.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "harness.h"
#include "origin.h"

/* With --max-header-size 4096 every buffer holds 4096 + 1024 bytes. */
#define SMALL_HEADS "4096"
#define BUFFER_BYTES 5120
/* What the proxy adds to each head it passes on. */
#define VIA_LINE "Via: 1.1 keepalive-proxy\r\n"

#define SEGMENT_BYTES (64 * 1024)
#define WAIT_MS 5000

static struct proxy px;
static int stats_port;
/* A held-back answer goes out once the test sets this. */
static atomic_bool gate_open;
/* The length of /close-delimited's body, set by its test. */
static size_t close_delimited_bytes;

/* ---- the origin ------------------------------------------------------------ */

/*
 * A head of exactly total bytes: start (status line and fields) padded
 * with one field to the length asked for, then the empty line.
 */
static size_t
padded_head(char *out, size_t size, const char *start, size_t total)
{
	size_t n = strlen(start), fixed = n + strlen("X-Pad: \r\n\r\n");

	assert_true(total > fixed && total < size);
	memcpy(out, start, n);
	n += (size_t)sprintf(out + n, "X-Pad: ");
	memset(out + n, 'p', total - fixed);
	n += total - fixed;
	n += (size_t)sprintf(out + n, "\r\n\r\n");
	assert_int_equal(n, total);
	return n;
}

/*
 * An interim head of first bytes, then the head second names, in one send:
 * both fit the origin's buffer together, so the proxy reads and parses them
 * in one go; written for the client, each with a Via, they no longer fit
 * its buffer.
 */
static void
send_two_heads(struct origin_conn *c, const char *second_start)
{
	static char heads[BUFFER_BYTES];
	size_t first = 2600, second = BUFFER_BYTES - 10 - first;
	size_t n = padded_head(heads, sizeof(heads), "HTTP/1.1 103 Early Hints\r\n", first);

	n += padded_head(heads + n, sizeof(heads) - n, second_start, second);
	assert_true(n <= BUFFER_BYTES && n + 2 * strlen(VIA_LINE) > BUFFER_BYTES);
	origin_send(c, heads, n);
	origin_stay_silent(c, 5000);
}

/* Waits for the test to open the gate (10 s at most). */
static void
wait_for_gate(struct origin_conn *c)
{
	for (int waited = 0; !atomic_load(&gate_open) && waited < 10000; waited += 5)
		origin_pause(c, 5);
}

static void
handle(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	const char *t = req->head.target;

	(void)arg;
	if (strcmp(t, "/head-in-pieces") == 0) {
		origin_sendf(c, "HTTP/1.1 200 OK\r\nContent-");
		origin_pause(c, 200);
		origin_sendf(c, "Length: 2\r\n\r\nok");
	} else if (strcmp(t, "/head-cut-short") == 0) {
		origin_sendf(c, "HTTP/1.1 200 OK\r\nContent-Len");
		origin_close(c);
	} else if (strcmp(t, "/interim-then-interim") == 0) {
		send_two_heads(c, "HTTP/1.1 103 Early Hints\r\n");
	} else if (strcmp(t, "/interim-then-switch") == 0) {
		send_two_heads(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
		                  "Connection: Upgrade\r\n");
	} else if (strcmp(t, "/interim-then-final") == 0) {
		send_two_heads(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n");
	} else if (strcmp(t, "/switch-with-bytes") == 0) {
		/* The 101 and, behind it in one read, more than the client's buffer has left. */
		static char bytes[BUFFER_BYTES];
		size_t n = (size_t)sprintf(bytes, "HTTP/1.1 101 Switching Protocols\r\n"
		                                  "Upgrade: websocket\r\n"
		                                  "Connection: Upgrade\r\n\r\n");

		memset(bytes + n, 'w', BUFFER_BYTES - 5 - n);
		origin_send(c, bytes, BUFFER_BYTES - 5);
		origin_stay_silent(c, 5000);
	} else if (strcmp(t, "/close-delimited") == 0) {
		origin_sendf(c, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
		origin_send_pattern(c, 0, close_delimited_bytes);
		origin_close(c);
	} else if (strcmp(t, "/long-chunk-line") == 0) {
		/* Within the framer's 4096 bytes a line, beyond a 2048-byte buffer. */
		static char extension[3000];

		memset(extension, 'x', sizeof(extension));
		origin_sendf(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;");
		origin_send(c, extension, sizeof(extension));
		origin_stay_silent(c, 5000);
	} else if (strcmp(t, "/answers-early") == 0) {
		/* The body is not read: the answer goes before the request is whole. */
		origin_reply(c, 413, NULL, "too large");
		origin_stay_silent(c, 5000);
	} else if (strcmp(t, "/resets-unread") == 0) {
		/* Long enough for the proxy's buffers toward this origin to fill. */
		origin_pause(c, 300);
		origin_reset(c);
	} else if (strcmp(t, "/lo.m3u8") == 0) {
		char text[512];
		size_t n = (size_t)snprintf(text, sizeof(text),
		                            "#EXTM3U\n#EXT-X-TARGETDURATION:4\n");

		/* Live (no EXT-X-ENDLIST), as a player's variant would be. */
		for (unsigned k = 0; k < 4; k++)
			n += (size_t)snprintf(text + n, sizeof(text) - n,
			                      "#EXTINF:4.0,\nlo%u.bin\n", k);
		origin_reply(c, 200, "Content-Type: application/vnd.apple.mpegurl\r\n", text);
	} else if (strncmp(t, "/lo", 3) == 0) {
		if (strcmp(t, "/lo1.bin") == 0)
			wait_for_gate(c);
		origin_reply_pattern(c, 200, "Content-Type: video/mp2t\r\n", SEGMENT_BYTES);
	} else {
		origin_reply(c, 200, NULL, "ok");
	}
}

/* ---- helpers ---------------------------------------------------------------- */

static void
start_proxy(const char *const more[])
{
	static char listen[64];
	const char *args[16] = {"--stats-listen", listen};
	size_t n = 2;

	stats_port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", stats_port);
	for (size_t i = 0; more && more[i]; i++) {
		assert_true(n < sizeof(args) / sizeof(args[0]) - 1);
		args[n++] = more[i];
	}
	args[n] = NULL;
	proxy_start(&px, args);
}

/* Reads one response and asserts its status and that its body says why. */
static void
expect_answer(struct client *c, int status, const char *why)
{
	struct response r;

	read_response_ok(c, &r, 0);
	if (r.head.status != status || !r.body.data || !strstr((const char *)r.body.data, why)) {
		response_print(&r);
		fail_msg("expected %d saying \"%s\"", status, why);
	}
	response_free(&r);
}

/* Waits until the metric reads at least want; fails after WAIT_MS. */
static void
metric_reaches(const char *name, double want)
{
	double deadline = now_s() + WAIT_MS / 1000.0, got;

	while ((got = stats_metric(stats_port, name)) < want) {
		if (now_s() > deadline)
			fail_msg("%s stays %.0f, expected %.0f", name, got, want);
		sleep_ms(5);
	}
}

/* The connection the origin read the request for path on; fails if it read none. */
static unsigned
connection_of(struct origin *og, const char *path)
{
	for (unsigned i = 0; i < origin_request_count(og); i++) {
		const struct origin_request *q = origin_request_at(og, i);

		if (q && strcmp(q->head.target, path) == 0)
			return q->conn_no;
	}
	fail_msg("the origin saw no request for %s", path);
	return 0;
}

/* Waits until the origin has read a request for path on the connection it read first's on. */
static void
wait_request_behind(struct origin *og, const char *first, const char *path)
{
	double deadline = now_s() + WAIT_MS / 1000.0;
	unsigned conn = connection_of(og, first);

	for (;;) {
		for (unsigned i = 0; i < origin_request_count(og); i++) {
			const struct origin_request *q = origin_request_at(og, i);

			if (q && q->conn_no == conn && strcmp(q->head.target, path) == 0)
				return;
		}
		if (now_s() > deadline)
			fail_msg("the origin read no request for %s behind %s", path, first);
		sleep_ms(5);
	}
}

/* ---- response heads ---------------------------------------------------------- */

/* A head that arrives in two pieces is parsed once whole. */
static void
response_head_in_pieces(void)
{
	struct origin *og = origin_start(handle, NULL);

	proxy_start(&px, NULL);
	expect_get(px.port, og, "/head-in-pieces", 200, "ok");
	proxy_stop(&px);
}

/* An origin that closes within its head: 502, not a close, since nothing was sent yet. */
static void
response_head_cut_short(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	send_get(&c, og, "/head-cut-short");
	expect_answer(&c, 502, "incomplete response head");
	client_close(&c);
	proxy_stop(&px);
}

/*
 * Heads that fit the origin's buffer together but not the client's once
 * written: the second one is refused with a 502 that says which, rather
 * than written past the buffer's end.
 */
static void
second_head_too_large_for_the_client(void)
{
	static const struct {
		const char *path, *why;
		bool upgrade;
	} cases[] = {
		{"/interim-then-interim", "interim response head too large", false},
		{"/interim-then-switch", "101 response head too large", true},
		{"/interim-then-final", "response head too large to forward", false},
	};
	struct origin *og = origin_start(handle, NULL);

	proxy_start(&px, (const char *const[]){"--max-header-size", SMALL_HEADS, NULL});
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct client c;

		client_open(&c, px.port);
		send_request(&c, "GET", og, cases[i].path, "HTTP/1.1",
		             cases[i].upgrade ? "Connection: Upgrade\r\nUpgrade: websocket\r\n"
		                              : NULL);
		expect_answer(&c, 502, cases[i].why);
		client_close(&c);
	}
	proxy_assert_alive(&px);
	proxy_stop(&px);
}

/*
 * A 101 followed, in the same read, by more bytes than the client's buffer
 * has room for behind the head: the connection is closed, with nothing of
 * the switch sent, rather than a tunnel that silently lost the bytes.
 */
static void
switch_with_more_early_bytes_than_fit(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct response r;

	proxy_start(&px, (const char *const[]){"--max-header-size", SMALL_HEADS, NULL});
	client_open(&c, px.port);
	send_request(&c, "GET", og, "/switch-with-bytes", "HTTP/1.1",
	             "Connection: Upgrade\r\nUpgrade: websocket\r\n");
	if (client_read_response(&c, &r, RESP_INTERIM) == WIRE_OK) {
		response_print(&r);
		fail_msg("a response came where the connection should have closed");
	}
	response_free(&r);
	client_close(&c);
	proxy_assert_alive(&px);
	expect_get(px.port, og, "/ok", 200, "ok");
	proxy_stop(&px);
}

/* ---- response bodies ----------------------------------------------------------- */

/* The most a socket's send buffer grows to (tcp_wmem's third figure); 4 MiB if unknown. */
static size_t
send_buffer_max(void)
{
	unsigned long lo, def, max = 4ul << 20;
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_wmem", "r");

	if (f) {
		if (fscanf(f, "%lu %lu %lu", &lo, &def, &max) != 3)
			max = 4ul << 20;
		fclose(f);
	}
	return max;
}

/* A connection to the proxy whose receive buffer is fixed small (no autotuning). */
static int
open_small_window(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct timeval tv = {CLIENT_TIMEOUT_MS / 1000, 0};
	int small = 65536, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	/* Before connecting: set later, it would not bound the window advertised. */
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/*
 * A close-delimited body whose end the proxy reads while the client, slow,
 * has taken nothing more: the closed origin is no longer read (it would
 * read its end of file over and over), and the client still gets every
 * byte, then the close. The body is larger than the proxy's socket toward
 * the client, the client's window and a pipe together can hold, so the
 * client is still behind when the origin's end of file is read.
 */
static void
close_delimited_body_to_a_slow_client(void)
{
	enum { READ = 32768 };
	struct origin *og = origin_start(handle, NULL);
	size_t total, cap, len = 0;
	char *got, *want, *body, request[256];
	ssize_t n;
	int fd;

	close_delimited_bytes = send_buffer_max() + (2u << 20);
	total = close_delimited_bytes;
	cap = total + 1024;
	got = malloc(cap);
	want = malloc(total);
	assert_non_null(got);
	assert_non_null(want);
	proxy_start(&px, NULL);
	fd = open_small_window(px.port);
	n = snprintf(request, sizeof(request),
	             "GET http://127.0.0.1:%d/close-delimited HTTP/1.1\r\n"
	             "Host: 127.0.0.1:%d\r\n\r\n",
	             origin_port(og), origin_port(og));
	assert_int_equal(send(fd, request, (size_t)n, MSG_NOSIGNAL), n);
	/* About 6 MB/s: the proxy, far faster, waits for the client nearly all the time. */
	while (len < cap) {
		n = recv(fd, got + len, cap - len < READ ? cap - len : READ, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
		sleep_ms(5);
	}
	if (n != 0)
		fail_msg("after %zu bytes of %zu the proxy sent nothing more for %d s", len, total,
		         CLIENT_TIMEOUT_MS / 1000);
	close(fd);
	assert_true(len < cap);
	body = memmem(got, len, "\r\n\r\n", 4);
	assert_non_null(body);
	body += 4;
	assert_memory_equal(got, "HTTP/1.1 200 OK\r\n", 17);
	assert_int_equal(len - (size_t)(body - got), total);
	pattern_fill(want, 0, total);
	assert_memory_equal(body, want, total);
	free(got);
	free(want);
	proxy_stop(&px);
}

/*
 * A chunk-size line longer than a buffer holds (possible below a
 * --max-header-size of 3072, since the framer allows 4096 bytes a line):
 * the response has begun, so the client's connection is closed at once,
 * not left waiting for a line that can never be read whole.
 */
static void
chunk_size_line_longer_than_a_buffer(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct response r;
	double started;
	int rc;

	proxy_start(&px, (const char *const[]){"--max-header-size", "1024", NULL});
	client_open(&c, px.port);
	send_get(&c, og, "/long-chunk-line");
	started = now_s();
	rc = client_read_response(&c, &r, 0);
	if ((rc != WIRE_TRUNC && rc != WIRE_IO) || r.head.status != 200 || now_s() - started > 3) {
		response_print(&r);
		fail_msg("expected the 200's head, then a close within 3 s; got %s after %.1f s",
		         wire_strerror(rc), now_s() - started);
	}
	response_free(&r);
	client_close(&c);
	proxy_stop(&px);
}

/* ---- request bodies ----------------------------------------------------------- */

/* The second half of a body arrives while the connect is still held back. */
static void
body_arrives_while_connecting(void)
{
	struct origin *og = origin_start(handle, NULL);
	const struct origin_request *q;
	struct client c;

	proxy_start(&px, NULL);
	origin_hold_accepts(og);
	client_open(&c, px.port);
	send_request(&c, "POST", og, "/ok", "HTTP/1.1", "Content-Length: 10\r\n");
	client_sendf(&c, "01234");
	sleep_ms(300);
	client_sendf(&c, "56789");
	sleep_ms(300);
	origin_release_accepts(og);
	expect_response(&c, 200, "ok");
	q = origin_last_request(og);
	assert_true(q->body_complete);
	assert_int_equal(q->body.len, 10);
	assert_memory_equal(q->body.data, "0123456789", 10);
	client_close(&c);
	proxy_stop(&px);
}

/* A chunk-size line split across two reads is framed once its end arrives. */
static void
chunk_size_line_split_across_reads(void)
{
	struct origin *og = origin_start(handle, NULL);
	const struct origin_request *q;
	struct client c;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	send_request(&c, "POST", og, "/ok", "HTTP/1.1", "Transfer-Encoding: chunked\r\n");
	client_sendf(&c, "5");
	sleep_ms(200);
	client_sendf(&c, "\r\nhello\r\n0\r\n\r\n");
	expect_response(&c, 200, "ok");
	q = origin_last_request(og);
	assert_true(q->body_complete);
	assert_int_equal(q->body.len, 5);
	assert_memory_equal(q->body.data, "hello", 5);
	client_close(&c);
	proxy_stop(&px);
}

/* Chunk framing that goes bad after the head went out still gets the client a 400. */
static void
chunked_body_malformed_after_the_head_went(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	send_request(&c, "POST", og, "/ok", "HTTP/1.1", "Transfer-Encoding: chunked\r\n");
	client_sendf(&c, "5\r\nhello\r\n");
	/* The head and the first chunk are on their way to the origin by now. */
	sleep_ms(300);
	client_sendf(&c, "zz\r\n");
	expect_answer(&c, 400, "malformed chunked request body");
	assert_client_eof(&c, WAIT_MS);
	client_close(&c);
	proxy_stop(&px);
}

/* A client that half-closes before its body ended is closed, and so is the origin's connection. */
static void
client_half_closes_mid_body(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	send_request(&c, "POST", og, "/ok", "HTTP/1.1", "Content-Length: 100\r\n");
	client_sendf(&c, "0123456789");
	sleep_ms(200);
	client_shutdown_write(&c);
	assert_client_eof(&c, 2000);
	client_close(&c);
	if (!origin_wait_closed(og, 1, WAIT_MS))
		fail_msg("the origin's connection stayed open");
	proxy_stop(&px);
}

/*
 * An origin that answers before the request body is whole: the client gets
 * the answer, then a close, since the rest of its body would otherwise be
 * read as its next request.
 */
static void
answer_before_the_request_is_whole(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	send_request(&c, "POST", og, "/answers-early", "HTTP/1.1",
	             "Expect: 100-continue\r\nContent-Length: 100000\r\n");
	client_sendf(&c, "0123456789");
	expect_response(&c, 413, "too large");
	assert_client_eof(&c, 2000);
	client_close(&c);
	proxy_stop(&px);
}

struct writer {
	struct client *c;
	pthread_t thread;
};

/* Sends body bytes until the proxy stops taking them. */
static void *
write_until_refused(void *arg)
{
	struct writer *w = arg;
	static char chunk[64 * 1024];

	memset(chunk, 'b', sizeof(chunk));
	for (int i = 0; i < 1024; i++)
		if (client_send(w->c, chunk, sizeof(chunk)) < 0)
			break;
	return NULL;
}

/*
 * An origin that resets while the proxy still has body bytes to send it:
 * the failed send leaves the verdict to the response side, which answers
 * 502 (nothing of a response came), not a bare close.
 */
static void
origin_resets_while_the_body_is_sent(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct writer w = {.c = &c};

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	send_request(&c, "POST", og, "/resets-unread", "HTTP/1.1",
	             "Expect: 100-continue\r\nContent-Length: 67108864\r\n");
	assert_int_equal(pthread_create(&w.thread, NULL, write_until_refused, &w), 0);
	/* Which of its close or its reset the proxy reads first is the kernel's choice. */
	expect_answer(&c, 502, "the origin");
	shutdown(c.fd, SHUT_RDWR);
	pthread_join(w.thread, NULL);
	client_close(&c);
	proxy_stop(&px);
}

/*
 * A body read whole before the answer is the proxy's own (here a 502: the
 * origin's port refuses): the connection stays, and its next request is
 * read from after that body.
 */
static void
local_answer_after_a_body_keeps_the_connection(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;
	struct response r;
	char url[128];

	proxy_start(&px, NULL);
	client_open(&c, px.port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", free_port());
	client_sendf(&c,
	             "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 5\r\n\r\nhello", url,
	             url + strlen("http://"));
	read_response_ok(&c, &r, 0);
	assert_status(&r, 502);
	response_free(&r);
	send_get(&c, og, "/ok");
	expect_response(&c, 200, "ok");
	client_close(&c);
	proxy_stop(&px);
}

/*
 * A client that half-closes right behind its CONNECT, before the origin
 * accepted: once the tunnel opens, the bytes it sent go through, then its
 * end of stream, and the origin's answer and close come back.
 */
static void
connect_half_closed_before_the_tunnel_opens(void)
{
	struct origin *og = origin_start_raw(origin_echo_all, NULL);
	struct client c;
	struct response r;
	struct body b;
	char authority[64];

	proxy_start(&px, (const char *const[]){"--connect-ports", "*", NULL});
	origin_hold_accepts(og);
	client_open(&c, px.port);
	snprintf(authority, sizeof(authority), "127.0.0.1:%d", origin_port(og));
	client_sendf(&c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\nhello", authority, authority);
	client_shutdown_write(&c);
	sleep_ms(300);
	origin_release_accepts(og);
	read_response_ok(&c, &r, RESP_CONNECT);
	assert_status(&r, 200);
	response_free(&r);
	body_init(&b, 64);
	assert_int_equal(client_recv_to_eof(&c, &b), WIRE_OK);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.data, "hello", 5);
	body_free(&b);
	client_close(&c);
	proxy_stop(&px);
}

/* ---- waits ------------------------------------------------------------------ */

/* A connect that does not complete within --queue-timeout: 504, saying so. */
static void
connect_not_done_in_time(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;

	proxy_start(&px, (const char *const[]){"--queue-timeout", "1", NULL});
	origin_hold_accepts(og);
	client_open(&c, px.port);
	send_get(&c, og, "/ok");
	expect_answer(&c, 504, "could not be reached in time");
	client_close(&c);
	origin_release_accepts(og);
	proxy_stop(&px);
}

/*
 * The playlist, then its first segment: the proxy fetches lo1 and lo2
 * ahead, lo2 pipelined behind lo1, which the origin holds back.
 */
static void
pipeline_behind_a_held_answer(struct origin *og, struct client *c)
{
	struct response r;

	client_open(c, px.port);
	send_get(c, og, "/lo.m3u8");
	read_response_ok(c, &r, 0);
	assert_status(&r, 200);
	response_free(&r);
	expect_get(px.port, og, "/lo0.bin", 200, NULL);
	metric_reaches("keepalive_proxy_pipelined_total", 1);
}

/*
 * A fetch ahead pipelined behind an answer slower than --queue-timeout
 * waits for it: it is on a connection already, not waiting for one, and is
 * served from memory afterwards, never asked for again.
 */
static void
pipelined_fetch_outwaits_the_queue_timeout(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c;

	atomic_store(&gate_open, false);
	start_proxy((const char *const[]){"--read-ahead", "--queue-timeout", "1", NULL});
	pipeline_behind_a_held_answer(og, &c);
	sleep_ms(2500);
	atomic_store(&gate_open, true);
	expect_get(px.port, og, "/lo1.bin", 200, NULL);
	expect_get(px.port, og, "/lo2.bin", 200, NULL);
	assert_int_equal(origin_count_requests(og, "GET", "/lo2.bin"), 1);
	assert_int_equal(stats_metric(stats_port, "keepalive_proxy_readahead_failed_total"), 0);
	client_close(&c);
	proxy_stop(&px);
}

/*
 * A client asking for a fetch ahead while it is pipelined joins it where it
 * is: it is not asked for again on another connection.
 */
static void
client_joins_a_pipelined_fetch(void)
{
	struct origin *og = origin_start(handle, NULL);
	struct client c, joiner;
	struct response r;

	atomic_store(&gate_open, false);
	start_proxy((const char *const[]){"--read-ahead", NULL});
	pipeline_behind_a_held_answer(og, &c);
	client_open(&joiner, px.port);
	send_get(&joiner, og, "/lo2.bin");
	/* Joins are counted once served: time for the proxy to take the request is all it needs. */
	sleep_ms(300);
	atomic_store(&gate_open, true);
	read_response_ok(&joiner, &r, 0);
	assert_status(&r, 200);
	assert_int_equal(r.body.len, SEGMENT_BYTES);
	response_free(&r);
	assert_int_equal(stats_metric(stats_port, "keepalive_proxy_readahead_joins_total"), 1);
	/* Once the origin has read the pipelined request, it must have been the only one. */
	wait_request_behind(og, "/lo1.bin", "/lo2.bin");
	assert_int_equal(origin_count_requests(og, "GET", "/lo2.bin"), 1);
	client_close(&joiner);
	client_close(&c);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(response_head_in_pieces),
		E2E_TEST(response_head_cut_short),
		E2E_TEST(second_head_too_large_for_the_client),
		E2E_TEST(switch_with_more_early_bytes_than_fit),
		E2E_TEST(close_delimited_body_to_a_slow_client),
		E2E_TEST(chunk_size_line_longer_than_a_buffer),
		E2E_TEST(body_arrives_while_connecting),
		E2E_TEST(chunk_size_line_split_across_reads),
		E2E_TEST(chunked_body_malformed_after_the_head_went),
		E2E_TEST(client_half_closes_mid_body),
		E2E_TEST(answer_before_the_request_is_whole),
		E2E_TEST(origin_resets_while_the_body_is_sent),
		E2E_TEST(local_answer_after_a_body_keeps_the_connection),
		E2E_TEST(connect_half_closed_before_the_tunnel_opens),
		E2E_TEST(connect_not_done_in_time),
		E2E_TEST(pipelined_fetch_outwaits_the_queue_timeout),
		E2E_TEST(client_joins_a_pipelined_fetch),
	};

	return E2E_RUN("e2e_exchange_edges", tests);
}
