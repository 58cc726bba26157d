/*
 * The bytes of a handshake with a parent proxy, and nothing else: the
 * requests of a SOCKS5 session (RFC 1928, with RFC 1929's username and
 * password) and of an HTTP CONNECT, and readers of the parent's replies.
 * No I/O and no state beyond what the caller hands in, so the unit tests
 * and the fuzzer reach every rule without a socket.
 *
 * A reader looks at the bytes of a reply received so far and says whether
 * they are a valid start (and how long the reply is at least), a whole
 * reply (and exactly how long, so that not a byte past it is read), or
 * bytes no valid reply starts with. It says so as soon as the prefix
 * proves it: a parent speaking another protocol is told apart at its first
 * wrong byte, not at the deadline.
 */
#ifndef KP_PARENT_WIRE_H
#define KP_PARENT_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* The longest SOCKS5 reply: VER REP RSV ATYP, a 255-byte name after its length, a port. */
#define PARENT_SOCKS5_REPLY_MAX 262
/* The longest SOCKS5 greeting: VER NMETHODS and two methods. */
#define PARENT_SOCKS5_GREETING_MAX 4
/* The most an HTTP parent's answer to CONNECT may take, interim heads included. */
#define PARENT_HTTP_HEAD_MAX 8192
/* The most of its reason phrase kept for the words. */
#define PARENT_REASON_MAX 64

/* SOCKS5 method codes (RFC 1928 section 3). */
#define PARENT_SOCKS5_NO_AUTH 0x00
#define PARENT_SOCKS5_PASSWORD 0x02
#define PARENT_SOCKS5_NO_METHOD 0xff

/* What the bytes of a reply so far are. */
enum parent_wire {
	PARENT_WIRE_SHORT,   /* a valid start: the reply has at least *need bytes, more than len */
	PARENT_WIRE_WHOLE,   /* a whole reply of exactly *need bytes; anything after is not its */
	PARENT_WIRE_BAD,     /* no valid reply starts with these bytes; *bad says why */
};

/* ---- requests: each returns its length, or -1 with *why saying what cannot be sent ---- */

/* The methods offered: "no authentication", and username/password when there are credentials. */
size_t parent_socks5_greeting(uint8_t out[PARENT_SOCKS5_GREETING_MAX], bool password);

/* RFC 1929's request. -1 when the username or the password is over 255 bytes. */
ssize_t parent_socks5_login(uint8_t *out, size_t cap, const char *user, const char *password,
                            const char **why);

/*
 * CONNECT to host:port. With addr (IPv4 or IPv6), that address is sent;
 * without, host is sent as an address when it is an IPv4 or IPv6 literal
 * (brackets allowed), else as a name (1 to 255 bytes, no spaces or control
 * characters).
 */
ssize_t parent_socks5_connect(uint8_t *out, size_t cap, const char *host, uint16_t port,
                              const struct sockaddr *addr, const char **why);

/*
 * "CONNECT host:port HTTP/1.1", Host, and Proxy-Authorization (Basic) when
 * user is not NULL; an IPv6 literal goes in brackets. -1 when host has
 * spaces or control characters, when user has a colon (Basic cannot carry
 * it), or when it does not fit in cap.
 */
ssize_t parent_http_connect(char *out, size_t cap, const char *host, uint16_t port,
                            const char *user, const char *password, const char **why);
/*
 * "Proxy-Authorization: Basic ...\r\n" for user and password (RFC 7617),
 * NUL-terminated; its length, or -1 with why when user has a colon or it
 * does not fit in cap.
 */
ssize_t parent_http_authorization(char *out, size_t cap, const char *user,
                                  const char *password, const char **why);

/* ---- SOCKS5 replies: the parent's choice, its word on the login, its answer to CONNECT ---- */

/* VER 5, METHOD: when whole, p[1] is the method chosen. */
enum parent_wire parent_socks5_method_check(const uint8_t *p, size_t len, size_t *need,
                                            const char **bad);

/*
 * VER, STATUS: when whole, p[1] is the status (0: accepted). VER is RFC
 * 1929's 1, or 5, which enough servers send that clients take it too.
 */
enum parent_wire parent_socks5_login_check(const uint8_t *p, size_t len, size_t *need,
                                           const char **bad);

/*
 * VER 5, REP (0 to 8), RSV 0, ATYP 1, 3 or 4, BND.ADDR, BND.PORT: when
 * whole, p[1] is REP. How long it is is known from its first 5 bytes.
 */
enum parent_wire parent_socks5_reply_check(const uint8_t *p, size_t len, size_t *need,
                                           const char **bad);

/* RFC 1928's words for a reply code ("connection not allowed by ruleset"); NULL if unassigned. */
const char *parent_socks5_rep_text(uint8_t rep);

/* ---- HTTP: the head of the answer to CONNECT, read as it arrives ---- */

/* Where in the head the next byte falls; parent_wire.c's own. */
enum parent_http_at {
	PARENT_HTTP_VERSION,    /* "HTTP/1." so far: vpos bytes of it */
	PARENT_HTTP_MINOR,      /* the minor version's digit */
	PARENT_HTTP_CODE_SP,    /* the space before the status code */
	PARENT_HTTP_CODE,       /* its three digits: vpos of them so far */
	PARENT_HTTP_CODE_END,   /* a space before the reason, or the line's end */
	PARENT_HTTP_REASON,     /* the reason phrase */
	PARENT_HTTP_LINE_START, /* a field line, or the empty line that ends the head */
	PARENT_HTTP_NAME,       /* a field's name, up to its colon */
	PARENT_HTTP_VALUE,      /* a field's value (or a folded line), up to the line's end */
	PARENT_HTTP_LINE_CR,    /* a CR ended a line: an LF must follow */
	PARENT_HTTP_END_CR,     /* a CR on an empty line: the LF after it ends the head */
};

/*
 * What is kept of a head while it arrives; initialise with
 * parent_http_reply_init. Bounded whatever the parent sends: the reason is
 * cut, the rest is counted, not kept.
 */
struct parent_http_reply {
	size_t len;                 /* bytes of the answer taken, interim heads included */
	int status;                 /* the code of the head being read; 0 before its digits */
	enum parent_http_at at;     /* where the next byte falls */
	unsigned vpos;              /* place inside "HTTP/1." or inside the code */
	bool field_seen;            /* a field line came before: a folded line may follow */
	size_t reason_len;          /* bytes of reason, at most PARENT_REASON_MAX */
	char reason[PARENT_REASON_MAX + 1];   /* printable ASCII only, NUL-terminated */
};

void parent_http_reply_init(struct parent_http_reply *r);

/*
 * Takes bytes of the answer, in pieces as they arrive. SHORT: all len
 * bytes were the head's and it goes on (*took = len). WHOLE: the final
 * head ended after *took bytes of p; r->status and r->reason are its. BAD:
 * *bad says what is wrong (not an HTTP/1.x status line, a malformed line,
 * or no end within PARENT_HTTP_HEAD_MAX bytes). Interim (1xx) heads are
 * taken and passed over: the final one decides.
 */
enum parent_wire parent_http_reply_feed(struct parent_http_reply *r, const uint8_t *p,
                                        size_t len, size_t *took, const char **bad);

#endif
