#include "kp/server.h"

#include <errno.h>
#include <grp.h>
#include <malloc.h>
#include <pwd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kp/access_log.h"
#include "kp/auth.h"
#include "kp/buf.h"
#include "kp/dns.h"
#include "kp/evglue.h"
#include "kp/hostcheck.h"
#include "kp/hoststats.h"
#if KP_TLS
#include "kp/intercept.h"
#endif
#include "kp/list.h"
#include "kp/listener.h"
#include "kp/log.h"
#include "kp/net.h"
#include "kp/parent.h"
#include "kp/readahead.h"
#include "kp/splice.h"
#include "kp/stats.h"
#include "kp/tls.h"

static void clients_left(struct server *srv);

static struct server *
server_of(struct listener *l)
{
	return container_of(l, struct server, listener);
}

static bool
has_room(struct listener *l)
{
	struct server *srv = server_of(l);

	return srv->clients.count < srv->max_clients;
}

static void
accepted(struct listener *l, int fd, const struct sockaddr *peer)
{
	struct server *srv = server_of(l);
	union net_addr addr;

	memset(&addr, 0, sizeof(addr));
	memcpy(&addr, peer, peer->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                                                : sizeof(struct sockaddr_in));
	if (net_tune(fd, NET_CLIENT, srv->cfg, NULL) < 0)
		log_debug("client socket options: %s", strerror(errno));
	client_new(&srv->env, &srv->clients, fd, &addr);
	srv->fds.clients = srv->clients.count;
}

/* A client needs the descriptor more than an idle pooled connection does. */
static bool
free_descriptor(struct listener *l)
{
	return dispatch_free_descriptor(&server_of(l)->dispatch);
}

static const struct listener_ops client_listener_ops = {
	.has_room = has_room,
	.accepted = accepted,
	.free_descriptor = free_descriptor,
};

/* Clients went away: accepting may resume if the cap held it back, or, when stopping, the loop ends. */
static void
clients_left(struct server *srv)
{
	srv->fds.clients = srv->clients.count;
	if (srv->env.draining) {
		if (srv->clients.count == 0)
			ev_break(srv->loop, EVBREAK_ALL);
		return;
	}
	listener_resume(&srv->listener);
}

static void
reaper_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct server *srv = container_of(w, struct server, reaper);

	(void)loop;
	(void)revents;
	if (client_reap(&srv->clients) > 0)
		clients_left(srv);
}

static void
stats_signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	stats_log_summary();
}

/* Reads --auth-file; at start a failure is fatal, on SIGHUP the old one stays. */
static int
load_auth(struct server *srv)
{
	const char *path = srv->cfg->auth_file;
	struct auth *fresh;
	char why[256];

	if (!path)
		return 0;
	if (!(fresh = auth_load(path, why, sizeof(why)))) {
		log_error("--auth-file %s: %s%s", path, why,
		          srv->auth ? "; the users read before stay in force" : "");
		return -1;
	}
	if (auth_file_exposed(path))
		log_warn("--auth-file %s can be read by every user: chmod o-r it", path);
	auth_free(srv->auth);
	srv->auth = fresh;
	srv->env.auth = fresh;
	log_info("%u proxy user%s from %s", auth_users(fresh), auth_users(fresh) == 1 ? "" : "s",
	         path);
	return 0;
}

static void
reload_signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct server *srv = container_of(w, struct server, sighup_watcher);

	(void)loop;
	(void)revents;
	log_info("SIGHUP: reloading");
	access_log_reopen();
	srv->own.count = policy_own_addresses(srv->own.addr, POLICY_MAX_OWN);
	load_auth(srv);
}

/* Spare buffers and request states untouched this long are freed: a burst's memory goes back. */
#define TRIM_SECONDS 5.0

static void
trim_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct server *srv = container_of(w, struct server, trim_timer);
	unsigned long freed = buf_trim();

	(void)loop;
	(void)revents;
	freed += client_trim(&srv->clients);
	/* What read-ahead held for a client is many small records: their pages go back too. */
	freed += readahead_take_freed(srv->readahead);
	if (freed > 0) {
#ifdef __GLIBC__
		/* glibc keeps freed heap pages mapped; hand them back to the kernel. */
		malloc_trim(0);
#endif
	}
}

static void
grace_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct server *srv = container_of(w, struct server, grace_timer);

	(void)revents;
	log_info("grace period over: closing %u client%s", srv->clients.count,
	         srv->clients.count == 1 ? "" : "s");
	ev_break(loop, EVBREAK_ALL);
}

/*
 * The first SIGTERM or SIGINT stops accepting and lets the responses in
 * flight finish, up to --grace; clients waiting for their next request are
 * closed now, the others after their response. A second signal, or no
 * grace, ends it at once.
 */
static void
signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct server *srv = w->data;

	(void)revents;
	if (srv->env.draining || srv->cfg->grace <= 0) {
		log_info("signal %d: stopping now", w->signum);
		ev_break(loop, EVBREAK_ALL);
		return;
	}
	srv->env.draining = true;
	listener_close(&srv->listener);
	KP_LIST_EACH_SAFE(c, next, &srv->clients.live, struct client, link)
		client_stop_if_idle(c);
	if (srv->clients.count == 0) {
		log_info("signal %d: stopping", w->signum);
		ev_break(loop, EVBREAK_ALL);
		return;
	}
	log_info("signal %d: stopping once %u client%s finish%s (at most %g s; signal again to "
	         "stop now)",
	         w->signum, srv->clients.count, srv->clients.count == 1 ? "" : "s",
	         srv->clients.count == 1 ? "es" : "", srv->cfg->grace);
	ev_timer_set(&srv->grace_timer, srv->cfg->grace, 0.);
	ev_timer_start(loop, &srv->grace_timer);
}

/*
 * Each client may hold an upstream connection too, so two fds per client;
 * raise the soft limit to the hard one and fit the client cap under it.
 */
static unsigned
fit_clients_to_fd_limit(struct server *srv, unsigned wanted)
{
	struct rlimit rl;
	rlim_t usable;

	srv->fds.limit = 1024;
	srv->fds.reserved = KP_FDS_RESERVED;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return wanted;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	srv->fds.limit = rl.rlim_cur == RLIM_INFINITY ? ~0UL : (unsigned long)rl.rlim_cur;
	usable = rl.rlim_cur > KP_FDS_RESERVED ? (rl.rlim_cur - KP_FDS_RESERVED) / 2 : 1;
	if (usable < wanted) {
		log_info("fd limit %llu allows %llu clients, not %u", (unsigned long long)rl.rlim_cur,
		         (unsigned long long)usable, wanted);
		return (unsigned)usable;
	}
	return wanted;
}

/*
 * Tries the upstream socket options once at start, so a congestion control
 * the kernel does not offer is a clear error now, not a failed connect per
 * request later.
 */
static int
check_upstream_tuning(const struct kp_config *cfg)
{
	const char *failed = "socket";
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), saved;

	if (fd >= 0 && net_tune(fd, NET_UPSTREAM, cfg, &failed) == 0) {
		close(fd);
		return 0;
	}
	saved = errno;
	if (fd >= 0)
		close(fd);
	if (strcmp(failed, "TCP_CONGESTION") == 0)
		log_error("--congestion %s: %s; the kernel offers what "
		          "net.ipv4.tcp_available_congestion_control lists, and unprivileged "
		          "sockets only what net.ipv4.tcp_allowed_congestion_control lists "
		          "(modprobe tcp_%s may add it)",
		          cfg->congestion, strerror(saved), cfg->congestion);
	else
		log_error("cannot set %s on upstream sockets: %s", failed, strerror(saved));
	return -1;
}

/* Written once the port is bound, so whoever waits for it may connect at once. */
static int
write_pidfile(struct server *srv)
{
	const struct kp_config *cfg = srv->cfg;
	FILE *f;

	if (!cfg->pidfile)
		return 0;
	if (!(f = fopen(cfg->pidfile, "we")) || fprintf(f, "%ld\n", (long)getpid()) < 0 ||
	    fclose(f) != 0) {
		log_error("--pidfile %s: %s", cfg->pidfile, strerror(errno));
		return -1;
	}
	srv->pidfile_written = true;
	return 0;
}

/*
 * Gives up root for -u USER: supplementary groups, group, then user, in
 * that order (each step needs the privilege the next one drops). The
 * resolver threads follow: glibc changes the ids of every thread.
 */
static int
drop_privileges(const struct kp_config *cfg)
{
	struct passwd *pw;

	if (!cfg->user) {
		if (geteuid() == 0 && !config_bind_is_loopback(cfg->bind_addr))
			log_warn("running as root on %s: give -u USER to drop root once the port "
			         "is bound", cfg->bind_addr);
		return 0;
	}
	errno = 0;
	if (!(pw = getpwnam(cfg->user))) {
		log_error("-u %s: %s", cfg->user, errno ? strerror(errno) : "no such user");
		return -1;
	}
	if ((geteuid() == 0 && initgroups(pw->pw_name, pw->pw_gid) < 0) ||
	    setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0) {
		log_error("-u %s: cannot switch to uid %u gid %u: %s", cfg->user,
		          (unsigned)pw->pw_uid, (unsigned)pw->pw_gid, strerror(errno));
		return -1;
	}
	/* Paranoia that costs one call: getting root back must fail now. */
	if (pw->pw_uid != 0 && setuid(0) == 0) {
		log_error("-u %s: root could be regained", cfg->user);
		return -1;
	}
	log_info("running as %s (uid %u)", cfg->user, (unsigned)pw->pw_uid);
	return 0;
}

/*
 * One line when a host setting caps what this start is set up for (the
 * path of --rtt and --rate or their defaults, the buffer, congestion and
 * client flags): --check-host's judgement, read once before the loop. The
 * loopback routes are left out: reading them means running ip, and they
 * never limit.
 */
static void
log_host_limits(const struct kp_config *cfg)
{
	struct hostcheck_input in;
	struct hostcheck_report report;
	char summary[1024];

	hostcheck_input_local(&in, cfg, tls_built_in() ? tls_backend_name() : NULL);
	hostcheck_run(&report, &in, cfg);
	if (hostcheck_summary(&report, summary, sizeof(summary)) > 0)
		log_warn("this host limits downloads: %s (keepalive-proxy --check-host for the fix)",
		         summary);
}

/*
 * How long a host stays tunnelled for a client that refused our
 * certificate: an app that pins does not change its mind within the hour,
 * and a user who has just installed the CA does not wait longer than that.
 */
#define REFUSAL_MEMORY_SECONDS 3600

/* Before privileges go: the CA key is readable by root alone. */
static int
load_tls(struct server *srv)
{
#if KP_TLS
	char why[512];

	if (!(srv->tls = tls_new(srv->cfg, why, sizeof(why)))) {
		log_error("%s", why);
		return -1;
	}
	if (!(srv->refusals = malloc(sizeof(*srv->refusals)))) {
		log_error("out of memory");
		return -1;
	}
	intercept_memory_init(srv->refusals, REFUSAL_MEMORY_SECONDS);
	srv->env.tls = srv->tls;
	srv->env.refusals = srv->refusals;
	log_info("intercepting %u host pattern%s with %s (%s)", srv->cfg->nintercept,
	         srv->cfg->nintercept == 1 ? "" : "s", srv->cfg->ca_cert, tls_backend_name());
	return 0;
#else
	/* The configuration refused --intercept already: this binary has no TLS. */
	(void)srv;
	return -1;
#endif
}

/*
 * The server's fields and the process-wide buffer and pipe pools: nothing
 * here can fail, so a shutdown after any later failure finds them set.
 */
static void
init_fields(struct server *srv, struct ev_loop *loop, const struct kp_config *cfg)
{
	memset(srv, 0, sizeof(*srv));
	/* Shut down safely even if init stops before the stats page's own. */
	srv->stats_page.listener.fd = -1;
	kp_list_init(&srv->stats_page.conns);
	srv->loop = loop;
	srv->cfg = cfg;
	srv->listener.fd = -1;
	clock_init(&srv->clock, loop);
	srv->env.loop = loop;
	srv->env.clock = &srv->clock;
	srv->env.cfg = cfg;
	srv->env.dispatch = &srv->dispatch;
	srv->env.fds = &srv->fds;
	client_list_init(&srv->clients);
	srv->max_clients = fit_clients_to_fd_limit(srv, cfg->max_clients);
	/* Room for the largest head plus the fields the proxy adds to it. */
	buf_init(cfg->max_header_bytes + 1024);
	/* Sixteen spare pipes (32 fds) absorb churn without pinning fds for long. */
	pipes_init(cfg->pipe_size, 16, &srv->fds);
}

/* --parent and its rules, with the credentials file read while the daemon may still read it. */
static int
load_parents(struct server *srv)
{
	char why[512];

	if (!srv->cfg->parent_url && !srv->cfg->nparent_rules)
		return 0;
	if (!(srv->parents = calloc(1, sizeof(*srv->parents)))) {
		log_error("out of memory");
		return -1;
	}
	if (!parents_init(srv->parents, srv->cfg, why, sizeof(why))) {
		log_error("%s", why);
		return -1;
	}
	for (unsigned i = 0; i < srv->parents->count; i++)
		log_info("parent %s%s", srv->parents->list[i].label,
		         srv->parents->list[i].hop.user ? " (with credentials)" : "");
	srv->env.parents = srv->parents;
	return 0;
}

/*
 * The parts the listener's clients will need: the resolver, the stats
 * page, the access log, TLS, dispatch, read-ahead and the per-host counts.
 */
static int
start_parts(struct server *srv)
{
	struct ev_loop *loop = srv->loop;
	const struct kp_config *cfg = srv->cfg;

	if (dns_init(loop, cfg) < 0) {
		log_error("cannot start the resolver thread");
		return -1;
	}
	/* The stats page first: once the proxy's port answers, the page does too. */
	if (check_upstream_tuning(cfg) < 0 || load_auth(srv) < 0 ||
	    stats_page_init(&srv->stats_page, &srv->env) < 0)
		return -1;
	if (cfg->access_log && access_log_open(loop, cfg->access_log, cfg->log_query) < 0) {
		log_error("--access-log %s: %s", cfg->access_log, strerror(errno));
		return -1;
	}
	if (cfg->nintercept && load_tls(srv) < 0)
		return -1;
	if (load_parents(srv) < 0)
		return -1;
	srv->own.count = policy_own_addresses(srv->own.addr, POLICY_MAX_OWN);
	if (dispatch_init(&srv->dispatch, loop, &srv->clock, cfg, srv->tls, &srv->own,
	                  &srv->fds) < 0 ||
	    ((cfg->read_ahead || cfg->nsplit) && !(srv->readahead = readahead_new(&srv->env))) ||
	    (cfg->stats_addr && !(srv->env.hosts = calloc(1, sizeof(*srv->env.hosts))))) {
		log_error("out of memory");
		return -1;
	}
	if (srv->readahead)
		srv->env.hooks = readahead_hooks(srv->readahead);
	return 0;
}

/* The proxy's port is served from here on; the signals, timers and the reaper watch. */
static void
start_watchers(struct server *srv)
{
	struct ev_loop *loop = srv->loop;
	const struct kp_config *cfg = srv->cfg;

	listener_start(&srv->listener, loop, srv->listener.fd, cfg, &client_listener_ops, "proxy");
	ev_init(&srv->grace_timer, grace_cb);
	ev_timer_init(&srv->trim_timer, trim_cb, TRIM_SECONDS, TRIM_SECONDS);
	ev_timer_start(loop, &srv->trim_timer);
	ev_signal_init(&srv->sigint_watcher, signal_cb, SIGINT);
	srv->sigint_watcher.data = srv;
	ev_signal_start(loop, &srv->sigint_watcher);
	ev_signal_init(&srv->sigterm_watcher, signal_cb, SIGTERM);
	srv->sigterm_watcher.data = srv;
	ev_signal_start(loop, &srv->sigterm_watcher);
	ev_signal_init(&srv->sigusr1_watcher, stats_signal_cb, SIGUSR1);
	ev_signal_start(loop, &srv->sigusr1_watcher);
	ev_signal_init(&srv->sighup_watcher, reload_signal_cb, SIGHUP);
	ev_signal_start(loop, &srv->sighup_watcher);
	ev_prepare_init(&srv->reaper, reaper_cb);
	ev_prepare_start(loop, &srv->reaper);
}

int
server_init(struct server *srv, struct ev_loop *loop, const struct kp_config *cfg)
{
	init_fields(srv, loop, cfg);
	if (start_parts(srv) < 0)
		return -1;
	srv->listener.fd = net_listen(cfg->bind_addr, cfg->port, 1024, cfg);
	if (srv->listener.fd < 0) {
		log_error("cannot listen on %s port %u: %s", cfg->bind_addr, cfg->port,
		          errno == EINVAL ? "not a numeric IPv4 or IPv6 address" : strerror(errno));
		return -1;
	}
	if (write_pidfile(srv) < 0 || drop_privileges(cfg) < 0)
		return -1;
	/*
	 * Root may set any congestion control the kernel has; the -u user only
	 * the allowed ones. Checked again as that user, or every upstream
	 * connect would fail with EPERM and every request with a 502.
	 */
	if (cfg->user && check_upstream_tuning(cfg) < 0)
		return -1;
	log_host_limits(cfg);
	start_watchers(srv);
	log_info("keepalive-proxy %s listening on %s%s%s:%u (idle timeout %gs, %u idle per host, "
	         "%u in all)",
	         KP_VERSION, strchr(cfg->bind_addr, ':') ? "[" : "", cfg->bind_addr,
	         strchr(cfg->bind_addr, ':') ? "]" : "", cfg->port, cfg->idle_timeout,
	         cfg->max_idle_per_host, cfg->max_idle_total);
	return 0;
}

void
server_run(struct server *srv)
{
	ev_run(srv->loop, 0);
}

void
server_shutdown(struct server *srv)
{
	struct client *c;

	listener_close(&srv->listener);
	stats_page_shutdown(&srv->stats_page);
	while ((c = KP_LIST_FIRST(&srv->clients.live, struct client, link)) != NULL)
		client_close(c);
	/* After the clients, who may still read what it holds; before the pool its fetches use. */
	srv->env.hooks = NULL;
	readahead_free(srv->readahead);
	srv->readahead = NULL;
	free(srv->parents);
	srv->parents = NULL;
	srv->env.parents = NULL;
	/* Connects nobody waits for any more, and the idle pool. */
	dispatch_shutdown(&srv->dispatch);
	client_reap(&srv->clients);
	free(srv->env.hosts);
	srv->env.hosts = NULL;
	dns_shutdown();
	pipes_shutdown();
	ev_signal_stop(srv->loop, &srv->sigint_watcher);
	ev_signal_stop(srv->loop, &srv->sigterm_watcher);
	ev_signal_stop(srv->loop, &srv->sigusr1_watcher);
	ev_timer_stop(srv->loop, &srv->grace_timer);
	ev_timer_stop(srv->loop, &srv->trim_timer);
	ev_signal_stop(srv->loop, &srv->sighup_watcher);
	auth_free(srv->auth);
	srv->auth = NULL;
	srv->env.auth = NULL;
	tls_free(srv->tls);
	srv->tls = NULL;
	free(srv->refusals);
	srv->refusals = NULL;
	access_log_close();
	/* Best effort: after -u the directory may no longer be ours to write. */
	if (srv->pidfile_written)
		unlink(srv->cfg->pidfile);
	ev_prepare_stop(srv->loop, &srv->reaper);
	client_list_free(&srv->clients);
	buf_drain_free_list();
	stats_log_summary();
}
