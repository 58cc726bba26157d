/*
 * Back-pressure: an origin sends a 1 GiB body as fast as it can, the client
 * reads about 1 MB/s. The proxy must stop reading the origin instead of
 * buffering the body: its resident memory stays within 8 MiB of where it
 * started and the origin gets rid of far less than the body (under 64 MiB
 * accepted by its send() calls). The proxy does not spin meanwhile, drops the
 * upstream connection when the client leaves, and keeps serving. With splice
 * (what the client read went through pipes, as the daemon's counter shows)
 * and with --no-splice.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "origin.h"

#define BODY (1024ull * 1024 * 1024)
#define READ_RATE 1000000.0 /* bytes per second */
#define READ_SECONDS 5.0
#define SAMPLE_MS 500
#define MAX_RSS_GROWTH_KIB (8 * 1024)
#define MAX_ORIGIN_SENT (64ull * 1024 * 1024)
/* Of the wall-clock time spent reading: moving 1 MB/s costs next to nothing. */
#define MAX_CPU_SHARE 0.2
/* Body bytes that may come into a buffer with the response head, before splicing starts. */
#define WITH_HEAD_MAX (1024u * 1024u)

static struct proxy px;
static atomic_int gig_result; /* 0 running, 1 cut off by the proxy, 2 sent completely */

static void
handle(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	(void)arg;
	if (strcmp(req->head.target, "/gig") == 0) {
		bool ok = origin_reply_pattern(c, 200, "Content-Type: application/octet-stream\r\n",
		                               BODY);

		atomic_store(&gig_result, ok ? 2 : 1);
	} else {
		origin_reply(c, 200, NULL, "ok");
	}
}

static void
slow_reader(bool splice)
{
	const char *label = splice ? "splice" : "--no-splice";
	char listen[64];
	const char *args[] = {"--stats-listen", listen, splice ? NULL : "--no-splice", NULL};
	int stats_port = free_port();
	double spliced, copied;
	struct origin *og;
	struct client c;
	struct msg_head h;
	struct body got;
	char why[256];
	long base, rss, peak;
	long samples[64];
	unsigned nsamples = 0;
	double t0, next_sample, cpu0, cpu, deadline;
	uint64_t sent;
	int rc;

	atomic_store(&gig_result, 0);
	og = origin_start(handle, NULL);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", stats_port);
	proxy_start(&px, args);
	/* One ordinary exchange first, so that start-up allocations are behind us. */
	expect_get(px.port, og, "/ok", 200, "ok");
	sleep_ms(100);
	base = peak = proxy_rss_kib(&px);

	client_open(&c, px.port);
	send_get(&c, og, "/gig");
	rc = wire_read_head(&c.w, false, 1u << 20, &h, why, sizeof(why));
	if (rc != WIRE_OK)
		fail_msg("[%s] response head: %s %s", label, wire_strerror(rc), why);
	assert_int_equal(h.status, 200);
	msg_head_free(&h);

	body_init(&got, 16);
	cpu0 = proxy_cpu_seconds(&px);
	t0 = now_s();
	next_sample = t0;
	for (;;) {
		double now = now_s();
		uint64_t target = (uint64_t)((now - t0) * READ_RATE);

		if (now >= next_sample) {
			rss = proxy_rss_kib(&px);
			if (nsamples < sizeof(samples) / sizeof(samples[0]))
				samples[nsamples++] = rss;
			if (rss > peak)
				peak = rss;
			next_sample += SAMPLE_MS / 1000.0;
		}
		if (now - t0 >= READ_SECONDS)
			break;
		if (target > got.len) {
			uint64_t n = target - got.len;

			rc = client_recv_exact(&c, n < 65536 ? n : 65536, &got);
			if (rc != WIRE_OK || !got.pattern_ok) {
				body_free(&got);
				fail_msg("[%s] reading the body slowly: %s after %llu bytes%s",
				         label, wire_strerror(rc), (unsigned long long)got.len,
				         got.pattern_ok ? "" : ", corrupted");
			}
		}
		sleep_ms(10);
	}
	cpu = proxy_cpu_seconds(&px) - cpu0;
	sent = origin_bytes_sent(og);
	/* Counted since the start: the small exchange before left both at 0 with splice on. */
	spliced = stats_metric(stats_port, "keepalive_proxy_bytes_spliced_total");
	copied = stats_metric(stats_port, "keepalive_proxy_bytes_copied_total");
	print_message("[%s] read %llu bytes in %.1f s; origin's send() accepted %llu bytes; "
	              "daemon CPU %.2f s; %.0f bytes spliced, %.0f copied\n",
	              label, (unsigned long long)got.len, now_s() - t0, (unsigned long long)sent,
	              cpu, spliced, copied);
	/*
	 * What the client read went through a pipe, but for what came into a
	 * buffer with the head; on the copy path all of it went through user
	 * space instead.
	 */
	if (splice ? spliced + WITH_HEAD_MAX < (double)got.len || copied != 0
	           : spliced != 0 || copied < (double)got.len)
		fail_msg("[%s] the client read %llu bytes of the body; the proxy spliced %.0f and "
		         "copied %.0f",
		         label, (unsigned long long)got.len, spliced, copied);
	print_message("[%s] VmRSS baseline %ld KiB, samples:", label, base);
	for (unsigned i = 0; i < nsamples; i++)
		print_message(" %ld", samples[i]);
	print_message(" (peak +%ld KiB)\n", peak - base);
	body_free(&got);

	if (peak - base >= MAX_RSS_GROWTH_KIB)
		fail_msg(
			"[%s] the daemon's resident memory grew by %ld KiB (from %ld to %ld) while "
			"a slow client read a fast origin's body: it buffers instead of pushing "
			"back",
			label, peak - base, base, peak);
	if (sent >= MAX_ORIGIN_SENT)
		fail_msg("[%s] the origin got rid of %llu bytes while the client read %.0f MB: the "
		         "proxy kept reading the origin",
		         label, (unsigned long long)sent, READ_RATE * READ_SECONDS / 1e6);

	/* The client leaves; the proxy drops the upstream connection and stays healthy. */
	client_close(&c);
	deadline = now_s() + 3.0;
	while (atomic_load(&gig_result) == 0 && now_s() < deadline)
		sleep_ms(5);
	if (atomic_load(&gig_result) != 1)
		fail_msg("[%s] 3 s after the client left, the proxy %s the origin's connection",
		         label, atomic_load(&gig_result) == 2 ? "had read all of" : "still held");
	proxy_assert_alive(&px);
	expect_get(px.port, og, "/ok", 200, "ok");
	assert_origin_clean(og);
	proxy_stop(&px);
	/* Waiting for a slow client is waiting: no busy loop meanwhile. */
	if (cpu > MAX_CPU_SHARE * READ_SECONDS)
		fail_msg(
			"[%s] the daemon used %.2f s of CPU in %.1f s of a slow transfer: it spins "
			"while waiting for the client",
			label, cpu, READ_SECONDS);
}

static void
slow_client_splice(void)
{
	slow_reader(true);
}

static void
slow_client_no_splice(void)
{
	slow_reader(false);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(slow_client_splice),
		E2E_TEST(slow_client_no_splice),
	};

	return E2E_RUN("e2e_backpressure", tests);
}
