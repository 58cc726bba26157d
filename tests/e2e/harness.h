/*
 * End-to-end test driver: runs the daemon (and other programs) as child
 * processes, picks free ports, and talks HTTP to the proxy as a client.
 *
 * Everything a test starts is recorded here and cleaned up by the per-test
 * teardown, also when an assertion fails half-way; the logs of the daemon and
 * of any helper program are printed when a test fails.
 */
#ifndef KP_E2E_HARNESS_H
#define KP_E2E_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmocka.h>

#include "wire.h"

/* ---- Test cases ---- */

/*
 * A scenario file lists its tests with E2E_TEST(fn), where fn is
 * `static void fn(void)`, and ends main() with E2E_RUN("name", tests).
 * The harness runs each test between its own setup and teardown.
 */
struct e2e_case {
	void (*fn)(void);
};

void e2e_run(void **state);
int e2e_setup(void **state);
int e2e_teardown(void **state);
int e2e_main(const char *group, const struct CMUnitTest *tests, size_t count);

#define E2E_TEST(f)                                                                                \
	{                                                                                          \
		.name = #f, .test_func = e2e_run, .setup_func = e2e_setup,                         \
		.teardown_func = e2e_teardown, .initial_state = &(struct e2e_case){f},             \
	}
#define E2E_RUN(group, tests) e2e_main((group), (tests), sizeof(tests) / sizeof((tests)[0]))

/* Runs fn(arg) at teardown unless cancelled; used for anything a test starts. */
void harness_defer(void (*fn)(void *), void *arg);
void harness_cancel(void (*fn)(void *), void *arg);
/* Runs fn(arg) at teardown, before the deferred clean-ups, if the test failed. */
void harness_on_failure(void (*fn)(void *), void *arg);
void harness_cancel_on_failure(void (*fn)(void *), void *arg);
/* Prints this file (its tail) if the current test fails. */
void harness_watch_log(const char *path, const char *label);
void harness_unwatch_log(const char *path);
/* A fresh directory, removed with its contents at teardown. Returns a static-lifetime copy. */
const char *harness_temp_dir(void);

/* ---- Time ---- */

double now_s(void); /* monotonic seconds */
void sleep_ms(int ms);

/* ---- Ports and processes ---- */

/* A TCP port on 127.0.0.1 that was free a moment ago. */
int free_port(void);

/*
 * Starts argv[0] (a path) with stdin from /dev/null and stdout+stderr appended
 * to log_path (NULL: /dev/null). The child dies with the test process. The
 * pid is recorded so that teardown stops it if the test does not.
 */
pid_t spawn_process(const char *const argv[], const char *log_path);
/* Waits up to timeout_ms for pid to exit. Returns true and the wait status if it did. */
bool wait_process(pid_t pid, int timeout_ms, int *status);
/* Sends sig to pid (one we started), waits up to timeout_ms, then SIGKILL. Returns the wait status.
 */
int stop_process(pid_t pid, int sig, int timeout_ms);
/* Runs a program to completion. Returns its exit code, or -1 (killed, timed out). */
int run_process(const char *const argv[], const char *log_path, int timeout_ms);
/* True once pid is alive and itself listens on 127.0.0.1:port. */
bool wait_listening(pid_t pid, int port, int timeout_ms);
bool process_alive(pid_t pid);
/* Describes a wait status ("exit 0", "killed by signal 11"). */
const char *describe_status(int status, char *buf, size_t size);

/*
 * Path of a required program: $env_override if set, else found in PATH or
 * the sbin directories. Fails the test with a clear message if missing.
 * The result lives until teardown.
 */
const char *require_program(const char *name, const char *env_override);

/* Whole file into memory (NUL-terminated); NULL if unreadable. */
char *read_file_all(const char *path, size_t *len);
/*
 * The file's text once it holds at least n lines (a log written by another
 * process, perhaps once a second); fails the test after timeout_ms. The
 * caller frees it.
 */
char *wait_file_lines(const char *path, unsigned n, int timeout_ms);
/* Writes len pattern bytes to path. */
void write_pattern_file(const char *path, uint64_t len);
/* dir/name into buf; fails the test if it does not fit. */
void path_join(char *buf, size_t size, const char *dir, const char *name);
/* Writes text to path; fails the test if it cannot. */
void write_text_file(const char *path, const char *text);

/*
 * Starts a private nginx (KP_NGINX, else the one on PATH) in the
 * foreground with its prefix in dir: configure(arg) picks the ports
 * (free_port()) and writes conf, and the start counts once every *ports[i]
 * listens. A port taken meanwhile makes it try again with others, five
 * times at most. Its error log and output are shown when a test fails.
 */
pid_t harness_start_nginx(const char *dir, const char *conf, const char *errlog, const char *out,
                          void (*configure)(void *arg), void *arg, int *const ports[],
                          size_t nports);

/* A private nginx serving one file of pattern bytes from dir/www. */
struct nginx_files {
	pid_t pid;
	int port;
	bool tls;                 /* HTTPS with dir/origin.crt and origin.key, for localhost */
	const char *log_format;   /* the access log's line, in nginx's log_format syntax */
	char dir[256];
	char conf[300];
	char access_log[300];
};
/*
 * Starts nginx in dir (which must exist) serving len pattern bytes as
 * dir/www/file (.bin served as video/mp4, as a downloader expects of a
 * direct media link), logging each request as log_format says; stopped at
 * teardown. ng must outlive the case.
 */
void nginx_files_start(struct nginx_files *ng, const char *dir, bool tls, const char *log_format,
                       const char *file, uint64_t len);

/* Runs a program to completion, its output into log; fails the test unless it exits 0. */
void run_ok(const char *const argv[], const char *log);
/* True unless the proxy under test ($KP_BINARY) was built without TLS (-V says "TLS: none"). */
bool proxy_has_tls(void);
/* The FNV-1a hash of len pattern bytes from offset first (as fnv1a64 over them). */
uint64_t pattern_range_fnv(uint64_t first, uint64_t len);
/* The space-separated words of in, sorted, each after a space, into out. */
void sorted_words(const char *in, char *out, size_t size);
/* The file at path is bytes first..first+len-1 of the pattern, exactly; else the test fails. */
void harness_expect_file(const char *path, uint64_t first, uint64_t len, const char *file, int line);
#define assert_file_pattern(path, first, len) \
	harness_expect_file((path), (first), (len), __FILE__, __LINE__)
/*
 * curl through the proxy at proxy_port for url into dest, its output into
 * log: with "--range range" unless NULL, trusting cacert unless NULL. Fails
 * the test unless curl exits 0.
 */
void curl_through(int proxy_port, const char *url, const char *range, const char *dest,
                  const char *cacert, const char *log);

/* ---- The proxy under test ---- */

struct proxy {
	pid_t pid;
	int port;
	bool running;
	char log_path[256];
};

/*
 * Starts $KP_BINARY -p PORT -b 127.0.0.1 -v [extra_args...] (extra_args is
 * NULL-terminated or NULL) and waits until it accepts connections.
 */
void proxy_start(struct proxy *p, const char *const extra_args[]);
/* SIGTERM; asserts a clean exit (status 0) within 5 s. */
void proxy_stop(struct proxy *p);
/* Same with any signal; returns the seconds it took to exit. */
double proxy_stop_with(struct proxy *p, int sig);
/* How often text occurs in the daemon's log so far. */
unsigned proxy_log_count(struct proxy *p, const char *text);
/* Sends SIGUSR1 and returns the counters line the daemon logs ("clients N, ..."). */
const char *proxy_stats(struct proxy *p);
/* The number after "name " in such a line; fails the test if it is not there. */
unsigned long stats_get(const char *line, const char *name);
/* Waits for the daemon to exit on its own; asserts status 0. Returns the seconds waited. */
double proxy_wait_exit(struct proxy *p, int timeout_ms);
/* Fails the test if the daemon has died. */
void proxy_assert_alive(struct proxy *p);
/* Open file descriptors of the daemon (entries of /proc/PID/fd). */
int proxy_fd_count(struct proxy *p);
/* The same, by kind. */
struct fd_census {
	int total, sockets, pipes, other;
};
void proxy_fd_census(struct proxy *p, struct fd_census *census);
/* The daemon's resident memory (VmRSS in /proc/PID/status), in KiB. */
long proxy_rss_kib(struct proxy *p);
/* CPU time (user + system) the daemon has used so far, in seconds. */
double proxy_cpu_seconds(struct proxy *p);
/* The daemon's RLIMIT_NOFILE from /proc/PID/limits (-1: unlimited). */
void proxy_nofile_limits(struct proxy *p, long *soft, long *hard);

/* ---- Clients ---- */

#define CLIENT_TIMEOUT_MS 10000
#define CLIENT_KEEP_BODY (1024u * 1024u) /* bytes of a response body kept for inspection */

struct client {
	int fd;
	struct wire w;
};

/* Connects to 127.0.0.1:port (blocking, 10 s receive/send timeouts). */
void client_open(struct client *c, int port);
/* The same from a local IPv4 source address (NULL: the kernel's choice). */
void client_open_from(struct client *c, int port, const char *source);
void client_close(struct client *c);
/* Closes with a reset (SO_LINGER 0). */
void client_abort(struct client *c);
/* Returns 0 or -errno. */
int client_send(struct client *c, const void *data, size_t len);
void client_sendf(struct client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sends len pattern bytes (offsets 0..len-1), raw or in chunked coding. */
void client_send_pattern(struct client *c, uint64_t len);
void client_send_pattern_chunked(struct client *c, uint64_t len, size_t chunk);

struct response {
	struct msg_head head; /* head.status, head.minor, head.headers */
	struct body body;
	struct header_list trailers;
	enum framing framing;
	unsigned nchunks;
	unsigned ninterim; /* 1xx responses skipped before this one */
	int interim[8];
	char why[256]; /* detail when reading failed */
};

#define RESP_HEAD 1u    /* the request was HEAD: no body */
#define RESP_INTERIM 2u /* return 1xx responses instead of skipping them */
#define RESP_CONNECT 4u /* the request was CONNECT: a 2xx has no body, a tunnel follows */

/* Reads one response. Returns WIRE_OK or a WIRE_* error. */
int client_read_response(struct client *c, struct response *r, unsigned flags);
void response_free(struct response *r);
const char *resp_header(const struct response *r, const char *name);
/* Prints a response summary to the error stream (for failure messages). */
void response_print(const struct response *r);

/* True if the peer closes (or resets) within timeout_ms with no further data. */
bool client_eof(struct client *c, int timeout_ms);

/*
 * Raw bytes, for tunnels and upgraded connections; bytes already buffered
 * behind a response head come first. See wire_recv_exact, wire_recv_to_eof
 * and wire_exchange; each waits at most CLIENT_TIMEOUT_MS for progress.
 */
int client_recv_exact(struct client *c, uint64_t len, struct body *b);
int client_recv_to_eof(struct client *c, struct body *b);
void client_exchange(struct client *c, uint64_t send_len, struct body *got, struct exchange *x);
/* shutdown(SHUT_WR): the proxy sees the end of the client's stream. */
void client_shutdown_write(struct client *c);

/*
 * Opens a client connection and sends "CONNECT authority HTTP/1.1" (with a
 * Host field), then reads the answer into r (RESP_CONNECT); returns its
 * status, or fails the test if no well-formed answer arrives.
 */
int client_connect(struct client *c, int proxy_port, const char *authority, struct response *r);
/*
 * Same, and asserts the tunnel opened: "HTTP/1.1 200 Connection established"
 * with an empty head (no fields, hence no body).
 */
void harness_open_tunnel(struct client *c, int proxy_port, const char *authority, const char *file,
                         int line);
#define open_tunnel(c, port, authority)                                                            \
	harness_open_tunnel((c), (port), (authority), __FILE__, __LINE__)

/* Authority ("host:port") of an absolute http URL. */
const char *url_authority(const char *url, char *buf, size_t size);

/* ---- Requests through the proxy ---- */

struct origin;

/*
 * On an open client: "METHOD url VERSION" for path on og, a Host field
 * naming og, then fields (header lines each ended by CRLF, or NULL).
 * send_get() is the plain GET over HTTP/1.1 most scenarios send.
 */
void send_request(struct client *c, const char *method, struct origin *og, const char *path,
                  const char *version, const char *fields);
void send_get(struct client *c, struct origin *og, const char *path);

/*
 * One exchange on a new connection from source (a local IPv4 address; NULL:
 * the kernel's choice), closed afterwards: text goes out as it is and the
 * response to it is read (asserted well-formed) into r. A HEAD or CONNECT
 * in text is read as such.
 */
void request_once(int proxy_port, const char *source, const char *text, struct response *r);
/*
 * The same for "METHOD url HTTP/1.1" with Host and User-Agent, then fields
 * (header lines each ended by CRLF, or NULL). fetch() is this from the
 * kernel's choice of address with no more fields.
 */
void fetch_from(int proxy_port, const char *source, const char *method, const char *url,
                const char *fields, struct response *r);
void fetch(int proxy_port, const char *method, const char *url, struct response *r);

/*
 * A GET of url from source (NULL: the kernel's choice) on a new connection;
 * asserts the status and, unless body is NULL, the whole body.
 * expect_get() is the same for path on og.
 */
void harness_expect_get(int proxy_port, const char *source, const char *url, int status,
                        const char *body, const char *file, int line);
void harness_expect_get_path(int proxy_port, struct origin *og, const char *path, int status,
                             const char *body, const char *file, int line);
#define expect_get_from(port, source, url, status, body)                                           \
	harness_expect_get((port), (source), (url), (status), (body), __FILE__, __LINE__)
#define expect_get(port, og, path, status, body)                                                   \
	harness_expect_get_path((port), (og), (path), (status), (body), __FILE__, __LINE__)

/* ---- The stats page (--stats-listen) ---- */

/* GET path from the stats page on port; the body (static, until the next call) and *status. */
const char *stats_page(int stats_port, const char *path, int *status);
/* The value on the line "name value" of a /metrics text (name may carry labels). */
double metric_value(const char *text, const char *name);
/* One metric, read from a fresh /metrics (asserted 200). */
double stats_metric(int stats_port, const char *name);

/* Assertions with useful messages. */
void harness_read_ok(struct client *c, struct response *r, unsigned flags, const char *file,
                     int line);
void harness_assert_status(const struct response *r, int status, const char *file, int line);
void harness_assert_eof(struct client *c, int timeout_ms, const char *file, int line);
void harness_assert_body(const struct response *r, const char *text, const char *file, int line);

/* Reads one response on c; asserts its status and, unless body is NULL, its whole body. */
void harness_expect_response(struct client *c, int status, const char *body, const char *file,
                             int line);

#define read_response_ok(c, r, flags) harness_read_ok((c), (r), (flags), __FILE__, __LINE__)
#define assert_status(r, s) harness_assert_status((r), (s), __FILE__, __LINE__)
#define assert_client_eof(c, ms) harness_assert_eof((c), (ms), __FILE__, __LINE__)
#define assert_body(r, text) harness_assert_body((r), (text), __FILE__, __LINE__)
#define expect_response(c, status, body)                                                           \
	harness_expect_response((c), (status), (body), __FILE__, __LINE__)

/* ---- A private network and /etc/hosts ---- */

/*
 * Moves the calling process (call it from main(), before any thread exists)
 * into a network and a mount namespace of its own, which the daemon and the
 * origins it starts later inherit; runs the shell commands in steps there
 * (ip(8) set-up), and mounts a private /etc/hosts with hosts as its text
 * (NULL: keep the machine's). Needs root; false with the reason in why.
 */
bool harness_private_world(const char *const steps[], size_t nsteps, const char *hosts, char *why,
                           size_t whylen);

#endif
