#include "kp/access_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "kp/log.h"
#include "kp/net.h"

/* Lines wait here for the next flush; a full buffer flushes at once. */
#define PENDING_BYTES 16384
#define FLUSH_SECONDS 1.0

/* One log per process, as there is one loop (the state is set up per loop by open). */
static char pending[PENDING_BYTES]; /* apart from al, whose initialiser would store it in the binary */
static struct {
	struct ev_loop *loop;
	const char *path;         /* NULL: syslog */
	bool on;
	bool with_query;
	int fd;
	ev_timer flush_timer;
	size_t len;
} al = {.fd = -1};

static void
flush(void)
{
	static struct log_limit write_log = LOG_LIMIT(60);
	size_t done = 0;

	while (done < al.len) {
		ssize_t n = write(al.fd, pending + done, al.len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			log_limited(&write_log, KP_LOG_WARN, "--access-log %s: %s; lines lost", al.path,
			            n < 0 ? strerror(errno) : "short write");
			break;
		}
		done += (size_t)n;
	}
	al.len = 0;
}

static void
flush_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	flush();
}

static int
open_file(void)
{
	int fd = open(al.path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);

	if (fd < 0)
		return -1;
	net_close(&al.fd);
	al.fd = fd;
	return 0;
}

int
access_log_open(struct ev_loop *loop, const char *where, bool with_query)
{
	al.loop = loop;
	al.with_query = with_query;
	al.len = 0;
	if (strcmp(where, "syslog") == 0) {
		al.path = NULL;
		openlog("keepalive-proxy", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	} else {
		al.path = where;
		if (open_file() < 0)
			return -1;
		ev_init(&al.flush_timer, flush_cb);
	}
	al.on = true;
	return 0;
}

void
access_log_write(const struct access_entry *e)
{
	char line[1024], client[64], when[32];
	const char *query;
	uint32_t target_len = e->target_len;
	struct timeval now;
	struct tm tm;
	int n;

	if (!al.on)
		return;
	/* Queries often carry tokens; they are left out unless asked for. */
	if (!al.with_query && (query = memchr(e->target, '?', target_len)) != NULL)
		target_len = (uint32_t)(query - e->target);
	if (target_len > 512)
		target_len = 512;
	gettimeofday(&now, NULL);
	gmtime_r(&now.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	n = snprintf(line, sizeof(line), "%s.%03ldZ %s %s %.*s %d %llu %.1fms %s%s%s\n", when,
	             (long)(now.tv_usec / 1000), net_addr_text(e->client, client, sizeof(client)),
	             e->method, (int)target_len, e->target, e->status,
	             (unsigned long long)e->bytes, e->seconds * 1000, e->upstream,
	             e->via ? " via " : "", e->via ? e->via : "");
	if (n <= 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	if (!al.path) {
		/* The date is syslog's own. */
		syslog(LOG_INFO, "%.*s", n - 1 - (int)strlen(when) - 6, line + strlen(when) + 6);
		return;
	}
	if (al.len + (size_t)n > sizeof(pending))
		flush();
	memcpy(pending + al.len, line, (size_t)n);
	al.len += (size_t)n;
	if (!ev_is_active(&al.flush_timer)) {
		ev_timer_set(&al.flush_timer, FLUSH_SECONDS, 0.);
		ev_timer_start(al.loop, &al.flush_timer);
	}
}

void
access_log_reopen(void)
{
	if (!al.on || !al.path)
		return;
	flush();
	if (open_file() < 0)
		log_error("--access-log %s: %s; still writing to the old file", al.path,
		          strerror(errno));
}

void
access_log_close(void)
{
	if (!al.on)
		return;
	if (al.path) {
		flush();
		ev_timer_stop(al.loop, &al.flush_timer);
		net_close(&al.fd);
	} else {
		closelog();
	}
	al.on = false;
}
