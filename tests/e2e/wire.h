/*
 * HTTP/1.x on a blocking socket, for the end-to-end tests: a buffered reader,
 * a strict parser for message heads, body readers for every framing, and the
 * deterministic byte pattern plus checksum that let both ends verify large
 * bodies without keeping them.
 *
 * The parser is deliberately strict (CRLF line ends, token field names, no
 * whitespace before the colon, no obsolete line folding, one valid
 * Content-Length) so that anything sloppy the proxy emits shows up as a test
 * failure instead of being tolerated.
 */
#ifndef KP_E2E_WIRE_H
#define KP_E2E_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Results of the read functions. */
enum {
	WIRE_OK = 0,
	WIRE_EOF = -1,     /* orderly end of stream before the first byte of a message */
	WIRE_TIMEOUT = -2, /* SO_RCVTIMEO expired */
	WIRE_IO = -3,      /* recv failed (reset, shut down, ...) */
	WIRE_BAD = -4,     /* bytes that are not valid HTTP/1.x */
	WIRE_TRUNC = -5,   /* end of stream in the middle of a message */
	WIRE_TOOBIG = -6,  /* head larger than allowed */
};

const char *wire_strerror(int rc);

/* ---- Deterministic body pattern and checksum ---- */

/* Byte at a given offset of the pattern; every offset gets its own value so
 * that lost, repeated or reordered data is caught. */
uint8_t pattern_at(uint64_t offset);
void pattern_fill(void *buf, uint64_t offset, size_t len);

#define FNV1A64_INIT 0xcbf29ce484222325ULL
uint64_t fnv1a64(uint64_t h, const void *data, size_t len);
/* Checksum of len pattern bytes starting at offset 0. */
uint64_t pattern_fnv(uint64_t len);

/* ---- Header lists: order and repeats kept ---- */

struct header {
	char *name;
	char *value; /* leading and trailing whitespace removed */
};

struct header_list {
	struct header *v;
	size_t n, cap;
};

void headers_add(struct header_list *l, const char *name, const char *value);
void headers_free(struct header_list *l);
/* First value of the field (case-insensitive name), or NULL. */
const char *headers_get(const struct header_list *l, const char *name);
size_t headers_count(const struct header_list *l, const char *name);
/* All values of a field joined with ", " into buf (empty if absent). */
const char *headers_join(const struct header_list *l, const char *name, char *buf, size_t size);
/* True if a comma-separated field (e.g. Connection) lists the token. */
bool headers_has_token(const struct header_list *l, const char *name, const char *token);

/* ---- Bodies: counted, checksummed, pattern-checked, partly kept ---- */

struct body {
	uint64_t len;
	uint64_t fnv;
	bool pattern_ok;      /* every byte so far equals pattern_at(its offset) */
	uint64_t pattern_bad; /* offset of the first mismatch if !pattern_ok */
	char *data;           /* first keep_max bytes, NUL-terminated */
	size_t kept, keep_max, cap;
};

void body_init(struct body *b, size_t keep_max);
void body_feed(struct body *b, const void *data, size_t len);
void body_free(struct body *b);

/* ---- Buffered socket ---- */

struct wire {
	int fd;
	char *buf;
	size_t cap, rpos, wpos; /* unread bytes are buf[rpos..wpos) */
	int last_errno;
};

void wire_init(struct wire *w, int fd);
void wire_free(struct wire *w); /* frees the buffer; does not close fd */
size_t wire_buffered(const struct wire *w);
/* Reads more bytes into the buffer: >0 count, 0 end of stream, <0 WIRE_*. */
long wire_fill(struct wire *w);
/* Sends everything (MSG_NOSIGNAL). Returns 0 or -errno. */
int wire_send_all(int fd, const void *data, size_t len);

/* ---- Raw byte streams (tunnels, upgraded connections) ---- */

/*
 * Reads exactly len bytes (buffered bytes first) into b. Gives up after
 * idle_ms without a byte. Returns WIRE_OK, WIRE_TRUNC (end of stream first),
 * WIRE_TIMEOUT or WIRE_IO.
 */
int wire_recv_exact(struct wire *w, uint64_t len, struct body *b, int idle_ms);
/* Reads into b until the end of the stream: WIRE_OK, WIRE_TIMEOUT or WIRE_IO. */
int wire_recv_to_eof(struct wire *w, struct body *b, int idle_ms);

/*
 * Both directions of a raw stream at once: a helper thread sends send_len
 * pattern bytes (offsets from 0) and then shuts down writing, while the
 * calling thread reads into got (buffered bytes first) until the end of the
 * stream. Either direction gives up after idle_ms without progress.
 */
struct exchange {
	uint64_t sent;  /* bytes send() accepted */
	int send_err;   /* 0, or the errno that stopped sending (ETIMEDOUT: no progress) */
	int recv_rc;    /* WIRE_OK once the end of the stream was read, else a WIRE_* error */
	int recv_err;   /* errno behind a WIRE_IO or WIRE_TIMEOUT */
	double seconds; /* until both directions were done */
};

void wire_exchange(struct wire *w, uint64_t send_len, struct body *got, int idle_ms,
                   struct exchange *x);
/* One line on x and got: "sent 5 of 5 bytes, received 7 bytes then end of stream, 0.01 s". */
const char *exchange_describe(const struct exchange *x, uint64_t send_len, const struct body *got,
                              char *buf, size_t size);

/* ---- Messages ---- */

struct msg_head {
	/* Request line ... */
	char *method;
	char *target;
	/* ... or status line. */
	int status;
	char *reason;
	int major, minor;
	struct header_list headers;
};

void msg_head_free(struct msg_head *h);

/*
 * Reads one head (start line + fields + empty line). request selects the
 * start-line grammar. max bounds the head size. On WIRE_BAD, why describes the
 * problem.
 */
int wire_read_head(struct wire *w, bool request, size_t max, struct msg_head *h, char *why,
                   size_t why_size);

enum framing {
	FRAMING_NONE,    /* no body */
	FRAMING_LENGTH,  /* Content-Length bytes */
	FRAMING_CHUNKED, /* chunked transfer coding */
	FRAMING_EOF,     /* until the connection closes (responses only) */
};

/*
 * Decides how the body of a message is delimited (RFC 9112 section 6.3).
 * For responses, head_request and status matter. Returns WIRE_OK or WIRE_BAD
 * (for example conflicting Content-Length values).
 */
int wire_framing(const struct msg_head *h, bool request, bool head_request, enum framing *f,
                 uint64_t *length);

/*
 * Reads a body with the given framing into b. For chunked bodies the number
 * of chunks and the trailer fields are returned (trailers may be NULL).
 */
int wire_read_body(struct wire *w, enum framing f, uint64_t length, struct body *b,
                   struct header_list *trailers, unsigned *nchunks, char *why, size_t why_size);

#endif
