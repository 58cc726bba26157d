/*
 * Parent proxies and a DNS stub for the end-to-end tests; see parents.h.
 *
 * Every program runs in the foreground as a child of the test (so the
 * harness's registry stops it at teardown and it dies with the test), with
 * everything it writes in a directory from harness_temp_dir(). Where a
 * program must see files other than the machine's (a resolver, a user that
 * exists for the test only, sshd's run directory), it runs in a mount
 * namespace of its own: unshare(1) and a shell mount those files and then
 * exec the program, so the pid the test holds is the program's.
 */
#include "parents.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define START_MS 10000  /* a parent listens within this */
#define STOP_MS 10000   /* squid takes about 2 s to leave, even with shutdown_lifetime 0 */
#define ATTEMPTS 5      /* a port taken between free_port() and the bind: try others */
#define VIEW_BINDS 8
/* Where Debian's squid keeps its Basic authentication helper for password files. */
#define SQUID_NCSA_AUTH "/usr/lib/squid/basic_ncsa_auth"

/* ---- Programs ---- */

/* Path of name in PATH or the sbin directories into buf; false if there is none. */
static bool
find_program(const char *name, char *buf, size_t size)
{
	const char *path = getenv("PATH");
	char dirs[4096];
	char *save = NULL;

	snprintf(dirs, sizeof(dirs), "%s:/usr/sbin:/usr/local/sbin:/sbin",
	         path && *path ? path : "/usr/bin:/bin");
	for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		int n = snprintf(buf, size, "%s/%s", *d ? d : ".", name);

		if (n > 0 && (size_t)n < size && access(buf, X_OK) == 0)
			return true;
	}
	return false;
}

/* find_program(), or false with "needs NAME (Debian package PKG)" in why. */
static bool
need_program(const char *name, const char *package, char *buf, size_t size, char *why,
              size_t whylen)
{
	if (find_program(name, buf, size))
		return true;
	snprintf(why, whylen, "needs %s (Debian package %s), which is not installed", name,
	         package);
	return false;
}

/* Text of a file (NUL-terminated, the caller frees); fails the test if it cannot be read. */
static char *
slurp(const char *path)
{
	char *text = read_file_all(path, NULL);

	if (!text)
		fail_msg("cannot read %s: %s", path, strerror(errno));
	return text;
}

/* Occurrences of needle in text. */
static unsigned
count_text(const char *text, const char *needle)
{
	unsigned n = 0;
	size_t len = strlen(needle);

	for (const char *at = text; (at = strstr(at, needle)) != NULL; at += len)
		n++;
	return n;
}

/* One line of a program's output (its first line, newline removed), run to completion. */
static void
run_capture(const char *const argv[], const char *out, char *line, size_t size)
{
	char *text;

	unlink(out);
	run_ok(argv, out);
	text = slurp(out);
	text[strcspn(text, "\r\n")] = '\0';
	snprintf(line, size, "%s", text);
	free(text);
}

/* A crypt(3) hash of pass, as "openssl passwd -6" or "-apr1" makes it. */
static void
hash_password(const char *openssl, const char *kind, const char *pass, const char *dir, char *hash,
              size_t size)
{
	char out[300];
	const char *argv[] = {openssl, "passwd", kind, pass, NULL};

	path_join(out, sizeof(out), dir, "passwd-hash.out");
	run_capture(argv, out, hash, size);
	if (hash[0] != '$')
		fail_msg("openssl passwd %s did not print a hash: %s", kind, hash);
}

/* The name of the user this process runs as. */
static const char *
user_name(void)
{
	struct passwd *pw = getpwuid(geteuid());

	if (!pw)
		fail_msg("uid %d has no name in the password database", (int)geteuid());
	return pw->pw_name;
}

/* ---- Private views of a few files ---- */

/*
 * Files a program sees in place of the machine's, in a mount namespace of
 * its own. Paths go into a shell command in double quotes, so they must not
 * hold characters the shell expands there; the temporary directories never
 * do.
 */
struct view {
	size_t nbinds;
	char src[VIEW_BINDS][300];
	char dst[VIEW_BINDS][300];
	bool run_dir;    /* an empty tmpfs on /run, with /run/sshd, for a root sshd */
	bool hide_nscd;  /* an empty /run/nscd, so glibc cannot ask a caching daemon */
};

static bool
view_used(const struct view *v)
{
	return v->nbinds > 0 || v->run_dir || v->hide_nscd;
}

static void
check_shell_safe(const char *path)
{
	if (strpbrk(path, "\"$`\\\n"))
		fail_msg("path unfit for a shell command: %s", path);
}

static void
view_bind(struct view *v, const char *src, const char *dst)
{
	if (v->nbinds == VIEW_BINDS)
		fail_msg("too many files in a private view");
	check_shell_safe(src);
	check_shell_safe(dst);
	snprintf(v->src[v->nbinds], sizeof(v->src[0]), "%s", src);
	snprintf(v->dst[v->nbinds], sizeof(v->dst[0]), "%s", dst);
	v->nbinds++;
}

/* What a DNS stub's dir holds, each shown in place of the file of that name in /etc. */
static const char *const stub_files[] = {"resolv.conf", "hosts", "nsswitch.conf"};
#define NSTUB_FILES (sizeof(stub_files) / sizeof(stub_files[0]))

/* The stub's files over the machine's resolver configuration. */
static void
view_resolver(struct view *v, const struct dns_stub *s)
{
	for (size_t i = 0; i < NSTUB_FILES; i++) {
		char src[300], dst[64];

		path_join(src, sizeof(src), s->dir, stub_files[i]);
		snprintf(dst, sizeof(dst), "/etc/%s", stub_files[i]);
		view_bind(v, src, dst);
	}
	v->hide_nscd = true;
}

/* Appends to buf at *used, printf-style; fails the test if it does not fit. */
static void appendf(char *buf, size_t size, size_t *used, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void
appendf(char *buf, size_t size, size_t *used, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf + *used, size - *used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size - *used)
		fail_msg("a command or configuration built by the test does not fit");
	*used += (size_t)n;
}

/*
 * The shell command that sets the view up and then execs "$@". A bind's
 * target is taken through its symbolic links first (/etc/resolv.conf often
 * is one into /run); one that lands in the fresh /run is created there.
 */
static void
view_script(const struct view *v, char *buf, size_t size)
{
	size_t used = 0;
	struct stat st;

	buf[0] = '\0';
	if (v->run_dir)
		appendf(buf, size, &used,
		        "mount -t tmpfs -o mode=0755 kp-run /run && mkdir -m 0755 /run/sshd && ");
	else if (v->hide_nscd && stat("/run/nscd", &st) == 0 && S_ISDIR(st.st_mode))
		appendf(buf, size, &used, "mount -t tmpfs -o mode=0755 kp-nscd /run/nscd && ");
	for (size_t i = 0; i < v->nbinds; i++) {
		char real[PATH_MAX];
		const char *dst = realpath(v->dst[i], real) ? real : v->dst[i];

		check_shell_safe(dst);
		if (v->run_dir && strncmp(dst, "/run/", 5) == 0)
			appendf(buf, size, &used,
			        "mkdir -p \"$(dirname \"%s\")\" && : > \"%s\" && ", dst, dst);
		appendf(buf, size, &used, "mount --bind \"%s\" \"%s\" && ", v->src[i], dst);
	}
	appendf(buf, size, &used, "exec \"$@\"");
}

/* unshare(1) with its options for a view: a user namespace as well when not root. */
static size_t
view_prefix(const char *unshare, const char **argv, size_t max)
{
	size_t n = 0;

	if (max < 6)
		fail_msg("no room for a view's arguments");
	argv[n++] = unshare;
	if (geteuid() != 0)
		argv[n++] = "--map-root-user";
	argv[n++] = "--mount";
	argv[n++] = "--propagation";
	argv[n++] = "private";
	return n;
}

/* Where unshare(1) and mount(8) are, or false with the reason. */
static bool
view_tools(char *unshare, size_t size, char *why, size_t whylen)
{
	char mount_bin[PATH_MAX];

	return need_program("unshare", "util-linux", unshare, size, why, whylen) &&
	       need_program("mount", "mount", mount_bin, sizeof(mount_bin), why, whylen);
}

/* spawn_process(argv, log), inside v if it is used. */
static pid_t
view_spawn(const struct view *v, const char *const argv[], const char *log)
{
	char unshare[PATH_MAX], why[256], script[8192];
	const char *full[64];
	size_t n;

	if (!view_used(v))
		return spawn_process(argv, log);
	if (!view_tools(unshare, sizeof(unshare), why, sizeof(why)))
		fail_msg("a private view %s", why);
	view_script(v, script, sizeof(script));
	n = view_prefix(unshare, full, 64);
	full[n++] = "/bin/sh";
	full[n++] = "-c";
	full[n++] = script;
	full[n++] = "kp-view";
	for (size_t i = 0; argv[i]; i++) {
		if (n == 63)
			fail_msg("too many arguments for %s", argv[0]);
		full[n++] = argv[i];
	}
	full[n] = NULL;
	return spawn_process(full, log);
}

/* ---- DNS stub ---- */

#define DNS_TYPE_A 1
#define DNS_TYPE_AAAA 28
#define DNS_RCODE_NXDOMAIN 3

static void
put16(unsigned char *p, unsigned v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

static unsigned
get16(const unsigned char *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

/* Lower-case copy of name without a trailing dot. */
static void
dns_name_key(const char *name, char *out, size_t size)
{
	size_t n = 0;

	for (; name[n] && n + 1 < size; n++)
		out[n] = (char)((name[n] >= 'A' && name[n] <= 'Z') ? name[n] - 'A' + 'a' : name[n]);
	if (n > 0 && out[n - 1] == '.')
		n--;
	out[n] = '\0';
}

/* The question's name (dotted, lower case) from msg at off; the offset after it, or 0. */
static size_t
dns_read_name(const unsigned char *msg, size_t len, size_t off, char *out, size_t size)
{
	size_t used = 0;

	for (;;) {
		unsigned label;

		if (off >= len)
			return 0;
		label = msg[off++];
		if (label == 0)
			break;
		/* Questions are never compressed; refuse what would need following. */
		if (label > 63 || off + label > len || used + label + 2 > size)
			return 0;
		if (used > 0)
			out[used++] = '.';
		memcpy(out + used, msg + off, label);
		used += label;
		off += label;
	}
	out[used] = '\0';
	dns_name_key(out, out, size);
	return off;
}

static void
dns_count(struct dns_stub *s, const char *name)
{
	pthread_mutex_lock(&s->lock);
	s->total++;
	for (size_t i = 0; i < DNS_STUB_NAMES; i++) {
		struct dns_stub_count *c = &s->counts[i];

		if (c->name[0] == '\0' || strcmp(c->name, name) == 0) {
			snprintf(c->name, sizeof(c->name), "%s", name);
			c->queries++;
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
}

/*
 * The answer to the query in msg, into out; its length, or 0 to stay
 * silent. One question of class IN: the record's address when the type
 * matches, an empty answer when the name is known but not for that type,
 * NXDOMAIN otherwise.
 */
static size_t
dns_answer(struct dns_stub *s, const unsigned char *msg, size_t len, unsigned char *out,
           size_t size)
{
	char name[256];
	size_t end, n;
	unsigned type, rcode = DNS_RCODE_NXDOMAIN, answers = 0;
	const struct dns_stub_record *hit = NULL;

	if (len < 12 || (msg[2] & 0x80) || get16(msg + 4) != 1) {
		dns_count(s, "");
		return 0;
	}
	end = dns_read_name(msg, len, 12, name, sizeof(name));
	if (end == 0 || end + 4 > len) {
		dns_count(s, "");
		return 0;
	}
	dns_count(s, name);
	type = get16(msg + end);
	for (size_t i = 0; i < s->nrecords; i++) {
		if (strcmp(s->records[i].name, name) != 0)
			continue;
		rcode = 0;
		if ((type == DNS_TYPE_A && s->records[i].family == AF_INET) ||
		    (type == DNS_TYPE_AAAA && s->records[i].family == AF_INET6)) {
			hit = &s->records[i];
			answers = 1;
			break;
		}
	}
	end += 4;
	if (end + 16 + 16 > size)
		return 0;
	/* Header: same id; a response, authoritative, recursion "available". */
	memcpy(out, msg, end);
	out[2] = (unsigned char)(0x80 | (msg[2] & 0x79) | 0x04);
	out[3] = (unsigned char)(0x80 | rcode);
	put16(out + 6, answers);
	put16(out + 8, 0);
	put16(out + 10, 0);
	n = end;
	if (hit) {
		unsigned alen = hit->family == AF_INET ? 4 : 16;

		put16(out + n, 0xc00c); /* the question's name */
		put16(out + n + 2, type);
		put16(out + n + 4, 1); /* IN */
		memset(out + n + 6, 0, 4); /* TTL 0: nothing may keep it */
		put16(out + n + 10, alen);
		memcpy(out + n + 12, hit->addr, alen);
		n += 12 + alen;
	}
	return n;
}

static void *
dns_stub_loop(void *arg)
{
	struct dns_stub *s = arg;
	unsigned char in[1500], out[1500];

	for (;;) {
		struct pollfd pfd[2] = {{.fd = s->fd, .events = POLLIN},
		                        {.fd = s->wake[0], .events = POLLIN}};
		struct sockaddr_storage from;
		socklen_t fromlen = sizeof(from);
		ssize_t got;
		size_t n;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents)
			break;
		got = recvfrom(s->fd, in, sizeof(in), 0, (struct sockaddr *)&from, &fromlen);
		if (got <= 0)
			continue;
		n = dns_answer(s, in, (size_t)got, out, sizeof(out));
		if (n > 0)
			sendto(s->fd, out, n, 0, (struct sockaddr *)&from, fromlen);
	}
	return NULL;
}

/* Parses "name address" lines into s->records; fails the test on a bad one. */
static void
dns_parse_records(struct dns_stub *s, const char *records)
{
	char copy[4096], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", records ? records : "");
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[256], addr[64];
		struct dns_stub_record *r;

		if (sscanf(line, "%255s %63s", name, addr) != 2)
			continue;
		if (s->nrecords == DNS_STUB_RECORDS)
			fail_msg("the DNS stub takes at most %d records", DNS_STUB_RECORDS);
		r = &s->records[s->nrecords];
		dns_name_key(name, r->name, sizeof(r->name));
		if (inet_pton(AF_INET, addr, r->addr) == 1)
			r->family = AF_INET;
		else if (inet_pton(AF_INET6, addr, r->addr) == 1)
			r->family = AF_INET6;
		else
			fail_msg("the DNS stub's record \"%s\" has no address", line);
		s->nrecords++;
	}
}

/* nsswitch.conf as the machine has it, with hosts looked up in files, then DNS. */
static void
write_nsswitch(const char *path)
{
	char *text = read_file_all("/etc/nsswitch.conf", NULL);
	FILE *f = fopen(path, "w");
	char *save = NULL;

	if (!f)
		fail_msg("cannot write %s: %s", path, strerror(errno));
	for (char *line = text ? strtok_r(text, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "hosts:", 6) != 0)
			fprintf(f, "%s\n", line);
	}
	fprintf(f, "hosts: files dns\n");
	free(text);
	if (fclose(f) != 0)
		fail_msg("cannot write %s: %s", path, strerror(errno));
}

static void
dns_stub_stop_deferred(void *arg)
{
	dns_stub_stop(arg);
}

/* Binds s->fd to port 53 of an address in 127/8 no other run is likely to pick. */
static bool
dns_stub_bind(struct dns_stub *s)
{
	unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);

	for (int attempt = 0; attempt < 32; attempt++) {
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53)};
		unsigned r = seed + (unsigned)attempt * 7919u;

		/* 127.53.0.0 upwards: clear of 127.0.0.x, where resolvers and tests sit. */
		snprintf(s->addr, sizeof(s->addr), "127.53.%u.%u", (r >> 8) % 250 + 1,
		         r % 250 + 1);
		inet_pton(AF_INET, s->addr, &sa.sin_addr);
		if (bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return true;
		if (errno == EACCES || errno == EPERM) {
			snprintf(s->why,
			         sizeof(s->why),
			         "the DNS stub must listen on port 53, which needs root (or "
			         "net.ipv4.ip_unprivileged_port_start <= 53)");
			return false;
		}
		if (errno != EADDRINUSE)
			fail_msg("the DNS stub cannot bind %s:53: %s", s->addr, strerror(errno));
	}
	fail_msg("the DNS stub found no free address in 127.53.0.0/16");
	return false;
}

bool
dns_stub_start(struct dns_stub *s, const char *records)
{
	char path[300], text[256], unshare[PATH_MAX];

	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->wake[0] = s->wake[1] = -1;
	if (!view_tools(unshare, sizeof(unshare), s->why, sizeof(s->why)))
		return false;
	if (access("/etc/resolv.conf", F_OK) != 0) {
		/* Without one glibc asks 127.0.0.1 itself, and there is nothing to cover. */
		snprintf(s->why, sizeof(s->why), "this machine has no /etc/resolv.conf to cover");
		return false;
	}
	dns_parse_records(s, records);
	s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s->fd < 0)
		fail_msg("socket: %s", strerror(errno));
	if (!dns_stub_bind(s)) {
		close(s->fd);
		s->fd = -1;
		return false;
	}
	snprintf(s->dir, sizeof(s->dir), "%s", harness_temp_dir());
	/* Everything a test starts may read these, whoever it runs as. */
	chmod(s->dir, 0755);
	snprintf(text, sizeof(text), "nameserver %s\noptions timeout:2 attempts:2\n", s->addr);
	path_join(path, sizeof(path), s->dir, "resolv.conf");
	write_text_file(path, text);
	/* Only localhost: any other name must be asked for. No ::1, which a parent
	 * might try before 127.0.0.1 where the test's servers listen. */
	path_join(path, sizeof(path), s->dir, "hosts");
	write_text_file(path, "127.0.0.1\tlocalhost\n");
	path_join(path, sizeof(path), s->dir, "nsswitch.conf");
	write_nsswitch(path);
	/* Read by whatever user the program under the stub becomes (dante's nobody). */
	for (size_t i = 0; i < NSTUB_FILES; i++) {
		path_join(path, sizeof(path), s->dir, stub_files[i]);
		chmod(path, 0644);
	}
	if (pipe2(s->wake, O_CLOEXEC) != 0)
		fail_msg("pipe2: %s", strerror(errno));
	pthread_mutex_init(&s->lock, NULL);
	if (pthread_create(&s->thread, NULL, dns_stub_loop, s) != 0)
		fail_msg("cannot start the DNS stub's thread");
	s->running = true;
	harness_defer(dns_stub_stop_deferred, s);
	return true;
}

void
dns_stub_stop(struct dns_stub *s)
{
	if (!s->running)
		return;
	harness_cancel(dns_stub_stop_deferred, s);
	if (write(s->wake[1], "x", 1) != 1)
		fail_msg("cannot wake the DNS stub's thread: %s", strerror(errno));
	pthread_join(s->thread, NULL);
	close(s->fd);
	close(s->wake[0]);
	close(s->wake[1]);
	s->fd = s->wake[0] = s->wake[1] = -1;
	pthread_mutex_destroy(&s->lock);
	s->running = false;
}

unsigned
dns_stub_queries(struct dns_stub *s, const char *name)
{
	char key[256];
	unsigned n = 0;

	if (!s->running)
		return 0;
	if (name)
		dns_name_key(name, key, sizeof(key));
	pthread_mutex_lock(&s->lock);
	if (!name)
		n = s->total;
	for (size_t i = 0; name && i < DNS_STUB_NAMES && s->counts[i].name[0]; i++)
		if (strcmp(s->counts[i].name, key) == 0)
			n = s->counts[i].queries;
	pthread_mutex_unlock(&s->lock);
	return n;
}

void
dns_stub_skip(const struct dns_stub *s)
{
	print_message("skipped: %s\n", s->why);
	skip();
}

/* ---- The daemon under a stub ---- */

static char saved_binary[PATH_MAX];

static void
restore_binary(void *arg)
{
	(void)arg;
	setenv("KP_BINARY", saved_binary, 1);
}

void
proxy_start_with_dns(struct proxy *p, struct dns_stub *s, const char *const extra_args[])
{
	const char *bin = getenv("KP_BINARY");
	struct view v = {0};
	char unshare[PATH_MAX], why[256], script[8192], wrapper[300], text[10240];
	const char *prefix[8];
	size_t n, used = 0;

	if (!s->running)
		fail_msg("proxy_start_with_dns: the DNS stub is not running");
	if (!bin || !*bin)
		fail_msg("KP_BINARY is not set; run the end-to-end tests through ctest");
	check_shell_safe(bin);
	if (!view_tools(unshare, sizeof(unshare), why, sizeof(why)))
		fail_msg("proxy_start_with_dns %s", why);
	view_resolver(&v, s);
	view_script(&v, script, sizeof(script));
	/*
	 * proxy_start() runs $KP_BINARY: for this one start it names a script
	 * that execs the daemon inside the view, keeping the pid.
	 */
	text[0] = '\0';
	appendf(text, sizeof(text), &used, "#!/bin/sh\nexec");
	n = view_prefix(unshare, prefix, 8);
	for (size_t i = 0; i < n; i++)
		appendf(text, sizeof(text), &used, " %s", prefix[i]);
	appendf(text, sizeof(text), &used, " /bin/sh -c '%s' kp-view \"%s\" \"$@\"\n", script, bin);
	path_join(wrapper, sizeof(wrapper), s->dir, "keepalive-proxy-with-stub");
	write_text_file(wrapper, text);
	if (chmod(wrapper, 0755) != 0)
		fail_msg("chmod %s: %s", wrapper, strerror(errno));
	snprintf(saved_binary, sizeof(saved_binary), "%s", bin);
	harness_defer(restore_binary, NULL);
	setenv("KP_BINARY", wrapper, 1);
	proxy_start(p, extra_args);
	restore_binary(NULL);
	harness_cancel(restore_binary, NULL);
}

/* ---- Parents: common parts ---- */

static void
parent_stop_deferred(void *arg)
{
	parent_stop(arg);
}

/* Clears p but for what the caller set, and gives it a directory. */
static void
parent_begin(struct parent_proc *p, enum parent_prog prog)
{
	struct dns_stub *resolver = p->resolver;

	memset(p, 0, sizeof(*p));
	p->resolver = resolver;
	p->prog = prog;
	if (resolver && !resolver->running)
		fail_msg("the parent's resolver (a DNS stub) is not running");
	snprintf(p->dir, sizeof(p->dir), "%s", harness_temp_dir());
}

/* The view p's server runs in: its resolver's files, if it has one. */
static void
parent_view(const struct parent_proc *p, struct view *v)
{
	memset(v, 0, sizeof(*v));
	if (p->resolver)
		view_resolver(v, p->resolver);
}

/*
 * Starts argv (inside v) with its output appended to out and waits until it
 * listens on port. Returns its pid, or 0 if it exited first (a port taken
 * meanwhile, most likely: the caller tries others). Fails the test if it
 * lives on without listening.
 */
static pid_t
spawn_listening(const struct view *v, const char *const argv[], const char *out, int port,
                const char *label)
{
	pid_t pid = view_spawn(v, argv, out);

	if (wait_listening(pid, port, START_MS))
		return pid;
	if (process_alive(pid)) {
		stop_process(pid, SIGKILL, 1000);
		fail_msg("%s did not listen on 127.0.0.1:%d within %d ms", label, port, START_MS);
	}
	stop_process(pid, SIGKILL, 1000);
	return 0;
}

static void
set_url(struct parent_proc *p, const char *scheme)
{
	if (p->user[0])
		snprintf(p->url, sizeof(p->url), "%s://%s:%s@127.0.0.1:%d", scheme, p->user,
		         p->pass, p->port);
	else
		snprintf(p->url, sizeof(p->url), "%s://127.0.0.1:%d", scheme, p->port);
}

static void
set_credentials(struct parent_proc *p, const char *user, const char *pass)
{
	if (!user)
		return;
	if (strlen(user) >= sizeof(p->user) || strlen(pass ? pass : "") >= sizeof(p->pass) ||
	    strpbrk(user, ":@/% \t\n") || strpbrk(pass ? pass : "", ":@/% \t\n"))
		fail_msg("test credentials must be short and need no percent-encoding");
	snprintf(p->user, sizeof(p->user), "%s", user);
	snprintf(p->pass, sizeof(p->pass), "%s", pass ? pass : "");
}

void
parent_skip(const struct parent_proc *p)
{
	print_message("skipped: %s\n", p->why);
	skip();
}

/* ---- microsocks ---- */

bool
parent_start_microsocks(struct parent_proc *p, const char *user, const char *pass)
{
	char bin[PATH_MAX], port[16];
	struct view v;

	parent_begin(p, PARENT_MICROSOCKS);
	if (!need_program("microsocks", "microsocks", bin, sizeof(bin), p->why, sizeof(p->why)))
		return false;
	set_credentials(p, user, pass);
	parent_view(p, &v);
	path_join(p->out, sizeof(p->out), p->dir, "microsocks.log");
	/* It writes "client[N] ADDRESS: connected to HOST:PORT" for each session. */
	snprintf(p->log, sizeof(p->log), "%s", p->out);
	harness_watch_log(p->out, "microsocks output");
	for (int attempt = 0; attempt < ATTEMPTS && !p->pid; attempt++) {
		const char *argv[10] = {bin, "-i", "127.0.0.1", "-p", port};

		p->port = free_port();
		snprintf(port, sizeof(port), "%d", p->port);
		if (p->user[0]) {
			argv[5] = "-u";
			argv[6] = p->user;
			argv[7] = "-P";
			argv[8] = p->pass;
		}
		p->pid = spawn_listening(&v, argv, p->out, p->port, "microsocks");
	}
	if (!p->pid)
		fail_msg("microsocks failed to start %d times; see its output", ATTEMPTS);
	set_url(p, "socks5h");
	harness_defer(parent_stop_deferred, p);
	return true;
}

/* ---- dante ---- */

/*
 * A copy of the machine's /etc/passwd and /etc/shadow with one more user,
 * name with password pass, for a view: dante's "username" method checks
 * the system password database (getpwnam, getspnam) and nothing else, and
 * the test must not add a user to the machine.
 */
static void
dante_users(struct parent_proc *p, struct view *v, const char *openssl)
{
	char passwd[300], shadow[300], hash[256], line[512];
	char *text;
	FILE *f;

	if (getpwnam(p->user))
		fail_msg("this machine already has a user %s, which the dante test adds", p->user);
	hash_password(openssl, "-6", p->pass, p->dir, hash, sizeof(hash));
	path_join(passwd, sizeof(passwd), p->dir, "passwd");
	path_join(shadow, sizeof(shadow), p->dir, "shadow");
	text = slurp("/etc/passwd");
	snprintf(line, sizeof(line), "%s:x:64999:64999::/nonexistent:/usr/sbin/nologin\n", p->user);
	f = fopen(passwd, "w");
	if (!f || fputs(text, f) < 0 || fputs(line, f) < 0 || fclose(f) != 0)
		fail_msg("cannot write %s", passwd);
	free(text);
	text = read_file_all("/etc/shadow", NULL);
	snprintf(line, sizeof(line), "%s:%s:19000:0:99999:7:::\n", p->user, hash);
	f = fopen(shadow, "w");
	if (!f || fputs(text ? text : "", f) < 0 || fputs(line, f) < 0 || fclose(f) != 0)
		fail_msg("cannot write %s", shadow);
	free(text);
	chmod(shadow, 0640);
	view_bind(v, passwd, "/etc/passwd");
	view_bind(v, shadow, "/etc/shadow");
}

static void
dante_configure(const struct parent_proc *p, const char *conf, const char *log)
{
	char text[2048];
	int n;

	/*
	 * "external" is where it connects from: loopback, as the tests talk to
	 * nothing else. Run by root it serves as nobody and reads the password
	 * database as root.
	 */
	n = snprintf(text, sizeof(text),
	             "logoutput: %s\n"
	             "internal: 127.0.0.1 port = %d\n"
	             "external: 127.0.0.1\n"
	             "clientmethod: none\n"
	             "socksmethod: %s\n"
	             "%s"
	             "client pass { from: 127.0.0.0/8 to: 0.0.0.0/0 log: error }\n"
	             "socks pass { from: 127.0.0.0/8 to: 127.0.0.0/8 log: connect disconnect "
	             "error }\n"
	             "socks block { from: 0.0.0.0/0 to: 0.0.0.0/0 log: connect error }\n",
	             log, p->port, p->user[0] ? "username" : "none",
	             geteuid() == 0 ? "user.privileged: root\nuser.unprivileged: nobody\n" : "");
	if (n < 0 || (size_t)n >= sizeof(text))
		fail_msg("dante's configuration does not fit");
	write_text_file(conf, text);
}

bool
parent_start_dante(struct parent_proc *p, bool with_auth)
{
	char bin[PATH_MAX], openssl[PATH_MAX], conf[300], pidfile[300];
	const char *argv[] = {bin, "-f", conf, "-N", "1", "-p", pidfile, NULL};
	struct view v;

	parent_begin(p, PARENT_DANTE);
	if (!need_program("danted", "dante-server", bin, sizeof(bin), p->why, sizeof(p->why)))
		return false;
	parent_view(p, &v);
	if (with_auth) {
		if (geteuid() != 0) {
			snprintf(p->why, sizeof(p->why),
			         "dante's username method checks the system password database; the "
			         "test shows it a private one, which needs root");
			return false;
		}
		if (!need_program("openssl", "openssl", openssl, sizeof(openssl), p->why,
		                  sizeof(p->why)))
			return false;
		set_credentials(p, "kp-socks", "kp-dante-pw");
		dante_users(p, &v, openssl);
	}
	path_join(conf, sizeof(conf), p->dir, "danted.conf");
	path_join(pidfile, sizeof(pidfile), p->dir, "danted.pid");
	path_join(p->out, sizeof(p->out), p->dir, "danted.out");
	/* "pass(1): tcp/connect [: CLIENT PROXY -> FROM TO" opens each session's lines. */
	path_join(p->log, sizeof(p->log), p->dir, "danted.log");
	harness_watch_log(p->out, "danted output");
	harness_watch_log(p->log, "danted log");
	for (int attempt = 0; attempt < ATTEMPTS && !p->pid; attempt++) {
		p->port = free_port();
		dante_configure(p, conf, p->log);
		p->pid = spawn_listening(&v, argv, p->out, p->port, "danted");
	}
	if (!p->pid)
		fail_msg("danted failed to start %d times; see its log", ATTEMPTS);
	set_url(p, "socks5h");
	harness_defer(parent_stop_deferred, p);
	return true;
}

/* ---- sshd and ssh -D ---- */

static void
sshd_configure(const struct parent_proc *p, const char *conf)
{
	char text[2048];
	int n;

	/*
	 * DEBUG1 is the level at which sshd names each forwarded connection
	 * ("server_request_direct_tcpip: originator ..., target HOST port N").
	 * The keys live in the temporary directory, hence StrictModes no.
	 */
	n = snprintf(text, sizeof(text),
	             "ListenAddress 127.0.0.1:%d\n"
	             "HostKey %s/host_key\n"
	             "PidFile none\n"
	             "AuthorizedKeysFile %s/authorized_keys\n"
	             "StrictModes no\n"
	             "PermitRootLogin prohibit-password\n"
	             "PubkeyAuthentication yes\n"
	             "PasswordAuthentication no\n"
	             "KbdInteractiveAuthentication no\n"
	             "UsePAM no\n"
	             "AllowTcpForwarding yes\n"
	             "PermitTTY no\n"
	             "X11Forwarding no\n"
	             "PrintMotd no\n"
	             "UseDNS no\n"
	             "LogLevel DEBUG1\n",
	             p->server_port, p->dir, p->dir);
	if (n < 0 || (size_t)n >= sizeof(text))
		fail_msg("sshd's configuration does not fit");
	write_text_file(conf, text);
}

static void
ssh_keys(const struct parent_proc *p, const char *keygen)
{
	char host_key[300], id[300], pub[300], auth[300], out[300], line[1024];
	const char *host_argv[] = {keygen, "-q", "-t", "ed25519", "-N", "", "-C", "kp-e2e-host",
	                           "-f", host_key, NULL};
	const char *id_argv[] = {keygen, "-q", "-t", "ed25519", "-N", "", "-C", "kp-e2e-client",
	                         "-f", id, NULL};
	char *text;

	path_join(host_key, sizeof(host_key), p->dir, "host_key");
	path_join(id, sizeof(id), p->dir, "id_ed25519");
	path_join(pub, sizeof(pub), p->dir, "id_ed25519.pub");
	path_join(auth, sizeof(auth), p->dir, "authorized_keys");
	path_join(out, sizeof(out), p->dir, "ssh-keygen.out");
	run_ok(host_argv, out);
	run_ok(id_argv, out);
	/* Only forwarding: no shell, no agent, no X11, whatever the configuration says. */
	text = slurp(pub);
	snprintf(line, sizeof(line), "restrict,port-forwarding %s", text);
	write_text_file(auth, line);
	free(text);
}

bool
parent_start_ssh_socks(struct parent_proc *p)
{
	char sshd[PATH_MAX], ssh[PATH_MAX], keygen[PATH_MAX], unshare[PATH_MAX];
	char conf[300], id[300], sshd_out[300], dport[32], sport[16], login[160];
	const char *sshd_argv[] = {sshd, "-D", "-e", "-f", conf, NULL};
	const char *ssh_argv[] = {ssh, "-F", "/dev/null", "-N", "-D", dport, "-p", sport, "-i", id,
	                          "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes",
	                          "-o", "StrictHostKeyChecking=no",
	                          "-o", "UserKnownHostsFile=/dev/null",
	                          "-o", "GlobalKnownHostsFile=/dev/null",
	                          "-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=5",
	                          "-o", "ControlPath=none", "-o", "LogLevel=ERROR", login, NULL};
	struct view v;

	parent_begin(p, PARENT_SSH);
	if (!need_program("sshd", "openssh-server", sshd, sizeof(sshd), p->why, sizeof(p->why)) ||
	    !need_program("ssh", "openssh-client", ssh, sizeof(ssh), p->why, sizeof(p->why)) ||
	    !need_program("ssh-keygen", "openssh-client", keygen, sizeof(keygen), p->why,
	                  sizeof(p->why)))
		return false;
	parent_view(p, &v);
	if (geteuid() == 0) {
		/*
		 * A root sshd insists on its privilege separation directory,
		 * /run/sshd, which the system's unit creates: it gets one in a
		 * /run of its own instead.
		 */
		if (!view_tools(unshare, sizeof(unshare), p->why, sizeof(p->why)))
			return false;
		v.run_dir = true;
	} else if (p->resolver) {
		snprintf(p->why, sizeof(p->why),
		         "sshd under a DNS stub runs in a private mount namespace, which needs "
		         "root");
		return false;
	}
	ssh_keys(p, keygen);
	path_join(conf, sizeof(conf), p->dir, "sshd_config");
	path_join(id, sizeof(id), p->dir, "id_ed25519");
	path_join(sshd_out, sizeof(sshd_out), p->dir, "sshd.log");
	path_join(p->out, sizeof(p->out), p->dir, "ssh.log");
	snprintf(p->log, sizeof(p->log), "%s", sshd_out);
	snprintf(login, sizeof(login), "%s@127.0.0.1", user_name());
	harness_watch_log(sshd_out, "sshd log");
	harness_watch_log(p->out, "ssh -D output");
	for (int attempt = 0; attempt < ATTEMPTS && !p->pid; attempt++) {
		char *text;
		bool clash;

		p->server_port = free_port();
		sshd_configure(p, conf);
		p->server_pid = spawn_listening(&v, sshd_argv, sshd_out, p->server_port, "sshd");
		if (!p->server_pid)
			continue;
		p->port = free_port();
		snprintf(dport, sizeof(dport), "127.0.0.1:%d", p->port);
		snprintf(sport, sizeof(sport), "%d", p->server_port);
		/* ssh listens on the SOCKS port once it is logged in. */
		p->pid = spawn_listening(&(struct view){0}, ssh_argv, p->out, p->port, "ssh -D");
		if (p->pid)
			break;
		stop_process(p->server_pid, SIGTERM, STOP_MS);
		p->server_pid = 0;
		text = slurp(p->out);
		clash = strstr(text, "Address already in use") != NULL;
		if (!clash && geteuid() != 0) {
			/* A user's own sshd may refuse them: a locked account, say. */
			snprintf(p->why, sizeof(p->why),
			         "the test's own sshd did not let %s in (a locked account?): "
			         "%.120s",
			         user_name(), text);
			free(text);
			return false;
		}
		free(text);
		if (!clash)
			fail_msg("ssh -D could not log in to the test's own sshd; see their logs");
	}
	if (!p->pid)
		fail_msg("sshd and ssh -D failed to start %d times; see their logs", ATTEMPTS);
	set_url(p, "socks5h");
	harness_defer(parent_stop_deferred, p);
	return true;
}

/* ---- squid ---- */

/* Removes the shared memory segments squid named after p->shm (left behind if it was killed). */
static void
squid_forget_shm(struct parent_proc *p)
{
	char pattern[128];
	glob_t g;

	if (!p->shm[0])
		return;
	snprintf(pattern, sizeof(pattern), "/dev/shm/%s-*", p->shm);
	if (glob(pattern, 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			unlink(g.gl_pathv[i]);
		globfree(&g);
	}
	p->shm[0] = '\0';
}

static void
squid_configure(const struct parent_proc *p, const char *conf, const char *helper,
                const char *run_as)
{
	char text[4096], auth[1024] = "", user[128] = "";
	size_t used = 0;
	int n;

	if (p->user[0])
		appendf(auth, sizeof(auth), &used,
		        "auth_param basic program %s %s/passwd\n"
		        "auth_param basic children 2\n"
		        "auth_param basic realm keepalive-proxy tests\n"
		        "acl authed proxy_auth REQUIRED\n"
		        "http_access allow localhost authed\n",
		        helper, p->dir);
	else
		appendf(auth, sizeof(auth), &used, "http_access allow localhost\n");
	if (run_as)
		snprintf(user, sizeof(user), "cache_effective_user %s\n", run_as);
	/*
	 * No cache and no disk store: a parent that only forwards. The access
	 * log's line names the client's address:port (one per connection to
	 * squid) and squid's own port towards the origin (one per connection
	 * from it). shutdown_lifetime 0: it leaves on SIGTERM without waiting
	 * for clients. Requests for off-limits.test and its subdomains are denied
	 * (403), as an office proxy's rules deny a site, before any DNS.
	 */
	n = snprintf(text, sizeof(text),
	             "http_port 127.0.0.1:%d\n"
	             "pid_filename %s/squid.pid\n"
	             "cache_log %s/cache.log\n"
	             "logformat kp %%ts.%%03tu %%>a:%%>p %%Ss/%%03>Hs %%rm %%ru %%un %%<lp\n"
	             "access_log stdio:%s kp\n"
	             "buffered_logs off\n"
	             "cache_store_log none\n"
	             "coredump_dir %s\n"
	             "netdb_filename none\n"
	             "pinger_enable off\n"
	             "cache deny all\n"
	             "cache_mem 1 MB\n"
	             "shutdown_lifetime 0 seconds\n"
	             "acl off_limits dstdomain .off-limits.test\n"
	             "http_access deny off_limits\n"
	             "%s"
	             "%s"
	             "http_access deny all\n",
	             p->port, p->dir, p->dir, p->log, p->dir, user, auth);
	if (n < 0 || (size_t)n >= sizeof(text))
		fail_msg("squid's configuration does not fit");
	write_text_file(conf, text);
}

bool
parent_start_squid(struct parent_proc *p, const char *user, const char *pass)
{
	static unsigned instances;
	char bin[PATH_MAX], openssl[PATH_MAX], conf[300];
	const char *argv[] = {bin, "-N", "-n", p->shm, "-f", conf, NULL};
	const char *run_as = NULL;
	struct view v;

	parent_begin(p, PARENT_SQUID);
	if (!need_program("squid", "squid", bin, sizeof(bin), p->why, sizeof(p->why)))
		return false;
	set_credentials(p, user, pass);
	if (p->user[0]) {
		char hash[256], line[320], path[300];

		if (access(SQUID_NCSA_AUTH, X_OK) != 0) {
			snprintf(p->why, sizeof(p->why),
			         "needs " SQUID_NCSA_AUTH " (Debian package squid)");
			return false;
		}
		if (!need_program("openssl", "openssl", openssl, sizeof(openssl), p->why,
		                  sizeof(p->why)))
			return false;
		/* The MD5 form htpasswd writes, which basic_ncsa_auth checks itself. */
		hash_password(openssl, "-apr1", p->pass, p->dir, hash, sizeof(hash));
		snprintf(line, sizeof(line), "%s:%s\n", p->user, hash);
		path_join(path, sizeof(path), p->dir, "passwd");
		write_text_file(path, line);
		chmod(path, 0644); /* read by the helper, as squid's user */
	}
	if (geteuid() == 0) {
		/* Squid refuses to serve as root; it becomes this user, who must write the logs. */
		struct passwd *pw = getpwnam("proxy");

		if (!pw)
			pw = getpwnam("nobody");
		if (!pw)
			fail_msg("squid needs a user to run as (proxy or nobody)");
		run_as = pw->pw_name;
		if (chown(p->dir, pw->pw_uid, pw->pw_gid) != 0)
			fail_msg("chown %s: %s", p->dir, strerror(errno));
	}
	parent_view(p, &v);
	path_join(conf, sizeof(conf), p->dir, "squid.conf");
	path_join(p->out, sizeof(p->out), p->dir, "squid.out");
	path_join(p->log, sizeof(p->log), p->dir, "access.log");
	harness_watch_log(p->out, "squid output");
	harness_watch_log(p->log, "squid access log");
	{
		char cache_log[300];

		path_join(cache_log, sizeof(cache_log), p->dir, "cache.log");
		harness_watch_log(cache_log, "squid cache log");
	}
	for (int attempt = 0; attempt < ATTEMPTS && !p->pid; attempt++) {
		p->port = free_port();
		/* Its shared memory is named after the service (letters and digits only). */
		snprintf(p->shm, sizeof(p->shm), "kpsquid%dn%u", (int)getpid(), ++instances);
		squid_configure(p, conf, SQUID_NCSA_AUTH, run_as);
		p->pid = spawn_listening(&v, argv, p->out, p->port, "squid");
		if (!p->pid)
			squid_forget_shm(p);
	}
	if (!p->pid)
		fail_msg("squid failed to start %d times; see its logs", ATTEMPTS);
	set_url(p, "http");
	harness_defer(parent_stop_deferred, p);
	return true;
}

/* ---- privoxy ---- */

static void
privoxy_configure(const struct parent_proc *p, const char *conf, const char *forward)
{
	char text[4096], templates[300] = "";
	int n;

	if (access("/etc/privoxy/templates", R_OK) == 0)
		snprintf(templates, sizeof(templates), "templdir /etc/privoxy/templates\n");
	/*
	 * Logged to its standard error (--no-daemon): debug 1 each request's
	 * destination, 2 connections ("Accepted connection from"), 512 a
	 * common-log-format line per request, 4096 and 8192 start-up and
	 * errors. connection-sharing with a default-server-timeout keeps
	 * connections to the parent open between clients; without a server
	 * timeout privoxy closes each one after its request.
	 */
	n = snprintf(text, sizeof(text),
	             "listen-address 127.0.0.1:%d\n"
	             "confdir %s\n"
	             "%s"
	             "debug 1\n"
	             "debug 2\n"
	             "debug 512\n"
	             "debug 4096\n"
	             "debug 8192\n"
	             "%s"
	             "connection-sharing 1\n"
	             "keep-alive-timeout 300\n"
	             "default-server-timeout 60\n"
	             "socket-timeout 30\n"
	             "toggle 0\n"
	             "enable-remote-toggle 0\n"
	             "enable-remote-http-toggle 0\n"
	             "enable-edit-actions 0\n"
	             "accept-intercepted-requests 0\n",
	             p->port, p->dir, templates, forward);
	if (n < 0 || (size_t)n >= sizeof(text))
		fail_msg("privoxy's configuration does not fit");
	write_text_file(conf, text);
}

bool
parent_start_privoxy(struct parent_proc *p, const struct parent_proc *via,
                     enum privoxy_forward how)
{
	char bin[PATH_MAX], conf[300], pidfile[300], forward[256] = "", creds[80] = "";
	const char *argv[] = {bin, "--no-daemon", "--pidfile", pidfile, conf, NULL};
	struct view v;

	parent_begin(p, PARENT_PRIVOXY);
	if (!need_program("privoxy", "privoxy", bin, sizeof(bin), p->why, sizeof(p->why)))
		return false;
	if ((how == PRIVOXY_DIRECT) != (via == NULL))
		fail_msg("privoxy: a parent to forward to goes with a forwarding mode");
	if (via && via->user[0])
		snprintf(creds, sizeof(creds), "%s:%s@", via->user, via->pass);
	switch (how) {
	case PRIVOXY_DIRECT:
		break;
	case PRIVOXY_SOCKS5:
	case PRIVOXY_SOCKS5T:
		snprintf(forward, sizeof(forward), "forward-socks5%s / %s127.0.0.1:%d .\n",
		         how == PRIVOXY_SOCKS5T ? "t" : "", creds, via->port);
		break;
	case PRIVOXY_HTTP:
		if (via->user[0])
			fail_msg("privoxy cannot give an HTTP parent credentials");
		snprintf(forward, sizeof(forward), "forward / 127.0.0.1:%d\n", via->port);
		break;
	}
	parent_view(p, &v);
	path_join(conf, sizeof(conf), p->dir, "config");
	path_join(pidfile, sizeof(pidfile), p->dir, "privoxy.pid");
	path_join(p->out, sizeof(p->out), p->dir, "privoxy.log");
	snprintf(p->log, sizeof(p->log), "%s", p->out);
	harness_watch_log(p->out, "privoxy log");
	for (int attempt = 0; attempt < ATTEMPTS && !p->pid; attempt++) {
		p->port = free_port();
		privoxy_configure(p, conf, forward);
		p->pid = spawn_listening(&v, argv, p->out, p->port, "privoxy");
	}
	if (!p->pid)
		fail_msg("privoxy failed to start %d times; see its log", ATTEMPTS);
	set_url(p, "http");
	harness_defer(parent_stop_deferred, p);
	return true;
}

/* ---- Stopping and counting ---- */

void
parent_stop(struct parent_proc *p)
{
	harness_cancel(parent_stop_deferred, p);
	/* The client first: sshd's per-connection process ends with its connection. */
	if (p->pid > 0)
		stop_process(p->pid, SIGTERM, STOP_MS);
	if (p->server_pid > 0)
		stop_process(p->server_pid, SIGTERM, STOP_MS);
	p->pid = p->server_pid = 0;
	p->resolver = NULL;
	if (p->prog == PARENT_SQUID)
		squid_forget_shm(p);
}

unsigned
parent_log_count(const struct parent_proc *p, const char *text)
{
	char *log = read_file_all(p->log, NULL);
	unsigned n = log ? count_text(log, text) : 0;

	free(log);
	return n;
}

/*
 * squid's access log: its requests, and the distinct client address:port
 * pairs among them (its client connections). A line whose method is "-"
 * is a connection that sent no request, such as the probe that saw it
 * listen, and counts for neither.
 */
static void
squid_count(const struct parent_proc *p, unsigned *requests, unsigned *clients)
{
	char *log = read_file_all(p->log, NULL);
	char seen[256][64];
	char *save = NULL;

	*requests = *clients = 0;
	for (char *line = log ? strtok_r(log, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		char client[64], method[32];
		bool known = false;

		if (sscanf(line, "%*s %63s %*s %31s", client, method) != 2 ||
		    strcmp(method, "-") == 0)
			continue;
		(*requests)++;
		for (unsigned i = 0; i < *clients && !known; i++)
			known = strcmp(seen[i], client) == 0;
		if (!known && *clients < 256)
			snprintf(seen[(*clients)++], sizeof(seen[0]), "%s", client);
	}
	free(log);
}

unsigned
parent_sessions(const struct parent_proc *p)
{
	unsigned requests, clients;

	switch (p->prog) {
	case PARENT_MICROSOCKS:
		return parent_log_count(p, ": connected to ");
	case PARENT_DANTE:
		return parent_log_count(p, " tcp/connect [: ");
	case PARENT_SSH:
		return parent_log_count(p, "server_request_direct_tcpip: ");
	case PARENT_SQUID:
		squid_count(p, &requests, &clients);
		return clients;
	case PARENT_PRIVOXY:
		/* Less those that sent no request, such as the probe that saw it listen. */
		return parent_log_count(p, "Connect: Accepted connection from ") -
		       parent_log_count(p, "got closed without sending a complete request line");
	case PARENT_NONE:
		break;
	}
	fail_msg("parent_sessions: no parent was started");
	return 0;
}

unsigned
parent_requests(const struct parent_proc *p)
{
	unsigned requests, clients;

	switch (p->prog) {
	case PARENT_SQUID:
		squid_count(p, &requests, &clients);
		return requests;
	case PARENT_PRIVOXY:
		/* Its common-log-format lines: 127.0.0.1 - - [date] "GET ..." status size */
		return parent_log_count(p, "127.0.0.1 - - [");
	default:
		return parent_sessions(p);
	}
}

static unsigned
wait_count(const struct parent_proc *p, unsigned (*count)(const struct parent_proc *),
           unsigned n, int timeout_ms)
{
	double deadline = now_s() + timeout_ms / 1000.0;
	unsigned got;

	while ((got = count(p)) < n && now_s() < deadline)
		sleep_ms(10);
	return got;
}

unsigned
parent_wait_log_count(const struct parent_proc *p, const char *text, unsigned n, int timeout_ms)
{
	double deadline = now_s() + timeout_ms / 1000.0;
	unsigned got;

	while ((got = parent_log_count(p, text)) < n && now_s() < deadline)
		sleep_ms(10);
	return got;
}

unsigned
parent_wait_sessions(const struct parent_proc *p, unsigned n, int timeout_ms)
{
	return wait_count(p, parent_sessions, n, timeout_ms);
}

unsigned
parent_wait_requests(const struct parent_proc *p, unsigned n, int timeout_ms)
{
	return wait_count(p, parent_requests, n, timeout_ms);
}

/* ---- curl through a proxy ---- */

int
curl_via(const char *proxy_url, const char *const urls[], size_t nurls, const char *dest,
         const char *log)
{
	const char *bin = require_program("curl", "KP_CURL");
	const char *argv[48] = {bin,         "-q",         "--silent", "--show-error",
	                        "--fail",    "--fail-early", "--max-time", "30",
	                        "--noproxy", "",           "--proxy",  proxy_url,
	                        "--stderr",  log};
	size_t n = 14;

	if (nurls > sizeof(argv) / sizeof(argv[0]) - n - 1)
		fail_msg("curl_via: too many URLs");
	for (size_t i = 0; i < nurls; i++)
		argv[n++] = urls[i];
	argv[n] = NULL;
	/* Bodies go to standard output, appended to dest; messages to log. */
	return run_process(argv, dest, 40000);
}
