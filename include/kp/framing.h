/*
 * Where an HTTP/1.1 message body ends, tracked as one signed "bytes left"
 * counter: a positive value is payload that may be moved blindly (copied or
 * spliced) without looking at it; zero is the end; negative values name the
 * places where the proxy has to read a small piece of framing itself.
 * llhttp parses message heads; bodies are framed here so that payload can
 * bypass user space later.
 */
#ifndef KP_FRAMING_H
#define KP_FRAMING_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum body_kind {
	BODY_NONE,         /* no body: HEAD, 1xx, 204, 304, request without length */
	BODY_LENGTH,       /* Content-Length */
	BODY_CHUNKED,      /* Transfer-Encoding ending in chunked */
	BODY_UNTIL_CLOSE,  /* response delimited by the server closing */
};

enum {
	FRAME_DONE = 0,
	FRAME_CHUNK_SIZE = -1,   /* expecting a chunk-size line */
	FRAME_CHUNK_END = -2,    /* expecting the CRLF after chunk data */
	FRAME_TRAILER = -3,      /* expecting trailer fields or the final CRLF */
	FRAME_UNTIL_CLOSE = -4,  /* everything up to EOF is payload */
};

/* A chunk-size or trailer line longer than this is malformed, not slow. */
#define FRAME_MAX_LINE 4096

struct framer {
	int64_t left;   /* payload bytes left, or a FRAME_* state */
	bool chunked;   /* payload runs out into FRAME_CHUNK_END, not FRAME_DONE */
};

enum span_kind {
	SPAN_PAYLOAD,   /* message content */
	SPAN_FRAMING,   /* chunk-size lines, chunk CRLFs, trailers */
};

void framer_init(struct framer *f, enum body_kind kind, uint64_t length);

/*
 * Classifies the bytes at p: returns the length of the next span (and its
 * kind) and advances past it, 0 when more bytes are needed to decide, or -1
 * when the framing is malformed.
 */
ssize_t framer_next(struct framer *f, const char *p, size_t len, enum span_kind *kind);

/* Notes that n payload bytes moved without framer_next() (splice); n <= left. */
void framer_payload_moved(struct framer *f, uint64_t n);

static inline bool
framer_done(const struct framer *f)
{
	return f->left == FRAME_DONE;
}

/* Payload that can move now without inspection, 0 if framing comes first. */
static inline uint64_t
framer_payload_left(const struct framer *f)
{
	return f->left > 0 ? (uint64_t)f->left : 0;
}

#endif
