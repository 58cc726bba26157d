#include "kp/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/*
 * Every socket option the daemon sets, for every kind of socket, in one
 * place with one error exit, so what a flag does to a socket can be read
 * (and tested) here alone.
 */
int
net_tune(int fd, enum net_role role, const struct kp_config *cfg, const char **failed)
{
	int one = 1, v;
	const char *opt;

	if (role == NET_LISTENER) {
		opt = "SO_REUSEADDR";
		if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
			goto fail;
		return 0;
	}
	/*
	 * Heads and bodies go out in separate writes; without TCP_NODELAY a
	 * small response would wait for the peer's delayed ACK.
	 */
	opt = "TCP_NODELAY";
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		goto fail;
	if (role == NET_CLIENT)
		return 0;
	/*
	 * Buffer sizes stay unset unless asked for: setting SO_RCVBUF switches
	 * off Linux's receive autotuning, and a fixed buffer caps a stream at
	 * buffer / RTT. Set before connect(), so the window scale offered in the
	 * SYN fits them. SO_*BUFFORCE lets root go past net.core.[rw]mem_max.
	 */
	if (cfg->upstream_rcvbuf) {
		v = (int)cfg->upstream_rcvbuf;
		opt = "SO_RCVBUF";
		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) < 0 &&
		    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) < 0)
			goto fail;
	}
	if (cfg->upstream_sndbuf) {
		v = (int)cfg->upstream_sndbuf;
		opt = "SO_SNDBUF";
		if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)) < 0 &&
		    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) < 0)
			goto fail;
	}
	if (cfg->congestion) {
		opt = "TCP_CONGESTION";
		if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cfg->congestion,
		               (socklen_t)strlen(cfg->congestion)) < 0)
			goto fail;
	}
	/* Pooled connections sit idle for long: probes notice a path that died. */
	if (cfg->tcp_keepalive) {
		int idle = (int)cfg->tcp_keepalive, intvl = idle / 3 ? idle / 3 : 1, cnt = 3;

		opt = "SO_KEEPALIVE";
		if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0 ||
		    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) < 0 ||
		    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) < 0 ||
		    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) < 0)
			goto fail;
	}
	return 0;
fail:
	if (failed)
		*failed = opt;
	return -1;
}

bool
net_literal(const char *host, union net_addr *a)
{
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, host, &a->in.sin_addr) == 1)
		a->in.sin_family = AF_INET;
	else if (inet_pton(AF_INET6, host, &a->in6.sin6_addr) == 1)
		a->in6.sin6_family = AF_INET6;
	return a->sa.sa_family != 0;
}

int
net_listen(const char *addr, unsigned port, int backlog, const struct kp_config *cfg)
{
	union net_addr a;
	socklen_t len;
	int fd, one = 1, saved;

	if (!net_literal(addr, &a)) {
		errno = EINVAL;
		return -1;
	}
	if (a.sa.sa_family == AF_INET) {
		a.in.sin_port = htons((uint16_t)port);
		len = sizeof(a.in);
	} else {
		a.in6.sin6_port = htons((uint16_t)port);
		len = sizeof(a.in6);
	}
	fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (net_tune(fd, NET_LISTENER, cfg, NULL) < 0)
		goto fail;
	/* "::" means IPv6 only here; bind 0.0.0.0 separately for IPv4. */
	if (a.sa.sa_family == AF_INET6 &&
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0)
		goto fail;
	if (bind(fd, &a.sa, len) < 0 || listen(fd, backlog) < 0)
		goto fail;
	return fd;
fail:
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

int
net_connect_start(const struct sockaddr *sa, socklen_t len, const struct kp_config *cfg)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), saved;

	if (fd < 0)
		return -1;
	if (net_tune(fd, NET_UPSTREAM, cfg, NULL) == 0 &&
	    (connect(fd, sa, len) == 0 || errno == EINPROGRESS))
		return fd;
	saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

int
net_connect_finish(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return -1;
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

bool
net_idle_alive(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

const char *
net_addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(sin6->sin6_port));
	} else if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(sin->sin_port));
	} else {
		snprintf(buf, len, "?");
	}
	return buf;
}

bool
net_would_block(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

void
net_close(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}
