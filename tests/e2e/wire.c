/*
 * HTTP/1.x framing for the end-to-end tests; see wire.h.
 */
#include "wire.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#define WIRE_INITIAL_BUFFER (64u * 1024u)
#define WIRE_MAX_LINE 8192u

const char *
wire_strerror(int rc)
{
	switch (rc) {
	case WIRE_OK:
		return "ok";
	case WIRE_EOF:
		return "connection closed before a message began";
	case WIRE_TIMEOUT:
		return "timed out waiting for data";
	case WIRE_IO:
		return "receive failed (connection reset?)";
	case WIRE_BAD:
		return "malformed HTTP message";
	case WIRE_TRUNC:
		return "connection closed in the middle of a message";
	case WIRE_TOOBIG:
		return "message head too large";
	default:
		return "unknown result";
	}
}

static void set_why(char *why, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
set_why(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;

	if (!why || size == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(why, size, fmt, ap);
	va_end(ap);
}

static void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fprintf(stderr, "out of memory\n");
		abort();
	}
	return p;
}

static void *
xrealloc(void *old, size_t n)
{
	void *p = realloc(old, n ? n : 1);

	if (!p) {
		fprintf(stderr, "out of memory\n");
		abort();
	}
	return p;
}

static char *
xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

/* ---- Pattern and checksum ---- */

static uint64_t
mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

uint8_t
pattern_at(uint64_t offset)
{
	return (uint8_t)(mix64(offset >> 3) >> ((offset & 7u) * 8u));
}

void
pattern_fill(void *buf, uint64_t offset, size_t len)
{
	uint8_t *p = buf;

	while (len > 0 && (offset & 7u) != 0) {
		*p++ = pattern_at(offset++);
		len--;
	}
	while (len >= 8) {
		uint64_t v = mix64(offset >> 3);

		for (unsigned i = 0; i < 8; i++)
			p[i] = (uint8_t)(v >> (i * 8u));
		p += 8;
		offset += 8;
		len -= 8;
	}
	while (len > 0) {
		*p++ = pattern_at(offset++);
		len--;
	}
}

uint64_t
fnv1a64(uint64_t h, const void *data, size_t len)
{
	const uint8_t *p = data;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

uint64_t
pattern_fnv(uint64_t len)
{
	uint8_t block[4096];
	uint64_t h = FNV1A64_INIT;

	for (uint64_t off = 0; off < len;) {
		size_t n = len - off < sizeof(block) ? (size_t)(len - off) : sizeof(block);

		pattern_fill(block, off, n);
		h = fnv1a64(h, block, n);
		off += n;
	}
	return h;
}

/* ---- Header lists ---- */

void
headers_add(struct header_list *l, const char *name, const char *value)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n].name = xstrndup(name, strlen(name));
	l->v[l->n].value = xstrndup(value, strlen(value));
	l->n++;
}

void
headers_free(struct header_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].value);
	}
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

const char *
headers_get(const struct header_list *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcasecmp(l->v[i].name, name) == 0)
			return l->v[i].value;
	return NULL;
}

size_t
headers_count(const struct header_list *l, const char *name)
{
	size_t c = 0;

	for (size_t i = 0; i < l->n; i++)
		if (strcasecmp(l->v[i].name, name) == 0)
			c++;
	return c;
}

const char *
headers_join(const struct header_list *l, const char *name, char *buf, size_t size)
{
	size_t used = 0;

	if (size == 0)
		return buf;
	buf[0] = '\0';
	for (size_t i = 0; i < l->n; i++) {
		if (strcasecmp(l->v[i].name, name) != 0)
			continue;
		int w = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", l->v[i].value);
		if (w < 0 || (size_t)w >= size - used) {
			buf[size - 1] = '\0';
			break;
		}
		used += (size_t)w;
	}
	return buf;
}

bool
headers_has_token(const struct header_list *l, const char *name, const char *token)
{
	size_t tlen = strlen(token);

	for (size_t i = 0; i < l->n; i++) {
		if (strcasecmp(l->v[i].name, name) != 0)
			continue;
		const char *p = l->v[i].value;
		while (*p) {
			while (*p == ' ' || *p == '\t' || *p == ',')
				p++;
			const char *start = p;
			while (*p && *p != ',')
				p++;
			const char *end = p;
			while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
				end--;
			if ((size_t)(end - start) == tlen && strncasecmp(start, token, tlen) == 0)
				return true;
		}
	}
	return false;
}

/* ---- Bodies ---- */

void
body_init(struct body *b, size_t keep_max)
{
	memset(b, 0, sizeof(*b));
	b->fnv = FNV1A64_INIT;
	b->pattern_ok = true;
	b->keep_max = keep_max;
	b->cap = keep_max < 4096 ? keep_max + 1 : 4096;
	b->data = xmalloc(b->cap);
	b->data[0] = '\0';
}

void
body_feed(struct body *b, const void *data, size_t len)
{
	const uint8_t *p = data;

	b->fnv = fnv1a64(b->fnv, p, len);
	if (b->pattern_ok) {
		uint8_t expect[4096];
		size_t done = 0;

		while (done < len) {
			size_t n = len - done < sizeof(expect) ? len - done : sizeof(expect);

			pattern_fill(expect, b->len + done, n);
			if (memcmp(expect, p + done, n) != 0) {
				for (size_t i = 0; i < n; i++) {
					if (expect[i] != p[done + i]) {
						b->pattern_bad = b->len + done + i;
						break;
					}
				}
				b->pattern_ok = false;
				break;
			}
			done += n;
		}
	}
	if (b->kept < b->keep_max) {
		size_t n = b->keep_max - b->kept < len ? b->keep_max - b->kept : len;

		if (b->kept + n + 1 > b->cap) {
			size_t cap = b->cap;

			while (cap < b->kept + n + 1)
				cap *= 2;
			if (cap > b->keep_max + 1)
				cap = b->keep_max + 1;
			b->data = xrealloc(b->data, cap);
			b->cap = cap;
		}
		memcpy(b->data + b->kept, p, n);
		b->kept += n;
		b->data[b->kept] = '\0';
	}
	b->len += len;
}

void
body_free(struct body *b)
{
	free(b->data);
	b->data = NULL;
	b->kept = b->cap = 0;
}

/* ---- Buffered socket ---- */

void
wire_init(struct wire *w, int fd)
{
	memset(w, 0, sizeof(*w));
	w->fd = fd;
	w->cap = WIRE_INITIAL_BUFFER;
	w->buf = xmalloc(w->cap);
}

void
wire_free(struct wire *w)
{
	free(w->buf);
	w->buf = NULL;
	w->cap = w->rpos = w->wpos = 0;
}

size_t
wire_buffered(const struct wire *w)
{
	return w->wpos - w->rpos;
}

long
wire_fill(struct wire *w)
{
	if (w->rpos == w->wpos)
		w->rpos = w->wpos = 0;
	if (w->wpos == w->cap) {
		if (w->rpos > 0) {
			memmove(w->buf, w->buf + w->rpos, w->wpos - w->rpos);
			w->wpos -= w->rpos;
			w->rpos = 0;
		} else {
			w->cap *= 2;
			w->buf = xrealloc(w->buf, w->cap);
		}
	}
	for (;;) {
		ssize_t n = recv(w->fd, w->buf + w->wpos, w->cap - w->wpos, 0);

		if (n > 0) {
			w->wpos += (size_t)n;
			return (long)n;
		}
		if (n == 0)
			return 0;
		if (errno == EINTR)
			continue;
		w->last_errno = errno;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return WIRE_TIMEOUT;
		return WIRE_IO;
	}
}

int
wire_send_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return -ETIMEDOUT;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- Message heads ---- */

static bool
is_tchar(unsigned char c)
{
	return isalnum(c) || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool
is_field_vchar(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

void
msg_head_free(struct msg_head *h)
{
	free(h->method);
	free(h->target);
	free(h->reason);
	headers_free(&h->headers);
	memset(h, 0, sizeof(*h));
}

/* Parses "HTTP/d.d" at p; returns the length consumed or 0. */
static size_t
parse_version(const char *p, int *major, int *minor)
{
	if (strncmp(p, "HTTP/", 5) != 0 || !isdigit((unsigned char)p[5]) || p[6] != '.' ||
	    !isdigit((unsigned char)p[7]))
		return 0;
	*major = p[5] - '0';
	*minor = p[7] - '0';
	return 8;
}

static int
parse_request_line(const char *line, struct msg_head *h, char *why, size_t ws)
{
	const char *p = line;

	while (is_tchar((unsigned char)*p))
		p++;
	if (p == line || *p != ' ') {
		set_why(why, ws, "bad method in request line \"%.200s\"", line);
		return WIRE_BAD;
	}
	h->method = xstrndup(line, (size_t)(p - line));
	const char *t = ++p;
	while (*p > 0x20 && *p < 0x7f)
		p++;
	if (p == t || *p != ' ') {
		set_why(why, ws, "bad request-target in \"%.200s\"", line);
		return WIRE_BAD;
	}
	h->target = xstrndup(t, (size_t)(p - t));
	p++;
	size_t n = parse_version(p, &h->major, &h->minor);
	if (n == 0 || p[n] != '\0') {
		set_why(why, ws, "bad HTTP version in \"%.200s\"", line);
		return WIRE_BAD;
	}
	return WIRE_OK;
}

static int
parse_status_line(const char *line, struct msg_head *h, char *why, size_t ws)
{
	size_t n = parse_version(line, &h->major, &h->minor);
	const char *p = line + n;

	if (n == 0 || p[0] != ' ' || !isdigit((unsigned char)p[1]) ||
	    !isdigit((unsigned char)p[2]) || !isdigit((unsigned char)p[3]) || p[4] != ' ') {
		set_why(why, ws, "bad status line \"%.200s\"", line);
		return WIRE_BAD;
	}
	h->status = (p[1] - '0') * 100 + (p[2] - '0') * 10 + (p[3] - '0');
	p += 5;
	for (const char *q = p; *q; q++) {
		if (!is_field_vchar((unsigned char)*q)) {
			set_why(why, ws, "control character in status line \"%.200s\"", line);
			return WIRE_BAD;
		}
	}
	h->reason = xstrndup(p, strlen(p));
	return WIRE_OK;
}

/* Parses "name: value" into l. */
static int
parse_field_line(char *line, struct header_list *l, char *why, size_t ws)
{
	char *p = line;

	if (*p == ' ' || *p == '\t') {
		set_why(why, ws, "obsolete line folding: \"%.200s\"", line);
		return WIRE_BAD;
	}
	while (is_tchar((unsigned char)*p))
		p++;
	if (p == line || *p != ':') {
		set_why(why, ws, "bad field line \"%.200s\"", line);
		return WIRE_BAD;
	}
	*p++ = '\0';
	for (char *q = p; *q; q++) {
		if (!is_field_vchar((unsigned char)*q)) {
			set_why(why, ws, "control character in field %s", line);
			return WIRE_BAD;
		}
	}
	while (*p == ' ' || *p == '\t')
		p++;
	char *end = p + strlen(p);
	while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	*end = '\0';
	headers_add(l, line, p);
	return WIRE_OK;
}

/*
 * Finds the end of the head in the buffer, rejecting a bare LF. Returns the
 * offset just past the empty line, 0 if more data is needed, or WIRE_BAD.
 */
static long
find_head_end(struct wire *w, size_t *scan, char *why, size_t ws)
{
	for (size_t i = *scan; i < w->wpos; i++) {
		if (w->buf[i] != '\n')
			continue;
		if (i == w->rpos || w->buf[i - 1] != '\r') {
			set_why(why, ws, "bare LF in message head at byte %zu", i - w->rpos);
			return WIRE_BAD;
		}
		if (i >= w->rpos + 3 && w->buf[i - 2] == '\n' && w->buf[i - 3] == '\r')
			return (long)(i + 1);
	}
	*scan = w->wpos;
	return 0;
}

int
wire_read_head(struct wire *w, bool request, size_t max, struct msg_head *h, char *why, size_t ws)
{
	size_t scan_from = 0; /* relative to rpos; the buffer may move */
	long end;

	memset(h, 0, sizeof(*h));
	set_why(why, ws, "%s", "");
	for (;;) {
		size_t scan = w->rpos + scan_from;

		end = find_head_end(w, &scan, why, ws);
		if (end < 0)
			return (int)end;
		if (end > 0)
			break;
		scan_from = scan - w->rpos;
		if (wire_buffered(w) > max) {
			set_why(why, ws, "head exceeds %zu bytes", max);
			return WIRE_TOOBIG;
		}
		long n = wire_fill(w);
		if (n == 0) {
			if (wire_buffered(w) == 0)
				return WIRE_EOF;
			set_why(why, ws, "end of stream after %zu bytes of a head",
			        wire_buffered(w));
			return WIRE_TRUNC;
		}
		if (n < 0)
			return (int)n;
	}

	size_t len = (size_t)end - w->rpos;
	char *head = xstrndup(w->buf + w->rpos, len - 4); /* without the final CRLF CRLF */
	w->rpos = (size_t)end;

	int rc = WIRE_OK;
	char *line = head;
	bool first = true;
	if (memchr(head, '\0', len - 4)) {
		set_why(why, ws, "NUL byte in message head");
		free(head);
		return WIRE_BAD;
	}
	for (;;) {
		char *crlf = strstr(line, "\r\n");

		if (crlf)
			*crlf = '\0';
		if (strchr(line, '\r')) {
			set_why(why, ws, "bare CR in message head");
			rc = WIRE_BAD;
			break;
		}
		if (first) {
			if (line[0] == '\0') {
				set_why(why, ws, "empty line before the start line");
				rc = WIRE_BAD;
				break;
			}
			rc = request ? parse_request_line(line, h, why, ws) :
			               parse_status_line(line, h, why, ws);
			first = false;
		} else {
			rc = parse_field_line(line, &h->headers, why, ws);
		}
		if (rc != WIRE_OK || !crlf)
			break;
		line = crlf + 2;
	}
	free(head);
	if (rc != WIRE_OK)
		msg_head_free(h);
	return rc;
}

/* ---- Framing ---- */

static bool
last_coding_is_chunked(const struct header_list *l)
{
	const char *last = NULL;
	size_t last_len = 0;

	for (size_t i = 0; i < l->n; i++) {
		if (strcasecmp(l->v[i].name, "Transfer-Encoding") != 0)
			continue;
		const char *p = l->v[i].value;
		while (*p) {
			while (*p == ' ' || *p == '\t' || *p == ',')
				p++;
			const char *s = p;
			while (*p && *p != ',')
				p++;
			const char *e = p;
			while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
				e--;
			if (e > s) {
				last = s;
				last_len = (size_t)(e - s);
			}
		}
	}
	return last && last_len == 7 && strncasecmp(last, "chunked", 7) == 0;
}

static int
content_length(const struct msg_head *h, bool *present, uint64_t *len)
{
	*present = false;
	for (size_t i = 0; i < h->headers.n; i++) {
		if (strcasecmp(h->headers.v[i].name, "Content-Length") != 0)
			continue;
		const char *v = h->headers.v[i].value;
		uint64_t n = 0;

		if (*v == '\0')
			return WIRE_BAD;
		for (; *v; v++) {
			if (!isdigit((unsigned char)*v) || n > (UINT64_MAX - 9) / 10)
				return WIRE_BAD;
			n = n * 10 + (uint64_t)(*v - '0');
		}
		if (*present && n != *len)
			return WIRE_BAD;
		*present = true;
		*len = n;
	}
	return WIRE_OK;
}

int
wire_framing(const struct msg_head *h, bool request, bool head_request, enum framing *f,
             uint64_t *length)
{
	bool has_cl;
	bool has_te = headers_get(&h->headers, "Transfer-Encoding") != NULL;

	*length = 0;
	if (content_length(h, &has_cl, length) != WIRE_OK)
		return WIRE_BAD;
	if (has_te && has_cl)
		return WIRE_BAD; /* a proxy must never send both */
	if (!request) {
		if (head_request || h->status / 100 == 1 || h->status == 204 || h->status == 304) {
			*f = FRAMING_NONE;
			return WIRE_OK;
		}
		if (has_te) {
			*f = last_coding_is_chunked(&h->headers) ? FRAMING_CHUNKED : FRAMING_EOF;
			return WIRE_OK;
		}
		*f = has_cl ? FRAMING_LENGTH : FRAMING_EOF;
		return WIRE_OK;
	}
	if (has_te) {
		if (!last_coding_is_chunked(&h->headers))
			return WIRE_BAD;
		*f = FRAMING_CHUNKED;
		return WIRE_OK;
	}
	*f = has_cl ? FRAMING_LENGTH : FRAMING_NONE;
	return WIRE_OK;
}

/* ---- Bodies ---- */

/* Reads one CRLF-terminated line (without the CRLF) into out. */
static int
read_line(struct wire *w, char *out, size_t size, char *why, size_t ws)
{
	for (;;) {
		char *base = w->buf + w->rpos;
		size_t avail = wire_buffered(w);
		char *lf = memchr(base, '\n', avail);

		if (lf) {
			size_t n = (size_t)(lf - base);

			if (n == 0 || base[n - 1] != '\r') {
				set_why(why, ws, "bare LF in chunked framing");
				return WIRE_BAD;
			}
			if (n - 1 >= size) {
				set_why(why, ws, "chunked framing line too long");
				return WIRE_BAD;
			}
			memcpy(out, base, n - 1);
			out[n - 1] = '\0';
			w->rpos += n + 1;
			if (strchr(out, '\r')) {
				set_why(why, ws, "bare CR in chunked framing");
				return WIRE_BAD;
			}
			return WIRE_OK;
		}
		if (avail > size + 2) {
			set_why(why, ws, "chunked framing line too long");
			return WIRE_BAD;
		}
		long r = wire_fill(w);
		if (r == 0) {
			set_why(why, ws, "end of stream inside chunked framing");
			return WIRE_TRUNC;
		}
		if (r < 0)
			return (int)r;
	}
}

static int
read_exact(struct wire *w, uint64_t len, struct body *b, char *why, size_t ws)
{
	while (len > 0) {
		if (wire_buffered(w) == 0) {
			long r = wire_fill(w);

			if (r == 0) {
				set_why(why, ws, "end of stream with %llu body bytes missing",
				        (unsigned long long)len);
				return WIRE_TRUNC;
			}
			if (r < 0) {
				set_why(why, ws, "%llu body bytes missing",
				        (unsigned long long)len);
				return (int)r;
			}
		}
		size_t n = wire_buffered(w);
		if (n > len)
			n = (size_t)len;
		body_feed(b, w->buf + w->rpos, n);
		w->rpos += n;
		len -= n;
	}
	return WIRE_OK;
}

static int
read_chunked(struct wire *w, struct body *b, struct header_list *trailers, unsigned *nchunks,
             char *why, size_t ws)
{
	char line[WIRE_MAX_LINE];
	int rc;

	for (;;) {
		uint64_t size = 0;
		const char *p;

		rc = read_line(w, line, sizeof(line), why, ws);
		if (rc != WIRE_OK)
			return rc;
		for (p = line; isxdigit((unsigned char)*p); p++) {
			if (size >> 60) {
				set_why(why, ws, "chunk size overflow");
				return WIRE_BAD;
			}
			size = size * 16 +
			       (uint64_t)(isdigit((unsigned char)*p) ?
			                          *p - '0' :
			                          (tolower((unsigned char)*p) - 'a' + 10));
		}
		if (p == line) {
			set_why(why, ws, "bad chunk size line \"%.100s\"", line);
			return WIRE_BAD;
		}
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p != '\0' && *p != ';') {
			set_why(why, ws, "bad chunk size line \"%.100s\"", line);
			return WIRE_BAD;
		}
		if (size == 0)
			break;
		if (nchunks)
			(*nchunks)++;
		rc = read_exact(w, size, b, why, ws);
		if (rc != WIRE_OK)
			return rc;
		rc = read_line(w, line, sizeof(line), why, ws);
		if (rc != WIRE_OK)
			return rc;
		if (line[0] != '\0') {
			set_why(why, ws, "chunk data not followed by CRLF");
			return WIRE_BAD;
		}
	}
	/* Trailer section. */
	for (;;) {
		rc = read_line(w, line, sizeof(line), why, ws);
		if (rc != WIRE_OK)
			return rc;
		if (line[0] == '\0')
			return WIRE_OK;
		struct header_list scratch = {0};
		rc = parse_field_line(line, trailers ? trailers : &scratch, why, ws);
		headers_free(&scratch);
		if (rc != WIRE_OK)
			return rc;
	}
}

int
wire_read_body(struct wire *w, enum framing f, uint64_t length, struct body *b,
               struct header_list *trailers, unsigned *nchunks, char *why, size_t ws)
{
	set_why(why, ws, "%s", "");
	switch (f) {
	case FRAMING_NONE:
		return WIRE_OK;
	case FRAMING_LENGTH:
		return read_exact(w, length, b, why, ws);
	case FRAMING_CHUNKED:
		return read_chunked(w, b, trailers, nchunks, why, ws);
	case FRAMING_EOF:
		for (;;) {
			if (wire_buffered(w) > 0) {
				body_feed(b, w->buf + w->rpos, wire_buffered(w));
				w->rpos = w->wpos;
			}
			long r = wire_fill(w);
			if (r == 0)
				return WIRE_OK;
			if (r < 0) {
				set_why(why, ws,
				        "close-delimited body ended by an error after %llu bytes",
				        (unsigned long long)b->len);
				return (int)r;
			}
		}
	}
	return WIRE_BAD;
}

/* ---- Raw byte streams ---- */

#define WIRE_RAW_BLOCK (256u * 1024u)

static double
mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits for events on fd: 1 ready, 0 idle_ms passed, <0 WIRE_IO. */
static int
wait_fd(int fd, short events, int idle_ms)
{
	struct pollfd pfd = {.fd = fd, .events = events};

	for (;;) {
		int r = poll(&pfd, 1, idle_ms);

		if (r > 0)
			return 1;
		if (r == 0)
			return 0;
		if (errno != EINTR)
			return WIRE_IO;
	}
}

/* Like wire_fill, but waits at most idle_ms for the first byte. */
static long
fill_within(struct wire *w, int idle_ms)
{
	int r = wait_fd(w->fd, POLLIN, idle_ms);

	if (r == 0) {
		w->last_errno = ETIMEDOUT;
		return WIRE_TIMEOUT;
	}
	if (r < 0) {
		w->last_errno = errno;
		return WIRE_IO;
	}
	return wire_fill(w);
}

int
wire_recv_exact(struct wire *w, uint64_t len, struct body *b, int idle_ms)
{
	while (len > 0) {
		size_t n = wire_buffered(w);

		if (n == 0) {
			long r = fill_within(w, idle_ms);

			if (r == 0)
				return WIRE_TRUNC;
			if (r < 0)
				return (int)r;
			continue;
		}
		if (n > len)
			n = (size_t)len;
		body_feed(b, w->buf + w->rpos, n);
		w->rpos += n;
		len -= n;
	}
	return WIRE_OK;
}

int
wire_recv_to_eof(struct wire *w, struct body *b, int idle_ms)
{
	for (;;) {
		long r;

		if (wire_buffered(w) > 0) {
			body_feed(b, w->buf + w->rpos, wire_buffered(w));
			w->rpos = w->wpos;
		}
		r = fill_within(w, idle_ms);
		if (r == 0)
			return WIRE_OK;
		if (r < 0)
			return (int)r;
	}
}

struct sender {
	int fd;
	uint64_t len;
	int idle_ms;
	uint64_t sent;
	int err;
};

static void *
sender_main(void *arg)
{
	struct sender *s = arg;
	char *block = xmalloc(WIRE_RAW_BLOCK);
	uint64_t off = 0;

	while (off < s->len && s->err == 0) {
		size_t n = s->len - off < WIRE_RAW_BLOCK ? (size_t)(s->len - off) : WIRE_RAW_BLOCK;
		size_t done = 0;

		pattern_fill(block, off, n);
		while (done < n) {
			ssize_t k =
				send(s->fd, block + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT);

			if (k > 0) {
				done += (size_t)k;
				s->sent += (uint64_t)k;
				continue;
			}
			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				int r = wait_fd(s->fd, POLLOUT, s->idle_ms);

				if (r > 0)
					continue;
				s->err = r == 0 ? ETIMEDOUT : errno;
				break;
			}
			s->err = k < 0 ? errno : EIO;
			break;
		}
		off += done;
	}
	if (s->err == 0 && shutdown(s->fd, SHUT_WR) != 0)
		s->err = errno;
	free(block);
	return NULL;
}

void
wire_exchange(struct wire *w, uint64_t send_len, struct body *got, int idle_ms, struct exchange *x)
{
	struct sender s = {.fd = w->fd, .len = send_len, .idle_ms = idle_ms};
	pthread_t th;
	bool started;
	double t0 = mono_s();

	memset(x, 0, sizeof(*x));
	started = pthread_create(&th, NULL, sender_main, &s) == 0;
	if (!started)
		s.err = EAGAIN;
	x->recv_rc = wire_recv_to_eof(w, got, idle_ms);
	if (x->recv_rc == WIRE_IO || x->recv_rc == WIRE_TIMEOUT)
		x->recv_err = w->last_errno;
	if (started)
		pthread_join(th, NULL);
	x->sent = s.sent;
	x->send_err = s.err;
	x->seconds = mono_s() - t0;
}

const char *
exchange_describe(const struct exchange *x, uint64_t send_len, const struct body *got, char *buf,
                  size_t size)
{
	char stopped[96] = "", bad[64] = "", why[96] = "";

	if (x->send_err)
		snprintf(stopped, sizeof(stopped), " (stopped: %s)", strerror(x->send_err));
	if (!got->pattern_ok)
		snprintf(bad, sizeof(bad), ", first wrong byte at offset %llu",
		         (unsigned long long)got->pattern_bad);
	if (x->recv_err)
		snprintf(why, sizeof(why), ": %s", strerror(x->recv_err));
	snprintf(buf, size, "sent %llu of %llu bytes%s, received %llu bytes%s then %s%s, %.2f s",
	         (unsigned long long)x->sent, (unsigned long long)send_len, stopped,
	         (unsigned long long)got->len, bad,
	         x->recv_rc == WIRE_OK ? "end of stream" : wire_strerror(x->recv_rc), why,
	         x->seconds);
	return buf;
}
