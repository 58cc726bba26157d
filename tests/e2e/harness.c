/*
 * End-to-end test driver; see harness.h.
 */
#include "harness.h"
#include "origin.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- Per-test registry ---- */

#define MAX_DEFERRED 4096   /* a test may hold thousands of client connections */
#define MAX_CHILDREN 64
#define MAX_LOGS 16
#define MAX_TEMP_DIRS 16
#define LOG_TAIL_BYTES (24 * 1024)

struct deferred {
	void (*fn)(void *);
	void *arg;
};

struct child {
	pid_t pid;
	bool reaped;
	int status;
};

struct watched_log {
	char path[PATH_MAX];
	char label[64];
	bool remove; /* a file the harness created; deleted at teardown */
};

static struct deferred deferred[MAX_DEFERRED];
static size_t ndeferred;
static struct deferred failure_hooks[MAX_DEFERRED];
static size_t nfailure_hooks;
static struct child children[MAX_CHILDREN];
static struct watched_log logs[MAX_LOGS];
static size_t nlogs;
static char *temp_dirs[MAX_TEMP_DIRS];
static size_t ntemp_dirs;
static bool test_completed;

void
harness_defer(void (*fn)(void *), void *arg)
{
	if (ndeferred == MAX_DEFERRED)
		fail_msg("harness: too many resources in one test");
	deferred[ndeferred].fn = fn;
	deferred[ndeferred].arg = arg;
	ndeferred++;
}

void
harness_cancel(void (*fn)(void *), void *arg)
{
	for (size_t i = ndeferred; i-- > 0;) {
		if (deferred[i].fn == fn && deferred[i].arg == arg) {
			memmove(&deferred[i], &deferred[i + 1],
			        (ndeferred - i - 1) * sizeof(deferred[0]));
			ndeferred--;
			return;
		}
	}
}

void
harness_on_failure(void (*fn)(void *), void *arg)
{
	if (nfailure_hooks == MAX_DEFERRED)
		fail_msg("harness: too many failure hooks in one test");
	failure_hooks[nfailure_hooks].fn = fn;
	failure_hooks[nfailure_hooks].arg = arg;
	nfailure_hooks++;
}

void
harness_cancel_on_failure(void (*fn)(void *), void *arg)
{
	for (size_t i = nfailure_hooks; i-- > 0;) {
		if (failure_hooks[i].fn == fn && failure_hooks[i].arg == arg) {
			memmove(&failure_hooks[i], &failure_hooks[i + 1],
			        (nfailure_hooks - i - 1) * sizeof(failure_hooks[0]));
			nfailure_hooks--;
			return;
		}
	}
}

static void
watch_log(const char *path, const char *label, bool remove_after)
{
	if (nlogs == MAX_LOGS)
		return;
	snprintf(logs[nlogs].path, sizeof(logs[nlogs].path), "%s", path);
	snprintf(logs[nlogs].label, sizeof(logs[nlogs].label), "%s", label);
	logs[nlogs].remove = remove_after;
	nlogs++;
}

void
harness_watch_log(const char *path, const char *label)
{
	watch_log(path, label, false);
}

void
harness_unwatch_log(const char *path)
{
	for (size_t i = 0; i < nlogs; i++) {
		if (strcmp(logs[i].path, path) == 0) {
			if (logs[i].remove)
				unlink(logs[i].path);
			memmove(&logs[i], &logs[i + 1], (nlogs - i - 1) * sizeof(logs[0]));
			nlogs--;
			return;
		}
	}
}

static const char *
temp_base(void)
{
	const char *t = getenv("TMPDIR");

	return t && *t ? t : "/tmp";
}

const char *
harness_temp_dir(void)
{
	char tmpl[PATH_MAX];

	if (ntemp_dirs == MAX_TEMP_DIRS)
		fail_msg("harness: too many temporary directories");
	snprintf(tmpl, sizeof(tmpl), "%s/kp-e2e-XXXXXX", temp_base());
	if (!mkdtemp(tmpl))
		fail_msg("mkdtemp(%s): %s", tmpl, strerror(errno));
	temp_dirs[ntemp_dirs] = strdup(tmpl);
	assert_non_null(temp_dirs[ntemp_dirs]);
	return temp_dirs[ntemp_dirs++];
}

static int
remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void
print_log_tail(const struct watched_log *l)
{
	FILE *f = fopen(l->path, "rb");
	char buf[4096];
	size_t n;

	fprintf(stderr, "----- %s (%s) -----\n", l->label, l->path);
	if (!f) {
		fprintf(stderr, "(cannot open: %s)\n", strerror(errno));
		return;
	}
	if (fseek(f, 0, SEEK_END) == 0) {
		long size = ftell(f);

		if (size > LOG_TAIL_BYTES) {
			fseek(f, size - LOG_TAIL_BYTES, SEEK_SET);
			fprintf(stderr, "(last %d of %ld bytes)\n", LOG_TAIL_BYTES, size);
		} else {
			fseek(f, 0, SEEK_SET);
		}
	}
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		fwrite(buf, 1, n, stderr);
	fclose(f);
	fprintf(stderr, "----- end of %s -----\n", l->label);
}

/* ---- Test cases ---- */

int
e2e_setup(void **state)
{
	(void)state;
	test_completed = false;
	return 0;
}

void
e2e_run(void **state)
{
	const struct e2e_case *tc = *state;

	tc->fn();
	test_completed = true;
}

int
e2e_teardown(void **state)
{
	bool keep;

	(void)state;
	if (!test_completed && nfailure_hooks > 0) {
		/* Let in-flight work settle so that the reports show the final state. */
		sleep_ms(200);
	}
	if (!test_completed)
		for (size_t i = 0; i < nfailure_hooks; i++)
			failure_hooks[i].fn(failure_hooks[i].arg);
	nfailure_hooks = 0;
	/* Clients, origins and the like, newest first. */
	while (ndeferred > 0) {
		struct deferred d = deferred[--ndeferred];

		d.fn(d.arg);
	}
	/* Processes the test did not stop itself. */
	for (size_t i = 0; i < MAX_CHILDREN; i++) {
		if (children[i].pid > 0) {
			if (!children[i].reaped)
				stop_process(children[i].pid, SIGTERM, 5000);
			children[i].pid = 0;
		}
	}
	if (!test_completed) {
		for (size_t i = 0; i < nlogs; i++)
			print_log_tail(&logs[i]);
	}
	/* KP_E2E_KEEP=1 keeps logs and temporary directories for a look afterwards. */
	keep = getenv("KP_E2E_KEEP") && strcmp(getenv("KP_E2E_KEEP"), "0") != 0;
	for (size_t i = 0; i < nlogs; i++) {
		if (keep)
			fprintf(stderr, "kept %s: %s\n", logs[i].label, logs[i].path);
		else if (logs[i].remove)
			unlink(logs[i].path);
	}
	nlogs = 0;
	for (size_t i = 0; i < ntemp_dirs; i++) {
		if (keep)
			fprintf(stderr, "kept directory %s\n", temp_dirs[i]);
		else
			nftw(temp_dirs[i], remove_entry, 16, FTW_DEPTH | FTW_PHYS);
		free(temp_dirs[i]);
	}
	ntemp_dirs = 0;
	return 0;
}

int
e2e_main(const char *group, const struct CMUnitTest *tests, size_t count)
{
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	return _cmocka_run_group_tests(group, tests, count, NULL, NULL);
}

/* ---- Time ---- */

double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void
sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- Ports ---- */

int
free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
		int e = errno;
		close(fd);
		fail_msg("cannot pick a free port: %s", strerror(e));
	}
	close(fd);
	return ntohs(sa.sin_port);
}

/* ---- Processes ---- */

static struct child *
child_find(pid_t pid)
{
	for (size_t i = 0; i < MAX_CHILDREN; i++)
		if (children[i].pid == pid)
			return &children[i];
	return NULL;
}

static void
child_forget(pid_t pid)
{
	struct child *ch = child_find(pid);

	if (ch)
		memset(ch, 0, sizeof(*ch));
}

/* Reaps the child if it has exited; true if it has. */
static bool
child_poll(struct child *ch)
{
	int st;
	pid_t r;

	if (ch->reaped)
		return true;
	do {
		r = waitpid(ch->pid, &st, WNOHANG);
	} while (r < 0 && errno == EINTR);
	if (r == ch->pid) {
		ch->reaped = true;
		ch->status = st;
		return true;
	}
	if (r < 0) {
		ch->reaped = true;
		ch->status = 0xff00; /* unknown: report as exit 255 */
		return true;
	}
	return false;
}

const char *
describe_status(int status, char *buf, size_t size)
{
	if (WIFEXITED(status))
		snprintf(buf, size, "exit status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, size, "killed by signal %d (%s)%s", WTERMSIG(status),
		         strsignal(WTERMSIG(status)), WCOREDUMP(status) ? ", core dumped" : "");
	else
		snprintf(buf, size, "wait status 0x%x", (unsigned)status);
	return buf;
}

pid_t
spawn_process(const char *const argv[], const char *log_path)
{
	struct child *slot = child_find(0);
	int out_fd, in_fd;
	pid_t parent = getpid();
	pid_t pid;

	if (!slot)
		fail_msg("harness: too many child processes");
	in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	out_fd = log_path ? open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) :
	                    open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (in_fd < 0 || out_fd < 0)
		fail_msg("cannot open the log %s: %s", log_path ? log_path : "/dev/null",
		         strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		fail_msg("fork: %s", strerror(errno));
	if (pid == 0) {
		/* Only async-signal-safe calls between fork and exec. */
		struct sigaction dfl = {.sa_handler = SIG_DFL};
		sigset_t none;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(126);
		for (int s = 1; s < NSIG; s++)
			sigaction(s, &dfl, NULL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		dup2(in_fd, 0);
		dup2(out_fd, 1);
		dup2(out_fd, 2);
		if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
			for (int fd = 3; fd < 4096; fd++)
				close(fd);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(in_fd);
	close(out_fd);
	slot->pid = pid;
	slot->reaped = false;
	slot->status = 0;
	return pid;
}

bool
wait_process(pid_t pid, int timeout_ms, int *status)
{
	struct child *ch = child_find(pid);
	double deadline = now_s() + timeout_ms / 1000.0;

	if (!ch)
		fail_msg("harness: pid %d was not started by this test", (int)pid);
	for (;;) {
		if (child_poll(ch)) {
			if (status)
				*status = ch->status;
			return true;
		}
		if (now_s() >= deadline)
			return false;
		sleep_ms(5);
	}
}

bool
process_alive(pid_t pid)
{
	struct child *ch = child_find(pid);

	return ch && !child_poll(ch);
}

int
stop_process(pid_t pid, int sig, int timeout_ms)
{
	struct child *ch = child_find(pid);
	int status = 0;

	if (!ch)
		return 0;
	if (!ch->reaped)
		kill(pid, sig);
	if (!wait_process(pid, timeout_ms, &status)) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	child_forget(pid);
	return status;
}

int
run_process(const char *const argv[], const char *log_path, int timeout_ms)
{
	pid_t pid = spawn_process(argv, log_path);
	int status;

	if (!wait_process(pid, timeout_ms, &status)) {
		stop_process(pid, SIGKILL, 1000);
		return -1;
	}
	child_forget(pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Adds the inodes of listening sockets on port found in a /proc/PID/net/tcp* file. */
static size_t
listener_inodes(const char *path, int port, unsigned long *inodes, size_t max, size_t n)
{
	FILE *f = fopen(path, "r");
	char line[512];

	if (!f)
		return n;
	while (fgets(line, sizeof(line), f)) {
		unsigned lport, st;
		unsigned long inode;

		if (sscanf(line, " %*s %*[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*u %*u %lu", &lport,
		           &st, &inode) == 3 &&
		    (int)lport == port && st == 0x0A && n < max)
			inodes[n++] = inode;
	}
	fclose(f);
	return n;
}

/* True if pid holds a socket listening on port. */
static bool
pid_listens_on(pid_t pid, int port)
{
	char path[64], link[64], want[64];
	unsigned long inodes[8];
	size_t n = 0;
	bool found = false;
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "/proc/%d/net/tcp", (int)pid);
	n = listener_inodes(path, port, inodes, 8, n);
	snprintf(path, sizeof(path), "/proc/%d/net/tcp6", (int)pid);
	n = listener_inodes(path, port, inodes, 8, n);
	if (n == 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return false;
	while (!found && (e = readdir(d)) != NULL) {
		char fdpath[PATH_MAX];
		ssize_t len;

		if (e->d_name[0] == '.')
			continue;
		snprintf(fdpath, sizeof(fdpath), "%s/%s", path, e->d_name);
		len = readlink(fdpath, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		for (size_t i = 0; i < n && !found; i++) {
			snprintf(want, sizeof(want), "socket:[%lu]", inodes[i]);
			found = strcmp(link, want) == 0;
		}
	}
	closedir(d);
	return found;
}

static bool
port_accepts(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0)
		return false;
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

bool
wait_listening(pid_t pid, int port, int timeout_ms)
{
	double deadline = now_s() + timeout_ms / 1000.0;

	while (now_s() < deadline) {
		if (!process_alive(pid))
			return false;
		if (port_accepts(port) && pid_listens_on(pid, port))
			return true;
		sleep_ms(10);
	}
	return false;
}

static char *
search_path(const char *name)
{
	const char *path = getenv("PATH");
	char *dirs;
	size_t len = (path ? strlen(path) : 0) + 64;
	char *out = NULL;

	dirs = malloc(len);
	assert_non_null(dirs);
	snprintf(dirs, len, "%s:/usr/sbin:/usr/local/sbin:/sbin", path ? path : "/usr/bin:/bin");
	for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d;
	     d = strtok_r(NULL, ":", &save)) {
		char cand[PATH_MAX];

		snprintf(cand, sizeof(cand), "%s/%s", *d ? d : ".", name);
		if (access(cand, X_OK) == 0) {
			out = strdup(cand);
			break;
		}
	}
	free(dirs);
	return out;
}

const char *
require_program(const char *name, const char *env_override)
{
	const char *env = env_override ? getenv(env_override) : NULL;
	char *found;

	if (env && *env) {
		if (access(env, X_OK) != 0)
			fail_msg("%s=%s is not an executable program", env_override, env);
		found = strdup(env);
	} else {
		found = search_path(name);
	}
	if (!found)
		fail_msg(
			"this test needs the program '%s', which was not found in PATH or the sbin "
			"directories; install it (Debian: apt-get install %s) or set %s to its path",
			name, strcmp(name, "nginx") == 0 ? "nginx-light" : name,
			env_override ? env_override : "PATH");
	harness_defer(free, found);
	return found;
}

char *
read_file_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, used = 0, n;

	if (!f)
		return NULL;
	do {
		if (cap - used < 65536) {
			cap = cap ? cap * 2 : 131072;
			char *nb = realloc(buf, cap + 1);
			if (!nb) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		n = fread(buf + used, 1, cap - used, f);
		used += n;
	} while (n > 0);
	fclose(f);
	buf[used] = '\0';
	if (len)
		*len = used;
	return buf;
}

char *
wait_file_lines(const char *path, unsigned n, int timeout_ms)
{
	double deadline = now_s() + timeout_ms / 1000.0;

	for (;;) {
		char *text = read_file_all(path, NULL);
		unsigned lines = 0;

		for (char *p = text; p && (p = strchr(p, '\n')) != NULL; p++)
			lines++;
		if (lines >= n)
			return text;
		if (now_s() > deadline)
			fail_msg("%s has fewer than %u lines after %d ms:\n%s", path, n, timeout_ms,
			         text ? text : "");
		free(text);
		sleep_ms(5);
	}
}

void
write_pattern_file(const char *path, uint64_t len)
{
	FILE *f = fopen(path, "wb");
	static char block[1 << 16];

	if (!f)
		fail_msg("cannot create %s: %s", path, strerror(errno));
	for (uint64_t off = 0; off < len;) {
		size_t n = len - off < sizeof(block) ? (size_t)(len - off) : sizeof(block);

		pattern_fill(block, off, n);
		if (fwrite(block, 1, n, f) != n)
			fail_msg("cannot write %s: %s", path, strerror(errno));
		off += n;
	}
	if (fclose(f) != 0)
		fail_msg("cannot write %s: %s", path, strerror(errno));
}

void
path_join(char *buf, size_t size, const char *dir, const char *name)
{
	int n = snprintf(buf, size, "%s/%s", dir, name);

	if (n < 0 || (size_t)n >= size)
		fail_msg("path too long: %s/%s", dir, name);
}

void
write_text_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		fail_msg("cannot write %s: %s", path, strerror(errno));
}

pid_t
harness_start_nginx(const char *dir, const char *conf, const char *errlog, const char *out,
                    void (*configure)(void *arg), void *arg, int *const ports[], size_t nports)
{
	const char *bin = require_program("nginx", "KP_NGINX");
	const char *argv[] = {bin,    "-p", dir,
	                      "-c",   conf, "-e",
	                      errlog, "-g", "daemon off; master_process off;",
	                      NULL};

	harness_watch_log(errlog, "nginx error log");
	harness_watch_log(out, "nginx output");
	for (int attempt = 1; attempt <= 5; attempt++) {
		pid_t pid;
		size_t up = 0;

		configure(arg);
		pid = spawn_process(argv, out);
		while (up < nports && wait_listening(pid, *ports[up], 5000))
			up++;
		if (up == nports)
			return pid;
		if (process_alive(pid))
			fail_msg("nginx did not listen on 127.0.0.1:%d within 5 s", *ports[up]);
		/* Exited: a port was probably taken meanwhile; try others. */
		stop_process(pid, SIGTERM, 1000);
	}
	fail_msg("nginx failed to start 5 times; see its logs");
	return -1;
}

static void
nginx_files_configure(void *arg)
{
	struct nginx_files *ng = arg;
	char text[4096], ssl[800] = "";
	int n;

	ng->port = free_port();
	if (ng->tls)
		snprintf(ssl, sizeof(ssl),
		         " ssl;\n        ssl_certificate %s/origin.crt;\n"
		         "        ssl_certificate_key %s/origin.key",
		         ng->dir, ng->dir);
	/* .bin is served as video: yt-dlp takes only media for a direct link. */
	n = snprintf(text, sizeof(text),
	             "pid %s/nginx.pid;\n"
	             "error_log %s/error.log info;\n"
	             "events { worker_connections 64; }\n"
	             "http {\n"
	             "    default_type application/octet-stream;\n"
	             "    types { video/mp4 bin; }\n"
	             "    log_format kp '%s';\n"
	             "    access_log %s kp;\n"
	             "    client_body_temp_path %s/tmp_body;\n"
	             "    proxy_temp_path %s/tmp_proxy;\n"
	             "    fastcgi_temp_path %s/tmp_fastcgi;\n"
	             "    uwsgi_temp_path %s/tmp_uwsgi;\n"
	             "    scgi_temp_path %s/tmp_scgi;\n"
	             "    keepalive_timeout 60s;\n"
	             "    keepalive_requests 10000;\n"
	             "    server {\n"
	             "        listen 127.0.0.1:%d%s;\n"
	             "        root %s/www;\n"
	             "    }\n"
	             "}\n",
	             ng->dir, ng->dir, ng->log_format, ng->access_log, ng->dir, ng->dir, ng->dir,
	             ng->dir, ng->dir, ng->port, ssl, ng->dir);
	if (n < 0 || (size_t)n >= sizeof(text))
		fail_msg("the nginx configuration does not fit");
	write_text_file(ng->conf, text);
}

static void
nginx_files_stop(void *arg)
{
	struct nginx_files *ng = arg;

	if (ng->pid > 0)
		stop_process(ng->pid, SIGQUIT, 5000);
	ng->pid = 0;
}

void
nginx_files_start(struct nginx_files *ng, const char *dir, bool tls, const char *log_format,
                  const char *file, uint64_t len)
{
	char path[300], name[64], errlog[300], out[300];
	int *const ports[] = {&ng->port};

	memset(ng, 0, sizeof(*ng));
	ng->tls = tls;
	ng->log_format = log_format;
	snprintf(ng->dir, sizeof(ng->dir), "%s", dir);
	path_join(ng->conf, sizeof(ng->conf), ng->dir, "nginx.conf");
	path_join(ng->access_log, sizeof(ng->access_log), ng->dir, "access.log");
	path_join(path, sizeof(path), ng->dir, "www");
	if (mkdir(path, 0755) != 0)
		fail_msg("mkdir %s: %s", path, strerror(errno));
	snprintf(name, sizeof(name), "www/%s", file);
	path_join(path, sizeof(path), ng->dir, name);
	write_pattern_file(path, len);
	harness_watch_log(ng->access_log, "nginx access log");
	path_join(errlog, sizeof(errlog), ng->dir, "error.log");
	path_join(out, sizeof(out), ng->dir, "nginx.out");
	ng->pid =
		harness_start_nginx(ng->dir, ng->conf, errlog, out, nginx_files_configure, ng, ports, 1);
	harness_defer(nginx_files_stop, ng);
}

void
run_ok(const char *const argv[], const char *log)
{
	int rc = run_process(argv, log, 60000);

	if (rc != 0) {
		char *text = read_file_all(log, NULL);

		print_error("%s exited with %d:\n", argv[0], rc);
		for (size_t i = 0; argv[i]; i++)
			print_error(" '%s'", argv[i]);
		print_error("\n%s\n", text ? text : "");
		free(text);
		fail();
	}
}

bool
proxy_has_tls(void)
{
	char log[300];
	const char *argv[] = {getenv("KP_BINARY"), "-V", NULL};
	char *text;
	bool tls;

	path_join(log, sizeof(log), harness_temp_dir(), "version");
	if (!argv[0])
		fail_msg("KP_BINARY is not set");
	run_ok(argv, log);
	text = read_file_all(log, NULL);
	tls = text && !strstr(text, "TLS: none");
	free(text);
	return tls;
}

uint64_t
pattern_range_fnv(uint64_t first, uint64_t len)
{
	uint8_t block[65536];
	uint64_t h = FNV1A64_INIT;

	while (len > 0) {
		size_t n = len < sizeof(block) ? (size_t)len : sizeof(block);

		pattern_fill(block, first, n);
		h = fnv1a64(h, block, n);
		first += n;
		len -= n;
	}
	return h;
}

static int
compare_words(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void
sorted_words(const char *in, char *out, size_t size)
{
	char copy[8192], *words[512], *save = NULL, *w;
	size_t n = 0, used = 0;

	snprintf(copy, sizeof(copy), "%s", in);
	for (w = strtok_r(copy, " ", &save); w && n < 512; w = strtok_r(NULL, " ", &save))
		words[n++] = w;
	qsort(words, n, sizeof(words[0]), compare_words);
	out[0] = '\0';
	for (size_t i = 0; i < n && used < size; i++)
		used += (size_t)snprintf(out + used, size - used, " %s", words[i]);
}

void
harness_expect_file(const char *path, uint64_t first, uint64_t len, const char *file, int line)
{
	size_t got;
	char *data = read_file_all(path, &got);
	static char want[1 << 16];

	if (!data)
		fail_msg("%s:%d: cannot read %s", file, line, path);
	if (got != len) {
		free(data);
		fail_msg("%s:%d: %s: %zu bytes, not bytes %llu-%llu of the file", file, line, path,
		         got, (unsigned long long)first, (unsigned long long)(first + len - 1));
	}
	for (uint64_t done = 0; done < len;) {
		size_t n = len - done < sizeof(want) ? (size_t)(len - done) : sizeof(want);

		pattern_fill(want, first + done, n);
		if (memcmp(want, data + done, n) != 0) {
			free(data);
			fail_msg("%s:%d: %s differs from the pattern in bytes %llu..%llu", file, line,
			         path, (unsigned long long)done, (unsigned long long)(done + n - 1));
		}
		done += n;
	}
	free(data);
}

void
curl_through(int proxy_port, const char *url, const char *range, const char *dest,
             const char *cacert, const char *log)
{
	const char *bin = require_program("curl", "KP_CURL");
	char proxy[64];
	const char *argv[24] = {bin,          "-q",   "--silent",  "--show-error", "--fail",
	                        "--max-time", "30",   "--noproxy", "",             "--proxy",
	                        proxy,        "--output", dest};
	size_t n = 13;

	snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", proxy_port);
	if (range) {
		argv[n++] = "--range";
		argv[n++] = range;
	}
	if (cacert) {
		argv[n++] = "--cacert";
		argv[n++] = cacert;
	}
	argv[n++] = url;
	argv[n] = NULL;
	run_ok(argv, log);
}

/* ---- The proxy ---- */

void
proxy_start(struct proxy *p, const char *const extra_args[])
{
	const char *bin = getenv("KP_BINARY");
	const char *verbose = getenv("KP_E2E_VERBOSE");
	const char *argv[64];
	char port_str[16];
	int fd;

	if (!bin || !*bin)
		fail_msg("KP_BINARY is not set; run the end-to-end tests through ctest or set "
		         "KP_BINARY to the keepalive-proxy executable");
	if (access(bin, X_OK) != 0)
		fail_msg("KP_BINARY=%s is not executable: %s", bin, strerror(errno));

	memset(p, 0, sizeof(*p));
	snprintf(p->log_path, sizeof(p->log_path), "%s/kp-e2e-proxy-XXXXXX.log", temp_base());
	fd = mkstemps(p->log_path, 4);
	if (fd < 0)
		fail_msg("cannot create the proxy log %s: %s", p->log_path, strerror(errno));
	close(fd);
	watch_log(p->log_path, "keepalive-proxy stderr", true);

	for (int attempt = 1; attempt <= 5; attempt++) {
		size_t n = 0;
		int status = 0;
		char how[128];
		FILE *log;

		p->port = free_port();
		snprintf(port_str, sizeof(port_str), "%d", p->port);
		argv[n++] = bin;
		argv[n++] = "-p";
		argv[n++] = port_str;
		argv[n++] = "-b";
		argv[n++] = "127.0.0.1";
		if (!verbose || strcmp(verbose, "0") != 0)
			argv[n++] = "-v";
		for (size_t i = 0; extra_args && extra_args[i]; i++) {
			if (n >= sizeof(argv) / sizeof(argv[0]) - 1)
				fail_msg("too many proxy arguments");
			argv[n++] = extra_args[i];
		}
		argv[n] = NULL;

		log = fopen(p->log_path, "a");
		if (log) {
			fprintf(log, "=== e2e: starting");
			for (size_t i = 0; i < n; i++)
				fprintf(log, " %s", argv[i]);
			fprintf(log, " ===\n");
			fclose(log);
		}
		p->pid = spawn_process(argv, p->log_path);
		if (wait_listening(p->pid, p->port, 5000)) {
			p->running = true;
			return;
		}
		if (wait_process(p->pid, 0, &status)) {
			/* Exited: most likely the port was taken in the meantime; try another. */
			child_forget(p->pid);
			fprintf(stderr, "keepalive-proxy exited during start-up (%s), attempt %d\n",
			        describe_status(status, how, sizeof(how)), attempt);
			continue;
		}
		stop_process(p->pid, SIGKILL, 1000);
		fail_msg(
			"keepalive-proxy (pid %d) did not accept connections on 127.0.0.1:%d within 5 s",
			(int)p->pid, p->port);
	}
	fail_msg("keepalive-proxy failed to start 5 times; see its log");
}

/* The daemon has exited with status: it must have been 0, with no sanitizer report. */
static void
check_clean_exit(struct proxy *p, int status, const char *after)
{
	char how[128];
	char *log;

	child_forget(p->pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("keepalive-proxy %s ended with %s, expected exit status 0", after,
		         describe_status(status, how, sizeof(how)));
	log = read_file_all(p->log_path, NULL);
	if (log && (strstr(log, "Sanitizer") || strstr(log, "runtime error:"))) {
		free(log);
		fail_msg("keepalive-proxy's log contains a sanitizer report");
	}
	free(log);
}

double
proxy_stop_with(struct proxy *p, int sig)
{
	int status = 0;
	char how[128], after[64];
	double t0 = now_s(), elapsed;

	if (!p->running)
		fail_msg("proxy_stop: the proxy is not running");
	p->running = false;
	if (!process_alive(p->pid)) {
		wait_process(p->pid, 0, &status);
		child_forget(p->pid);
		fail_msg("keepalive-proxy had already died before it was stopped: %s",
		         describe_status(status, how, sizeof(how)));
	}
	kill(p->pid, sig);
	if (!wait_process(p->pid, 5000, &status)) {
		stop_process(p->pid, SIGKILL, 1000);
		fail_msg("keepalive-proxy did not exit within 5 s of signal %d (%s)", sig,
		         strsignal(sig));
	}
	elapsed = now_s() - t0;
	snprintf(after, sizeof(after), "stopped by signal %d (%s)", sig, strsignal(sig));
	check_clean_exit(p, status, after);
	return elapsed;
}

double
proxy_wait_exit(struct proxy *p, int timeout_ms)
{
	double t0 = now_s();
	int status = 0;

	if (!p->running)
		fail_msg("proxy_wait_exit: the proxy is not running");
	if (!wait_process(p->pid, timeout_ms, &status))
		fail_msg("keepalive-proxy did not exit within %d ms", timeout_ms);
	p->running = false;
	check_clean_exit(p, status, "exiting by itself");
	return now_s() - t0;
}

unsigned
proxy_log_count(struct proxy *p, const char *text)
{
	char *log = read_file_all(p->log_path, NULL);
	unsigned n = 0;

	for (char *at = log; at && (at = strstr(at, text)) != NULL; at += strlen(text))
		n++;
	free(log);
	return n;
}

/*
 * Counts the summary lines in the daemon's log; *last gets a copy of the
 * newest. A line still being written (no newline yet) does not count: a
 * read of the file does not wait for a write in progress to it.
 */
static unsigned
count_stats_lines(struct proxy *p, char *last, size_t size)
{
	static const char marker[] = ": clients ";
	char *log = read_file_all(p->log_path, NULL), *at, *found = NULL;
	unsigned n = 0;

	for (at = log; at && (at = strstr(at, marker)) != NULL; at += sizeof(marker) - 1) {
		if (!strchr(at, '\n'))
			break;
		found = at + 2;
		n++;
	}
	if (found && last) {
		size_t len = strcspn(found, "\n");

		snprintf(last, size, "%.*s", (int)(len < size ? len : size - 1), found);
	}
	free(log);
	return n;
}

const char *
proxy_stats(struct proxy *p)
{
	static char line[2048];
	unsigned before = count_stats_lines(p, NULL, 0);
	double deadline = now_s() + 3;

	proxy_assert_alive(p);
	kill(p->pid, SIGUSR1);
	while (count_stats_lines(p, line, sizeof(line)) == before) {
		if (now_s() > deadline)
			fail_msg("keepalive-proxy logged no counters within 3 s of SIGUSR1");
		sleep_ms(10);
	}
	return line;
}

unsigned long
stats_get(const char *line, const char *name)
{
	char key[64];
	const char *at;

	snprintf(key, sizeof(key), "%s ", name);
	at = strstr(line, key);
	if (!at)
		fail_msg("no counter '%s' in the stats line: %s", name, line);
	return strtoul(at + strlen(key), NULL, 10);
}

void
proxy_stop(struct proxy *p)
{
	proxy_stop_with(p, SIGTERM);
}

void
proxy_assert_alive(struct proxy *p)
{
	int status = 0;
	char how[128];

	if (p->running && !process_alive(p->pid)) {
		wait_process(p->pid, 0, &status);
		p->running = false;
		fail_msg("keepalive-proxy died: %s", describe_status(status, how, sizeof(how)));
	}
}

void
proxy_fd_census(struct proxy *p, struct fd_census *census)
{
	char path[64];
	DIR *d;
	struct dirent *e;

	memset(census, 0, sizeof(*census));
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)p->pid);
	d = opendir(path);
	if (!d)
		fail_msg("cannot list %s: %s", path, strerror(errno));
	while ((e = readdir(d)) != NULL) {
		char fdpath[PATH_MAX], link[128];
		ssize_t len;

		if (e->d_name[0] == '.')
			continue;
		census->total++;
		snprintf(fdpath, sizeof(fdpath), "%s/%s", path, e->d_name);
		len = readlink(fdpath, link, sizeof(link) - 1);
		if (len <= 0) {
			census->other++;
			continue;
		}
		link[len] = '\0';
		if (strncmp(link, "socket:", 7) == 0)
			census->sockets++;
		else if (strncmp(link, "pipe:", 5) == 0)
			census->pipes++;
		else
			census->other++;
	}
	closedir(d);
}

int
proxy_fd_count(struct proxy *p)
{
	struct fd_census n;

	proxy_fd_census(p, &n);
	return n.total;
}

long
proxy_rss_kib(struct proxy *p)
{
	char path[64], line[256];
	FILE *f;
	long kib = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)p->pid);
	f = fopen(path, "r");
	if (!f)
		fail_msg("cannot read %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	if (kib < 0)
		fail_msg("no VmRSS line in %s", path);
	return kib;
}

double
proxy_cpu_seconds(struct proxy *p)
{
	char path[64], buf[1024];
	FILE *f;
	size_t n;
	const char *fields;
	unsigned long long utime = 0, stime = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)p->pid);
	f = fopen(path, "r");
	if (!f)
		fail_msg("cannot read %s: %s", path, strerror(errno));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name may contain anything; the fields follow its closing parenthesis. */
	fields = strrchr(buf, ')');
	if (!fields || sscanf(fields + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
	                      &utime, &stime) != 2)
		fail_msg("cannot parse %s", path);
	return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

static long
parse_limit(const char *s)
{
	return strcmp(s, "unlimited") == 0 ? -1 : strtol(s, NULL, 10);
}

void
proxy_nofile_limits(struct proxy *p, long *soft, long *hard)
{
	char path[64], line[256], a[32], b[32];
	FILE *f;
	bool found = false;

	snprintf(path, sizeof(path), "/proc/%d/limits", (int)p->pid);
	f = fopen(path, "r");
	if (!f)
		fail_msg("cannot read %s: %s", path, strerror(errno));
	while (!found && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Max open files %31s %31s", a, b) == 2) {
			*soft = parse_limit(a);
			*hard = parse_limit(b);
			found = true;
		}
	}
	fclose(f);
	if (!found)
		fail_msg("no 'Max open files' line in %s", path);
}

/* ---- Clients ---- */

static void
close_fd_deferred(void *arg)
{
	close((int)(intptr_t)arg);
}

void
client_open(struct client *c, int port)
{
	client_open_from(c, port, NULL);
}

void
client_open_from(struct client *c, int port, const char *source)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_in from = {.sin_family = AF_INET};
	struct timeval tv = {CLIENT_TIMEOUT_MS / 1000, (CLIENT_TIMEOUT_MS % 1000) * 1000};
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	if (source && (inet_pton(AF_INET, source, &from.sin_addr) != 1 ||
	               bind(fd, (struct sockaddr *)&from, sizeof(from)) != 0))
		fail_msg("cannot bind a client to %s: %s", source, strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int e = errno;
		close(fd);
		fail_msg("cannot connect to 127.0.0.1:%d: %s", port, strerror(e));
	}
	c->fd = fd;
	wire_init(&c->w, fd);
	harness_defer(close_fd_deferred, (void *)(intptr_t)fd);
}

void
client_close(struct client *c)
{
	if (c->fd < 0)
		return;
	harness_cancel(close_fd_deferred, (void *)(intptr_t)c->fd);
	close(c->fd);
	wire_free(&c->w);
	c->fd = -1;
}

void
client_abort(struct client *c)
{
	struct linger lg = {1, 0};

	if (c->fd >= 0)
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	client_close(c);
}

int
client_send(struct client *c, const void *data, size_t len)
{
	return wire_send_all(c->fd, data, len);
}

void
client_sendf(struct client *c, const char *fmt, ...)
{
	va_list ap;
	char small[4096];
	char *buf = small;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	assert_true(n >= 0);
	if ((size_t)n >= sizeof(small)) {
		buf = malloc((size_t)n + 1);
		assert_non_null(buf);
		va_start(ap, fmt);
		vsnprintf(buf, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	int rc = client_send(c, buf, (size_t)n);
	if (buf != small)
		free(buf);
	if (rc != 0)
		fail_msg("sending %d bytes to the proxy failed: %s", n, strerror(-rc));
}

void
client_send_pattern(struct client *c, uint64_t len)
{
	static char block[1 << 16];

	for (uint64_t off = 0; off < len;) {
		size_t n = len - off < sizeof(block) ? (size_t)(len - off) : sizeof(block);
		int rc;

		pattern_fill(block, off, n);
		rc = client_send(c, block, n);
		if (rc != 0)
			fail_msg("sending the body failed at offset %llu of %llu: %s",
			         (unsigned long long)off, (unsigned long long)len, strerror(-rc));
		off += n;
	}
}

void
client_send_pattern_chunked(struct client *c, uint64_t len, size_t chunk)
{
	char *block = malloc(chunk + 32);

	assert_non_null(block);
	for (uint64_t off = 0; off < len;) {
		size_t n = len - off < chunk ? (size_t)(len - off) : chunk;
		int h = snprintf(block, 32, "%zx\r\n", n);
		int rc;

		pattern_fill(block + h, off, n);
		memcpy(block + h + n, "\r\n", 2);
		rc = client_send(c, block, (size_t)h + n + 2);
		if (rc != 0) {
			free(block);
			fail_msg("sending the chunked body failed at offset %llu: %s",
			         (unsigned long long)off, strerror(-rc));
		}
		off += n;
	}
	free(block);
	client_sendf(c, "0\r\n\r\n");
}

int
client_read_response(struct client *c, struct response *r, unsigned flags)
{
	uint64_t len = 0;
	int rc;

	memset(r, 0, sizeof(*r));
	body_init(&r->body, CLIENT_KEEP_BODY);
	for (;;) {
		rc = wire_read_head(&c->w, false, 1u << 20, &r->head, r->why, sizeof(r->why));
		if (rc != WIRE_OK)
			return rc;
		if (r->head.status / 100 != 1 || r->head.status == 101)
			break;
		if (flags & RESP_INTERIM) {
			r->framing = FRAMING_NONE;
			return WIRE_OK;
		}
		if (r->ninterim < sizeof(r->interim) / sizeof(r->interim[0]))
			r->interim[r->ninterim] = r->head.status;
		r->ninterim++;
		msg_head_free(&r->head);
	}
	if ((flags & RESP_CONNECT) && r->head.status / 100 == 2) {
		/* A tunnel follows the head (RFC 9112 section 6.3, rule 2). */
		r->framing = FRAMING_NONE;
		return WIRE_OK;
	}
	if (wire_framing(&r->head, false, (flags & RESP_HEAD) != 0, &r->framing, &len) != WIRE_OK) {
		snprintf(
			r->why, sizeof(r->why),
			"invalid or conflicting Content-Length / Transfer-Encoding in the response");
		return WIRE_BAD;
	}
	return wire_read_body(&c->w, r->framing, len, &r->body, &r->trailers, &r->nchunks, r->why,
	                      sizeof(r->why));
}

void
response_free(struct response *r)
{
	msg_head_free(&r->head);
	body_free(&r->body);
	headers_free(&r->trailers);
}

const char *
resp_header(const struct response *r, const char *name)
{
	return headers_get(&r->head.headers, name);
}

void
response_print(const struct response *r)
{
	print_error("response: HTTP/%d.%d %d %s\n", r->head.major, r->head.minor, r->head.status,
	            r->head.reason ? r->head.reason : "");
	for (size_t i = 0; i < r->head.headers.n; i++)
		print_error("  %s: %s\n", r->head.headers.v[i].name, r->head.headers.v[i].value);
	print_error("  body: %llu bytes%s", (unsigned long long)r->body.len,
	            r->body.len ? ", starting \"" : "\n");
	if (r->body.len) {
		for (size_t i = 0; i < r->body.kept && i < 200; i++) {
			unsigned char ch = (unsigned char)r->body.data[i];

			if (ch >= 0x20 && ch < 0x7f)
				print_error("%c", ch);
			else
				print_error("\\x%02x", ch);
		}
		print_error("\"\n");
	}
}

bool
client_eof(struct client *c, int timeout_ms)
{
	struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
	long n;

	if (wire_buffered(&c->w) > 0)
		return false;
	if (poll(&pfd, 1, timeout_ms) <= 0)
		return false;
	n = wire_fill(&c->w);
	return n == 0 || n == WIRE_IO;
}

int
client_recv_exact(struct client *c, uint64_t len, struct body *b)
{
	return wire_recv_exact(&c->w, len, b, CLIENT_TIMEOUT_MS);
}

int
client_recv_to_eof(struct client *c, struct body *b)
{
	return wire_recv_to_eof(&c->w, b, CLIENT_TIMEOUT_MS);
}

void
client_exchange(struct client *c, uint64_t send_len, struct body *got, struct exchange *x)
{
	wire_exchange(&c->w, send_len, got, CLIENT_TIMEOUT_MS, x);
}

void
client_shutdown_write(struct client *c)
{
	if (shutdown(c->fd, SHUT_WR) != 0)
		fail_msg("shutdown(SHUT_WR) of the client connection: %s", strerror(errno));
}

int
client_connect(struct client *c, int proxy_port, const char *authority, struct response *r)
{
	int rc;

	client_open(c, proxy_port);
	client_sendf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", authority, authority);
	rc = client_read_response(c, r, RESP_CONNECT);
	if (rc != WIRE_OK) {
		print_error("CONNECT %s: reading the proxy's answer failed: %s%s%s\n", authority,
		            wire_strerror(rc), r->why[0] ? ": " : "", r->why);
		if (r->head.status)
			response_print(r);
		fail();
	}
	return r->head.status;
}

void
harness_open_tunnel(struct client *c, int proxy_port, const char *authority, const char *file,
                    int line)
{
	struct response r;

	client_connect(c, proxy_port, authority, &r);
	if (r.head.status != 200 || r.head.major != 1 || r.head.minor != 1 ||
	    strcmp(r.head.reason, "Connection established") != 0 || r.head.headers.n != 0) {
		print_error("CONNECT %s: expected \"HTTP/1.1 200 Connection established\" and an "
		            "empty head\n",
		            authority);
		response_print(&r);
		response_free(&r);
		_fail(file, line);
	}
	response_free(&r);
}

const char *
url_authority(const char *url, char *buf, size_t size)
{
	const char *p = strstr(url, "://");
	size_t n;

	p = p ? p + 3 : url;
	n = strcspn(p, "/?#");
	snprintf(buf, size, "%.*s", (int)n, p);
	return buf;
}

void
harness_read_ok(struct client *c, struct response *r, unsigned flags, const char *file, int line)
{
	int rc = client_read_response(c, r, flags);

	if (rc != WIRE_OK) {
		print_error("reading a response from the proxy failed: %s%s%s\n", wire_strerror(rc),
		            r->why[0] ? ": " : "", r->why);
		if (r->head.status)
			response_print(r);
		response_free(r);
		_fail(file, line);
	}
}

void
harness_assert_status(const struct response *r, int status, const char *file, int line)
{
	if (r->head.status != status) {
		print_error("expected status %d, got %d\n", status, r->head.status);
		response_print(r);
		_fail(file, line);
	}
}

void
harness_assert_eof(struct client *c, int timeout_ms, const char *file, int line)
{
	if (!client_eof(c, timeout_ms)) {
		print_error("expected the proxy to close the client connection within %d ms%s\n",
		            timeout_ms,
		            wire_buffered(&c->w) ? ", but more bytes arrived" :
		                                   ", but it stayed open");
		_fail(file, line);
	}
}

/* The whole body is text. */
static bool
body_is(const struct response *r, const char *text)
{
	size_t n = strlen(text);

	return r->body.len == n && r->body.kept == n && memcmp(r->body.data, text, n) == 0;
}

void
harness_assert_body(const struct response *r, const char *text, const char *file, int line)
{
	if (!body_is(r, text)) {
		print_error("expected body \"%s\" (%zu bytes)\n", text, strlen(text));
		response_print(r);
		_fail(file, line);
	}
}

void
harness_expect_response(struct client *c, int status, const char *body, const char *file, int line)
{
	struct response r;

	harness_read_ok(c, &r, 0, file, line);
	harness_assert_status(&r, status, file, line);
	if (body)
		harness_assert_body(&r, body, file, line);
	response_free(&r);
}

/* ---- Requests through the proxy ---- */

void
send_request(struct client *c, const char *method, struct origin *og, const char *path,
             const char *version, const char *fields)
{
	/* Written whole, however long the path: a case may ask for one of kilobytes. */
	client_sendf(c, "%s http://127.0.0.1:%d%s %s\r\nHost: 127.0.0.1:%d\r\n%s\r\n", method,
	             origin_port(og), path, version, origin_port(og), fields ? fields : "");
}

void
send_get(struct client *c, struct origin *og, const char *path)
{
	send_request(c, "GET", og, path, "HTTP/1.1", NULL);
}

void
request_once(int proxy_port, const char *source, const char *text, struct response *r)
{
	struct client c;
	unsigned flags = 0;

	/* The method decides how the response is delimited. */
	if (strncmp(text, "HEAD ", 5) == 0)
		flags = RESP_HEAD;
	else if (strncmp(text, "CONNECT ", 8) == 0)
		flags = RESP_CONNECT;
	client_open_from(&c, proxy_port, source);
	client_sendf(&c, "%s", text);
	read_response_ok(&c, r, flags);
	client_close(&c);
}

void
fetch_from(int proxy_port, const char *source, const char *method, const char *url,
           const char *fields, struct response *r)
{
	char auth[256], *text;

	if (asprintf(&text, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: kp-e2e\r\n%s\r\n", method,
	             url, url_authority(url, auth, sizeof(auth)), fields ? fields : "") < 0)
		fail_msg("out of memory");
	request_once(proxy_port, source, text, r);
	free(text);
}

void
fetch(int proxy_port, const char *method, const char *url, struct response *r)
{
	fetch_from(proxy_port, NULL, method, url, NULL, r);
}

void
harness_expect_get(int proxy_port, const char *source, const char *url, int status,
                   const char *body, const char *file, int line)
{
	struct response r;

	fetch_from(proxy_port, source, "GET", url, NULL, &r);
	if (r.head.status != status || (body && !body_is(&r, body))) {
		print_error("GET %s%s%s:\n", url, source ? " from " : "", source ? source : "");
		harness_assert_status(&r, status, file, line);
		harness_assert_body(&r, body, file, line);
	}
	response_free(&r);
}

void
harness_expect_get_path(int proxy_port, struct origin *og, const char *path, int status,
                        const char *body, const char *file, int line)
{
	char url[512];

	harness_expect_get(proxy_port, NULL, origin_url(og, path, url, sizeof(url)), status, body,
	                   file, line);
}

/* ---- The stats page ---- */

const char *
stats_page(int stats_port, const char *path, int *status)
{
	static char body[CLIENT_KEEP_BODY + 1];
	struct response r;
	char *text;

	if (asprintf(&text, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", path, stats_port) < 0)
		fail_msg("out of memory");
	request_once(stats_port, NULL, text, &r);
	free(text);
	*status = r.head.status;
	if (r.body.len != r.body.kept)
		fail_msg("the stats page %s is larger than %zu bytes", path, r.body.kept);
	memcpy(body, r.body.data ? r.body.data : "", r.body.kept);
	body[r.body.kept] = '\0';
	response_free(&r);
	return body;
}

double
metric_value(const char *text, const char *name)
{
	char key[256];
	const char *at;
	size_t n = strlen(name);

	snprintf(key, sizeof(key), "\n%s ", name);
	/* The first line has no newline before it. */
	if (strncmp(text, key + 1, n + 1) == 0)
		at = text;
	else if ((at = strstr(text, key)) != NULL)
		at++;
	else
		fail_msg("no metric %s in:\n%s", name, text);
	return strtod(at + n + 1, NULL);
}

double
stats_metric(int stats_port, const char *name)
{
	int status;
	const char *text = stats_page(stats_port, "/metrics", &status);

	if (status != 200)
		fail_msg("the stats page answered %d to GET /metrics", status);
	return metric_value(text, name);
}

/* ---- A private network and /etc/hosts ---- */

static bool
write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return false;
	fputs(text, f);
	return fclose(f) == 0;
}

/* Mounts a file with text over target; the mount keeps it after it is unlinked. */
static bool
bind_file(const char *dir, const char *name, const char *text, const char *target)
{
	char path[512];
	bool ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ok = write_text(path, text) && mount(path, target, NULL, MS_BIND, NULL) == 0;
	unlink(path);
	return ok;
}

bool
harness_private_world(const char *const steps[], size_t nsteps, const char *hosts, char *why,
                      size_t whylen)
{
	char dir[] = "/tmp/kp-e2e-world-XXXXXX";
	bool ok;

	if (unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) {
		snprintf(why, whylen, "unshare: %s", strerror(errno));
		return false;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		snprintf(why, whylen, "private mounts: %s", strerror(errno));
		return false;
	}
	for (size_t i = 0; i < nsteps; i++) {
		char cmd[256];

		snprintf(cmd, sizeof(cmd), "%s >/dev/null 2>&1", steps[i]);
		if (system(cmd) != 0) {
			snprintf(why, whylen, "'%s' failed", steps[i]);
			return false;
		}
	}
	if (!hosts)
		return true;
	ok = mkdtemp(dir) && bind_file(dir, "hosts", hosts, "/etc/hosts") &&
	     bind_file(dir, "host.conf", "multi on\n", "/etc/host.conf");
	if (!ok)
		snprintf(why, whylen, "private /etc/hosts: %s", strerror(errno));
	rmdir(dir);
	return ok;
}
