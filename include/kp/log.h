/*
 * Levelled logging to stderr. Only the daemon's own modules that decide what
 * is worth telling the operator call it; helpers return -1 and let their
 * caller decide.
 */
#ifndef KP_LOG_H
#define KP_LOG_H

enum log_level {
	KP_LOG_ERROR,
	KP_LOG_WARN,
	KP_LOG_INFO,   /* shown by default: start, stop, refused requests */
	KP_LOG_DEBUG,  /* -v: one line per request and per upstream connection */
	KP_LOG_TRACE,  /* -vv: state transitions */
};

/* verbosity 0 shows INFO and above; each -v shows one level more. */
void log_set_verbosity(int verbosity);
/* From now on lines go to syslog(3) (facility daemon) instead of stderr. */
void log_to_syslog(void);
int log_enabled(enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * A line that may repeat (a refused client, descriptors running out) goes
 * through a limiter: at most one per interval, the next one saying how many
 * were left out in between.
 */
struct log_limit {
	double interval;       /* seconds between lines */
	double last;           /* monotonic time of the last line, 0: none yet */
	unsigned suppressed;   /* lines left out since */
};

#define LOG_LIMIT(seconds) {.interval = (seconds)}

void log_limited(struct log_limit *l, enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_error(...) log_msg(KP_LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(KP_LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(KP_LOG_INFO, __VA_ARGS__)
/* The argument list is not evaluated when the level is off. */
#define log_debug(...) do { if (log_enabled(KP_LOG_DEBUG)) log_msg(KP_LOG_DEBUG, __VA_ARGS__); } while (0)
#define log_trace(...) do { if (log_enabled(KP_LOG_TRACE)) log_msg(KP_LOG_TRACE, __VA_ARGS__); } while (0)

#endif
