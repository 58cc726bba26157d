#include "kp/conn.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include "kp/evglue.h"
#include "kp/net.h"

static ssize_t
tcp_recv(struct conn *c, void *p, size_t len)
{
	return recv(c->fd, p, len, 0);
}

static ssize_t
tcp_sendv(struct conn *c, const struct iovec *iov, int iovcnt)
{
	struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};

	return sendmsg(c->fd, &msg, MSG_NOSIGNAL);
}

static bool
tcp_idle_alive(struct conn *c)
{
	return net_idle_alive(c->fd);
}

const struct conn_ops conn_tcp_ops = {
	.recv = tcp_recv,
	.sendv = tcp_sendv,
	.idle_alive = tcp_idle_alive,
	.can_splice = true,
};

/*
 * Socket readiness becomes what the owner waits for: a TLS read that has to
 * write first is woken by writability and still told EV_READ.
 */
static void
deliver(struct conn *c, short socket_ready)
{
	if (c->want_read && c->read_on == socket_ready) {
		c->readable = true;
		c->on_io(c, EV_READ);
	} else if (c->want_write && c->write_on == socket_ready) {
		c->on_io(c, EV_WRITE);
	} else if (socket_ready == EV_READ && c->want_read) {
		/* Fed for bytes pending inside the layer. */
		c->readable = true;
		c->on_io(c, EV_READ);
	} else {
		c->on_io(c, socket_ready);
	}
}

static void
read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	deliver(container_of(w, struct conn, rio), EV_READ);
}

static void
write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	deliver(container_of(w, struct conn, wio), EV_WRITE);
}

void
conn_clear_facts(struct conn *c)
{
	c->eof = c->reset = c->readable = c->write_failed = false;
	c->read_on = EV_READ;
	c->write_on = EV_WRITE;
}

void
conn_init(struct conn *c, struct ev_loop *loop, int fd, const struct conn_ops *ops,
          conn_io_fn on_io)
{
	c->loop = loop;
	c->ops = ops;
	c->on_io = on_io;
	c->fd = -1;
	c->tls = NULL;
	ev_io_init(&c->rio, read_cb, -1, EV_READ);
	ev_io_init(&c->wio, write_cb, -1, EV_WRITE);
	conn_set_fd(c, fd);
}

void
conn_set_fd(struct conn *c, int fd)
{
	conn_watch(c, false, false);
	c->fd = fd;
	ev_io_set(&c->rio, fd, EV_READ);
	ev_io_set(&c->wio, fd, EV_WRITE);
	conn_clear_facts(c);
}

void
conn_watch(struct conn *c, bool readable, bool writable)
{
	bool on_read, on_write;

	if (c->ops->watch) {
		c->want_read = readable;
		c->want_write = writable;
		c->ops->watch(c, readable, writable);
		return;
	}
	on_read = (readable && c->read_on == EV_READ) || (writable && c->write_on == EV_READ);
	on_write = (writable && c->write_on == EV_WRITE) || (readable && c->read_on == EV_WRITE);

	c->want_read = readable;
	c->want_write = writable;
	io_watch(c->loop, &c->rio, &c->wio, on_read, on_write);
	/*
	 * Bytes the layer holds raise no readiness of their own. Once a read
	 * found nothing (readable cleared), what the layer holds is an
	 * incomplete record, and the socket will say when the rest comes.
	 */
	if (readable && c->readable && c->ops->pending && c->ops->pending(c) > 0)
		ev_feed_event(c->loop, &c->rio, EV_READ);
}

void
conn_close(struct conn *c)
{
	conn_watch(c, false, false);
	/* An event fed for it (a memory end's) must not reach a closed end. */
	ev_clear_pending(c->loop, &c->rio);
	ev_clear_pending(c->loop, &c->wio);
	if (c->ops->release)
		c->ops->release(c);
	net_close(&c->fd);
}

int
conn_shutdown_write(struct conn *c)
{
	if (c->ops->end_writes)
		c->ops->end_writes(c);
	return c->fd >= 0 ? shutdown(c->fd, SHUT_WR) : 0;
}

enum move_status
conn_read(struct conn *c, void *p, size_t len, size_t *got)
{
	ssize_t n;

	*got = 0;
	if (c->eof)
		return c->reset ? MOVE_ERROR : MOVE_EOF;
	if (len == 0)
		return MOVE_FULL;
	n = c->ops->recv(c, p, len);
	if (n > 0) {
		*got = (size_t)n;
		return MOVE_OK;
	}
	if (n == 0) {
		c->eof = true;
		return MOVE_EOF;
	}
	if (net_would_block()) {
		c->readable = false;
		return MOVE_AGAIN;
	}
	c->eof = c->reset = true;
	return MOVE_ERROR;
}

enum move_status
conn_fill(struct conn *c, struct buf *b, size_t *got)
{
	enum move_status r;

	if (buf_room(b) == 0)
		buf_compact(b);
	r = conn_read(c, buf_tail(b), buf_room(b), got);
	if (r == MOVE_OK)
		b->end += *got;
	return r;
}

ssize_t
conn_send_two(struct conn *c, const char *a, size_t alen, const char *b, size_t blen)
{
	struct iovec iov[2] = {{(void *)a, alen}, {(void *)b, blen}};
	ssize_t w = c->ops->sendv(c, alen ? iov : iov + 1, (alen ? 1 : 0) + (blen ? 1 : 0));

	if (w >= 0)
		return w;
	if (net_would_block())
		return 0;
	return -1;
}

/*
 * Linux's struct tcp_info (include/uapi/linux/tcp.h) as far as the delivery
 * rate, by its ABI: C libraries whose copy of the struct stops earlier
 * (glibc's) still read every figure the kernel fills in.
 */
struct tcp_figures {
	uint8_t state, ca_state, retransmits, probes, backoff, options, wscales, flags;
	uint32_t rto, ato, snd_mss, rcv_mss, unacked, sacked, lost, retrans, fackets;
	uint32_t last_data_sent, last_ack_sent, last_data_recv, last_ack_recv;
	uint32_t pmtu, rcv_ssthresh, rtt, rttvar, snd_ssthresh, snd_cwnd, advmss, reordering;
	uint32_t rcv_rtt, rcv_space, total_retrans;
	uint64_t pacing_rate, max_pacing_rate, bytes_acked, bytes_received;
	uint32_t segs_out, segs_in, notsent_bytes, min_rtt, data_segs_in, data_segs_out;
	uint64_t delivery_rate;   /* Linux 4.9 */
};

struct conn_path
conn_path_figures(const struct conn *c)
{
	struct conn_path p = {0, 0};
	struct tcp_figures ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (c->fd < 0 || getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return p;
	if (len >= offsetof(struct tcp_figures, rtt) + sizeof(ti.rtt))
		p.rtt = ti.rtt / 1e6;
	if (len >= offsetof(struct tcp_figures, delivery_rate) + sizeof(ti.delivery_rate))
		p.delivery_rate = (double)ti.delivery_rate;
	return p;
}
