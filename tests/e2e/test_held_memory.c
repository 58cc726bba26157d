/*
 * What one client can make the proxy hold, with --read-ahead, measured as
 * the daemon's resident memory (VmRSS), not its counters: media playlists
 * it reads as they pass and holds (32 of them, each 4096 one-character
 * segment lines at a 4 KB path, so every line resolves to a 4 KB URL, then
 * 32 of 500 such lines, just short enough to be held, 2 MiB each),
 * playlists still arriving (256 of 256 KiB at once), and the records kept
 * per URL answered with a 206 (8000 one-byte ranges of distinct 4 KB URLs
 * on one connection). Each grows
 * the daemon by at most 48 MiB, and the memory is given back once
 * --read-ahead-ttl has passed.
 */
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "harness.h"
#include "origin.h"

#define MIB 1024l
#define GROWTH_MAX (48 * MIB)
/* What stays after the TTL: spare buffers and the allocator's own, not what was held. */
#define LEFT_MAX (8 * MIB)
#define TTL "2"
#define TTL_SECONDS 2.0
#define PLAYLISTS 32
#define SEGMENTS 4096
/* As many as a playlist at a 4 KB path may list and still be read: about 2 MiB each, held. */
#define SEGMENTS_THAT_FIT 500
/* The directory of every playlist and segment path: a 4 KB path in all. */
#define DIR_LEN 4000
#define URLS 8000
#define STALLED 256
#define STALLED_SIZE (256 * 1024)
/* Of a stalled playlist's body, all but this much is sent. */
#define STALLED_HELD_BACK 16

static struct proxy px;
static int stats_port;
static char dir[DIR_LEN + 1];
static atomic_bool stall_open;

/*
 * A media playlist of SEGMENTS one-character lines, for any path ending in
 * .m3u8; a one-byte 206 of a million-byte object for anything with a Range;
 * for /stalled/, a 256 KiB playlist's head and all but the end of its
 * body, then nothing until the test lets go.
 */
static void
serve(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	const char *path = req->head.target;

	(void)arg;
	if (strstr(path, "/stalled/")) {
		static char body[STALLED_SIZE];

		memset(body, '#', sizeof(body));
		memcpy(body, "#EXTM3U\n", 8);
		origin_sendf(c,
		             "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.apple.mpegurl\r\n"
		             "Content-Length: %d\r\n\r\n",
		             STALLED_SIZE);
		origin_send(c, body, sizeof(body) - STALLED_HELD_BACK);
		for (int waited = 0; !atomic_load(&stall_open) && waited < 60000; waited += 10)
			origin_pause(c, 10);
		origin_close(c);
		return;
	}
	if (strstr(path, ".m3u8")) {
		static char text[16 + SEGMENTS * 2 + 64];
		size_t n = (size_t)snprintf(text, sizeof(text), "#EXTM3U\n#EXT-X-TARGETDURATION:4\n");
		unsigned segments = strstr(path, "/fits/") ? SEGMENTS_THAT_FIT : SEGMENTS;

		for (unsigned i = 0; i < segments; i++) {
			text[n++] = "abcdefghijklmnopqrstuvwxyz"[i % 26];
			text[n++] = '\n';
		}
		n += (size_t)snprintf(text + n, sizeof(text) - n, "#EXT-X-ENDLIST\n");
		origin_sendf(c,
		             "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.apple.mpegurl\r\n"
		             "Content-Length: %zu\r\n\r\n",
		             n);
		origin_send(c, text, n);
		return;
	}
	if (headers_get(&req->head.headers, "Range")) {
		origin_sendf(c, "HTTP/1.1 206 Partial Content\r\nETag: \"v1\"\r\n"
		                "Content-Range: bytes 0-0/1000000\r\nContent-Length: 1\r\n\r\nx");
		return;
	}
	origin_reply(c, 404, NULL, "no");
}

static void
start(void)
{
	static char listen[64];
#if KP_SANITIZED
	print_message("skipped: under AddressSanitizer, resident memory is the sanitizer's\n");
	skip();
#endif
	const char *args[] = {"--read-ahead", "--read-ahead-ttl", TTL, "--stats-listen", listen,
	                      NULL};

	stats_port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", stats_port);
	memset(dir, 'd', DIR_LEN);
	dir[DIR_LEN] = '\0';
	proxy_start(&px, args);
}

/* The daemon's resident memory once it settled: the least of a few readings. */
static long
rss_now(void)
{
	long least = proxy_rss_kib(&px);

	for (int i = 0; i < 4; i++) {
		long kib;

		sleep_ms(50);
		if ((kib = proxy_rss_kib(&px)) < least)
			least = kib;
	}
	return least;
}

/*
 * Waits for read-ahead to count nothing once the TTL and a sweep have
 * passed, then for the memory to go back to at most base + LEFT_MAX, at
 * the trim that follows; fails, saying what stayed, if not.
 */
static void
expect_memory_back(long base, const char *what)
{
	double deadline = now_s() + TTL_SECONDS * 2 + 5;
	long kib;

	while (stats_metric(stats_port, "keepalive_proxy_fetch_memory_bytes") != 0 ||
	       stats_metric(stats_port, "keepalive_proxy_fetch_records_bytes") != 0) {
		if (now_s() > deadline)
			fail_msg("%s: read-ahead still counts memory after the TTL", what);
		sleep_ms(100);
	}
	deadline = now_s() + 12;
	while ((kib = rss_now()) > base + LEFT_MAX) {
		if (now_s() > deadline)
			fail_msg("%s: %ld KiB still resident after the TTL, %ld KiB before", what, kib,
			         base);
		sleep_ms(200);
	}
	print_message("%s: %ld KiB after the TTL (%+ld KiB)\n", what, kib, kib - base);
}

static void
expect_growth_within(long base, long peak, const char *what)
{
	print_message("%s: %ld KiB before, %ld KiB after (%+ld KiB); counted %.0f bytes held, "
	              "%.0f of records\n",
	              what, base, peak, peak - base,
	              stats_metric(stats_port, "keepalive_proxy_fetch_memory_bytes"),
	              stats_metric(stats_port, "keepalive_proxy_fetch_records_bytes"));
	if (peak - base > GROWTH_MAX)
		fail_msg("%s grew the daemon by %ld KiB, more than %ld KiB", what, peak - base,
		         GROWTH_MAX);
}

/* GET path of og on c, read to its end. */
static void
get(struct client *c, struct origin *og, const char *path, const char *fields)
{
	struct response r;

	send_request(c, "GET", og, path, "HTTP/1.1", fields);
	read_response_ok(c, &r, 0);
	response_free(&r);
}

static void
held_playlists_are_bounded(void)
{
	struct origin *og = origin_start(serve, NULL);
	struct client c;
	char path[DIR_LEN + 64];
	long base, peak;

	start();
	client_open(&c, px.port);
	get(&c, og, "/warm-up.m3u8", NULL);
	base = rss_now();
	for (int i = 0; i < PLAYLISTS; i++) {
		snprintf(path, sizeof(path), "/%s/%d/list.m3u8", dir, i);
		get(&c, og, path, NULL);
	}
	peak = rss_now();
	expect_growth_within(base, peak, "32 playlists of 4096 segments at 4 KB paths");
	/* Short enough to be held, 2 MiB each: the client's share holds what it can of them. */
	for (int i = 0; i < PLAYLISTS; i++) {
		snprintf(path, sizeof(path), "/%s/fits/%d/list.m3u8", dir, i);
		get(&c, og, path, NULL);
	}
	peak = rss_now();
	client_close(&c);
	expect_growth_within(base, peak, "and 32 playlists of 500 segments at 4 KB paths");
	expect_memory_back(base, "64 playlists");
	proxy_stop(&px);
}

/*
 * Reads what the proxy relays of a stalled playlist on c, head and body,
 * until all the origin sent of it came: the proxy reads a playlist as it
 * passes to the client, so what passed is what it holds.
 */
static void
read_stalled(struct client *c)
{
	static char buf[STALLED_SIZE + 1024];
	size_t got = 0;
	const char *end = NULL;

	while (!end || got - (size_t)(end + 4 - buf) < STALLED_SIZE - STALLED_HELD_BACK) {
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		ssize_t n = poll(&pfd, 1, 10000) == 1 ? recv(c->fd, buf + got, sizeof(buf) - got, 0) : -1;

		if (n <= 0)
			fail_msg("a stalled playlist stopped short: %zu bytes", got);
		got += (size_t)n;
		if (!end)
			end = memmem(buf, got, "\r\n\r\n", 4);
	}
}

/* Playlists still arriving, each with room for its whole text, from one client address. */
static void
playlists_arriving_are_bounded(void)
{
	static struct client c[STALLED];
	struct origin *og = origin_start(serve, NULL);
	char path[64];
	long base, peak;

	atomic_store(&stall_open, false);
	start();
	client_open(&c[0], px.port);
	get(&c[0], og, "/warm-up.m3u8", NULL);
	client_close(&c[0]);
	base = rss_now();
	for (int i = 0; i < STALLED; i++) {
		client_open(&c[i], px.port);
		snprintf(path, sizeof(path), "/stalled/%d.m3u8", i);
		send_request(&c[i], "GET", og, path, "HTTP/1.1", NULL);
	}
	if (!origin_wait_requests(og, STALLED + 1, 10000))
		fail_msg("the origin saw %u requests", origin_request_count(og));
	for (int i = 0; i < STALLED; i++)
		read_stalled(&c[i]);
	peak = rss_now();
	expect_growth_within(base, peak, "256 playlists of 256 KiB arriving");
	atomic_store(&stall_open, true);
	for (int i = 0; i < STALLED; i++)
		client_close(&c[i]);
	expect_memory_back(base, "256 playlists arriving");
	proxy_stop(&px);
}

static void
records_per_url_are_bounded(void)
{
	struct origin *og = origin_start(serve, NULL);
	struct client c;
	char path[DIR_LEN + 64];
	long base, peak;

	start();
	client_open(&c, px.port);
	get(&c, og, "/warm-up.bin", "Range: bytes=0-0\r\n");
	base = rss_now();
	for (int i = 0; i < URLS; i++) {
		snprintf(path, sizeof(path), "/%s/object-%d.bin", dir, i);
		get(&c, og, path, "Range: bytes=0-0\r\n");
	}
	peak = rss_now();
	client_close(&c);
	expect_growth_within(base, peak, "8000 one-byte ranges of distinct 4 KB URLs");
	expect_memory_back(base, "8000 URLs");
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(held_playlists_are_bounded),
		E2E_TEST(playlists_arriving_are_bounded),
		E2E_TEST(records_per_url_are_bounded),
	};

	return E2E_RUN("e2e_held_memory", tests);
}
