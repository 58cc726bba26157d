#include "kp/stats_page.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kp/cidr.h"
#include "kp/config.h"
#include "kp/dispatch.h"
#include "kp/dns.h"
#include "kp/evglue.h"
#include "kp/history.h"
#include "kp/hoststats.h"
#include "kp/http.h"
#include "kp/log.h"
#include "kp/net.h"
#include "kp/stats.h"
#if KP_DASHBOARD
#include "kp/dashboard.h"
#else
#define KP_DASHBOARD 0
#endif

/* A scraper sends one short request at once; anything slower is dropped. */
#define PAGE_TIMEOUT 5.0
#define PAGE_REQUEST_MAX 2048

struct page_conn {
	struct stats_page *sp;
	int fd;
	ev_io io;
	ev_timer timer;
	char in[PAGE_REQUEST_MAX];
	size_t in_len;
	struct stats_text out;         /* the whole response once the request is in */
	size_t sent;
	union dns_addr peer;
	struct kp_list link;           /* in sp->conns */
};

static void
page_close(struct page_conn *pc)
{
	struct ev_loop *loop = pc->sp->env->loop;

	ev_io_stop(loop, &pc->io);
	ev_timer_stop(loop, &pc->timer);
	net_close(&pc->fd);
	kp_list_unlink(&pc->link);
	free(pc->out.data);
	free(pc);
}

/* Status line and fields, then the body: one buffer, sent as it drains. */
static void
respond(struct page_conn *pc, int status, const char *type, struct stats_text *body)
{
	struct stats_text *o = &pc->out;
	size_t body_len = body && body->data ? body->len : 0;
	char head[256];
	int n = snprintf(head, sizeof(head),
	                 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
	                 "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
	                 status, http_status_reason(status), type, body_len);

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
	stats_printf(t, "}\n");
}

static void
answer(struct page_conn *pc)
{
	const struct kp_config *cfg = pc->sp->env->cfg;
	struct stats_text body = {0};
	char *eol = memchr(pc->in, '\r', pc->in_len);
	size_t line = eol ? (size_t)(eol - pc->in) : pc->in_len;

	if (cfg->nallow && !cidr_any_match(cfg->allow, cfg->nallow, &pc->peer.sa)) {
		respond(pc, 403, "text/plain", NULL);
	} else if (line > 4 && strncmp(pc->in, "GET ", 4) == 0 &&
	           (strncmp(pc->in + 4, "/metrics ", 9) == 0 ||
	            strncmp(pc->in + 4, "/metrics?", 9) == 0)) {
		stats_render_prometheus(&body);
		respond(pc, body.failed ? 503 : 200, "text/plain; version=0.0.4", &body);
	} else if (line > 4 && strncmp(pc->in, "GET ", 4) == 0 &&
	           strncmp(pc->in + 4, "/stats ", 7) == 0) {
		render_stats(pc->sp, &body);
		respond(pc, body.failed ? 503 : 200, "application/json", &body);
#if KP_DASHBOARD
	} else if (line > 4 && strncmp(pc->in, "GET ", 4) == 0 &&
	           (strncmp(pc->in + 4, "/ ", 2) == 0 || strncmp(pc->in + 4, "/index.html ", 12) == 0)) {
		struct stats_text page = {.data = (char *)dashboard_page,
		                          .len = dashboard_page_len,
		                          .cap = dashboard_page_len};

		respond(pc, 200, "text/html; charset=utf-8", &page);
#endif
	} else {
		respond(pc, 404, "text/plain", NULL);
	}
	free(body.data);
}

static void
page_io(struct ev_loop *loop, ev_io *w, int revents)
{
	struct page_conn *pc = container_of(w, struct page_conn, io);
	ssize_t n;

	(void)revents;
	if (!pc->out.data) {
		n = recv(pc->fd, pc->in + pc->in_len, sizeof(pc->in) - 1 - pc->in_len, 0);
		if (n <= 0) {
			if (n == 0 || !net_would_block())
				page_close(pc);
			return;
		}
		pc->in_len += (size_t)n;
		pc->in[pc->in_len] = '\0';
		if (!strstr(pc->in, "\r\n\r\n")) {
			if (pc->in_len == sizeof(pc->in) - 1)
				page_close(pc);
			return;
		}
		answer(pc);
		if (pc->out.failed) {
			page_close(pc);
			return;
		}
		ev_io_stop(loop, &pc->io);
		ev_io_set(&pc->io, pc->fd, EV_WRITE);
		ev_io_start(loop, &pc->io);
	}
	n = send(pc->fd, pc->out.data + pc->sent, pc->out.len - pc->sent, MSG_NOSIGNAL);
	if (n < 0 && net_would_block())
		return;
	if (n <= 0 || (pc->sent += (size_t)n) == pc->out.len)
		page_close(pc);
}

static void
page_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	page_close(container_of(w, struct page_conn, timer));
}

static void
page_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct stats_page *sp = container_of(w, struct stats_page, accept_watcher);
	static struct log_limit accept_log = LOG_LIMIT(10);

	(void)revents;
	for (int i = 0; i < 16; i++) {
		union dns_addr peer;
		socklen_t len = sizeof(peer);
		int fd = accept4(sp->listen_fd, &peer.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct page_conn *pc;

		if (fd < 0) {
			if (!net_would_block() && errno != ECONNABORTED)
				log_limited(&accept_log, KP_LOG_WARN, "stats page: accept: %s",
				            strerror(errno));
			return;
		}
		if (!(pc = calloc(1, sizeof(*pc)))) {
			close(fd);
			return;
		}
		pc->sp = sp;
		pc->fd = fd;
		pc->peer = peer;
		ev_io_init(&pc->io, page_io, fd, EV_READ);
		ev_io_start(loop, &pc->io);
		ev_timer_init(&pc->timer, page_timeout, PAGE_TIMEOUT, 0.);
		ev_timer_start(loop, &pc->timer);
		kp_list_insert_head(&sp->conns, &pc->link);
	}
}

int
stats_page_init(struct stats_page *sp, const struct proxy_env *env)
{
	const struct kp_config *cfg = env->cfg;

	memset(sp, 0, sizeof(*sp));
	kp_list_init(&sp->conns);
	sp->env = env;
	sp->listen_fd = -1;
	if (!cfg->stats_addr)
		return 0;
	sp->listen_fd = net_listen(cfg->stats_addr, cfg->stats_port, 64, cfg);
	if (sp->listen_fd < 0) {
		log_error("--stats-listen %s port %u: %s", cfg->stats_addr, cfg->stats_port,
		          strerror(errno));
		return -1;
	}
	/* Allocated only here: a daemon without the page keeps no samples. */
	if (!(sp->history = malloc(sizeof(*sp->history)))) {
		log_error("out of memory");
		net_close(&sp->listen_fd);
		return -1;
	}
	history_start(sp->history, env->clock, cfg->stats_interval);
	ev_io_init(&sp->accept_watcher, page_accept, sp->listen_fd, EV_READ);
	ev_io_start(env->loop, &sp->accept_watcher);
	log_info("stats page on %s port %u: %s/metrics, /stats", cfg->stats_addr, cfg->stats_port,
	         KP_DASHBOARD ? "/ (dashboard), " : "");
	return 0;
}

void
stats_page_shutdown(struct stats_page *sp)
{
	struct page_conn *pc;

	if (sp->listen_fd >= 0) {
		ev_io_stop(sp->env->loop, &sp->accept_watcher);
		net_close(&sp->listen_fd);
	}
	if (sp->history) {
		history_stop(sp->history);
		free(sp->history);
		sp->history = NULL;
	}
	while ((pc = KP_LIST_FIRST(&sp->conns, struct page_conn, link)) != NULL)
		page_close(pc);
}
