/*
 * HTTP/1.x heads: llhttp glue that records where every part of a head
 * lies, what the fields say (lists, keep-alive, framing), and the heads the
 * proxy writes, rewritten either way or its own. Request-targets are
 * http_target.c's.
 */
#include "kp/http.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "kp/auth.h"
#include "kp/chars.h"

#include "http_priv.h"

#define VIA_NAME "keepalive-proxy"

/* ---- head parsing --------------------------------------------------------- */

static struct http_parser *
parser_of(llhttp_t *ll)
{
	return (struct http_parser *)ll->data;
}

static uint32_t
offset_of(struct http_parser *p, const char *at)
{
	return (uint32_t)(at - p->base);
}

static int
on_url(llhttp_t *ll, const char *at, size_t len)
{
	struct http_parser *p = parser_of(ll);

	if (p->head->url.len == 0)
		p->head->url.off = offset_of(p, at);
	p->head->url.len += (uint32_t)len;
	if (p->head->url.len > p->max_url) {
		p->error = HTTP_HEAD_URL_TOO_LONG;
		return -1;
	}
	return 0;
}

static int
on_status(llhttp_t *ll, const char *at, size_t len)
{
	struct http_parser *p = parser_of(ll);

	if (p->head->reason.len == 0)
		p->head->reason.off = offset_of(p, at);
	p->head->reason.len += (uint32_t)len;
	return 0;
}

/*
 * llhttp hands a name or value over in pieces when it straddles two reads;
 * the pieces are contiguous in the message, so a piece either starts a new
 * span or lengthens the current one.
 */
static int
on_header_field(llhttp_t *ll, const char *at, size_t len)
{
	struct http_parser *p = parser_of(ll);
	struct http_head *h = p->head;
	struct http_field *f;

	if (!p->in_name) {
		if (h->nfields == HTTP_MAX_FIELDS) {
			p->error = HTTP_HEAD_TOO_LARGE;
			return -1;
		}
		f = &h->fields[h->nfields++];
		f->name.off = offset_of(p, at);
		f->name.len = 0;
		f->value.off = f->name.off;
		f->value.len = 0;
		p->in_name = true;
	}
	h->fields[h->nfields - 1].name.len += (uint32_t)len;
	return 0;
}

static int
on_header_field_complete(llhttp_t *ll)
{
	struct http_parser *p = parser_of(ll);
	struct http_field *f = &p->head->fields[p->head->nfields - 1];

	/*
	 * A name is a token (RFC 9110 5.1). Whitespace before the colon in
	 * particular is a smuggling vector that RFC 9112 5.1 says to reject.
	 */
	if (f->name.len == 0)
		goto bad;
	for (uint32_t i = 0; i < f->name.len; i++)
		if (!char_is_tchar(p->base[f->name.off + i]))
			goto bad;
	p->in_name = false;
	/* An empty value gets no callback; leave it pointing past the name. */
	f->value.off = f->name.off + f->name.len;
	return 0;
bad:
	p->error = HTTP_HEAD_MALFORMED;
	return -1;
}

static int
on_header_value(llhttp_t *ll, const char *at, size_t len)
{
	struct http_parser *p = parser_of(ll);
	struct http_field *f = &p->head->fields[p->head->nfields - 1];

	if (!p->in_value) {
		f->value.off = offset_of(p, at);
		f->value.len = 0;
		p->in_value = true;
	}
	f->value.len += (uint32_t)len;
	return 0;
}

static int
on_header_value_complete(llhttp_t *ll)
{
	struct http_parser *p = parser_of(ll);
	const struct http_field *f = &p->head->fields[p->head->nfields - 1];

	p->in_value = false;
	/*
	 * An obs-fold would be forwarded as a line break inside a value; RFC 9112
	 * 5.2 lets a proxy reject it instead of unfolding, and nothing current
	 * sends one.
	 */
	if (memchr(p->base + f->value.off, '\n', f->value.len) ||
	    memchr(p->base + f->value.off, '\r', f->value.len)) {
		p->error = HTTP_HEAD_MALFORMED;
		return -1;
	}
	return 0;
}

static int
on_headers_complete(llhttp_t *ll)
{
	struct http_parser *p = parser_of(ll);
	struct http_head *h = p->head;

	h->major = ll->http_major;
	h->minor = ll->http_minor;
	h->method = ll->method;
	h->status = ll->status_code;
	h->llhttp_flags = ll->flags;
	h->content_length = (ll->flags & F_CONTENT_LENGTH) ? ll->content_length : 0;
	/*
	 * RFC 9112 6.3: a request whose transfer coding does not end in chunked
	 * has no knowable length; it must be refused, not guessed at.
	 */
	if (ll->type == HTTP_REQUEST && (ll->flags & F_TRANSFER_ENCODING) &&
	    !(ll->flags & F_CHUNKED)) {
		p->error = HTTP_HEAD_MALFORMED;
		return -1;
	}
	h->transfer_coded = false;
	if (ll->flags & F_TRANSFER_ENCODING)
		for (unsigned i = 0; i < h->nfields; i++)
			if (http_span_is(p->base, h->fields[i].name, "transfer-encoding") &&
			    !http_list_only(p->base, h->fields[i].value, "chunked"))
				h->transfer_coded = true;
	p->complete = true;
	/* Stop here: the body is framed by the proxy, not by llhttp. */
	return HPE_PAUSED;
}

static const llhttp_settings_t head_settings = {
	.on_url = on_url,
	.on_status = on_status,
	.on_header_field = on_header_field,
	.on_header_field_complete = on_header_field_complete,
	.on_header_value = on_header_value,
	.on_header_value_complete = on_header_value_complete,
	.on_headers_complete = on_headers_complete,
};

void
http_parser_init(struct http_parser *p, llhttp_type_t type, size_t max_head, size_t max_url)
{
	memset(p, 0, sizeof(*p));
	llhttp_init(&p->ll, type, &head_settings);
	p->ll.data = p;
	p->max_head = max_head;
	p->max_url = max_url;
}

void
http_parser_start(struct http_parser *p, struct http_head *head)
{
	llhttp_reset(&p->ll);
	p->ll.data = p;
	p->head = head;
	memset(head, 0, offsetof(struct http_head, fields));
	p->base = NULL;
	p->fed = 0;
	p->error = HTTP_HEAD_OK;
	p->in_name = p->in_value = p->complete = false;
}

enum http_parse_result
http_parse_head(struct http_parser *p, const char *base, size_t avail)
{
	size_t feed = avail - p->fed;
	llhttp_errno_t err;

	if (p->complete)
		return HTTP_PARSE_DONE;
	if (p->error != HTTP_HEAD_OK)
		return HTTP_PARSE_ERROR;
	/* Never look past the limit: a head that has not ended by then is too large. */
	if (avail > p->max_head)
		feed = p->fed < p->max_head ? p->max_head - p->fed : 0;
	p->base = base;
	err = llhttp_execute(&p->ll, base + p->fed, feed);
	if (err == HPE_PAUSED && p->complete) {
		p->head->head_len = (uint32_t)(llhttp_get_error_pos(&p->ll) - base);
		p->fed = p->head->head_len;
		return HTTP_PARSE_DONE;
	}
	if (err != HPE_OK) {
		if (p->error == HTTP_HEAD_OK)
			p->error = HTTP_HEAD_MALFORMED;
		return HTTP_PARSE_ERROR;
	}
	p->fed += feed;
	if (p->fed >= p->max_head) {
		p->error = HTTP_HEAD_TOO_LARGE;
		return HTTP_PARSE_ERROR;
	}
	return HTTP_PARSE_MORE;
}

bool
http_parse_held_head(llhttp_type_t type, const char *p, size_t len, size_t max,
                     struct http_parser *ps, struct http_head *h)
{
	http_parser_init(ps, type, max, max);
	http_parser_start(ps, h);
	return p && http_parse_head(ps, p, len) == HTTP_PARSE_DONE;
}

const char *
http_parser_error_text(const struct http_parser *p)
{
	switch (p->error) {
	case HTTP_HEAD_OK:
		return "no error";
	case HTTP_HEAD_URL_TOO_LONG:
		return "request-target too long";
	case HTTP_HEAD_TOO_LARGE:
		return "head too large";
	case HTTP_HEAD_MALFORMED:
		break;
	}
	return llhttp_get_error_reason(&p->ll) ? llhttp_get_error_reason(&p->ll) : "malformed";
}

/* ---- field helpers -------------------------------------------------------- */

bool
http_span_is(const char *base, struct http_span s, const char *word)
{
	size_t n = strlen(word);

	return s.len == n && strncasecmp(base + s.off, word, n) == 0;
}

/*
 * Counts the comma-separated tokens of s (OWS around them, empty members
 * skipped, RFC 9110 5.6.1) that are word, and those that are not.
 */
static void
list_count(const char *base, struct http_span s, const char *word, unsigned *same,
           unsigned *other)
{
	const char *p = base + s.off, *end = p + s.len;
	size_t n = strlen(word);

	*same = *other = 0;
	while (p < end) {
		const char *tok, *tok_end;

		while (p < end && (char_is_ows(*p) || *p == ','))
			p++;
		tok = p;
		while (p < end && *p != ',')
			p++;
		tok_end = p;
		while (tok_end > tok && char_is_ows(tok_end[-1]))
			tok_end--;
		if (tok_end == tok)
			continue;
		if ((size_t)(tok_end - tok) == n && strncasecmp(tok, word, n) == 0)
			(*same)++;
		else
			(*other)++;
	}
}

bool
http_list_has(const char *base, struct http_span s, const char *word)
{
	unsigned same, other;

	list_count(base, s, word, &same, &other);
	return same > 0;
}

bool
http_list_only(const char *base, struct http_span s, const char *word)
{
	unsigned same, other;

	list_count(base, s, word, &same, &other);
	return other == 0;
}

/* Is the field named by f listed as a token in any Connection field of h? */
static bool
named_by_connection(const struct http_head *h, const char *base, const struct http_field *f)
{
	char name[128];

	if (f->name.len >= sizeof(name))
		return false;
	memcpy(name, base + f->name.off, f->name.len);
	name[f->name.len] = '\0';
	for (unsigned i = 0; i < h->nfields; i++)
		if (http_span_is(base, h->fields[i].name, "connection") &&
		    http_list_has(base, h->fields[i].value, name))
			return true;
	return false;
}

/* RFC 9110 7.6.1 plus the proxy-only fields a client addresses to us. */
static bool
is_hop_by_hop(const char *base, struct http_span name)
{
	static const char *const fields[] = {
		"connection", "keep-alive", "proxy-connection", "proxy-authorization",
		"te", "trailer", "upgrade",
	};

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (http_span_is(base, name, fields[i]))
			return true;
	return false;
}

static bool
has_connection_fields(const struct http_head *h, const char *base)
{
	for (unsigned i = 0; i < h->nfields; i++)
		if (http_span_is(base, h->fields[i].name, "connection"))
			return true;
	return false;
}

bool
http_head_keeps_alive(const struct http_head *h)
{
	if (h->major > 1 || (h->major == 1 && h->minor >= 1))
		return !(h->llhttp_flags & F_CONNECTION_CLOSE);
	return (h->llhttp_flags & F_CONNECTION_KEEP_ALIVE) != 0;
}

long
http_keep_alive_timeout(const struct http_head *h, const char *base)
{
	for (unsigned i = 0; i < h->nfields; i++) {
		const struct http_field *f = &h->fields[i];
		const char *p, *end;

		if (!http_span_is(base, f->name, "keep-alive"))
			continue;
		p = base + f->value.off;
		end = p + f->value.len;
		for (; p + 8 <= end; p++) {
			long v = 0;
			bool digits = false;

			if (strncasecmp(p, "timeout=", 8) != 0 ||
			    (p > base + f->value.off && p[-1] != ',' && !char_is_ows(p[-1])))
				continue;
			for (p += 8; p < end && char_is_digit(*p); p++) {
				digits = true;
				if (v < 1000000)
					v = v * 10 + (*p - '0');
			}
			if (digits)
				return v;
			break;
		}
	}
	return -1;
}

bool
http_method_is_idempotent(uint8_t method)
{
	switch (method) {
	case HTTP_GET:
	case HTTP_HEAD:
	case HTTP_PUT:
	case HTTP_DELETE:
	case HTTP_OPTIONS:
	case HTTP_TRACE:
		return true;
	default:
		return false;
	}
}

enum body_kind
http_request_body_kind(const struct http_head *req)
{
	if (req->llhttp_flags & F_CHUNKED)
		return BODY_CHUNKED;
	if (req->llhttp_flags & F_CONTENT_LENGTH)
		return req->content_length ? BODY_LENGTH : BODY_NONE;
	return BODY_NONE;
}

enum body_kind
http_response_body_kind(const struct http_head *resp, uint8_t request_method)
{
	if (request_method == HTTP_HEAD || resp->status < 200 || resp->status == 204 ||
	    resp->status == 304)
		return BODY_NONE;
	if (resp->llhttp_flags & F_CHUNKED)
		return BODY_CHUNKED;
	/* A transfer coding other than chunked last: only the close can end it. */
	if (resp->llhttp_flags & F_TRANSFER_ENCODING)
		return BODY_UNTIL_CLOSE;
	if (resp->llhttp_flags & F_CONTENT_LENGTH)
		return resp->content_length ? BODY_LENGTH : BODY_NONE;
	return BODY_UNTIL_CLOSE;
}

/* ---- head writing --------------------------------------------------------- */

struct writer {
	char *p;
	size_t left;
	bool overflow;
};

static void
put(struct writer *w, const char *s, size_t n)
{
	if (n > w->left) {
		w->overflow = true;
		w->left = 0;
		return;
	}
	memcpy(w->p, s, n);
	w->p += n;
	w->left -= n;
}

static void
puts_w(struct writer *w, const char *s)
{
	put(w, s, strlen(s));
}

static void
put_field(struct writer *w, const char *base, const struct http_field *f)
{
	put(w, base + f->name.off, f->name.len);
	put(w, ": ", 2);
	put(w, base + f->value.off, f->value.len);
	put(w, "\r\n", 2);
}

static void
put_uint(struct writer *w, uint64_t v)
{
	char digits[20];

	put(w, digits, format_uint(digits, v));
}

static void
put_via(struct writer *w, uint8_t major, uint8_t minor)
{
	puts_w(w, "Via: ");
	put_uint(w, major);
	put(w, ".", 1);
	put_uint(w, minor);
	puts_w(w, " " VIA_NAME "\r\n");
}

/* Should this field of h travel on to the next hop? */
static bool
forwarded(const struct http_head *h, const char *base, const struct http_field *f,
          bool connection_seen)
{
	if (is_hop_by_hop(base, f->name))
		return false;
	return !connection_seen || !named_by_connection(h, base, f);
}

long
http_max_forwards(const struct http_head *h, const char *base)
{
	if (h->method != HTTP_OPTIONS && h->method != HTTP_TRACE)
		return -1;
	for (unsigned i = 0; i < h->nfields; i++) {
		const struct http_field *f = &h->fields[i];
		const char *v = base + f->value.off;
		long n = 0;

		if (!http_span_is(base, f->name, "max-forwards"))
			continue;
		if (f->value.len == 0 || f->value.len > 9)
			return -1;
		for (size_t k = 0; k < f->value.len; k++) {
			if (v[k] < '0' || v[k] > '9')
				return -1;
			n = n * 10 + (v[k] - '0');
		}
		return n;
	}
	return -1;
}

/* Fields a TRACE answer leaves out: the final recipient should not echo secrets (RFC 9110 9.3.8). */
static bool
secret_field(const char *base, struct http_span name)
{
	return http_span_is(base, name, "proxy-authorization") ||
	       http_span_is(base, name, "authorization") || http_span_is(base, name, "cookie");
}

ssize_t
http_write_final_answer(char *out, size_t cap, const struct http_head *h, const char *base,
                        bool keep_alive, uint8_t client_minor)
{
	struct writer w = {out, cap, false};
	char body[4096];
	struct writer b = {body, sizeof(body), false};

	if (h->method == HTTP_TRACE) {
		/* The request as received, as a message/http body. */
		puts_w(&b, "TRACE ");
		put(&b, base + h->url.off, h->url.len);
		puts_w(&b, h->minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n");
		for (unsigned i = 0; i < h->nfields; i++)
			if (!secret_field(base, h->fields[i].name))
				put_field(&b, base, &h->fields[i]);
		put(&b, "\r\n", 2);
		if (b.overflow)
			return -1;
	}
	puts_w(&w, "HTTP/1.1 200 OK\r\n");
	if (h->method == HTTP_TRACE)
		puts_w(&w, "Content-Type: message/http\r\n");
	else
		puts_w(&w, "Allow: GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH\r\n");
	puts_w(&w, "Content-Length: ");
	put_uint(&w, (unsigned)(sizeof(body) - b.left));
	puts_w(&w, keep_alive ? (client_minor ? "\r\n" : "\r\nConnection: keep-alive\r\n")
	                      : "\r\nConnection: close\r\n");
	put(&w, "\r\n", 2);
	put(&w, body, sizeof(body) - b.left);
	return w.overflow ? -1 : (ssize_t)(cap - w.left);
}

ssize_t
http_write_request_head(char *out, size_t cap, const struct http_head *h, const char *base,
                        const struct http_target *t, bool upgrade)
{
	struct writer w = {out, cap, false};
	bool connection_seen = has_connection_fields(h, base);
	const char *method = llhttp_method_name((llhttp_method_t)h->method);
	long max_forwards = http_max_forwards(h, base);

	puts_w(&w, method);
	put(&w, " ", 1);
	/* The last proxy turns an OPTIONS for the server as a whole into "*" (RFC 9112 3.2.4). */
	if (h->method == HTTP_OPTIONS && t->path_empty)
		put(&w, "*", 1);
	else if (t->path[0] == '?')
		put(&w, "/", 1);
	if (h->method != HTTP_OPTIONS || !t->path_empty)
		put(&w, t->path, t->path_len);
	/* We speak HTTP/1.1 upstream whatever the client spoke (RFC 9110 6.2). */
	puts_w(&w, " HTTP/1.1\r\nHost: ");
	puts_w(&w, t->authority);
	put(&w, "\r\n", 2);
	for (unsigned i = 0; i < h->nfields; i++) {
		const struct http_field *f = &h->fields[i];

		if (http_span_is(base, f->name, "host"))
			continue;
		if (max_forwards >= 0 && http_span_is(base, f->name, "max-forwards")) {
			/* One hop used up (RFC 9110 7.6.2); 0 was answered before forwarding. */
			puts_w(&w, "Max-Forwards: ");
			put_uint(&w, (unsigned)(max_forwards > 0 ? max_forwards - 1 : 0));
			put(&w, "\r\n", 2);
			continue;
		}
		if (forwarded(h, base, f, connection_seen) ||
		    (upgrade && http_span_is(base, f->name, "upgrade")))
			put_field(&w, base, f);
	}
	put_via(&w, h->major, h->minor);
	/* Ask to keep the connection (pooling it is the point), unless it is to become a tunnel. */
	puts_w(&w, upgrade ? "Connection: upgrade\r\n\r\n" : "Connection: keep-alive\r\n\r\n");
	return w.overflow ? -1 : (ssize_t)(cap - w.left);
}

ssize_t
http_write_response_head(char *out, size_t cap, const struct http_head *h, const char *base,
                         const struct response_plan *plan)
{
	struct writer w = {out, cap, false};
	bool connection_seen = has_connection_fields(h, base);

	/*
	 * Our own version towards the client (RFC 9110 6.2: the highest we speak,
	 * even to an HTTP/1.0 client; framing below still suits that client).
	 */
	puts_w(&w, "HTTP/1.1 ");
	put_uint(&w, h->status);
	put(&w, " ", 1);
	put(&w, base + h->reason.off, h->reason.len);
	put(&w, "\r\n", 2);
	for (unsigned i = 0; i < h->nfields; i++) {
		const struct http_field *f = &h->fields[i];

		if (plan->dechunk && http_span_is(base, f->name, "transfer-encoding"))
			continue;
		if (forwarded(h, base, f, connection_seen) ||
		    (plan->upgrade && http_span_is(base, f->name, "upgrade")))
			put_field(&w, base, f);
	}
	if (!plan->no_via)
		put_via(&w, h->major, h->minor);
	if (plan->upgrade)
		puts_w(&w, "Connection: upgrade\r\n");
	else if (h->status >= 200) {
		if (!plan->client_keep_alive)
			puts_w(&w, "Connection: close\r\n");
		else if (plan->client_minor == 0)
			puts_w(&w, "Connection: keep-alive\r\n");
	}
	put(&w, "\r\n", 2);
	return w.overflow ? -1 : (ssize_t)(cap - w.left);
}

const char *
http_status_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 206: return "Partial Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 407: return "Proxy Authentication Required";
	case 408: return "Request Timeout";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 417: return "Expectation Failed";
	case 421: return "Misdirected Request";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return status >= 500 ? "Server Error" : status >= 400 ? "Client Error" : "OK";
	}
}

ssize_t
http_write_local_response(char *out, size_t cap, int status, const char *why, bool keep_alive,
                          uint8_t client_minor)
{
	/* A 407 without a challenge would leave the client nothing to answer (RFC 9110 15.5.8). */
	int n = snprintf(out, cap,
	                 "HTTP/1.1 %d %s\r\n"
	                 "Content-Type: text/plain; charset=utf-8\r\n"
	                 "Content-Length: %zu\r\n"
	                 "%s"
	                 "%s"
	                 "\r\n"
	                 "%s\n",
	                 status, http_status_reason(status),
	                 strlen(why) + 1,
	                 status == 407 ? "Proxy-Authenticate: Basic realm=\"" AUTH_REALM "\"\r\n" : "",
	                 keep_alive ? (client_minor ? "" : "Connection: keep-alive\r\n")
	                            : "Connection: close\r\n",
	                 why);

	return n < 0 || (size_t)n >= cap ? -1 : n;
}

/* Is the field one of the names in drop (lower case, NULL-terminated)? */
static bool
dropped(const char *base, const struct http_field *f, const char *const *drop)
{
	for (; drop && *drop; drop++)
		if (http_span_is(base, f->name, *drop))
			return true;
	return false;
}

ssize_t
http_write_edited_head(char *out, size_t cap, const struct http_head *h, const char *base,
                       const struct http_head_edit *e)
{
	struct writer w = {out, cap, false};
	const char *line_end = memchr(base, '\n', h->head_len);

	if (e->target) {
		puts_w(&w, "GET ");
		put(&w, e->target, e->target_len);
		puts_w(&w, " HTTP/1.1\r\n");
	} else if (e->status) {
		puts_w(&w, "HTTP/1.1 ");
		put_uint(&w, e->status);
		put(&w, " ", 1);
		puts_w(&w, http_status_reason(e->status));
		put(&w, "\r\n", 2);
	} else if (line_end) {
		put(&w, base, (size_t)(line_end + 1 - base));
	} else {
		return -1;
	}
	for (unsigned i = 0; i < h->nfields; i++)
		if (!dropped(base, &h->fields[i], e->drop))
			put_field(&w, base, &h->fields[i]);
	if (e->range) {
		puts_w(&w, "Range: bytes=");
		put_uint(&w, e->first);
		put(&w, "-", 1);
		put_uint(&w, e->last);
		put(&w, "\r\n", 2);
	}
	if (e->content_range) {
		puts_w(&w, "Content-Range: bytes ");
		put_uint(&w, e->first);
		put(&w, "-", 1);
		put_uint(&w, e->last);
		put(&w, "/", 1);
		put_uint(&w, e->complete);
		put(&w, "\r\n", 2);
	}
	if (e->content_length) {
		puts_w(&w, "Content-Length: ");
		put_uint(&w, e->length);
		put(&w, "\r\n", 2);
	}
	if (e->if_range) {
		puts_w(&w, "If-Range: ");
		put(&w, e->if_range, e->if_range_len);
		put(&w, "\r\n", 2);
	}
	put(&w, "\r\n", 2);
	return w.overflow ? -1 : (ssize_t)(cap - w.left);
}
