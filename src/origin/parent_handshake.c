#include "kp/parent_handshake.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "kp/evglue.h"

/*
 * Each step sends one request whole, then reads its reply exactly; h->phase
 * holds one of these. Whether the request is still going out is
 * out_sent < out_len.
 */
enum phase {
	PH_OFF,            /* not started, ended or cancelled: nothing armed */
	PH_GREETING,       /* the methods offered, then the one the parent chose */
	PH_LOGIN,          /* RFC 1929's username and password, then its verdict */
	PH_SOCKS_CONNECT,  /* CONNECT host:port, then the reply with the bound address */
	PH_HTTP_CONNECT,   /* CONNECT host:port HTTP/1.1, then the head of the answer */
};

/* What a read of the reply came to. */
enum got {
	GOT_LATER,   /* nothing more to read now: wait for the socket */
	GOT_WHOLE,   /* the reply is in, and not a byte after it */
	GOT_ENDED,   /* the handshake ended (done was called): h is not to be touched */
};

/* Room for the words: the label and a host are cut to fit, never the sentence's start. */
#define WHY_MAX 640
/* The most of a host name the words repeat. */
#define HOST_WORDS_MAX 120

static const char *const outcome_names[PARENT_OUTCOMES] = {
	[PARENT_OPEN] = "open",
	[PARENT_REFUSED] = "refused",
	[PARENT_AUTH_FAILED] = "auth",
	[PARENT_ORIGIN_UNREACHABLE] = "origin_unreachable",
	[PARENT_BAD_REPLY] = "bad_reply",
	[PARENT_TIMEOUT] = "timeout",
	[PARENT_CLOSED] = "closed",
};

const char *
parent_outcome_name(enum parent_outcome o)
{
	return (unsigned)o < PARENT_OUTCOMES ? outcome_names[o] : "unknown";
}

/*
 * host:port for the words: printable ASCII only and cut, since the host is
 * the client's and the words reach logs and error pages.
 */
static void
origin_words(const struct parent_handshake *h, char *out, size_t cap)
{
	char host[HOST_WORDS_MAX + 4];
	size_t n = 0;
	bool v6 = strchr(h->host, ':') && h->host[0] != '[';

	for (const char *c = h->host; *c && n < HOST_WORDS_MAX; c++)
		host[n++] = *c > 0x20 && *c < 0x7f ? *c : '?';
	if (h->host[n] && n == HOST_WORDS_MAX) {
		memcpy(host + n, "...", 3);
		n += 3;
	}
	host[n] = '\0';
	snprintf(out, cap, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "", h->port);
}

/* The status the client is answered for an outcome. */
static int
outcome_status(enum parent_outcome o)
{
	switch (o) {
	case PARENT_OPEN:
		return 0;
	case PARENT_TIMEOUT:
		return 504;
	default:
		return 502;
	}
}

/*
 * The end: everything stopped, then the owner told, as the very last
 * thing, since it may free h. fmt continues "parent LABEL ".
 */
__attribute__((format(printf, 4, 5))) static void
finish(struct parent_handshake *h, enum parent_outcome o, int status, const char *fmt, ...)
{
	parent_handshake_done done = h->done;
	char why[WHY_MAX];
	va_list ap;
	int n;

	ev_io_stop(h->loop, &h->io);
	ev_timer_stop(h->loop, &h->timer);
	h->phase = PH_OFF;
	n = snprintf(why, sizeof(why), "parent %.200s ", h->hop->label);
	if (n < 0)
		n = 0;
	va_start(ap, fmt);
	vsnprintf(why + n, sizeof(why) - (size_t)n, fmt, ap);
	va_end(ap);
	done(h, o, status ? status : outcome_status(o), why);
}

/* The step being waited on, for the words of a timeout or a close. */
static const char *
step_words(const struct parent_handshake *h, char *buf, size_t cap)
{
	char origin[HOST_WORDS_MAX + 16];

	switch ((enum phase)h->phase) {
	case PH_GREETING:
		return "the SOCKS5 greeting";
	case PH_LOGIN:
		return "the username and password";
	case PH_SOCKS_CONNECT:
	case PH_HTTP_CONNECT:
		origin_words(h, origin, sizeof(origin));
		snprintf(buf, cap, "CONNECT %s", origin);
		return buf;
	case PH_OFF:
		break;
	}
	return "nothing";
}

/* Bytes of the reply already in: a reply begun and not finished reads differently. */
static bool
reply_begun(const struct parent_handshake *h)
{
	return h->phase == PH_HTTP_CONNECT ? h->http.len > 0 : h->in_len > 0;
}

static void
fail_closed(struct parent_handshake *h, int err)
{
	char words[HOST_WORDS_MAX + 32];
	const char *what = step_words(h, words, sizeof(words));

	if (err == 0 && reply_begun(h))
		finish(h, PARENT_CLOSED, 0,
		       "closed the connection in the middle of its reply to %s", what);
	else if (err == 0)
		finish(h, PARENT_CLOSED, 0, "closed the connection instead of answering %s", what);
	else
		finish(h, PARENT_CLOSED, 0, "dropped the connection during %s (%s)", what,
		       strerror(err));
}

/* The first bytes of a SOCKS reply in hex, so a malformed one can be told apart. */
static void
fail_bad(struct parent_handshake *h, const char *bad)
{
	char hex[3 * 8 + 4] = "";
	size_t n = 0;

	if (h->phase != PH_HTTP_CONNECT) {
		for (size_t i = 0; i < h->in_len && i < 8; i++)
			n += (size_t)snprintf(hex + n, sizeof(hex) - n, "%s%02x", i ? " " : "",
			                      h->in[i]);
		if (h->in_len > 8)
			snprintf(hex + n, sizeof(hex) - n, " ...");
	}
	finish(h, PARENT_BAD_REPLY, 0, "sent a malformed reply (%s%s%s)", bad,
	       hex[0] ? ": " : "", hex);
}

static void
watch(struct parent_handshake *h, int events)
{
	if (ev_is_active(&h->io) && (h->io.events & (EV_READ | EV_WRITE)) == events)
		return;
	ev_io_stop(h->loop, &h->io);
	ev_io_set(&h->io, h->fd, events);
	ev_io_start(h->loop, &h->io);
}

/* The next request, already in out, and a fresh reply to read. */
static void
next_step(struct parent_handshake *h, enum phase p, size_t len)
{
	h->phase = p;
	h->out_len = len;
	h->out_sent = 0;
	h->in_len = 0;
}

/* ---- reading a reply, not a byte past it ----------------------------------- */

/*
 * net.h's test, repeated: net.h includes the configuration, which reaches
 * this module through the parents' URLs, so including it would close a circle.
 */
static bool
would_block(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

typedef enum parent_wire (*socks_check)(const uint8_t *p, size_t len, size_t *need,
                                        const char **bad);

static enum got
read_socks(struct parent_handshake *h)
{
	socks_check check = h->phase == PH_GREETING ? parent_socks5_method_check
	                    : h->phase == PH_LOGIN  ? parent_socks5_login_check
	                                            : parent_socks5_reply_check;

	for (;;) {
		const char *bad = NULL;
		size_t need;
		ssize_t n;

		switch (check(h->in, h->in_len, &need, &bad)) {
		case PARENT_WIRE_WHOLE:
			return GOT_WHOLE;
		case PARENT_WIRE_BAD:
			fail_bad(h, bad);
			return GOT_ENDED;
		case PARENT_WIRE_SHORT:
			break;
		}
		/* Only what the reply is known to hold: the origin may be speaking behind it. */
		n = recv(h->fd, h->in + h->in_len, need - h->in_len, 0);
		if (n > 0) {
			h->in_len += (size_t)n;
			continue;
		}
		if (n < 0 && would_block())
			return GOT_LATER;
		fail_closed(h, n == 0 ? 0 : errno);
		return GOT_ENDED;
	}
}

/* Takes n bytes off the socket that a peek has shown are there. */
static int
consume(int fd, uint8_t *buf, size_t n)
{
	while (n > 0) {
		ssize_t got = recv(fd, buf, n, 0);

		if (got <= 0)
			return -1;
		n -= (size_t)got;
	}
	return 0;
}

/*
 * An HTTP head has no length up front: peek, let the reader say how much
 * of what is there is head, and take exactly that. Taking the head's bytes
 * as they come, not only at its end, matters: bytes left queued keep the
 * socket readable, and a parent that stalls mid-head would spin the loop.
 */
static enum got
read_http(struct parent_handshake *h)
{
	uint8_t peek[2048];

	for (;;) {
		const char *bad = NULL;
		size_t took = 0;
		ssize_t n = recv(h->fd, peek, sizeof(peek), MSG_PEEK);
		enum parent_wire v;

		if (n == 0 || (n < 0 && !would_block())) {
			fail_closed(h, n == 0 ? 0 : errno);
			return GOT_ENDED;
		}
		if (n < 0)
			return GOT_LATER;
		v = parent_http_reply_feed(&h->http, peek, (size_t)n, &took, &bad);
		if (v == PARENT_WIRE_BAD) {
			fail_bad(h, bad);
			return GOT_ENDED;
		}
		if (consume(h->fd, peek, took) < 0) {
			fail_closed(h, errno);
			return GOT_ENDED;
		}
		if (v == PARENT_WIRE_WHOLE)
			return GOT_WHOLE;
	}
}

/* ---- what a whole reply means --------------------------------------------- */

/* The method the parent chose; true when the handshake goes on. */
static bool
after_method(struct parent_handshake *h)
{
	const char *user = h->hop->user;
	const char *why = NULL;
	ssize_t n;

	switch (h->in[1]) {
	case PARENT_SOCKS5_NO_AUTH:
		break;
	case PARENT_SOCKS5_PASSWORD:
		/* Not offered: it wants what it was not given, whatever the RFC says of that. */
		if (!user) {
			finish(h, PARENT_AUTH_FAILED, 0, "wants a username and password");
			return false;
		}
		n = parent_socks5_login((uint8_t *)h->out, sizeof(h->out), user,
		                        h->hop->password ? h->hop->password : "", &why);
		/* start() built it once already: it cannot fail here. */
		next_step(h, PH_LOGIN, n < 0 ? 0 : (size_t)n);
		return true;
	case PARENT_SOCKS5_NO_METHOD:
		if (user)
			finish(h, PARENT_AUTH_FAILED, 0,
			       "accepts none of the methods offered "
			       "(no authentication, username and password)");
		else
			finish(h, PARENT_AUTH_FAILED, 0,
			       "wants a username and password (it accepts none of the methods "
			       "offered: no authentication)");
		return false;
	default:
		finish(h, PARENT_BAD_REPLY, 0,
		       "sent a malformed reply (it chose method 0x%02x, which was not offered)",
		       h->in[1]);
		return false;
	}
	n = parent_socks5_connect((uint8_t *)h->out, sizeof(h->out), h->host, h->port,
	                          h->has_addr ? (const struct sockaddr *)&h->addr : NULL, &why);
	next_step(h, PH_SOCKS_CONNECT, n < 0 ? 0 : (size_t)n);
	return true;
}

static bool
after_login(struct parent_handshake *h)
{
	const char *why = NULL;
	ssize_t n;

	if (h->in[1] != 0) {
		finish(h, PARENT_AUTH_FAILED, 0, "rejected the username and password");
		return false;
	}
	n = parent_socks5_connect((uint8_t *)h->out, sizeof(h->out), h->host, h->port,
	                          h->has_addr ? (const struct sockaddr *)&h->addr : NULL, &why);
	next_step(h, PH_SOCKS_CONNECT, n < 0 ? 0 : (size_t)n);
	return true;
}

static void
after_socks_connect(struct parent_handshake *h)
{
	uint8_t rep = h->in[1];
	const char *text = parent_socks5_rep_text(rep);
	char origin[HOST_WORDS_MAX + 16];

	origin_words(h, origin, sizeof(origin));
	switch (rep) {
	case 0x00:
		finish(h, PARENT_OPEN, 0, "opened %s", origin);
		return;
	case 0x03:   /* network unreachable */
	case 0x04:   /* host unreachable */
	case 0x05:   /* connection refused, by the origin */
	case 0x06:   /* TTL expired */
		finish(h, PARENT_ORIGIN_UNREACHABLE, 0, "could not reach %s: %s", origin, text);
		return;
	default:
		/* 1 general failure, 2 ruleset, 7 command, 8 address type: the parent says no. */
		finish(h, PARENT_REFUSED, 0, "refused %s: %s", origin, text);
		return;
	}
}

static void
after_http_connect(struct parent_handshake *h)
{
	int code = h->http.status;
	char origin[HOST_WORDS_MAX + 16], status[PARENT_REASON_MAX + 8];

	origin_words(h, origin, sizeof(origin));
	snprintf(status, sizeof(status), "%d%s%s", code, h->http.reason[0] ? " " : "",
	         h->http.reason);
	/* RFC 9110 9.3.6: a 2xx's Content-Length or Transfer-Encoding means nothing here. */
	if (code / 100 == 2)
		finish(h, PARENT_OPEN, 0, "opened %s: %s", origin, status);
	else if (code == 407 && h->hop->user)
		finish(h, PARENT_AUTH_FAILED, 0, "rejected the username and password: %s", status);
	else if (code == 407)
		finish(h, PARENT_AUTH_FAILED, 0, "wants a username and password: %s", status);
	else if (code == 502 || code == 503 || code == 504)
		/*
		 * A 504 stays a 504: the time ran out past the parent, and a
		 * client (or a proxy in front) tells a slow origin from a broken
		 * path by it, as when the parent is talked to directly.
		 */
		finish(h, PARENT_ORIGIN_UNREACHABLE, code == 504 ? 504 : 502,
		       "could not reach %s: %s", origin, status);
	else
		finish(h, PARENT_REFUSED, 0, "refused %s: %s", origin, status);
}

/* A whole reply is in: true when the handshake goes on with a next request. */
static bool
after_reply(struct parent_handshake *h)
{
	switch ((enum phase)h->phase) {
	case PH_GREETING:
		return after_method(h);
	case PH_LOGIN:
		return after_login(h);
	case PH_SOCKS_CONNECT:
		after_socks_connect(h);
		return false;
	case PH_HTTP_CONNECT:
		after_http_connect(h);
		return false;
	case PH_OFF:
		break;
	}
	return false;
}

/* Sends what is left of the request, reads the reply, on to the next, until the socket waits. */
static void
step(struct parent_handshake *h)
{
	for (;;) {
		enum got got;

		while (h->out_sent < h->out_len) {
			ssize_t n = send(h->fd, h->out + h->out_sent, h->out_len - h->out_sent,
			                 MSG_NOSIGNAL);

			if (n < 0 && would_block()) {
				watch(h, EV_WRITE);
				return;
			}
			if (n <= 0) {
				fail_closed(h, n < 0 ? errno : EPIPE);
				return;
			}
			h->out_sent += (size_t)n;
		}
		got = h->phase == PH_HTTP_CONNECT ? read_http(h) : read_socks(h);
		if (got == GOT_ENDED)
			return;
		if (got == GOT_LATER) {
			watch(h, EV_READ);
			return;
		}
		if (!after_reply(h))
			return;
	}
}

static void
io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	step(container_of(w, struct parent_handshake, io));
}

static void
timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct parent_handshake *h = container_of(w, struct parent_handshake, timer);
	char words[HOST_WORDS_MAX + 32];
	const char *what = step_words(h, words, sizeof(words));

	(void)loop;
	(void)revents;
	if (h->out_sent < h->out_len)
		finish(h, PARENT_TIMEOUT, 0, "did not take %s within %g s", what, h->timeout);
	else if (reply_begun(h))
		finish(h, PARENT_TIMEOUT, 0, "did not finish its answer to %s within %g s", what,
		       h->timeout);
	else
		finish(h, PARENT_TIMEOUT, 0, "did not answer %s within %g s", what, h->timeout);
}

/* ---- start and cancel ------------------------------------------------------ */

/*
 * Everything that cannot be asked is found before a byte goes out: the
 * CONNECT (and the login) are built once here only to see that they can
 * be. False when the handshake ended.
 */
static bool
prepare_socks(struct parent_handshake *h)
{
	const struct sockaddr *addr = h->has_addr ? (const struct sockaddr *)&h->addr : NULL;
	char origin[HOST_WORDS_MAX + 16];
	const char *why = NULL;
	uint8_t probe[PARENT_SEND_MAX];

	origin_words(h, origin, sizeof(origin));
	if (parent_socks5_connect(probe, sizeof(probe), h->host, h->port, addr, &why) < 0) {
		finish(h, PARENT_REFUSED, 0, "cannot be asked for %s: %s", origin, why);
		return false;
	}
	/* socks5:// promises that no name leaves this machine: without an address, nothing goes. */
	if (h->hop->kind == PARENT_SOCKS5 && !addr && probe[3] == 0x03) {
		finish(h, PARENT_REFUSED, 0,
		       "cannot be asked for %s: socks5 sends an address, and none was given",
		       origin);
		return false;
	}
	if (h->hop->user &&
	    parent_socks5_login(probe, sizeof(probe), h->hop->user,
	                        h->hop->password ? h->hop->password : "", &why) < 0) {
		finish(h, PARENT_AUTH_FAILED, 0, "cannot be sent the credentials: %s", why);
		return false;
	}
	next_step(h, PH_GREETING, parent_socks5_greeting((uint8_t *)h->out, h->hop->user != NULL));
	return true;
}

/*
 * Built without credentials first, so that a failure with them is known
 * to be theirs (an auth outcome) and one without is the origin's (refused).
 */
static bool
prepare_http(struct parent_handshake *h)
{
	char origin[HOST_WORDS_MAX + 16];
	const char *why = NULL;
	ssize_t n = parent_http_connect(h->out, sizeof(h->out), h->host, h->port, NULL, NULL, &why);

	origin_words(h, origin, sizeof(origin));
	if (n < 0) {
		finish(h, PARENT_REFUSED, 0, "cannot be asked for %s: %s", origin, why);
		return false;
	}
	if (h->hop->user) {
		n = parent_http_connect(h->out, sizeof(h->out), h->host, h->port, h->hop->user,
		                        h->hop->password ? h->hop->password : "", &why);
		if (n < 0) {
			finish(h, PARENT_AUTH_FAILED, 0, "cannot be sent the credentials: %s", why);
			return false;
		}
	}
	parent_http_reply_init(&h->http);
	next_step(h, PH_HTTP_CONNECT, (size_t)n);
	return true;
}

void
parent_handshake_start(struct parent_handshake *h, struct ev_loop *loop, int fd,
                       const struct parent_hop *hop, const char *host, uint16_t port,
                       const struct sockaddr *addr, double timeout,
                       parent_handshake_done done)
{
	h->loop = loop;
	h->fd = fd;
	h->hop = hop;
	h->host = host;
	h->port = port;
	h->has_addr = false;
	if (hop->kind == PARENT_SOCKS5 && addr &&
	    (addr->sa_family == AF_INET || addr->sa_family == AF_INET6)) {
		memcpy(&h->addr, addr,
		       addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
		                                  : sizeof(struct sockaddr_in6));
		h->has_addr = true;
	}
	h->timeout = timeout;
	h->done = done;
	h->phase = PH_OFF;
	h->out_len = h->out_sent = h->in_len = 0;
	ev_io_init(&h->io, io_cb, fd, EV_WRITE);
	ev_timer_init(&h->timer, timer_cb, timeout, 0.);
	if (!(hop->kind == PARENT_HTTP ? prepare_http(h) : prepare_socks(h)))
		return;
	ev_timer_start(loop, &h->timer);
	/* A socket just connected can almost always take the request now: no wait for writable. */
	step(h);
}

void
parent_handshake_cancel(struct parent_handshake *h)
{
	if (h->phase == PH_OFF)
		return;
	ev_io_stop(h->loop, &h->io);
	ev_timer_stop(h->loop, &h->timer);
	h->phase = PH_OFF;
}
