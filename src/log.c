#include "kp/log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/time.h>
#include <syslog.h>
#include <time.h>

static enum log_level threshold = KP_LOG_INFO;
static bool use_syslog;

static const int syslog_priority[] = {
	[KP_LOG_ERROR] = LOG_ERR,
	[KP_LOG_WARN] = LOG_WARNING,
	[KP_LOG_INFO] = LOG_INFO,
	[KP_LOG_DEBUG] = LOG_DEBUG,
	[KP_LOG_TRACE] = LOG_DEBUG,
};

void
log_to_syslog(void)
{
	openlog("keepalive-proxy", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	use_syslog = true;
}

static const char *const level_names[] = {
	[KP_LOG_ERROR] = "error",
	[KP_LOG_WARN] = "warn",
	[KP_LOG_INFO] = "info",
	[KP_LOG_DEBUG] = "debug",
	[KP_LOG_TRACE] = "trace",
};

void
log_set_verbosity(int verbosity)
{
	int level = KP_LOG_INFO + verbosity;

	if (level > KP_LOG_TRACE)
		level = KP_LOG_TRACE;
	if (level < KP_LOG_ERROR)
		level = KP_LOG_ERROR;
	threshold = (enum log_level)level;
}

int
log_enabled(enum log_level level)
{
	return level <= threshold;
}

static void log_va(enum log_level level, unsigned suppressed, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

static void
log_va(enum log_level level, unsigned suppressed, const char *fmt, va_list ap)
{
	char line[1024];
	struct timeval now;
	struct tm tm;
	int n;

	if (use_syslog) {
		/* syslog stamps the time and the level itself. */
		n = vsnprintf(line, sizeof(line), fmt, ap);
		if (suppressed && n >= 0 && (size_t)n < sizeof(line))
			snprintf(line + n, sizeof(line) - (size_t)n, " (%u more like it left out)",
			         suppressed);
		syslog(syslog_priority[level], "%s", line);
		return;
	}
	gettimeofday(&now, NULL);
	localtime_r(&now.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "%04d-%02d-%02d %02d:%02d:%02d.%03ld %s: ",
	             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	             tm.tm_min, tm.tm_sec, (long)(now.tv_usec / 1000), level_names[level]);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	if (suppressed && (size_t)n < sizeof(line))
		snprintf(line + n, sizeof(line) - (size_t)n, " (%u more like it left out)",
		         suppressed);
	/* One fputs per line keeps lines whole when stderr is shared. */
	fprintf(stderr, "%s\n", line);
}

void
log_msg(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	log_va(level, 0, fmt, ap);
	va_end(ap);
}

void
log_limited(struct log_limit *l, enum log_level level, const char *fmt, ...)
{
	struct timespec ts;
	double now;
	va_list ap;

	if (!log_enabled(level))
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	if (l->last > 0 && now - l->last < l->interval) {
		l->suppressed++;
		return;
	}
	l->last = now;
	va_start(ap, fmt);
	log_va(level, l->suppressed, fmt, ap);
	va_end(ap);
	l->suppressed = 0;
}
