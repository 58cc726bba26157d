#include "kp/stats_page.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kp/auth.h"
#include "kp/config.h"
#include "kp/dispatch.h"
#include "kp/evglue.h"
#include "kp/history.h"
#include "kp/hoststats.h"
#include "kp/http.h"
#include "kp/listener.h"
#include "kp/log.h"
#include "kp/net.h"
#include "kp/parent.h"
#include "kp/stats.h"
#if KP_DASHBOARD
#include "kp/dashboard.h"
#else
#define KP_DASHBOARD 0
#endif

/* A scraper sends one short request at once; anything slower is dropped. */
#define PAGE_TIMEOUT 5.0
#define PAGE_REQUEST_MAX 2048
/*
 * Connections open at once: scrapers and a dashboard take one or two each;
 * past this, peers wait in the kernel's backlog rather than take
 * descriptors the proxy's clients need.
 */
#define PAGE_CONNS_MAX 32
/* The realm of the stats page's challenge: other credentials than a proxy's. */
#define PAGE_REALM AUTH_REALM " stats"

enum page_state {
	PAGE_READING,      /* the request head is on its way */
	PAGE_CHECKING,     /* its credentials' hash is being checked off the loop */
	PAGE_WRITING,      /* the response goes out, then the connection closes */
};

struct page_conn {
	struct stats_page *sp;
	enum page_state state;
	int fd;
	ev_io io;
	ev_timer timer;
	struct auth_waiter waiter;     /* PAGE_CHECKING: told the hash's verdict */
	char in[PAGE_REQUEST_MAX];
	size_t in_len;
	struct http_parser parser;
	struct http_head head;
	struct stats_text out;         /* the whole response once the request is in */
	size_t sent;
	struct sockaddr_storage peer;
	struct kp_list link;           /* in sp->conns */
};

static void
page_close(struct page_conn *pc)
{
	struct stats_page *sp = pc->sp;
	struct ev_loop *loop = sp->env->loop;

	if (pc->state == PAGE_CHECKING)
		auth_cancel(&pc->waiter);
	ev_io_stop(loop, &pc->io);
	ev_timer_stop(loop, &pc->timer);
	net_close(&pc->fd);
	kp_list_unlink(&pc->link);
	free(pc->out.data);
	free(pc);
	sp->nconns--;
	listener_resume(&sp->listener);
}

/* Status line and fields (extra: more field lines, or NULL), then the body, in one buffer. */
static void
respond(struct page_conn *pc, int status, const char *type, const char *extra,
        struct stats_text *body)
{
	struct stats_text *o = &pc->out;
	size_t body_len = body && body->data ? body->len : 0;
	char head[384];
	int n = snprintf(head, sizeof(head),
	                 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
	                 "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
	                 status, http_status_reason(status), type, body_len, extra ? extra : "");

	o->cap = (size_t)n + body_len;
	if (!(o->data = malloc(o->cap))) {
		o->failed = true;
		return;
	}
	memcpy(o->data, head, (size_t)n);
	if (body_len)
		memcpy(o->data + n, body->data, body_len);
	o->len = o->cap;
}

/* A response that is a short text of the page's own: why a request was not answered. */
static void
respond_text(struct page_conn *pc, int status, const char *extra, const char *why)
{
	struct stats_text body = {.data = (char *)why, .len = strlen(why), .cap = strlen(why)};

	respond(pc, status, "text/plain", extra, &body);
}

static void
idle_host(const char *key, size_t idle, void *arg)
{
	stats_json_key(arg, key);
	stats_printf(arg, "%zu", idle);
}

/* The hosts with idle connections whose counters the table does not hold. */
struct uncounted {
	struct stats_text *t;
	const struct hoststats *hs;
};

static void
idle_uncounted_host(const char *key, size_t idle, void *arg)
{
	struct uncounted *u = arg;

	if (!hoststats_find(u->hs, key))
		hoststats_json(u->t, key, idle, NULL);
}

/*
 * /stats: the counters, then what they do not know: idle connections per
 * host (dispatch's), counters per host (the env's table) with them, and
 * the samples for the chart.
 */
static void
render_stats(const struct stats_page *sp, struct stats_text *t)
{
	struct dispatch *d = sp->env->dispatch;
	const struct hoststats *hs = sp->env->hosts;

	stats_render_json(t);
	stats_printf(t, ", \"idle_per_host\": {");
	dispatch_each_idle_host(d, idle_host, t);
	stats_printf(t, "}, \"hosts\": {");
	if (hs) {
		struct uncounted u = {t, hs};

		for (unsigned i = 0; i < hs->used; i++)
			hoststats_json(t, hs->slot[i].key, dispatch_idle_count(d, hs->slot[i].key),
			               &hs->slot[i].counts);
		dispatch_each_idle_host(d, idle_uncounted_host, &u);
	}
	stats_printf(t, "}, \"hosts_forgotten\": %" PRIu64, hs ? hs->forgotten : 0);
	if (sp->history) {
		stats_printf(t, ", \"history\": ");
		history_json(sp->history, t, clock_now(sp->env->clock));
	}
	stats_printf(t, ", \"parents\": ");
	parents_json(sp->env->parents, t);
	stats_printf(t, "}\n");
}

/* The request line's target, if it is one of the page's: the path, without a query. */
static bool
target_is(const struct page_conn *pc, const char *path)
{
	const char *url = pc->in + pc->head.url.off;
	size_t n = strlen(path), len = pc->head.url.len;

	return len >= n && memcmp(url, path, n) == 0 && (len == n || url[n] == '?');
}

/* The page's answer to a request that may have it. */
static void
answer(struct page_conn *pc)
{
	struct stats_text body = {0};

	if (pc->head.method != HTTP_GET) {
		respond_text(pc, 405, "Allow: GET\r\n", "GET only\n");
	} else if (target_is(pc, "/metrics")) {
		stats_render_prometheus(&body);
		parents_prometheus(pc->sp->env->parents, &body);
		respond(pc, body.failed ? 503 : 200, "text/plain; version=0.0.4", NULL, &body);
	} else if (target_is(pc, "/stats") && pc->head.url.len == 6) {
		render_stats(pc->sp, &body);
		respond(pc, body.failed ? 503 : 200, "application/json", NULL, &body);
#if KP_DASHBOARD
	} else if (target_is(pc, "/") && (pc->head.url.len == 1 || target_is(pc, "/index.html"))) {
		struct stats_text page = {.data = (char *)dashboard_page,
		                          .len = dashboard_page_len,
		                          .cap = dashboard_page_len};

		respond(pc, 200, "text/html; charset=utf-8", NULL, &page);
#endif
	} else {
		respond(pc, 404, "text/plain", NULL, NULL);
	}
	free(body.data);
}

/* The response is ready: from now on the connection only writes. */
static void
start_writing(struct page_conn *pc)
{
	struct ev_loop *loop = pc->sp->env->loop;

	if (pc->out.failed) {
		page_close(pc);
		return;
	}
	pc->state = PAGE_WRITING;
	ev_io_stop(loop, &pc->io);
	ev_io_set(&pc->io, pc->fd, EV_WRITE);
	ev_io_start(loop, &pc->io);
}

/*
 * Is host (the Host field's value) an IP literal or localhost, with a port
 * or without? A name is what a web page that rebinds its own name to
 * 127.0.0.1 sends (DNS rebinding): the page must not answer it, or any page
 * in a browser on this machine could read the hosts its users visit.
 */
static bool
host_is_local(const char *host, size_t len)
{
	char name[64];
	const char *end = host + len, *colon;
	struct in6_addr a6;
	struct in_addr a4;

	if (len && host[0] == '[') {
		const char *close = memchr(host, ']', len);

		if (!close || (close + 1 != end && close[1] != ':') ||
		    (size_t)(close - host - 1) >= sizeof(name))
			return false;
		memcpy(name, host + 1, (size_t)(close - host - 1));
		name[close - host - 1] = '\0';
		return inet_pton(AF_INET6, name, &a6) == 1;
	}
	colon = memchr(host, ':', len);
	if (colon)
		end = colon;
	if ((size_t)(end - host) >= sizeof(name))
		return false;
	memcpy(name, host, (size_t)(end - host));
	name[end - host] = '\0';
	return inet_pton(AF_INET, name, &a4) == 1 || strcasecmp(name, "localhost") == 0;
}

/* The value of the field named name in the request's head, or NULL. */
static const char *
field(const struct page_conn *pc, const char *name, size_t *len)
{
	for (unsigned i = 0; i < pc->head.nfields; i++) {
		const struct http_field *f = &pc->head.fields[i];

		if (http_span_is(pc->in, f->name, name)) {
			*len = f->value.len;
			return pc->in + f->value.off;
		}
	}
	return NULL;
}

/* The credentials were judged (granted or not), on the loop or off it. */
static void
judged(struct page_conn *pc, enum auth_verdict verdict)
{
	static struct log_limit refused_log = LOG_LIMIT(10);
	char who[64];

	switch (verdict) {
	case AUTH_GRANTED:
		answer(pc);
		break;
	case AUTH_PENDING:
		pc->state = PAGE_CHECKING;
		ev_io_stop(pc->sp->env->loop, &pc->io);
		return;
	case AUTH_REFUSED:
		kp_stats.errors[KP_ERR_UNAUTHORIZED]++;
		log_limited(&refused_log, KP_LOG_INFO, "stats page: %s: 401 credentials needed",
		            net_addr_text((struct sockaddr *)&pc->peer, who, sizeof(who)));
		respond_text(pc, 401, "WWW-Authenticate: Basic realm=\"" PAGE_REALM "\"\r\n",
		             "the stats page needs the credentials of a user in --auth-file\n");
		break;
	case AUTH_LIMITED:
		respond_text(pc, 429, NULL, "too many wrong credentials from this address; try later\n");
		break;
	case AUTH_BUSY:
		respond_text(pc, 503, NULL, "too many credentials waiting to be checked\n");
		break;
	}
	start_writing(pc);
}

static void
authenticated(struct auth_waiter *w, bool granted)
{
	judged(container_of(w, struct page_conn, waiter), granted ? AUTH_GRANTED : AUTH_REFUSED);
}

/*
 * A whole request head came: a Host the page answers to, then, with
 * --auth-file and without --stats-no-auth, a user of the file.
 */
static void
request_in(struct page_conn *pc)
{
	const struct proxy_env *env = pc->sp->env;
	const char *host, *cred;
	size_t host_len = 0, cred_len = 0;

	http_parser_init(&pc->parser, HTTP_REQUEST, sizeof(pc->in), sizeof(pc->in));
	http_parser_start(&pc->parser, &pc->head);
	if (http_parse_head(&pc->parser, pc->in, pc->in_len) != HTTP_PARSE_DONE) {
		respond_text(pc, 400, NULL, "malformed request\n");
		start_writing(pc);
		return;
	}
	host = field(pc, "host", &host_len);
	if (!host || !host_is_local(host, host_len)) {
		respond_text(pc, 421, NULL,
		             "the stats page answers to its address or localhost, not to a name\n");
		start_writing(pc);
		return;
	}
	if (!env->auth || env->cfg->stats_no_auth) {
		judged(pc, AUTH_GRANTED);
		return;
	}
	cred = field(pc, "authorization", &cred_len);
	judged(pc, auth_check(env->auth, cred, cred_len, (struct sockaddr *)&pc->peer,
	                      ev_now(env->loop), &pc->waiter));
}

static void
page_read(struct page_conn *pc)
{
	ssize_t n = recv(pc->fd, pc->in + pc->in_len, sizeof(pc->in) - 1 - pc->in_len, 0);

	if (n <= 0) {
		if (n == 0 || !net_would_block())
			page_close(pc);
		return;
	}
	pc->in_len += (size_t)n;
	pc->in[pc->in_len] = '\0';
	if (strstr(pc->in, "\r\n\r\n"))
		request_in(pc);
	else if (pc->in_len == sizeof(pc->in) - 1)
		page_close(pc);
}

static void
page_write(struct page_conn *pc)
{
	ssize_t n = send(pc->fd, pc->out.data + pc->sent, pc->out.len - pc->sent, MSG_NOSIGNAL);

	if (n < 0 && net_would_block())
		return;
	if (n <= 0 || (pc->sent += (size_t)n) == pc->out.len)
		page_close(pc);
}

static void
page_io(struct ev_loop *loop, ev_io *w, int revents)
{
	struct page_conn *pc = container_of(w, struct page_conn, io);

	(void)loop;
	(void)revents;
	if (pc->state == PAGE_READING)
		page_read(pc);
	else if (pc->state == PAGE_WRITING)
		page_write(pc);
}

static void
page_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	page_close(container_of(w, struct page_conn, timer));
}

static struct stats_page *
page_of(struct listener *l)
{
	return container_of(l, struct stats_page, listener);
}

static bool
has_room(struct listener *l)
{
	return page_of(l)->nconns < PAGE_CONNS_MAX;
}

static void
accepted(struct listener *l, int fd, const struct sockaddr *peer)
{
	struct stats_page *sp = page_of(l);
	struct ev_loop *loop = sp->env->loop;
	struct page_conn *pc = calloc(1, sizeof(*pc));

	if (!pc) {
		close(fd);
		return;
	}
	pc->sp = sp;
	pc->fd = fd;
	pc->state = PAGE_READING;
	memcpy(&pc->peer, peer, peer->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                                                    : sizeof(struct sockaddr_in));
	pc->waiter.loop = loop;
	pc->waiter.done = authenticated;
	ev_io_init(&pc->io, page_io, fd, EV_READ);
	ev_io_start(loop, &pc->io);
	ev_timer_init(&pc->timer, page_timeout, PAGE_TIMEOUT, 0.);
	ev_timer_start(loop, &pc->timer);
	kp_list_insert_head(&sp->conns, &pc->link);
	sp->nconns++;
}

/* The page never takes a descriptor from the proxy's pool: its peers wait instead. */
static const struct listener_ops page_listener_ops = {
	.has_room = has_room,
	.accepted = accepted,
};

int
stats_page_init(struct stats_page *sp, const struct proxy_env *env)
{
	const struct kp_config *cfg = env->cfg;
	int fd;

	memset(sp, 0, sizeof(*sp));
	kp_list_init(&sp->conns);
	sp->env = env;
	sp->listener.fd = -1;
	if (!cfg->stats_addr)
		return 0;
	fd = net_listen(cfg->stats_addr, cfg->stats_port, 64, cfg);
	if (fd < 0) {
		log_error("--stats-listen %s port %u: %s", cfg->stats_addr, cfg->stats_port,
		          strerror(errno));
		return -1;
	}
	/* Allocated only here: a daemon without the page keeps no samples. */
	if (!(sp->history = malloc(sizeof(*sp->history)))) {
		log_error("out of memory");
		close(fd);
		return -1;
	}
	history_start(sp->history, env->clock, cfg->stats_interval);
	listener_start(&sp->listener, env->loop, fd, cfg, &page_listener_ops, "stats page");
	log_info("stats page on %s port %u: %s/metrics, /stats", cfg->stats_addr, cfg->stats_port,
	         KP_DASHBOARD ? "/ (dashboard), " : "");
	return 0;
}

void
stats_page_shutdown(struct stats_page *sp)
{
	struct page_conn *pc;

	listener_close(&sp->listener);
	if (sp->history) {
		history_stop(sp->history);
		free(sp->history);
		sp->history = NULL;
	}
	while ((pc = KP_LIST_FIRST(&sp->conns, struct page_conn, link)) != NULL)
		page_close(pc);
}
