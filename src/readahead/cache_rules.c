#include "kp/cache_rules.h"

#include <string.h>
#include <strings.h>

#include "kp/chars.h"
#include "kp/http_date.h"

/* RFC 9111 1.2.2: larger delta-seconds, and anything that overflows, is this. */
#define DELTA_MAX 2147483648LL

/* A lifetime guessed from Last-Modified goes no further than a day. */
#define HEURISTIC_MAX 86400

static const char *const verdict_names[CACHE_VERDICTS] = {
	[CACHE_SHAREABLE] = "shareable",
	[CACHE_METHOD] = "method",
	[CACHE_STATUS] = "status",
	[CACHE_NO_STORE] = "no_store",
	[CACHE_PRIVATE] = "private",
	[CACHE_NO_CACHE] = "no_cache",
	[CACHE_AUTHORIZATION] = "authorization",
	[CACHE_SET_COOKIE] = "set_cookie",
	[CACHE_VARY_ANY] = "vary_any",
	[CACHE_NO_LIFETIME] = "no_lifetime",
	[CACHE_STALE] = "stale",
};

const char *
cache_verdict_name(enum cache_verdict v)
{
	return (unsigned)v < CACHE_VERDICTS ? verdict_names[v] : "unknown";
}

/* ---- Cache-Control (RFC 9111 5.2) ------------------------------------------ */

/*
 * delta-seconds, bare or quoted (a sender should not quote it, a recipient
 * may meet it quoted): -1 when it is not one.
 */
static int64_t
delta_seconds(const char *p, const char *end)
{
	int64_t v = 0;

	if (end - p >= 2 && *p == '"' && end[-1] == '"') {
		p++;
		end--;
	}
	if (p == end)
		return -1;
	for (; p < end; p++) {
		if (!char_is_digit(*p))
			return -1;
		if (v < DELTA_MAX)
			v = v * 10 + (*p - '0');
	}
	return v < DELTA_MAX ? v : DELTA_MAX;
}

/* A directive with a number: a second, different value, or no number, conflicts. */
static void
set_seconds(struct cache_control *cc, int64_t *slot, const char *v, const char *v_end)
{
	int64_t n = v ? delta_seconds(v, v_end) : -1;

	if (n < 0 || (*slot >= 0 && *slot != n))
		cc->conflicting = true;
	else
		*slot = n;
}

static bool
named(const char *p, size_t n, const char *word)
{
	return strlen(word) == n && strncasecmp(p, word, n) == 0;
}

/* One directive: its name, and its argument (v NULL when it has none). */
static void
directive(struct cache_control *cc, const char *name, size_t n, const char *v, const char *v_end)
{
	if (named(name, n, "no-store"))
		cc->no_store = true;
	else if (named(name, n, "no-cache"))
		cc->no_cache = true;
	else if (named(name, n, "private"))
		cc->private_ = true;
	else if (named(name, n, "public"))
		cc->public_ = true;
	else if (named(name, n, "must-revalidate"))
		cc->must_revalidate = true;
	else if (named(name, n, "proxy-revalidate"))
		cc->proxy_revalidate = true;
	else if (named(name, n, "only-if-cached"))
		cc->only_if_cached = true;
	else if (named(name, n, "max-age"))
		set_seconds(cc, &cc->max_age, v, v_end);
	else if (named(name, n, "s-maxage"))
		set_seconds(cc, &cc->s_maxage, v, v_end);
	else if (named(name, n, "min-fresh"))
		set_seconds(cc, &cc->min_fresh, v, v_end);
	else if (named(name, n, "max-stale") && v)
		set_seconds(cc, &cc->max_stale, v, v_end);
	else if (named(name, n, "max-stale"))
		cc->max_stale = DELTA_MAX;   /* without a number: any staleness will do */
	/* Extensions a cache does not understand are ignored (RFC 9111 5.2.3). */
}

/* The end of a quoted-string that starts at p, or end when it never closes. */
static const char *
quoted_end(const char *p, const char *end)
{
	for (p++; p < end; p++) {
		if (*p == '\\' && p + 1 < end)
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return end;
}

/* Every directive of one field line's value. */
static void
read_line(struct cache_control *cc, const char *p, const char *end)
{
	while (p < end) {
		const char *name, *name_end, *v = NULL, *v_end = NULL;

		while (p < end && (char_is_ows(*p) || *p == ','))
			p++;
		name = p;
		while (p < end && char_is_tchar(*p))
			p++;
		name_end = p;
		if (p < end && *p == '=') {
			v = ++p;
			p = p < end && *p == '"' ? quoted_end(p, end) : p;
			while (p < end && *p != ',' && !char_is_ows(*p))
				p++;
			v_end = p;
		}
		if (name_end > name)
			directive(cc, name, (size_t)(name_end - name), v, v_end);
		/* Whatever else stands before the next comma is not part of a directive. */
		while (p < end && *p != ',')
			p = *p == '"' ? quoted_end(p, end) : p + 1;
	}
}

void
cache_control_read(const struct http_head *h, const char *base, struct cache_control *cc)
{
	bool any = false, pragma_no_cache = false;

	memset(cc, 0, sizeof(*cc));
	cc->max_age = cc->s_maxage = cc->min_fresh = cc->max_stale = -1;
	for (unsigned i = 0; i < h->nfields; i++) {
		const struct http_field *f = &h->fields[i];
		const char *v = base + f->value.off;

		if (http_span_is(base, f->name, "cache-control")) {
			any = true;
			read_line(cc, v, v + f->value.len);
		} else if (http_span_is(base, f->name, "pragma") &&
		           http_list_has(base, f->value, "no-cache")) {
			pragma_no_cache = true;
		}
	}
	/* RFC 9111 5.4: Pragma counts only where Cache-Control is absent. */
	if (!any && pragma_no_cache)
		cc->no_cache = true;
}

/* ---- the verdict ------------------------------------------------------------ */

static bool
has_field(const struct http_head *h, const char *base, const char *name)
{
	for (unsigned i = 0; i < h->nfields; i++)
		if (http_span_is(base, h->fields[i].name, name))
			return true;
	return false;
}

/*
 * The one value of a date field: 1 when it is read, 0 when absent, -1 when
 * malformed or given twice with different values.
 */
static int
date_field(const struct http_head *h, const char *base, const char *name, int64_t *t)
{
	int found = 0;

	for (unsigned i = 0; i < h->nfields; i++) {
		const struct http_field *f = &h->fields[i];
		int64_t v;

		if (!http_span_is(base, f->name, name))
			continue;
		if (!http_date_parse(base + f->value.off, f->value.len, &v) || (found && v != *t))
			return -1;
		*t = v;
		found = 1;
	}
	return found;
}

/* Statuses a cache may keep with a guessed lifetime (RFC 9110 15.1). */
static bool
heuristic_status(unsigned status)
{
	switch (status) {
	case 200: case 203: case 204: case 206: case 300: case 301: case 308:
	case 404: case 405: case 410: case 414: case 501:
		return true;
	default:
		return false;
	}
}

/* RFC 9111 4.2.1 and 4.2.2: -1 when no lifetime is given and none may be guessed. */
static int64_t
lifetime_of(const struct http_head *resp, const char *rbase, const struct cache_control *cc,
            int64_t date, bool *heuristic)
{
	int64_t expires, modified;
	int got;

	*heuristic = false;
	if (cc->conflicting)
		return 0;
	if (cc->s_maxage >= 0)
		return cc->s_maxage;
	if (cc->max_age >= 0)
		return cc->max_age;
	/*
	 * An Expires that cannot be read ("0", say) is in the past (RFC 9111
	 * 5.3); one further off than a delta-seconds may reach, as far as that.
	 */
	if ((got = date_field(resp, rbase, "expires", &expires)) != 0)
		return got < 0 || expires <= date ? 0
		       : expires - date < DELTA_MAX ? expires - date
		                                    : DELTA_MAX;
	if (!heuristic_status(resp->status) ||
	    date_field(resp, rbase, "last-modified", &modified) != 1 || modified > date)
		return -1;
	*heuristic = true;
	return (date - modified) / 10 < HEURISTIC_MAX ? (date - modified) / 10 : HEURISTIC_MAX;
}

/* RFC 9111 4.2.3: how old the answer was when it arrived. */
static int64_t
initial_age(const struct http_head *resp, const char *rbase, int64_t date,
            int64_t request_time, int64_t response_time)
{
	int64_t apparent = response_time > date ? response_time - date : 0;
	int64_t age = 0, delay = response_time > request_time ? response_time - request_time : 0;

	for (unsigned i = 0; i < resp->nfields; i++) {
		const struct http_field *f = &resp->fields[i];

		if (http_span_is(rbase, f->name, "age")) {
			const char *v = rbase + f->value.off;
			int64_t n = delta_seconds(v, v + f->value.len);

			if (n >= 0)
				age = n;
			break;
		}
	}
	return apparent > age + delay ? apparent : age + delay;
}

/* What the two heads alone rule out, before any lifetime. */
static enum cache_verdict
refusal(const struct http_head *req, const char *qbase, const struct cache_control *qcc,
        const struct http_head *resp, const char *rbase, const struct cache_control *rcc)
{
	if (req->method != HTTP_GET)
		return CACHE_METHOD;
	if (resp->status < 200)
		return CACHE_STATUS;
	if (qcc->no_store || rcc->no_store)
		return CACHE_NO_STORE;
	if (rcc->private_)
		return CACHE_PRIVATE;
	if (rcc->no_cache)
		return CACHE_NO_CACHE;
	if (has_field(req, qbase, "authorization") &&
	    !(rcc->public_ || rcc->s_maxage >= 0 || rcc->must_revalidate))
		return CACHE_AUTHORIZATION;
	if (has_field(resp, rbase, "set-cookie"))
		return CACHE_SET_COOKIE;
	for (unsigned i = 0; i < resp->nfields; i++)
		if (http_span_is(rbase, resp->fields[i].name, "vary") &&
		    http_list_has(rbase, resp->fields[i].value, "*"))
			return CACHE_VARY_ANY;
	return CACHE_SHAREABLE;
}

enum cache_verdict
cache_judge(const struct http_head *req, const char *qbase, const struct http_head *resp,
            const char *rbase, int64_t request_time, int64_t response_time,
            struct cache_life *life)
{
	struct cache_control qcc, rcc;
	enum cache_verdict v;
	int64_t date;
	bool heuristic;

	cache_control_read(req, qbase, &qcc);
	cache_control_read(resp, rbase, &rcc);
	if ((v = refusal(req, qbase, &qcc, resp, rbase, &rcc)) != CACHE_SHAREABLE)
		return v;
	/* Without a Date that can be read, the answer is as old as its arrival says. */
	if (date_field(resp, rbase, "date", &date) != 1)
		date = response_time;
	life->lifetime = lifetime_of(resp, rbase, &rcc, date, &heuristic);
	life->heuristic = heuristic;
	if (life->lifetime < 0)
		return heuristic_status(resp->status) || rcc.public_ ? CACHE_NO_LIFETIME
		                                                      : CACHE_STATUS;
	life->initial_age = initial_age(resp, rbase, date, request_time, response_time);
	return life->lifetime > life->initial_age ? CACHE_SHAREABLE : CACHE_STALE;
}

/* RFC 9111 4.2.3: its age now. */
static int64_t
current_age(const struct cache_life *life, int64_t response_time, int64_t now)
{
	return life->initial_age + (now > response_time ? now - response_time : 0);
}

bool
cache_fresh(const struct cache_life *life, int64_t response_time, int64_t now)
{
	return life->lifetime > current_age(life, response_time, now);
}

bool
cache_serves(const struct http_head *req, const char *qbase, const struct cache_life *life,
             int64_t response_time, int64_t now)
{
	int64_t age = current_age(life, response_time, now);
	struct cache_control cc;

	cache_control_read(req, qbase, &cc);
	/* A request's limits that cannot be read ask for the origin's own answer. */
	if (life->lifetime <= age || cc.no_cache || cc.conflicting)
		return false;
	if (cc.max_age >= 0 && age > cc.max_age)
		return false;
	return cc.min_fresh < 0 || life->lifetime - age >= cc.min_fresh;
}
