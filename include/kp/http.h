/*
 * HTTP/1.x message heads: llhttp glue that records where every part of a
 * head lies, and the rewriting a forward proxy owes both directions (RFC
 * 9110 7.6, RFC 9112 3.2.2). Request-targets have a header of their own
 * (http_target.h), included here since the head writer takes one. Nothing
 * here does I/O; bodies are framing.c's business.
 */
#ifndef KP_HTTP_H
#define KP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <llhttp.h>

#include "kp/framing.h"
#include "kp/http_target.h"

/* Fields beyond this many make a head "too large" (431 / 502). */
#define HTTP_MAX_FIELDS 100

/* Offsets from the first byte of the message, so the buffer may move. */
struct http_span {
	uint32_t off;
	uint32_t len;
};

struct http_field {
	struct http_span name;
	struct http_span value;
};

enum http_head_error {
	HTTP_HEAD_OK,
	HTTP_HEAD_MALFORMED,     /* 400 / 502 */
	HTTP_HEAD_URL_TOO_LONG,  /* 414 */
	HTTP_HEAD_TOO_LARGE,     /* 431 / 502: bytes or fields */
};

/* A parsed head. Spans point into the bytes the parser was fed. */
struct http_head {
	struct http_span url;        /* requests: request-target */
	struct http_span reason;     /* responses: reason phrase */
	uint32_t head_len;           /* bytes up to and including the empty line */
	uint16_t nfields;
	uint8_t major, minor;
	uint8_t method;              /* llhttp_method_t */
	uint16_t status;
	uint16_t llhttp_flags;       /* F_CHUNKED, F_CONTENT_LENGTH, F_CONNECTION_* ... */
	/*
	 * Transfer-Encoding lists a coding besides chunked (gzip, deflate ...):
	 * even de-chunked, the body is not the payload, and only a peer that
	 * speaks HTTP/1.1 may be given it, coding and field together.
	 */
	bool transfer_coded;
	uint64_t content_length;
	struct http_field fields[HTTP_MAX_FIELDS];
};

struct http_parser {
	llhttp_t ll;
	struct http_head *head;      /* filled while parsing */
	const char *base;            /* first byte of the message, valid during a feed */
	size_t fed;                  /* bytes of the message llhttp has seen */
	size_t max_head;             /* larger heads are HTTP_HEAD_TOO_LARGE */
	size_t max_url;
	enum http_head_error error;
	bool in_name, in_value;      /* a field piece continues the previous one */
	bool complete;
};

enum http_parse_result {
	HTTP_PARSE_MORE,   /* feed again when more bytes arrived */
	HTTP_PARSE_DONE,   /* head complete; head->head_len bytes belong to it */
	HTTP_PARSE_ERROR,  /* parser->error says why */
};

void http_parser_init(struct http_parser *p, llhttp_type_t type, size_t max_head, size_t max_url);
/* Prepares for the next message on the same connection. */
void http_parser_start(struct http_parser *p, struct http_head *head);

/*
 * Feeds the message whose first byte is at base and of which avail bytes are
 * held (including those fed before). Only the new bytes are parsed.
 */
enum http_parse_result http_parse_head(struct http_parser *p, const char *base, size_t avail);

/*
 * Parses a head already held whole in memory (a fetched answer, a kept
 * request): the head at the start of len bytes, at most max bytes, into h
 * with ps. True when it is one whole head; otherwise ps->error says whether
 * it is malformed or only incomplete (HTTP_HEAD_OK).
 */
bool http_parse_held_head(llhttp_type_t type, const char *p, size_t len, size_t max,
                          struct http_parser *ps, struct http_head *h);

/* Readable name of the last parse error, for logs. */
const char *http_parser_error_text(const struct http_parser *p);

/* Case-insensitive equality of a span and a C string. */
bool http_span_is(const char *base, struct http_span s, const char *word);
/* Is word one of the comma-separated tokens in s (case-insensitive)? */
bool http_list_has(const char *base, struct http_span s, const char *word);
/* Is every comma-separated token in s word (case-insensitive; an empty list is)? */
bool http_list_only(const char *base, struct http_span s, const char *word);

/* Does the request ask to switch protocols (Upgrade named in Connection)? */
static inline bool
http_wants_upgrade(const struct http_head *h)
{
	return (h->llhttp_flags & F_UPGRADE) && (h->llhttp_flags & F_CONNECTION_UPGRADE);
}

/* RFC 9110 9.2.2. */
bool http_method_is_idempotent(uint8_t method);

/* RFC 9112 6.3: how the response body is delimited. */
enum body_kind http_response_body_kind(const struct http_head *resp, uint8_t request_method);
enum body_kind http_request_body_kind(const struct http_head *req);

/* Did the sender of this head ask to keep the connection (version and Connection)? */
bool http_head_keeps_alive(const struct http_head *h);

/* Seconds from a "Keep-Alive: timeout=N" field, or -1 when there is none. */
long http_keep_alive_timeout(const struct http_head *h, const char *base);

/*
 * Writes the request head to send upstream: origin-form target, Host from the
 * target's authority, hop-by-hop fields removed, Via and Connection:
 * keep-alive added, everything else unchanged and in order. With upgrade,
 * Upgrade is kept and Connection says upgrade instead. Returns the length,
 * or -1 if it does not fit in cap.
 */
ssize_t http_write_request_head(char *out, size_t cap, const struct http_head *h,
                                const char *base, const struct http_target *t, bool upgrade);

struct response_plan {
	bool dechunk;          /* strip Transfer-Encoding; payload follows until close */
	bool client_keep_alive;
	uint8_t client_minor;  /* the client's HTTP/1.x minor version */
	bool upgrade;          /* a 101 the client asked for: keep Upgrade, say so in Connection */
	bool no_via;           /* for memory: whoever serves it later adds the Via */
};

/* Writes the response head for the client: hop-by-hop removed, Via added (unless no_via). */
ssize_t http_write_response_head(char *out, size_t cap, const struct http_head *h,
                                 const char *base, const struct response_plan *plan);

/*
 * A response the proxy makes itself: status line, a short text/plain body
 * that says why, and Connection: close unless keep_alive.
 */
ssize_t http_write_local_response(char *out, size_t cap, int status, const char *why,
                                  bool keep_alive, uint8_t client_minor);

const char *http_status_reason(int status);

/*
 * A head derived from another, as the proxy writes one of its own making
 * (read-ahead's request for the next range or segment, the head of a
 * slice of a response it holds): the start line is h's, or a GET of
 * another target, or a status line with another status; then h's fields
 * in order but for those named in drop; then the fields asked for; then
 * the empty line. The length, or -1 if it does not fit in cap.
 */
struct http_head_edit {
	const char *target;         /* "GET <target> HTTP/1.1" instead of h's line; NULL: h's */
	size_t target_len;
	uint16_t status;            /* "HTTP/1.1 <status> <reason>" instead; 0: h's line */
	const char *const *drop;    /* lower-case field names left out, NULL-terminated; may be NULL */
	bool range;                 /* adds "Range: bytes=first-last" */
	bool content_range;         /* adds "Content-Range: bytes first-last/complete" */
	uint64_t first, last, complete;
	bool content_length;        /* adds "Content-Length: length" */
	uint64_t length;
	const char *if_range;       /* adds "If-Range: <if_range>" (if_range_len bytes); NULL: not */
	size_t if_range_len;
};
ssize_t http_write_edited_head(char *out, size_t cap, const struct http_head *h,
                               const char *base, const struct http_head_edit *e);

/*
 * Max-Forwards of an OPTIONS or TRACE request (RFC 9110 7.6.2): its value,
 * or -1 when absent, malformed, or the method is another (it then means
 * nothing). At 0 the proxy answers itself; above, it forwards one less.
 */
long http_max_forwards(const struct http_head *h, const char *base);

/*
 * The proxy's own answer as the final recipient of an OPTIONS or TRACE
 * with Max-Forwards 0: 200 with Allow, or 200 reflecting the request head
 * (credentials and cookies left out) as message/http.
 */
ssize_t http_write_final_answer(char *out, size_t cap, const struct http_head *h,
                                const char *base, bool keep_alive, uint8_t client_minor);

#endif
