#include "kp/upstream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kp/evglue.h"
#include "kp/log.h"
#include "kp/net.h"
#include "kp/parent.h"
#include "kp/stats.h"
#include "kp/tls.h"

/*
 * RFC 8305's recommended Connection Attempt Delay: long enough for a
 * healthy handshake on most paths, short enough that a black-holed IPv6
 * route costs a quarter of a second, not a connect timeout.
 */
#define ATTEMPT_DELAY 0.25

/*
 * A TCP handshake with one address. Several run at once when the earlier
 * ones are slow: RFC 8305 starts the next address every 250 ms.
 */
struct connect_attempt {
	int fd;                      /* -1: slot free */
	ev_io wio;                   /* writable: the handshake ended, either way */
	ev_tstamp deadline;          /* --connect-timeout after it started */
	unsigned addr;               /* index into addrs */
	struct upstream *up;
};

/* Attempts in flight at once; more addresses wait for a slot. */
#define UPSTREAM_MAX_ATTEMPTS 4

/* Everything a connection needs until it is ready, and nothing after. */
struct upstream_setup {
	struct upstream *up;         /* whose it is */
	struct connect_attempt attempts[UPSTREAM_MAX_ATTEMPTS];
	unsigned attempts_open;      /* in flight */
	ev_timer timer;              /* the next stagger, the earliest deadline, or the handshake's */
	ev_tstamp next_attempt_at;   /* when the next address may start */
	struct dns_waiter dns;
	struct dns_addrs addrs;      /* in Happy Eyeballs order: families alternate, IPv6 first */
	unsigned next_addr;          /* index of the address to try next */
	int last_error;              /* errno of the last failed attempt, for the 502 text */
	unsigned refused;            /* addresses the destination rules refused */
	/*
	 * Through a socks5:// parent the origin's name is looked up here first
	 * (and held to the destination rules), then the parent's.
	 */
	bool naming_origin;
	struct sockaddr_storage origin_addr;
	bool has_origin_addr;
	struct parent_handshake handshake;   /* through a parent: asking it for the path */
	char host_name[];            /* the origin's name: looked up, then sent and checked in TLS */
};

static void start_attempts(struct upstream *up);

static const char *const state_names[] = {
	[UPSTREAM_RESOLVING] = "resolving",
	[UPSTREAM_CONNECTING] = "connecting",
	[UPSTREAM_PARENTING] = "parenting",
	[UPSTREAM_HANDSHAKING] = "handshaking",
	[UPSTREAM_BUSY] = "busy",
	[UPSTREAM_IDLE] = "idle",
	[UPSTREAM_CLOSED] = "closed",
};

static void
set_state(struct upstream *up, enum upstream_state next)
{
	log_trace("upstream %s fd %d: %s -> %s", up->key, up->src.conn.fd, state_names[up->state],
	          state_names[next]);
	up->state = next;
}

static void
close_attempt(struct upstream *up, struct connect_attempt *a)
{
	if (a->fd < 0)
		return;
	ev_io_stop(up->ctx->loop, &a->wio);
	net_close(&a->fd);
	up->setup->attempts_open--;
}

static void
close_attempts(struct upstream *up)
{
	for (unsigned i = 0; i < UPSTREAM_MAX_ATTEMPTS; i++)
		close_attempt(up, &up->setup->attempts[i]);
	ev_timer_stop(up->ctx->loop, &up->setup->timer);
}

/* Connected, or closed: what only connecting needed goes. */
static void
end_setup(struct upstream *up)
{
	if (!up->setup)
		return;
	dns_cancel(&up->setup->dns);
	parent_handshake_cancel(&up->setup->handshake);
	close_attempts(up);
	free(up->setup);
	up->setup = NULL;
}

void
upstream_close(struct upstream *up)
{
	if (up->state == UPSTREAM_CLOSED)
		return;
	end_setup(up);
	conn_close(&up->src.conn);
	buf_put(up->src.in);
	up->src.in = NULL;
	up->src.reader = NULL;
	set_state(up, UPSTREAM_CLOSED);
	up->ctx->ops->gone(up);
}

/* ---- between exchanges ---------------------------------------------------- */

void
upstream_begin(struct upstream *up)
{
	set_state(up, UPSTREAM_BUSY);
	up->src.reused = up->exchanges > 0;
	if (up->parent && up->src.reused)
		up->parent->counts.reused++;
	up->src.keep_alive_hint = -1;
	/*
	 * A request not yet sent has no answer waiting: reading now would only
	 * cost a recv() that says EAGAIN. Readiness arrives as an event.
	 */
	conn_clear_facts(&up->src.conn);
	conn_watch(&up->src.conn, false, false);
}

void
upstream_continue(struct upstream *up)
{
	set_state(up, UPSTREAM_BUSY);
	up->src.reused = true;
	if (up->parent)
		up->parent->counts.reused++;
	up->src.keep_alive_hint = -1;
	conn_watch(&up->src.conn, false, false);
}

bool
upstream_end(struct upstream *up)
{
	up->src.reader = NULL;
	up->exchanges++;
	conn_watch(&up->src.conn, false, false);
	/* Bytes behind the response are an answer to nothing: the stream is out of step. */
	return !up->src.in || buf_len(up->src.in) == 0;
}

void
upstream_idle(struct upstream *up)
{
	buf_put(up->src.in);
	up->src.in = NULL;
	set_state(up, UPSTREAM_IDLE);
	/* While idle, readability means the origin closed it (or spoke unasked). */
	conn_watch(&up->src.conn, true, false);
}

bool
upstream_usable(struct upstream *up)
{
	if (conn_idle_alive(&up->src.conn))
		return true;
	log_debug("upstream %s fd %d: dead at reuse (peek)", up->key, up->src.conn.fd);
	kp_stats.upstream_stale++;
	return false;
}

/* ---- connecting (RFC 8305) ------------------------------------------------ */

void
upstream_order_addrs(struct dns_addrs *a)
{
	union net_addr v6[DNS_MAX_ADDRS], v4[DNS_MAX_ADDRS];
	unsigned n6 = 0, n4 = 0, i6 = 0, i4 = 0;

	for (unsigned i = 0; i < a->count; i++) {
		if (a->addr[i].sa.sa_family == AF_INET6)
			v6[n6++] = a->addr[i];
		else
			v4[n4++] = a->addr[i];
	}
	for (unsigned i = 0; i < a->count; i++) {
		bool six = (i % 2 == 0 && i6 < n6) || i4 == n4;

		a->addr[i] = six ? v6[i6++] : v4[i4++];
	}
}

/* No connection to the parent: it is down, or the path to it is. */
static void
parent_unreachable(struct upstream *up)
{
	struct parent *p = up->parent;
	int err = up->setup->last_error;
	char why[400];

	kp_stats.upstream_connect_failures++;
	kp_stats.errors[err == ETIMEDOUT ? KP_ERR_TIMEOUT : KP_ERR_CONNECT]++;
	p->counts.unreachable++;
	snprintf(why, sizeof(why), "parent %s unreachable: %s", p->label,
	         err == ETIMEDOUT ? "timed out connecting to it"
	         : err        ? strerror(err)
	                      : "cannot connect to it");
	up->ctx->ops->failed(up, err == ETIMEDOUT ? 504 : 502, why);
}

static void
fail(struct upstream *up)
{
	int err = up->setup->last_error;
	bool all_refused = up->setup->refused == up->setup->addrs.count;

	if (up->parent && !up->setup->naming_origin) {
		parent_unreachable(up);
		return;
	}
	kp_stats.upstream_connect_failures++;
	if (!all_refused)
		kp_stats.errors[KP_ERR_CONNECT]++;
	if (all_refused)
		up->ctx->ops->failed(up, 403,
		                     "the destination is not reachable from your network "
		                     "through this proxy (see --allow-dest)");
	else if (err == ETIMEDOUT)
		up->ctx->ops->failed(up, 504, "timed out connecting to the origin");
	else
		up->ctx->ops->failed(up, 502, err ? strerror(err) : "cannot connect to the origin");
}

/* ---- TLS with the origin -------------------------------------------------- */

/* No retry on another address: a certificate that does not verify is the host's, not the route's. */
static void
tls_failed(struct upstream *up, const char *why)
{
	static struct log_limit failures = LOG_LIMIT(1);
	char text[240];

	/* Copied: the session holding the words is freed with the connection. */
	snprintf(text, sizeof(text), "%s", why);
	kp_stats.upstream_connect_failures++;
	kp_stats.errors[KP_ERR_TLS]++;
	log_limited(&failures, KP_LOG_INFO, "upstream %s: %s", up->key, text);
	up->ctx->ops->failed(up, 502, text);
}

static void
handshake_step(struct upstream *up)
{
	switch (tls_handshake(up->src.conn.tls)) {
	case TLS_STEP_DONE:
		end_setup(up);
		set_state(up, UPSTREAM_BUSY);
		conn_watch(&up->src.conn, false, false);
		up->ctx->ops->ready(up);
		break;
	case TLS_STEP_WANT_READ:
		conn_watch(&up->src.conn, true, false);
		break;
	case TLS_STEP_WANT_WRITE:
		conn_watch(&up->src.conn, false, true);
		break;
	case TLS_STEP_FAILED:
		tls_failed(up, tls_failure(up->src.conn.tls));
		break;
	}
}

/* The handshake gets --connect-timeout of its own. */
static void
start_tls(struct upstream *up)
{
	const char *why = NULL;
	struct tls_session *s = tls_connect(up->ctx->tls, up->src.conn.fd, up->setup->host_name,
	                                    up->key, &why);

	if (!s) {
		tls_failed(up, why);
		return;
	}
	tls_attach(&up->src.conn, s);
	set_state(up, UPSTREAM_HANDSHAKING);
	ev_timer_stop(up->ctx->loop, &up->setup->timer);
	ev_timer_set(&up->setup->timer, up->ctx->cfg->connect_timeout, 0.);
	ev_timer_start(up->ctx->loop, &up->setup->timer);
	handshake_step(up);
}

/* The bytes to the origin flow: TLS first if it is https, else ready. */
static void
path_open(struct upstream *up)
{
	if (up->tls) {
		start_tls(up);
		return;
	}
	end_setup(up);
	set_state(up, UPSTREAM_BUSY);
	up->ctx->ops->ready(up);
}

/* ---- through a parent ----------------------------------------------------- */

static void
parent_answered(struct parent_handshake *h, enum parent_outcome outcome, int status,
                const char *why)
{
	struct upstream *up = container_of(h, struct upstream_setup, handshake)->up;
	static struct log_limit failures = LOG_LIMIT(1);
	char text[400];

	up->parent->counts.outcomes[outcome]++;
	if (outcome == PARENT_OPEN) {
		log_debug("upstream %s fd %d: path open through %s", up->key, up->src.conn.fd,
		          up->parent->label);
		path_open(up);
		return;
	}
	/* Copied: the words live in the handshake, freed with the setup. */
	snprintf(text, sizeof(text), "%s", why);
	kp_stats.upstream_connect_failures++;
	kp_stats.errors[outcome == PARENT_TIMEOUT ? KP_ERR_TIMEOUT : KP_ERR_CONNECT]++;
	log_limited(&failures, KP_LOG_INFO, "upstream %s: %s", up->key, text);
	up->ctx->ops->failed(up, status, text);
}

/* Connected to the parent: it is asked for a path to the origin, within --connect-timeout. */
static void
start_parenting(struct upstream *up)
{
	struct upstream_setup *st = up->setup;

	set_state(up, UPSTREAM_PARENTING);
	ev_timer_stop(up->ctx->loop, &st->timer);
	parent_handshake_start(&st->handshake, up->ctx->loop, up->src.conn.fd, &up->parent->hop,
	                       st->host_name, up->port,
	                       st->has_origin_addr ? (const struct sockaddr *)&st->origin_addr : NULL,
	                       up->ctx->cfg->connect_timeout, parent_answered);
}

/*
 * The first handshake to finish wins. The others are closed: a request
 * that would want a second connection has its own connect in flight.
 */
static void
won(struct upstream *up, struct connect_attempt *a)
{
	char addr[64];
	int fd = a->fd;

	ev_io_stop(up->ctx->loop, &a->wio);
	a->fd = -1;
	up->setup->attempts_open--;
	close_attempts(up);
	conn_set_fd(&up->src.conn, fd);
	log_debug("upstream %s fd %d: connected to %s", up->key, fd,
	          net_addr_text(&up->setup->addrs.addr[a->addr].sa, addr, sizeof(addr)));
	if (up->parent) {
		up->parent->counts.connects++;
		up->parent->counts.rtt = conn_path_figures(&up->src.conn).rtt;
		if (!up->forward) {
			start_parenting(up);
			return;
		}
	}
	path_open(up);
}

/* When the connect timer should fire next: a stagger or a deadline. */
static void
arm_connect_timer(struct upstream *up)
{
	struct upstream_setup *st = up->setup;
	ev_tstamp at = 0;

	if (st->next_addr < st->addrs.count && st->attempts_open > 0 &&
	    st->attempts_open < UPSTREAM_MAX_ATTEMPTS)
		at = st->next_attempt_at;
	for (unsigned i = 0; i < UPSTREAM_MAX_ATTEMPTS; i++) {
		const struct connect_attempt *a = &st->attempts[i];

		if (a->fd >= 0 && (at == 0 || a->deadline < at))
			at = a->deadline;
	}
	ev_timer_stop(up->ctx->loop, &st->timer);
	if (at == 0)
		return;
	at -= ev_now(up->ctx->loop);
	ev_timer_set(&st->timer, at > 0 ? at : 0., 0.);
	ev_timer_start(up->ctx->loop, &st->timer);
}

/* An attempt ended without a connection; the next address starts at once. */
static void
attempt_failed(struct upstream *up, struct connect_attempt *a, int err)
{
	char addr[64];

	up->setup->last_error = err;
	log_debug("upstream %s: connect %s: %s", up->key,
	          net_addr_text(&up->setup->addrs.addr[a->addr].sa, addr, sizeof(addr)),
	          strerror(err));
	close_attempt(up, a);
	up->setup->next_attempt_at = ev_now(up->ctx->loop);
	start_attempts(up);
}

static void
attempt_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct connect_attempt *a = container_of(w, struct connect_attempt, wio);

	(void)loop;
	(void)revents;
	if (net_connect_finish(a->fd) < 0)
		attempt_failed(a->up, a, errno);
	else
		won(a->up, a);
}

static struct connect_attempt *
free_attempt_slot(struct upstream *up)
{
	for (unsigned i = 0; i < UPSTREAM_MAX_ATTEMPTS; i++)
		if (up->setup->attempts[i].fd < 0)
			return &up->setup->attempts[i];
	return NULL;
}

/* Starts one attempt at the next address; false when none could start. */
static bool
start_one(struct upstream *up, struct connect_attempt *a)
{
	struct upstream_setup *st = up->setup;

	while (st->next_addr < st->addrs.count) {
		unsigned i = st->next_addr++;
		union net_addr *sa = &st->addrs.addr[i];
		socklen_t len = sa->sa.sa_family == AF_INET6 ? sizeof(sa->in6) : sizeof(sa->in);
		char addr[64];

		uint16_t port = up->parent ? up->parent->where.port : up->port;

		if (sa->sa.sa_family == AF_INET6)
			sa->in6.sin6_port = htons(port);
		else
			sa->in.sin_port = htons(port);
		/* The parent is the user's own choice: the rules are for where it is asked to go. */
		if (!up->parent && !policy_dest_allowed(up->ctx->cfg, up->ctx->own->addr, up->ctx->own->count,
		                         up->restricted, &sa->sa)) {
			static struct log_limit refusals = LOG_LIMIT(1);

			log_limited(&refusals, KP_LOG_INFO, "upstream %s: %s refused by the "
			            "destination rules", up->key, net_addr_text(&sa->sa, addr, sizeof(addr)));
			st->refused++;
			st->last_error = EACCES;
			continue;
		}
		a->fd = net_connect_start(&sa->sa, len, up->ctx->cfg);
		/* Out of descriptors: an idle connection gives way, once per attempt. */
		if (a->fd < 0 && (errno == EMFILE || errno == ENFILE) &&
		    up->ctx->ops->need_descriptor(up))
			a->fd = net_connect_start(&sa->sa, len, up->ctx->cfg);
		if (a->fd < 0) {
			st->last_error = errno;
			log_debug("upstream %s: connect %s: %s", up->key,
			          net_addr_text(&sa->sa, addr, sizeof(addr)), strerror(errno));
			continue;
		}
		kp_stats.upstream_connects++;
		a->addr = i;
		a->up = up;
		a->deadline = ev_now(up->ctx->loop) + up->ctx->cfg->connect_timeout;
		ev_io_init(&a->wio, attempt_cb, a->fd, EV_WRITE);
		ev_io_start(up->ctx->loop, &a->wio);
		st->attempts_open++;
		st->next_attempt_at = ev_now(up->ctx->loop) + ATTEMPT_DELAY;
		return true;
	}
	return false;
}

/*
 * Starts the next address if it is due (nothing in flight, or the previous
 * one has had its 250 ms), then sets the timer for what comes next; fails
 * the connection when every address has been tried and nothing is left in
 * flight.
 */
static void
start_attempts(struct upstream *up)
{
	struct upstream_setup *st = up->setup;
	struct connect_attempt *a;

	if (st->next_addr < st->addrs.count &&
	    (st->attempts_open == 0 || ev_now(up->ctx->loop) >= st->next_attempt_at - 0.001) &&
	    (a = free_attempt_slot(up)) != NULL)
		start_one(up, a);
	if (st->attempts_open == 0) {
		fail(up);
		return;
	}
	set_state(up, UPSTREAM_CONNECTING);
	arm_connect_timer(up);
}

static void
connect_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct upstream *up = container_of(w, struct upstream_setup, timer)->up;
	ev_tstamp now = ev_now(loop);

	(void)revents;
	if (up->state == UPSTREAM_HANDSHAKING) {
		kp_stats.upstream_connect_failures++;
		kp_stats.errors[KP_ERR_TIMEOUT]++;
		up->ctx->ops->failed(up, 504, "timed out in the TLS handshake with the origin");
		return;
	}
	for (unsigned i = 0; i < UPSTREAM_MAX_ATTEMPTS; i++) {
		struct connect_attempt *a = &up->setup->attempts[i];

		if (a->fd >= 0 && a->deadline <= now + 0.001) {
			char addr[64];

			log_debug("upstream %s: connect %s timed out", up->key,
			          net_addr_text(&up->setup->addrs.addr[a->addr].sa, addr,
			                        sizeof(addr)));
			up->setup->last_error = ETIMEDOUT;
			close_attempt(up, a);
		}
	}
	start_attempts(up);
}

static void look_up(struct upstream *up, const char *name);

/*
 * socks5://: the origin's address, found here, is what the parent is
 * asked for: the first the destination rules allow. Then the parent's
 * own name is looked up.
 */
static void
origin_named(struct upstream *up, const struct dns_addrs *addrs)
{
	struct upstream_setup *st = up->setup;

	st->naming_origin = false;
	for (unsigned i = 0; i < addrs->count && !st->has_origin_addr; i++) {
		const struct sockaddr *sa = &addrs->addr[i].sa;

		if (!policy_dest_allowed(up->ctx->cfg, up->ctx->own->addr, up->ctx->own->count,
		                         up->restricted, sa))
			continue;
		memcpy(&st->origin_addr, sa,
		       sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
		                                 : sizeof(struct sockaddr_in));
		st->has_origin_addr = true;
	}
	if (!st->has_origin_addr) {
		kp_stats.upstream_connect_failures++;
		up->ctx->ops->failed(up, 403,
		                     "the destination is not reachable from your network "
		                     "through this proxy (see --allow-dest)");
		return;
	}
	look_up(up, up->parent->where.host);
}

static void
resolved(struct dns_waiter *w, const struct dns_addrs *addrs, int error)
{
	struct upstream *up = container_of(w, struct upstream_setup, dns)->up;
	char why[400];

	if (error && up->parent && !up->setup->naming_origin) {
		snprintf(why, sizeof(why), "cannot resolve parent %s: %s", up->parent->label,
		         dns_error_text(error));
		kp_stats.upstream_connect_failures++;
		kp_stats.errors[KP_ERR_UNRESOLVED]++;
		up->parent->counts.unreachable++;
		up->ctx->ops->failed(up, 502, why);
		return;
	}
	if (error) {
		snprintf(why, sizeof(why), "cannot resolve %s: %s", up->setup->host_name,
		         dns_error_text(error));
		kp_stats.upstream_connect_failures++;
		kp_stats.errors[KP_ERR_UNRESOLVED]++;
		up->ctx->ops->failed(up, 502, why);
		return;
	}
	if (up->setup->naming_origin) {
		origin_named(up, addrs);
		return;
	}
	up->setup->addrs = *addrs;
	upstream_order_addrs(&up->setup->addrs);
	up->setup->next_addr = 0;
	start_attempts(up);
}

/* ---- I/O ------------------------------------------------------------------ */

static void
io_event(struct conn *c, int revents)
{
	struct upstream *up = container_of(c, struct upstream, src.conn);

	switch (up->state) {
	case UPSTREAM_BUSY:
		if (up->src.reader)
			up->src.reader->event(up->src.reader, revents);
		break;
	case UPSTREAM_IDLE:
		/* TLS: a session ticket arriving late is housekeeping, not a close. */
		if (conn_idle_alive(c))
			break;
		log_debug("upstream %s fd %d: closed by the origin while idle", up->key, c->fd);
		kp_stats.upstream_stale++;
		upstream_close(up);
		break;
	case UPSTREAM_HANDSHAKING:
		handshake_step(up);
		break;
	case UPSTREAM_RESOLVING:
	case UPSTREAM_CONNECTING:
	case UPSTREAM_PARENTING:   /* the handshake watches the socket itself */
	case UPSTREAM_CLOSED:
		break;
	}
}

int
upstream_init(struct upstream *up, const struct upstream_context *ctx,
              const struct upstream_target *t)
{
	size_t len = strlen(t->host) + 1;
	struct upstream_setup *st = calloc(1, sizeof(*st) + len);

	memset(up, 0, sizeof(*up));
	if (!st)
		return -1;
	up->ctx = ctx;
	up->port = t->port;
	up->tls = t->tls;
	up->restricted = t->restricted;
	up->key = t->key;
	up->parent = t->parent;
	up->forward = t->forward;
	up->src.keep_alive_hint = -1;
	conn_init(&up->src.conn, ctx->loop, -1, &conn_tcp_ops, io_event);
	st->up = up;
	memcpy(st->host_name, t->host, len);
	for (unsigned i = 0; i < UPSTREAM_MAX_ATTEMPTS; i++)
		st->attempts[i].fd = -1;
	ev_init(&st->timer, connect_timer_cb);
	st->dns.done = resolved;
	up->setup = st;
	up->state = UPSTREAM_RESOLVING;
	return 0;
}

/* Looks name up; the answer goes to resolved(), perhaps before this returns. */
static void
look_up(struct upstream *up, const char *name)
{
	struct upstream_setup *st = up->setup;
	struct dns_addrs found;
	int error = 0;

	switch (dns_lookup(name, &found, &error, &st->dns)) {
	case DNS_DONE:
		resolved(&st->dns, &found, 0);
		break;
	case DNS_FAILED:
		resolved(&st->dns, NULL, error);
		break;
	case DNS_PENDING:
		break;
	}
}

void
upstream_connect(struct upstream *up)
{
	/*
	 * Through a parent the parent's name is looked up, not the origin's:
	 * socks5h:// and HTTP parents resolve it themselves, and no query for
	 * it leaves this machine. socks5:// wants the origin's address first.
	 */
	if (up->parent && up->parent->hop.kind == PARENT_SOCKS5 && !up->forward) {
		up->setup->naming_origin = true;
		look_up(up, up->setup->host_name);
		return;
	}
	look_up(up, up->parent ? up->parent->where.host : up->setup->host_name);
}
