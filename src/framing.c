#include "kp/framing.h"

#include <string.h>

#include "kp/chars.h"

/* Chunk sizes beyond this are nonsense and would overflow the counter. */
#define FRAME_MAX_CHUNK ((uint64_t)1 << 60)

void
framer_init(struct framer *f, enum body_kind kind, uint64_t length)
{
	f->chunked = false;
	switch (kind) {
	case BODY_NONE:
		f->left = FRAME_DONE;
		break;
	case BODY_LENGTH:
		f->left = length > FRAME_MAX_CHUNK ? (int64_t)FRAME_MAX_CHUNK : (int64_t)length;
		break;
	case BODY_CHUNKED:
		f->chunked = true;
		f->left = FRAME_CHUNK_SIZE;
		break;
	case BODY_UNTIL_CLOSE:
		f->left = FRAME_UNTIL_CLOSE;
		break;
	}
}

/* Length of the line at p including its LF, 0 if incomplete, -1 if too long. */
static ssize_t
line_length(const char *p, size_t len)
{
	size_t scan = len < FRAME_MAX_LINE ? len : FRAME_MAX_LINE;
	const char *lf = memchr(p, '\n', scan);

	if (lf)
		return lf - p + 1;
	return len >= FRAME_MAX_LINE ? -1 : 0;
}

/*
 * chunk-size [ BWS ; chunk-ext ] CRLF. Extensions are passed on, not
 * interpreted, so only their absence of control bytes is checked. Every line
 * must end in CRLF: a bare LF is where the proxy and an origin could disagree
 * about where a message ends, which is how requests get smuggled.
 */
static int
parse_chunk_size(const char *p, size_t line_len, uint64_t *size)
{
	size_t i = 0, end = line_len - 1;   /* index of the LF */
	uint64_t v = 0;
	int d;

	if (end == 0 || p[end - 1] != '\r')
		return -1;
	end--;
	if (end == 0 || char_hex_value(p[0]) < 0)
		return -1;
	for (; i < end && (d = char_hex_value(p[i])) >= 0; i++) {
		/* Checked before the shift, which could otherwise wrap around. */
		if (v > FRAME_MAX_CHUNK >> 4)
			return -1;
		v = v * 16 + (uint64_t)d;
	}
	while (i < end && (p[i] == ' ' || p[i] == '\t'))
		i++;
	if (i < end && p[i] != ';')
		return -1;
	for (; i < end; i++)
		if ((unsigned char)p[i] < 0x20 && p[i] != '\t')
			return -1;
	*size = v;
	return 0;
}

ssize_t
framer_next(struct framer *f, const char *p, size_t len, enum span_kind *kind)
{
	ssize_t n;
	uint64_t size;

	if (len == 0 || f->left == FRAME_DONE)
		return 0;
	if (f->left > 0) {
		n = (uint64_t)f->left < len ? (ssize_t)f->left : (ssize_t)len;
		f->left -= n;
		if (f->left == 0 && f->chunked)
			f->left = FRAME_CHUNK_END;
		*kind = SPAN_PAYLOAD;
		return n;
	}
	switch (f->left) {
	case FRAME_UNTIL_CLOSE:
		*kind = SPAN_PAYLOAD;
		return (ssize_t)len;
	case FRAME_CHUNK_SIZE:
		n = line_length(p, len);
		if (n <= 0)
			return n;
		if (parse_chunk_size(p, (size_t)n, &size) < 0)
			return -1;
		f->left = size == 0 ? FRAME_TRAILER : (int64_t)size;
		*kind = SPAN_FRAMING;
		return n;
	case FRAME_CHUNK_END:
		if (p[0] != '\r' || (len >= 2 && p[1] != '\n'))
			return -1;
		if (len < 2)
			return 0;
		n = 2;
		f->left = FRAME_CHUNK_SIZE;
		*kind = SPAN_FRAMING;
		return n;
	case FRAME_TRAILER:
		n = line_length(p, len);
		if (n <= 0)
			return n;
		if (n < 2 || p[n - 2] != '\r')
			return -1;
		/* An empty line ends the trailer section and the message. */
		if (n == 2)
			f->left = FRAME_DONE;
		else if (p[0] == ' ' || p[0] == '\t' || p[0] == ':')
			return -1;
		*kind = SPAN_FRAMING;
		return n;
	}
	return -1;
}

void
framer_payload_moved(struct framer *f, uint64_t n)
{
	if (f->left == FRAME_UNTIL_CLOSE || f->left <= 0)
		return;
	f->left -= (int64_t)n;
	if (f->left == 0 && f->chunked)
		f->left = FRAME_CHUNK_END;
}
