#include "kp/parent.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "kp/hostpattern.h"
#include "kp/net.h"
#include "kp/parent_wire.h"
#include "kp/stats.h"

/*
 * The label, the handshake's view and an HTTP parent's field, once the
 * credentials are known. False with why when Basic cannot carry them.
 */
static bool
finish(struct parent *p, const char **why)
{
	const struct parent_url *w = &p->where;
	const char *scheme = w->kind == PARENT_SOCKS5H ? "socks5h"
	                     : w->kind == PARENT_SOCKS5 ? "socks5"
	                                                 : "http";
	bool v6 = strchr(w->host, ':') != NULL;

	snprintf(p->label, sizeof(p->label), "%s://%s%s%s:%u", scheme, v6 ? "[" : "", w->host,
	         v6 ? "]" : "", w->port);
	p->hop.kind = w->kind;
	p->hop.label = p->label;
	p->hop.user = w->user[0] ? w->user : NULL;
	p->hop.password = w->user[0] ? w->password : NULL;
	p->authorization[0] = '\0';
	if (w->kind == PARENT_HTTP && w->user[0] &&
	    parent_http_authorization(p->authorization, sizeof(p->authorization), w->user,
	                              w->password, why) < 0)
		return false;
	return true;
}

static bool
same_place(const struct parent_url *a, const struct parent_url *b)
{
	return a->kind == b->kind && a->port == b->port && strcasecmp(a->host, b->host) == 0;
}

/*
 * Credentials for parents named without them, from path: one parent URL
 * with credentials a line (# comments). A parent takes those of the line
 * naming its scheme, host and port.
 */
static bool
read_credentials(struct parents *ps, const char *path, char *why, size_t why_len)
{
	FILE *f = fopen(path, "r");
	struct stat st;
	char line[1024];
	unsigned lineno = 0;

	if (!f) {
		snprintf(why, why_len, "cannot read --parent-credentials %s: %s", path,
		         strerror(errno));
		return false;
	}
	if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077))
		fprintf(stderr, "keepalive-proxy: warning: --parent-credentials %s can be read by "
		                "others than its owner (chmod 600 it)\n", path);
	while (fgets(line, sizeof(line), f)) {
		struct parent_url cred;
		const char *bad;
		char *s = line;

		lineno++;
		s[strcspn(s, "\r\n")] = '\0';
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s || *s == '#')
			continue;
		if ((bad = parent_url_parse(s, &cred)) != NULL || !cred.user[0]) {
			snprintf(why, why_len, "--parent-credentials %s line %u: %s", path, lineno,
			         bad ? bad : "no user:password@ in it");
			fclose(f);
			return false;
		}
		for (unsigned i = 0; i < ps->count; i++) {
			struct parent_url *w = &ps->list[i].where;

			if (!w->user[0] && same_place(w, &cred)) {
				memcpy(w->user, cred.user, sizeof(w->user));
				memcpy(w->password, cred.password, sizeof(w->password));
			}
		}
	}
	fclose(f);
	return true;
}

/* The parent url names, added once however often it is named. NULL: no room, or malformed. */
static struct parent *
add_parent(struct parents *ps, const char *url, char *why, size_t why_len)
{
	struct parent_url w;
	const char *bad = parent_url_parse(url, &w);

	if (bad) {
		snprintf(why, why_len, "--parent %s", bad);
		return NULL;
	}
	for (unsigned i = 0; i < ps->count; i++) {
		const struct parent_url *had = &ps->list[i].where;

		if (same_place(had, &w) && strcmp(had->user, w.user) == 0 &&
		    strcmp(had->password, w.password) == 0)
			return &ps->list[i];
	}
	if (ps->count == PARENT_MAX) {
		snprintf(why, why_len, "more than %d different parents", PARENT_MAX);
		return NULL;
	}
	memset(&ps->list[ps->count], 0, sizeof(ps->list[0]));
	ps->list[ps->count].where = w;
	ps->list[ps->count].id = ps->count;
	return &ps->list[ps->count++];
}

bool
parents_init(struct parents *ps, const struct kp_config *cfg, char *why, size_t why_len)
{
	memset(ps, 0, sizeof(*ps));
	if (cfg->parent_url && !(ps->fallback = add_parent(ps, cfg->parent_url, why, why_len)))
		return false;
	for (unsigned i = 0; i < cfg->nparent_rules; i++) {
		struct parent_rule *r = &ps->rules[ps->nrules++];

		r->pattern = cfg->parent_rules[i].pattern;
		r->parent = NULL;
		r->by_address = cidr_parse(r->pattern, &r->range) == 0;
		if (cfg->parent_rules[i].url &&
		    !(r->parent = add_parent(ps, cfg->parent_rules[i].url, why, why_len)))
			return false;
	}
	if (cfg->parent_credentials && !read_credentials(ps, cfg->parent_credentials, why, why_len))
		return false;
	for (unsigned i = 0; i < ps->count; i++) {
		const char *bad = NULL;

		if (!finish(&ps->list[i], &bad)) {
			snprintf(why, why_len, "--parent %s: %s", ps->list[i].label, bad);
			return false;
		}
	}
	return true;
}

struct parent *
parents_route(struct parents *ps, const char *host)
{
	union net_addr a;
	bool address;

	if (!ps || !ps->nrules)
		return ps ? ps->fallback : NULL;
	if (ps->last_host[0] && strcmp(ps->last_host, host) == 0)
		return ps->last_route;
	/* The host's address once, not once per rule: the rules were read at the start. */
	address = net_literal(host, &a);
	ps->last_route = ps->fallback;
	for (unsigned i = 0; i < ps->nrules; i++) {
		const struct parent_rule *r = &ps->rules[i];

		if (r->by_address ? address && cidr_match(&r->range, &a.sa)
		                  : !address && host_name_pattern_match(r->pattern, host)) {
			ps->last_route = r->parent;
			break;
		}
	}
	snprintf(ps->last_host, sizeof(ps->last_host), "%s", host);
	return ps->last_route;
}

/* One counter family, a line per parent. */
static void
prometheus_family(const struct parents *ps, struct stats_text *t, const char *name,
                  const char *help, size_t offset)
{
	stats_printf(t, "# HELP keepalive_proxy_%s %s\n# TYPE keepalive_proxy_%s counter\n", name,
	             help, name);
	for (unsigned i = 0; i < ps->count; i++)
		stats_printf(t, "keepalive_proxy_%s{parent=\"%s\"} %" PRIu64 "\n", name,
		             ps->list[i].label,
		             *(const uint64_t *)((const char *)&ps->list[i].counts + offset));
}

void
parents_prometheus(const struct parents *ps, struct stats_text *t)
{
	if (!ps || !ps->count)
		return;
	prometheus_family(ps, t, "parent_connects_total", "Connections opened to a parent proxy.",
	                  offsetof(struct parent_counts, connects));
	prometheus_family(ps, t, "parent_unreachable_total",
	                  "Connects to a parent proxy that failed (down, refused, timed out).",
	                  offsetof(struct parent_counts, unreachable));
	prometheus_family(ps, t, "parent_requests_total", "Requests sent through a parent proxy.",
	                  offsetof(struct parent_counts, requests));
	prometheus_family(ps, t, "parent_reused_total",
	                  "Requests through a parent on a connection (session) already open.",
	                  offsetof(struct parent_counts, reused));
	stats_printf(t, "# HELP keepalive_proxy_parent_handshakes_total Paths to origins asked of "
	                "a parent proxy, by how they ended.\n"
	                "# TYPE keepalive_proxy_parent_handshakes_total counter\n");
	for (unsigned i = 0; i < ps->count; i++)
		for (unsigned o = 0; o < PARENT_OUTCOMES; o++)
			stats_printf(t,
			             "keepalive_proxy_parent_handshakes_total{parent=\"%s\",outcome=\"%s\"} "
			             "%" PRIu64 "\n",
			             ps->list[i].label, parent_outcome_name((enum parent_outcome)o), ps->list[i].counts.outcomes[o]);
	stats_printf(t, "# HELP keepalive_proxy_parent_rtt_seconds TCP round trip to a parent "
	                "proxy at the last connect.\n"
	                "# TYPE keepalive_proxy_parent_rtt_seconds gauge\n");
	for (unsigned i = 0; i < ps->count; i++)
		stats_printf(t, "keepalive_proxy_parent_rtt_seconds{parent=\"%s\"} %.6f\n",
		             ps->list[i].label, ps->list[i].counts.rtt);
}

void
parents_json(const struct parents *ps, struct stats_text *t)
{
	stats_printf(t, "[");
	for (unsigned i = 0; ps && i < ps->count; i++) {
		const struct parent_counts *c = &ps->list[i].counts;

		stats_printf(t,
		             "%s{\"parent\": \"%s\", \"connects\": %" PRIu64 ", \"unreachable\": %" PRIu64
		             ", \"requests\": %" PRIu64 ", \"reused\": %" PRIu64 ", \"rtt\": %.6f, "
		             "\"handshakes\": {",
		             i ? ", " : "", ps->list[i].label, c->connects, c->unreachable,
		             c->requests, c->reused, c->rtt);
		for (unsigned o = 0; o < PARENT_OUTCOMES; o++)
			stats_printf(t, "%s\"%s\": %" PRIu64, o ? ", " : "", parent_outcome_name((enum parent_outcome)o),
			             c->outcomes[o]);
		stats_printf(t, "}}");
	}
	stats_printf(t, "]");
}
