/*
 * HTTPS pooling through interception, with real programs on both sides: a
 * private nginx serving HTTPS with a certificate from a CA this test makes
 * (openssl), the proxy with a CA of its own (--make-ca), and separate curl
 * processes as clients, each a new connection, the way a segment
 * downloader behaves.
 */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "parents.h"
#include "origin.h"
#include "wire.h"

/* curl's exit codes (curl(1), EXIT CODES) for the two ways a client is turned away here. */
#define CURL_RECV_ERROR 56     /* the CONNECT got an answer other than 2xx */
#define CURL_PEER_UNVERIFIED 60 /* the server's certificate did not verify */

#define CHUNK_LEN (2ull * 1024 * 1024)
#define BIG_LEN (64ull * 1024 * 1024)
#define CHUNKS 10

static struct proxy px;
static struct world the_world;

/* Everything one scenario made: certificates, nginx, its files. */
struct world {
	char dir[256];
	char origin_ca[300];      /* trusted by the proxy (--upstream-ca), not by clients */
	char proxy_ca[300];       /* --make-ca's certificate: what clients trust */
	char proxy_key[300];
	pid_t nginx;
	int port;
	char access_log[300];
};

/*
 * The origin's CA and a certificate for "localhost" only (no IP address,
 * so a client asking for 127.0.0.1 sees a name mismatch).
 */
static void
make_origin_certificates(const struct world *w)
{
	const char *openssl = require_program("openssl", "KP_OPENSSL");
	char key[300], csr[300], crt[300], cakey[300], ext[300], serial[300], log[300];

	path_join(cakey, sizeof(cakey), w->dir, "origin-ca.key");
	path_join(key, sizeof(key), w->dir, "origin.key");
	path_join(csr, sizeof(csr), w->dir, "origin.csr");
	path_join(crt, sizeof(crt), w->dir, "origin.crt");
	path_join(ext, sizeof(ext), w->dir, "origin.ext");
	path_join(serial, sizeof(serial), w->dir, "origin-ca.srl");
	path_join(log, sizeof(log), w->dir, "helper.log");
	write_text_file(ext, "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n");
	{
		const char *argv[] = {openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
		                      "ec_paramgen_curve:P-256", "-nodes", "-keyout", cakey, "-out",
		                      w->origin_ca, "-days", "2", "-subj", "/CN=kp test origin CA",
		                      "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
		                      "keyUsage=critical,keyCertSign", NULL};
		run_ok(argv, log);
	}
	{
		const char *argv[] = {openssl, "req", "-newkey", "ec", "-pkeyopt",
		                      "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", csr,
		                      "-subj", "/CN=localhost", NULL};
		run_ok(argv, log);
	}
	{
		const char *argv[] = {openssl, "x509", "-req", "-in", csr, "-CA", w->origin_ca,
		                      "-CAkey", cakey, "-CAserial", serial, "-CAcreateserial",
		                      "-out", crt, "-days", "2", "-extfile", ext, NULL};
		run_ok(argv, log);
	}
}

/* The proxy's own CA, as a user makes it. */
static void
make_proxy_ca(struct world *w)
{
	char dir[300], log[300];
	/* Constrained to the names the scenarios use (leaf_cache_is_bounded: .2 to .5). */
	const char *argv[] = {getenv("KP_BINARY"), "--make-ca", dir,           "--intercept",
	                      "localhost",         "--intercept", "127.0.0.1", "--intercept",
	                      "127.0.0.2",         "--intercept", "127.0.0.3", "--intercept",
	                      "127.0.0.4",         "--intercept", "127.0.0.5", NULL};
	struct stat st;

	path_join(dir, sizeof(dir), w->dir, "proxy-ca");
	path_join(log, sizeof(log), w->dir, "helper.log");
	run_ok(argv, log);
	path_join(w->proxy_ca, sizeof(w->proxy_ca), dir, "ca.crt");
	path_join(w->proxy_key, sizeof(w->proxy_key), dir, "ca.key");
	assert_int_equal(stat(w->proxy_key, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
}

/* What configure() writes nginx's config with. */
static struct {
	const char *keepalive;
	int ws_origin_port;          /* 0: no /ws location */
	char conf[300], errlog[300];
} nginx_setup;

static void
configure(void *arg)
{
	struct world *w = arg;
	char crt[300], key[300], text[8192], ws[512] = "";

	path_join(crt, sizeof(crt), w->dir, "origin.crt");
	path_join(key, sizeof(key), w->dir, "origin.key");
	w->port = free_port();
	/* WebSockets passed on to the scripted origin, as nginx does it. */
	if (nginx_setup.ws_origin_port)
		snprintf(ws, sizeof(ws),
		         "        location /ws {\n"
		         "            proxy_pass http://127.0.0.1:%d;\n"
		         "            proxy_http_version 1.1;\n"
		         "            proxy_set_header Upgrade $http_upgrade;\n"
		         "            proxy_set_header Connection \"upgrade\";\n"
		         "        }\n",
		         nginx_setup.ws_origin_port);
	snprintf(text, sizeof(text),
	         "pid %s/nginx.pid;\n"
	         "error_log %s info;\n"
	         "events { worker_connections 256; }\n"
	         "http {\n"
	         "    default_type application/octet-stream;\n"
	         "    log_format kp '$connection $status \"$request\"';\n"
	         "    access_log %s kp;\n"
	         "    client_body_temp_path %s/tmp_body;\n"
	         "    proxy_temp_path %s/tmp_proxy;\n"
	         "    fastcgi_temp_path %s/tmp_fastcgi;\n"
	         "    uwsgi_temp_path %s/tmp_uwsgi;\n"
	         "    scgi_temp_path %s/tmp_scgi;\n"
	         "    keepalive_timeout %s;\n"
	         "    keepalive_requests 10000;\n"
	         /* gzip: curl --compressed then gets a chunked answer (no length). */
	         "    gzip on; gzip_proxied any; gzip_min_length 0;\n"
	         "    gzip_types application/octet-stream;\n"
	         "    server {\n"
	         "        listen 127.0.0.1:%d ssl;\n"
	         "        ssl_certificate %s;\n"
	         "        ssl_certificate_key %s;\n"
	         "        root %s/www;\n"
	         /* A pooled connection that dies under its second request. */
	         "        location /flaky/ {\n"
	         "            if ($connection_requests = 2) { return 444; }\n"
	         "        }\n"
	         "%s"
	         "    }\n"
	         "}\n",
	         w->dir, nginx_setup.errlog, w->access_log, w->dir, w->dir, w->dir, w->dir, w->dir,
	         nginx_setup.keepalive, w->port, crt, key, w->dir, ws);
	write_text_file(nginx_setup.conf, text);
}

/* nginx on HTTPS; keepalive_timeout as given; gzip makes curl --compressed answers chunked. */
static void
nginx_start(struct world *w, const char *keepalive, int ws_origin_port)
{
	char out[300];
	int *const ports[] = {&w->port};

	nginx_setup.keepalive = keepalive;
	nginx_setup.ws_origin_port = ws_origin_port;
	path_join(nginx_setup.conf, sizeof(nginx_setup.conf), w->dir, "nginx.conf");
	path_join(nginx_setup.errlog, sizeof(nginx_setup.errlog), w->dir, "error.log");
	path_join(out, sizeof(out), w->dir, "nginx.out");
	path_join(w->access_log, sizeof(w->access_log), w->dir, "access.log");
	harness_watch_log(w->access_log, "nginx access log");
	w->nginx = harness_start_nginx(w->dir, nginx_setup.conf, nginx_setup.errlog, out, configure,
	                               w, ports, 1);
}

static void
nginx_stop(void *arg)
{
	struct world *w = arg;

	if (w->nginx > 0)
		stop_process(w->nginx, SIGQUIT, 5000);
	w->nginx = 0;
}

/*
 * Certificates, files and nginx; the proxy is each scenario's own. w must
 * outlive the scenario (nginx is stopped at teardown): the scenarios use
 * the file's one static world. ws_origin_port: where /ws is passed on to
 * as a WebSocket (0: nowhere).
 */
static void
world_make(struct world *w, const char *keepalive, int ws_origin_port)
{
	char www[300], file[300];

	memset(w, 0, sizeof(*w));
	snprintf(w->dir, sizeof(w->dir), "%s", harness_temp_dir());
	path_join(w->origin_ca, sizeof(w->origin_ca), w->dir, "origin-ca.crt");
	path_join(www, sizeof(www), w->dir, "www");
	assert_int_equal(mkdir(www, 0755), 0);
	path_join(file, sizeof(file), www, "chunk.bin");
	write_pattern_file(file, CHUNK_LEN);
	path_join(file, sizeof(file), www, "flaky");
	assert_int_equal(mkdir(file, 0755), 0);
	path_join(file, sizeof(file), www, "flaky/chunk.bin");
	write_pattern_file(file, CHUNK_LEN);
	path_join(file, sizeof(file), www, "big.bin");
	write_pattern_file(file, BIG_LEN);
	make_origin_certificates(w);
	make_proxy_ca(w);
	nginx_start(w, keepalive, ws_origin_port);
	harness_defer(nginx_stop, w);
}

/*
 * The proxy, intercepting localhost, with more flags; it verifies origins
 * against the test's origin CA, or with !trust_origin_ca the system store.
 */
static void
proxy_start_intercepting(const struct world *w, bool trust_origin_ca, const char *const more[])
{
	char ports[16];
	const char *args[32] = {"--intercept", "localhost", "--ca-cert", w->proxy_ca,
	                        "--ca-key", w->proxy_key, "--connect-ports", ports};
	size_t n = 8;

	snprintf(ports, sizeof(ports), "%d", w->port);
	if (trust_origin_ca) {
		args[n++] = "--upstream-ca";
		args[n++] = w->origin_ca;
	}
	for (size_t i = 0; more && more[i]; i++)
		args[n++] = more[i];
	args[n] = NULL;
	proxy_start(&px, args);
}

/*
 * One curl process through the proxy. Returns curl's exit code; the status
 * it saw goes to *status and the body to body_path.
 */
static int
curl(const struct world *w, const char *url, const char *cacert, const char *body_path,
     const char *extra, int *status)
{
	const char *bin = require_program("curl", "KP_CURL");
	char proxy[64], log[300];
	const char *argv[32];
	size_t n = 0;
	int rc;
	char *text;

	snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", px.port);
	path_join(log, sizeof(log), w->dir, "curl.out");
	unlink(log);
	argv[n++] = bin;
	argv[n++] = "-q";
	argv[n++] = "--silent";
	argv[n++] = "--show-error";
	argv[n++] = "--max-time";
	argv[n++] = "60";
	argv[n++] = "--noproxy";
	argv[n++] = "";
	argv[n++] = "--proxy";
	argv[n++] = proxy;
	argv[n++] = "--cacert";
	argv[n++] = cacert;
	argv[n++] = "--output";
	argv[n++] = body_path;
	argv[n++] = "--write-out";
	argv[n++] = "status=%{http_code}\n";
	if (extra)
		argv[n++] = extra;
	argv[n++] = url;
	argv[n] = NULL;
	rc = run_process(argv, log, 90000);
	text = read_file_all(log, NULL);
	*status = 0;
	if (text) {
		const char *s = strstr(text, "status=");

		if (s)
			*status = atoi(s + 7);
		if (rc != 0)
			print_message("curl %s: exit %d: %s\n", url, rc, text);
	}
	free(text);
	return rc;
}

/* curl exited with want, the code for the failure meant, not just with some failure. */
static void
curl_exit_is(int got, int want, const char *file, int line)
{
	if (got != want) {
		print_error("curl exited with %d, expected %d (%s)\n", got, want,
		            want == CURL_RECV_ERROR ? "the CONNECT refused"
		                                    : "a certificate that does not verify");
		_fail(file, line);
	}
}

#define assert_curl_exit(got, want) curl_exit_is((got), (want), __FILE__, __LINE__)

static void
url_of(char *buf, size_t size, const struct world *w, const char *host, const char *path)
{
	snprintf(buf, size, "https://%s:%d%s", host, w->port, path);
}

/* The file holds exactly len pattern bytes. */
static void
assert_pattern_file(const char *path, uint64_t len)
{
	size_t got;
	char *data = read_file_all(path, &got);
	static char want[1 << 16];

	assert_non_null(data);
	if (got != len) {
		free(data);
		fail_msg("%s: %zu bytes, expected %llu", path, got, (unsigned long long)len);
	}
	for (uint64_t off = 0; off < len; off += sizeof(want)) {
		size_t n = len - off < sizeof(want) ? (size_t)(len - off) : sizeof(want);

		pattern_fill(want, off, n);
		if (memcmp(want, data + off, n) != 0) {
			free(data);
			fail_msg("%s differs from the original at bytes %llu..", path,
			         (unsigned long long)off);
		}
	}
	free(data);
}

/* Distinct nginx connections in its access log, and the lines seen. */
static unsigned
origin_connections(const struct world *w, unsigned *lines)
{
	char *text = read_file_all(w->access_log, NULL);
	unsigned long seen[256];
	unsigned n = 0;

	*lines = 0;
	if (!text)
		return 0;
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		unsigned long conn = strtoul(l, NULL, 10);
		bool known = false;

		(*lines)++;
		for (unsigned i = 0; i < n; i++)
			known = known || seen[i] == conn;
		if (!known && n < 256)
			seen[n++] = conn;
	}
	free(text);
	return n;
}

/* ---- scenarios ------------------------------------------------------------ */

/*
 * The usual beginning: nginx, the proxy intercepting (with more flags), the
 * URL of path on host, and a file in the world to save the body to.
 */
static void
begin(const char *keepalive, const char *const more[], const char *host, const char *path,
      char url[256], char body[300])
{
	world_make(&the_world, keepalive, 0);
	proxy_start_intercepting(&the_world, true, more);
	url_of(url, 256, &the_world, host, path);
	path_join(body, 300, the_world.dir, "body.out");
}

static void
ten_clients_share_one_origin_connection(void)
{
	char url[256], body[300];
	unsigned lines;
	int status;

	begin("60s", NULL, "localhost", "/chunk.bin", url, body);
	for (int i = 0; i < CHUNKS; i++) {
		assert_int_equal(curl(&the_world, url, the_world.proxy_ca, body, NULL, &status), 0);
		assert_int_equal(status, 200);
		assert_pattern_file(body, CHUNK_LEN);
	}
	assert_int_equal(origin_connections(&the_world, &lines), 1);
	assert_int_equal(lines, CHUNKS);
	assert_int_equal(stats_get(proxy_stats(&px), "intercepted"), CHUNKS);
	assert_int_equal(stats_get(proxy_stats(&px), "tls upstream"), 1);
	proxy_stop(&px);
}

/*
 * Rule: an intercepted origin reached through a parent is one pooled path
 * through it: a SOCKS5 session, or a CONNECT through an HTTP parent, with
 * TLS inside, reused by every client connection that follows.
 */
static void
intercepted_origin_through_a_parent_is_pooled(void)
{
	static struct parent_proc socks, http;
	struct parent_proc *parents[] = {&socks, &http};
	char url[256], body[300];
	unsigned lines;
	int status;

	if (!parent_start_microsocks(&socks, NULL, NULL))
		parent_skip(&socks);
	if (!parent_start_squid(&http, "kpuser", "kp-secret"))
		parent_skip(&http);
	for (unsigned i = 0; i < 2; i++) {
		const char *more[] = {"--parent", parents[i]->url, NULL};

		begin("60s", more, "localhost", "/chunk.bin", url, body);
		for (int c = 0; c < 4; c++) {
			assert_int_equal(curl(&the_world, url, the_world.proxy_ca, body, NULL, &status), 0);
			assert_int_equal(status, 200);
			assert_pattern_file(body, CHUNK_LEN);
		}
		assert_int_equal(origin_connections(&the_world, &lines), 1);
		assert_int_equal(stats_get(proxy_stats(&px), "tls upstream"), 1);
		proxy_stop(&px);
	}
	assert_int_equal(parent_wait_sessions(&socks, 1, 5000), 1);
	assert_int_equal(parent_wait_log_count(&http, " CONNECT ", 1, 5000), 1);
}

static void
big_body_arrives_whole(void)
{
	char url[256], body[300];
	int status;

	begin("60s", NULL, "localhost", "/big.bin", url, body);
	assert_int_equal(curl(&the_world, url, the_world.proxy_ca, body, NULL, &status), 0);
	assert_int_equal(status, 200);
	assert_pattern_file(body, BIG_LEN);
	proxy_stop(&px);
}

/*
 * One curl, two URLs: the second request rides the same client TLS
 * connection; --compressed makes nginx answer chunked (gzip, no length).
 */
static void
chunked_and_keep_alive_inside_one_client_connection(void)
{
	char url[256];
	const char *bin = require_program("curl", "KP_CURL");
	char proxy[64], log[300], out1[300], out2[300];
	unsigned lines;

	world_make(&the_world, "60s", 0);
	proxy_start_intercepting(&the_world, true, NULL);
	url_of(url, sizeof(url), &the_world, "localhost", "/chunk.bin");
	path_join(out1, sizeof(out1), the_world.dir, "one.out");
	path_join(out2, sizeof(out2), the_world.dir, "two.out");
	path_join(log, sizeof(log), the_world.dir, "curl2.out");
	snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", px.port);
	{
		const char *argv[] = {bin,     "-q",         "--silent", "--show-error",
		                      "--fail", "--noproxy", "",         "--proxy",
		                      proxy,   "--cacert",   the_world.proxy_ca, "--compressed",
		                      "--verbose", url,      "--output", out1,
		                      url,     "--output",   out2,       NULL};

		assert_int_equal(run_process(argv, log, 60000), 0);
	}
	assert_pattern_file(out1, CHUNK_LEN);
	assert_pattern_file(out2, CHUNK_LEN);
	{
		char *text = read_file_all(log, NULL);

		assert_non_null(text);
		/* curl says so when it sends the second request on the same connection. */
		assert_non_null(strstr(text, "Re-using existing connection"));
		assert_non_null(strstr(text, "ransfer-Encoding: chunked"));
		/* curl offered h2 as well; inside, only HTTP/1.1 is spoken. */
		assert_non_null(strstr(text, "ALPN: server accepted http/1.1"));
		free(text);
	}
	assert_int_equal(origin_connections(&the_world, &lines), 1);
	assert_int_equal(stats_get(proxy_stats(&px), "intercepted"), 1);
	proxy_stop(&px);
}

/* A host not listed is a plain tunnel: the client sees the origin's own certificate. */
static void
unlisted_host_is_tunnelled_untouched(void)
{
	char url[256], body[300];
	int status;

	world_make(&the_world, "60s", 0);
	/* Only 127.0.0.1 is listed here; "localhost" is not. */
	{
		char ports[16];
		const char *args[] = {"--intercept", "127.0.0.1", "--ca-cert", the_world.proxy_ca, "--ca-key",
		                      the_world.proxy_key, "--upstream-ca", the_world.origin_ca, "--connect-ports",
		                      ports, NULL};

		snprintf(ports, sizeof(ports), "%d", the_world.port);
		proxy_start(&px, args);
	}
	url_of(url, sizeof(url), &the_world, "localhost", "/chunk.bin");
	path_join(body, sizeof(body), the_world.dir, "tunnel.out");
	/* Trusting only the origin's CA succeeds: nobody but the origin spoke TLS. */
	assert_int_equal(curl(&the_world, url, the_world.origin_ca, body, NULL, &status), 0);
	assert_int_equal(status, 200);
	assert_pattern_file(body, CHUNK_LEN);
	/* Trusting only the proxy's CA fails for the same reason: the origin's certificate. */
	assert_curl_exit(curl(&the_world, url, the_world.proxy_ca, body, NULL, &status),
	                 CURL_PEER_UNVERIFIED);
	assert_int_equal(stats_get(proxy_stats(&px), "intercepted"), 0);
	proxy_stop(&px);
}

static void
assert_body_contains(const char *path, const char *text)
{
	char *body = read_file_all(path, NULL);

	assert_non_null(body);
	if (!strstr(body, text)) {
		print_error("body: %s\n", body);
		free(body);
		fail_msg("the body does not say '%s'", text);
	}
	free(body);
}

/* The origin's certificate names localhost only; asked as 127.0.0.1 it does not verify. */
static void
origin_name_mismatch_is_502(void)
{
	char url[256], body[300];
	const char *more[] = {"--intercept", "127.0.0.1", NULL};
	int status;

	begin("60s", more, "127.0.0.1", "/chunk.bin", url, body);
	assert_int_equal(curl(&the_world, url, the_world.proxy_ca, body, NULL, &status), 0);
	assert_int_equal(status, 502);
	assert_body_contains(body, "did not verify");
	assert_body_contains(body, "mismatch");
	assert_true(proxy_log_count(&px, "did not verify") >= 1);
	proxy_stop(&px);
}

/* Without --upstream-ca the system store decides, and it has never heard of the test CA. */
static void
untrusted_origin_is_502(void)
{
	char url[256], body[300];
	unsigned lines;
	int status;

	world_make(&the_world, "60s", 0);
	proxy_start_intercepting(&the_world, false, NULL);
	url_of(url, sizeof(url), &the_world, "localhost", "/chunk.bin");
	path_join(body, sizeof(body), the_world.dir, "body.out");
	assert_int_equal(curl(&the_world, url, the_world.proxy_ca, body, NULL, &status), 0);
	assert_int_equal(status, 502);
	assert_body_contains(body, "did not verify");
	/* No request reached the origin over the unverified connection. */
	origin_connections(&the_world, &lines);
	assert_int_equal(lines, 0);
	proxy_stop(&px);
}

/*
 * A client that does not trust our CA (as an app that pins) fails once;
 * from then on its CONNECTs to that host are tunnelled, and it succeeds.
 */
static void
client_refusing_our_certificate_gets_tunnels(void)
{
	char url[256], body[300];
	int status;

	begin("60s", NULL, "localhost", "/chunk.bin", url, body);
	assert_curl_exit(curl(&the_world, url, the_world.origin_ca, body, NULL, &status),
	                 CURL_PEER_UNVERIFIED);
	assert_int_equal(curl(&the_world, url, the_world.origin_ca, body, NULL, &status), 0);
	assert_int_equal(status, 200);
	assert_pattern_file(body, CHUNK_LEN);
	assert_int_equal(curl(&the_world, url, the_world.origin_ca, body, NULL, &status), 0);
	assert_int_equal(proxy_log_count(&px, "refused the certificate"), 1);
	assert_int_equal(stats_get(proxy_stats(&px), "intercepted"), 1);
	assert_int_equal(stats_get(proxy_stats(&px), "refused"), 1);
	proxy_stop(&px);
}

/*
 * nginx closes idle connections after 1 s; the pooled one it closed must
 * not cost the next client anything, and the new connection resumes the
 * TLS session.
 */
static void
origin_closing_a_pooled_connection_is_transparent(void)
{
	char url[256], body[300];
	unsigned lines;
	int status;
	const char *line;

	begin("1s", NULL, "localhost", "/chunk.bin", url, body);
	assert_int_equal(curl(&the_world, url, the_world.proxy_ca, body, NULL, &status), 0);
	assert_int_equal(status, 200);
	/* Stop the proxy so it cannot see the close before the next request arrives. */
	assert_true(px.pid > 0);
	kill(px.pid, SIGSTOP);
	sleep_ms(2000);
	kill(px.pid, SIGCONT);
	assert_int_equal(curl(&the_world, url, the_world.proxy_ca, body, NULL, &status), 0);
	assert_int_equal(status, 200);
	assert_pattern_file(body, CHUNK_LEN);
	assert_int_equal(origin_connections(&the_world, &lines), 2);
	assert_int_equal(lines, 2);
	line = proxy_stats(&px);
	assert_int_equal(stats_get(line, "tls upstream"), 2);
	assert_int_equal(stats_get(line, "resumed"), 1);
	proxy_stop(&px);
}

/*
 * The origin closes a pooled TLS connection as the next request arrives on
 * it (nginx's 444): the request goes again on a new connection, and the
 * client never knows.
 */
static void
request_on_a_dying_pooled_connection_is_retried(void)
{
	char url[256], body[300];
	unsigned lines;
	int status;

	begin("60s", NULL, "localhost", "/flaky/chunk.bin", url, body);
	assert_int_equal(curl(&the_world, url, the_world.proxy_ca, body, NULL, &status), 0);
	assert_int_equal(status, 200);
	assert_int_equal(curl(&the_world, url, the_world.proxy_ca, body, NULL, &status), 0);
	assert_int_equal(status, 200);
	assert_pattern_file(body, CHUNK_LEN);
	/* 200, the 444 that closed the pooled connection, 200 on a new one. */
	assert_int_equal(origin_connections(&the_world, &lines), 2);
	assert_int_equal(lines, 3);
	assert_int_equal(stats_get(proxy_stats(&px), "retries"), 1);
	proxy_stop(&px);
}

/*
 * TLS 1.1 is refused toward the client (openssl s_client, allowed to offer
 * it, gets a protocol_version alert); 1.2 is taken.
 */
static void
tls_below_1_2_is_refused(void)
{
	const char *openssl = require_program("openssl", "KP_OPENSSL");
	char url[256], body[300], proxy[64], target[64], log[300];
	char *text;

	begin("60s", NULL, "localhost", "/chunk.bin", url, body);
	snprintf(proxy, sizeof(proxy), "127.0.0.1:%d", px.port);
	snprintf(target, sizeof(target), "localhost:%d", the_world.port);
	path_join(log, sizeof(log), the_world.dir, "s_client.out");
	{
		const char *argv[] = {openssl, "s_client", "-proxy", proxy, "-connect", target,
		                      "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0", "-CAfile",
		                      the_world.proxy_ca, NULL};

		assert_int_not_equal(run_process(argv, log, 20000), 0);
	}
	text = read_file_all(log, NULL);
	assert_non_null(text);
	assert_non_null(strstr(text, "alert protocol version"));
	free(text);
	unlink(log);
	{
		const char *argv[] = {openssl, "s_client", "-proxy", proxy, "-connect", target,
		                      "-tls1_2", "-CAfile", the_world.proxy_ca,
		                      "-verify_return_error", NULL};

		assert_int_equal(run_process(argv, log, 20000), 0);
	}
	text = read_file_all(log, NULL);
	assert_non_null(text);
	assert_non_null(strstr(text, "Protocol  : TLSv1.2"));
	free(text);
	proxy_stop(&px);
}

/* Leaves for many hosts: the cache keeps --leaf-cache of them. */
static void
leaf_cache_is_bounded(void)
{
	char url[256], body[300];
	/* Addresses nobody listens on: each handshake is ours alone, then a quick 502. */
	const char *more[] = {"--intercept", "127.0.0.2", "--intercept", "127.0.0.3",
	                      "--intercept", "127.0.0.4", "--intercept", "127.0.0.5",
	                      "--leaf-cache", "2", NULL};
	const char *names[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.2"};
	const char *line;
	int status;

	world_make(&the_world, "60s", 0);
	proxy_start_intercepting(&the_world, true, more);
	path_join(body, sizeof(body), the_world.dir, "leaf.out");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		url_of(url, sizeof(url), &the_world, names[i], "/");
		/* The handshake succeeds with a minted leaf; the connect is then refused. */
		assert_int_equal(curl(&the_world, url, the_world.proxy_ca, body, NULL, &status), 0);
		assert_int_equal(status, 502);
	}
	line = proxy_stats(&px);
	assert_int_equal(stats_get(line, "cached"), 2);
	/* 127.0.0.2 was evicted by .4 and .5, so it was minted again. */
	assert_int_equal(stats_get(line, "leaves minted"), 5);
	proxy_stop(&px);
}

/*
 * With --auth-file the CONNECT must carry credentials before the proxy
 * answers it; the requests inside need none (the tunnel was authenticated).
 */
static void
credentials_are_checked_before_interception(void)
{
	char url[256], body[300], users[300], userarg[64];
	const char *more[] = {"--auth-file", users, NULL};
	int status;

	world_make(&the_world, "60s", 0);
	path_join(users, sizeof(users), the_world.dir, "users");
	write_text_file(users, "alice:secret\n");
	assert_int_equal(chmod(users, 0600), 0);
	proxy_start_intercepting(&the_world, true, more);
	url_of(url, sizeof(url), &the_world, "localhost", "/chunk.bin");
	path_join(body, sizeof(body), the_world.dir, "auth.out");
	/* curl reports the proxy's 407 to the CONNECT and gives up. */
	assert_curl_exit(curl(&the_world, url, the_world.proxy_ca, body, NULL, &status),
	                 CURL_RECV_ERROR);
	assert_int_equal(stats_get(proxy_stats(&px), "intercepted"), 0);
	snprintf(userarg, sizeof(userarg), "-Ualice:secret");
	assert_int_equal(curl(&the_world, url, the_world.proxy_ca, body, userarg, &status), 0);
	assert_int_equal(status, 200);
	assert_pattern_file(body, CHUNK_LEN);
	assert_int_equal(stats_get(proxy_stats(&px), "intercepted"), 1);
	proxy_stop(&px);
}

/*
 * A name the wildcard matches but no certificate may carry (a tilde is
 * allowed in a URI's host, never in a DNS name): 502 at the CONNECT, and
 * the proxy goes on serving.
 */
static void
host_no_certificate_can_name_gets_502(void)
{
	const char *args[] = {"--intercept", "*.kp.invalid", "--ca-cert", the_world.proxy_ca,
	                      "--ca-key", the_world.proxy_key, "--connect-ports", "*", NULL};
	struct client c;
	struct response r;

	memset(&the_world, 0, sizeof(the_world));
	snprintf(the_world.dir, sizeof(the_world.dir), "%s", harness_temp_dir());
	make_proxy_ca(&the_world);
	proxy_start(&px, args);
	assert_int_equal(client_connect(&c, px.port, "a~b.kp.invalid:443", &r), 502);
	response_free(&r);
	client_close(&c);
	assert_int_equal(stats_get(proxy_stats(&px), "intercepted"), 0);
	proxy_assert_alive(&px);
	proxy_stop(&px);
}

static void
ca_key_readable_by_others_stops_start(void)
{
	char log[300];
	char port[16];
	const char *argv[] = {getenv("KP_BINARY"), "-p", port, "--intercept", "localhost",
	                      "--ca-cert", the_world.proxy_ca, "--ca-key", the_world.proxy_key, NULL};
	char *text;

	memset(&the_world, 0, sizeof(the_world));
	snprintf(the_world.dir, sizeof(the_world.dir), "%s", harness_temp_dir());
	make_proxy_ca(&the_world);
	snprintf(port, sizeof(port), "%d", free_port());
	assert_int_equal(chmod(the_world.proxy_key, 0644), 0);
	path_join(log, sizeof(log), the_world.dir, "refused.log");
	assert_int_equal(run_process(argv, log, 10000), 1);
	text = read_file_all(log, NULL);
	assert_non_null(text);
	assert_non_null(strstr(text, "can be read by others"));
	free(text);
}

/* ---- a WebSocket-style upgrade inside an intercepted connection ---------- */

#define WS_KEY "dGhlIHNhbXBsZSBub25jZQ=="
#define WS_ACCEPT "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
#define WS_ECHO 6000u

/*
 * 101 to an upgrade request, then every byte back. A request that lost its
 * Upgrade field on the way gets a plain 400, so the client sees why.
 */
static void
ws_origin(struct origin_conn *c, const struct origin_request *req, void *arg)
{
	const char *upgrade = headers_get(&req->head.headers, "Upgrade");

	(void)arg;
	if (!upgrade || strcasecmp(upgrade, "websocket") != 0) {
		origin_reply(c, 400, "Content-Type: text/plain\r\n",
		             "the origin got no \"Upgrade: websocket\"");
		return;
	}
	origin_sendf(c, "HTTP/1.1 101 Switching Protocols\r\n"
	                "Upgrade: websocket\r\n"
	                "Connection: Upgrade\r\n"
	                "Sec-WebSocket-Accept: " WS_ACCEPT "\r\n"
	                "\r\n");
	origin_echo(c, 10000, NULL);
}

/* The client's TLS inside its tunnel; freed at teardown. */
static struct {
	SSL_CTX *ctx;
	SSL *ssl;
} ws_tls;

static void
ws_tls_free(void *arg)
{
	(void)arg;
	SSL_free(ws_tls.ssl);
	SSL_CTX_free(ws_tls.ctx);
	memset(&ws_tls, 0, sizeof(ws_tls));
}

/* A TLS client on fd for host, trusting cafile only. */
static SSL *
ws_tls_connect(int fd, const char *cafile, const char *host)
{
	char err[256];

	ws_tls.ctx = SSL_CTX_new(TLS_client_method());
	harness_defer(ws_tls_free, NULL);
	assert_non_null(ws_tls.ctx);
	assert_int_equal(SSL_CTX_load_verify_locations(ws_tls.ctx, cafile, NULL), 1);
	SSL_CTX_set_verify(ws_tls.ctx, SSL_VERIFY_PEER, NULL);
	ws_tls.ssl = SSL_new(ws_tls.ctx);
	assert_non_null(ws_tls.ssl);
	assert_int_equal(SSL_set_tlsext_host_name(ws_tls.ssl, host), 1);
	assert_int_equal(SSL_set1_host(ws_tls.ssl, host), 1);
	assert_int_equal(SSL_set_fd(ws_tls.ssl, fd), 1);
	if (SSL_connect(ws_tls.ssl) != 1) {
		ERR_error_string_n(ERR_get_error(), err, sizeof(err));
		fail_msg("TLS handshake through the proxy failed: %s", err);
	}
	return ws_tls.ssl;
}

static void
ws_write(SSL *ssl, const void *data, size_t len)
{
	size_t done;

	if (SSL_write_ex(ssl, data, len, &done) != 1 || done != len)
		fail_msg("TLS write of %zu bytes failed", len);
}

/*
 * Reads a response head into buf (NUL-terminated); returns its length.
 * Bytes read behind it stay in buf up to *have.
 */
static size_t
ws_read_head(SSL *ssl, char *buf, size_t size, size_t *have)
{
	char *end;
	size_t n;

	*have = 0;
	while (!(end = strstr(buf, "\r\n\r\n"))) {
		if (*have + 1 >= size)
			fail_msg("a response head of more than %zu bytes", size);
		if (SSL_read_ex(ssl, buf + *have, size - 1 - *have, &n) != 1)
			fail_msg("the connection ended after %zu bytes of a response head: \"%s\"",
			         *have, buf);
		*have += n;
		buf[*have] = '\0';
	}
	return (size_t)(end - buf) + 4;
}

/*
 * The origin's 101 reaches the client through nginx and the interception,
 * and the bytes after it pass both ways unchanged.
 */
static void
websocket_upgrade_passes_through_interception(void)
{
	static char head[8192], sent[WS_ECHO], got[WS_ECHO];
	struct origin *og = origin_start(ws_origin, NULL);
	struct client c;
	char authority[64];
	size_t head_len, have, n;
	SSL *ssl;

	world_make(&the_world, "60s", origin_port(og));
	proxy_start_intercepting(&the_world, true, NULL);
	snprintf(authority, sizeof(authority), "localhost:%d", the_world.port);
	open_tunnel(&c, px.port, authority);
	ssl = ws_tls_connect(c.fd, the_world.proxy_ca, "localhost");
	snprintf(head, sizeof(head),
	         "GET /ws HTTP/1.1\r\n"
	         "Host: %s\r\n"
	         "Connection: Upgrade\r\n"
	         "Upgrade: websocket\r\n"
	         "Sec-WebSocket-Key: " WS_KEY "\r\n"
	         "Sec-WebSocket-Version: 13\r\n"
	         "\r\n",
	         authority);
	ws_write(ssl, head, strlen(head));
	memset(head, 0, sizeof(head));
	head_len = ws_read_head(ssl, head, sizeof(head), &have);
	if (strncmp(head, "HTTP/1.1 101 ", 13) != 0 ||
	    !strcasestr(head, "\r\nUpgrade: websocket\r\n") ||
	    !strstr(head, "\r\nSec-WebSocket-Accept: " WS_ACCEPT "\r\n"))
		fail_msg("expected 101 with \"Upgrade: websocket\" and the origin's accept key; "
		         "got:\n%s",
		         head);

	/* Whatever came behind the head is the start of the echo. */
	have -= head_len;
	memcpy(got, head + head_len, have);
	pattern_fill(sent, 0, sizeof(sent));
	ws_write(ssl, sent, sizeof(sent));
	while (have < sizeof(got)) {
		if (SSL_read_ex(ssl, got + have, sizeof(got) - have, &n) != 1)
			fail_msg("the echo ended after %zu of %u bytes", have, WS_ECHO);
		have += n;
	}
	if (memcmp(got, sent, sizeof(sent)) != 0)
		fail_msg("the %u bytes came back changed", WS_ECHO);
	SSL_shutdown(ssl);
	client_close(&c);
	proxy_assert_alive(&px);
	proxy_stop(&px);
}

/* ---- what decides against interception ------------------------------------ */

/* The proxy with its own CA, intercepting host, CONNECTs allowed to port. */
static void
proxy_start_with_ca(const char *host, int port)
{
	static char ports[16];
	const char *args[] = {"--intercept", host, "--ca-cert", the_world.proxy_ca, "--ca-key",
	                      the_world.proxy_key, "--connect-ports", ports, NULL};

	memset(&the_world, 0, sizeof(the_world));
	snprintf(the_world.dir, sizeof(the_world.dir), "%s", harness_temp_dir());
	make_proxy_ca(&the_world);
	snprintf(ports, sizeof(ports), "%d", port);
	proxy_start(&px, args);
}

/*
 * Bytes sent behind the CONNECT's head, before its answer, would be the
 * client's first TLS record, which our TLS could not read from the socket:
 * such a CONNECT is tunnelled, and they reach the origin as they were.
 */
static void
bytes_behind_the_connect_are_tunnelled(void)
{
	struct origin *og = origin_start(origin_handle_ok, NULL);
	struct client c;
	struct response r;
	int port = origin_port(og);

	proxy_start_with_ca("127.0.0.1", port);
	client_open(&c, px.port);
	client_sendf(&c,
	             "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n"
	             "GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
	             port, port, port);
	read_response_ok(&c, &r, RESP_CONNECT);
	assert_status(&r, 200);
	response_free(&r);
	/* The origin's own answer to the GET, through the tunnel. */
	expect_response(&c, 200, NULL);
	assert_int_equal(origin_request_count(og), 1);
	assert_int_equal(stats_get(proxy_stats(&px), "intercepted"), 0);
	assert_int_equal(proxy_log_count(&px, "bytes came with the CONNECT; tunnelled"), 1);
	client_close(&c);
	proxy_stop(&px);
}

/* A TLS client on fd that trusts no CA at all: it refuses any certificate it is shown. */
static void
refuse_the_certificate(int fd, const char *host)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl;

	assert_non_null(ctx);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	assert_non_null(ssl = SSL_new(ctx));
	assert_int_equal(SSL_set_tlsext_host_name(ssl, host), 1);
	assert_int_equal(SSL_set_fd(ssl, fd), 1);
	assert_int_not_equal(SSL_connect(ssl), 1);
	ERR_clear_error();
	SSL_free(ssl);
	SSL_CTX_free(ctx);
}

/*
 * Two connections of one client intercepted at once, and both refuse our
 * certificate: both count, and the host is remembered, and logged, once.
 */
static void
two_refusals_at_once_are_logged_once(void)
{
	struct client a, b;
	double until;

	proxy_start_with_ca("localhost", 443);
	open_tunnel(&a, px.port, "localhost:443");
	open_tunnel(&b, px.port, "localhost:443");
	refuse_the_certificate(a.fd, "localhost");
	refuse_the_certificate(b.fd, "localhost");
	for (until = now_s() + 5; stats_get(proxy_stats(&px), "refused") < 2 && now_s() < until;)
		sleep_ms(50);
	assert_int_equal(stats_get(proxy_stats(&px), "refused"), 2);
	assert_int_equal(stats_get(proxy_stats(&px), "intercepted"), 2);
	assert_int_equal(proxy_log_count(&px, "refused the certificate"), 1);
	client_close(&a);
	client_close(&b);
	proxy_stop(&px);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(ten_clients_share_one_origin_connection),
		E2E_TEST(intercepted_origin_through_a_parent_is_pooled),
		E2E_TEST(big_body_arrives_whole),
		E2E_TEST(chunked_and_keep_alive_inside_one_client_connection),
		E2E_TEST(unlisted_host_is_tunnelled_untouched),
		E2E_TEST(origin_name_mismatch_is_502),
		E2E_TEST(untrusted_origin_is_502),
		E2E_TEST(client_refusing_our_certificate_gets_tunnels),
		E2E_TEST(origin_closing_a_pooled_connection_is_transparent),
		E2E_TEST(request_on_a_dying_pooled_connection_is_retried),
		E2E_TEST(tls_below_1_2_is_refused),
		E2E_TEST(leaf_cache_is_bounded),
		E2E_TEST(credentials_are_checked_before_interception),
		E2E_TEST(host_no_certificate_can_name_gets_502),
		E2E_TEST(ca_key_readable_by_others_stops_start),
		E2E_TEST(websocket_upgrade_passes_through_interception),
		E2E_TEST(bytes_behind_the_connect_are_tunnelled),
		E2E_TEST(two_refusals_at_once_are_logged_once),
	};

	return E2E_RUN("e2e_intercept", tests);
}
