/*
 * Real programs on both sides: a private nginx (own config, port, logs and
 * temporary directories) serves generated files, and separate curl processes
 * fetch them through the proxy, one process per file or segment, the way a
 * segmented downloader does. The files must arrive byte-identical, and
 * nginx's access log must show every request on one upstream connection.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define SMALL_LEN 600ull
#define MEDIUM_LEN (2ull * 1024 * 1024)
#define LARGE_LEN (20ull * 1024 * 1024)
#define UPLOAD_LEN (3ull * 1024 * 1024 + 5)
#define SEGMENTS 8

static struct proxy px;

struct nginx {
	pid_t pid;
	int port;      /* the file server */
	int sink_port; /* where uploads are passed on to once nginx has stored them */
	char dir[256];
	char access_log[300];
	char body_dir[300];
};

static void
write_config(const struct nginx *ng, const char *conf)
{
	char text[4096];

	/* Everything nginx writes stays in its own directory. */
	snprintf(text, sizeof(text),
	         "pid %s/nginx.pid;\n"
	         "error_log %s/error.log info;\n"
	         "events { worker_connections 64; }\n"
	         "http {\n"
	         "    types { application/octet-stream bin; text/plain txt; }\n"
	         "    default_type application/octet-stream;\n"
	         "    log_format kp '$connection $connection_requests $status \"$request\"';\n"
	         "    access_log %s kp;\n"
	         "    client_body_temp_path %s/tmp_body;\n"
	         "    proxy_temp_path %s/tmp_proxy;\n"
	         "    fastcgi_temp_path %s/tmp_fastcgi;\n"
	         "    uwsgi_temp_path %s/tmp_uwsgi;\n"
	         "    scgi_temp_path %s/tmp_scgi;\n"
	         "    keepalive_timeout 60s;\n"
	         "    keepalive_requests 10000;\n"
	         "    client_max_body_size 64m;\n"
	         "    server {\n"
	         "        listen 127.0.0.1:%d;\n"
	         "        root %s/www;\n"
	         "        location = /upload {\n"
	         "            client_body_in_file_only on;\n"
	         "            client_body_temp_path %s;\n"
	         "            proxy_pass http://127.0.0.1:%d/stored;\n"
	         "        }\n"
	         "    }\n"
	         "    server {\n"
	         "        listen 127.0.0.1:%d;\n"
	         "        access_log off;\n"
	         "        location / { return 200 \"stored\\n\"; }\n"
	         "    }\n"
	         "}\n",
	         ng->dir, ng->dir, ng->access_log, ng->dir, ng->dir, ng->dir, ng->dir, ng->dir,
	         ng->port, ng->dir, ng->body_dir, ng->sink_port, ng->sink_port);
	write_text_file(conf, text);
}

static char nginx_conf[300];

static void
configure(void *arg)
{
	struct nginx *ng = arg;

	ng->port = free_port();
	ng->sink_port = free_port();
	write_config(ng, nginx_conf);
}

static void
nginx_start(struct nginx *ng)
{
	char www[300], errlog[300], out[300];
	int *const ports[] = {&ng->port, &ng->sink_port};

	memset(ng, 0, sizeof(*ng));
	snprintf(ng->dir, sizeof(ng->dir), "%s", harness_temp_dir());
	path_join(www, sizeof(www), ng->dir, "www");
	path_join(nginx_conf, sizeof(nginx_conf), ng->dir, "nginx.conf");
	path_join(errlog, sizeof(errlog), ng->dir, "error.log");
	path_join(out, sizeof(out), ng->dir, "nginx.out");
	path_join(ng->access_log, sizeof(ng->access_log), ng->dir, "access.log");
	path_join(ng->body_dir, sizeof(ng->body_dir), ng->dir, "uploads");
	if (mkdir(www, 0755) != 0 || mkdir(ng->body_dir, 0755) != 0)
		fail_msg("mkdir in %s: %s", ng->dir, strerror(errno));
	harness_watch_log(ng->access_log, "nginx access log");
	ng->pid = harness_start_nginx(ng->dir, nginx_conf, errlog, out, configure, ng, ports, 2);
}

static void
nginx_stop(struct nginx *ng)
{
	int status = stop_process(ng->pid, SIGQUIT, 5000);
	char how[128];

	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		print_message("nginx ended with %s\n", describe_status(status, how, sizeof(how)));
}

/* Runs curl through the proxy; returns nothing, fails the test unless curl exits 0. */
static void
curl_run(const char *const extra[], const char *log)
{
	const char *bin = require_program("curl", "KP_CURL");
	char proxy[64];
	const char *argv[32];
	size_t n = 0;
	int rc;

	snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", px.port);
	argv[n++] = bin;
	argv[n++] = "-q"; /* no ~/.curlrc */
	argv[n++] = "--silent";
	argv[n++] = "--show-error";
	argv[n++] = "--fail";
	argv[n++] = "--max-time";
	argv[n++] = "30";
	argv[n++] = "--noproxy";
	argv[n++] = ""; /* ignore no_proxy in the environment */
	argv[n++] = "--proxy";
	argv[n++] = proxy;
	for (size_t i = 0; extra[i]; i++) {
		assert_true(n < sizeof(argv) / sizeof(argv[0]) - 1);
		argv[n++] = extra[i];
	}
	argv[n] = NULL;
	rc = run_process(argv, log, 60000);
	if (rc != 0) {
		char *text = read_file_all(log, NULL);

		print_error("curl exited with %d:\n", rc);
		for (size_t i = 0; argv[i]; i++)
			print_error(" '%s'", argv[i]);
		print_error("\n%s\n", text ? text : "");
		free(text);
		fail();
	}
}

static void
url_of(char *buf, size_t size, const struct nginx *ng, const char *path)
{
	snprintf(buf, size, "http://127.0.0.1:%d%s", ng->port, path);
}

struct log_line {
	unsigned long conn, nreq;
	int status;
	char request[256];
};

static size_t
read_access_log(const struct nginx *ng, struct log_line *lines, size_t max)
{
	char *text = read_file_all(ng->access_log, NULL);
	size_t n = 0;

	if (!text)
		fail_msg("cannot read nginx's access log %s", ng->access_log);
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && n < max;
	     l = strtok_r(NULL, "\n", &save)) {
		int used = 0;

		if (sscanf(l, "%lu %lu %d %n", &lines[n].conn, &lines[n].nreq, &lines[n].status,
		           &used) < 3) {
			free(text);
			fail_msg("unexpected access log line: %s", l);
		}
		snprintf(lines[n].request, sizeof(lines[n].request), "%s", l + used);
		n++;
	}
	free(text);
	return n;
}

static void
curl_downloads_through_one_upstream_connection(void)
{
	struct nginx ng;
	char www[300], out[300], log[300], url[256], path[300], range[64];
	static const struct {
		const char *name;
		uint64_t len;
	} files[] = {
		{"small.bin", SMALL_LEN}, {"medium.bin", MEDIUM_LEN}, {"large.bin", LARGE_LEN}};
	struct log_line lines[64];
	size_t nlines, requests = 0;

	require_program("curl", "KP_CURL"); /* before anything starts */
	nginx_start(&ng);
	path_join(www, sizeof(www), ng.dir, "www");
	path_join(out, sizeof(out), ng.dir, "out");
	path_join(log, sizeof(log), ng.dir, "curl.log");
	assert_int_equal(mkdir(out, 0755), 0);
	for (size_t i = 0; i < 3; i++) {
		path_join(path, sizeof(path), www, files[i].name);
		write_pattern_file(path, files[i].len);
	}
	path_join(path, sizeof(path), www, "upload.bin");
	write_pattern_file(path, UPLOAD_LEN);
	proxy_start(&px, NULL);

	/* Whole files, one curl process each. */
	for (size_t i = 0; i < 3; i++) {
		char dest[400], rel[64];

		snprintf(rel, sizeof(rel), "/%s", files[i].name);
		url_of(url, sizeof(url), &ng, rel);
		snprintf(dest, sizeof(dest), "%s/%s", out, files[i].name);
		const char *args[] = {"--output", dest, url, NULL};
		curl_run(args, log);
		requests++;
		assert_file_pattern(dest, 0, files[i].len);
	}

	/* The large file again in segments, one curl process (and client connection) per segment.
	 */
	url_of(url, sizeof(url), &ng, "/large.bin");
	for (int s = 0; s < SEGMENTS; s++) {
		uint64_t seg = LARGE_LEN / SEGMENTS;
		uint64_t first = (uint64_t)s * seg;
		uint64_t last = s == SEGMENTS - 1 ? LARGE_LEN - 1 : first + seg - 1;
		char dest[400];

		snprintf(range, sizeof(range), "%llu-%llu", (unsigned long long)first,
		         (unsigned long long)last);
		snprintf(dest, sizeof(dest), "%s/large.part%d", out, s);
		const char *args[] = {"--range", range, "--output", dest, url, NULL};
		curl_run(args, log);
		requests++;
		assert_file_pattern(dest, first, last - first + 1);
	}

	/* HTTP/1.0 client. */
	{
		char dest[400];

		url_of(url, sizeof(url), &ng, "/medium.bin");
		snprintf(dest, sizeof(dest), "%s/medium.http10", out);
		const char *args[] = {"--http1.0", "--output", dest, url, NULL};
		curl_run(args, log);
		requests++;
		assert_file_pattern(dest, 0, MEDIUM_LEN);
	}

	/* HEAD. */
	{
		char dest[400], want[64];
		char *head;

		url_of(url, sizeof(url), &ng, "/large.bin");
		snprintf(dest, sizeof(dest), "%s/large.head", out);
		const char *args[] = {"--head", "--output", dest, url, NULL};
		curl_run(args, log);
		requests++;
		head = read_file_all(dest, NULL);
		assert_non_null(head);
		snprintf(want, sizeof(want), "Content-Length: %llu\r\n",
		         (unsigned long long)LARGE_LEN);
		if (strncmp(head, "HTTP/1.1 200", 12) != 0 || !strcasestr(head, want) ||
		    !strcasestr(head, "\r\nVia: ")) {
			print_error("unexpected HEAD response:\n%s\n", head);
			free(head);
			fail();
		}
		free(head);
	}

	/* POST of a file; nginx keeps the received body in its uploads directory. */
	{
		char dest[400], data_arg[400];
		char *reply;
		DIR *d;
		struct dirent *e;
		int stored = 0;

		url_of(url, sizeof(url), &ng, "/upload");
		snprintf(dest, sizeof(dest), "%s/upload.reply", out);
		snprintf(data_arg, sizeof(data_arg), "@%s/upload.bin", www);
		const char *args[] = {"--data-binary",
		                      data_arg,
		                      "--header",
		                      "Content-Type: application/octet-stream",
		                      "--output",
		                      dest,
		                      url,
		                      NULL};
		curl_run(args, log);
		requests++;
		reply = read_file_all(dest, NULL);
		assert_non_null(reply);
		assert_string_equal(reply, "stored\n");
		free(reply);
		d = opendir(ng.body_dir);
		assert_non_null(d);
		while ((e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			path_join(path, sizeof(path), ng.body_dir, e->d_name);
			assert_file_pattern(path, 0, UPLOAD_LEN);
			stored++;
		}
		closedir(d);
		assert_int_equal(stored, 1);
	}

	proxy_stop(&px);

	/* All requests, from all those curl processes, came over one connection. */
	nlines = read_access_log(&ng, lines, sizeof(lines) / sizeof(lines[0]));
	assert_int_equal(nlines, requests);
	for (size_t i = 0; i < nlines; i++) {
		if (lines[i].conn != lines[0].conn || lines[i].nreq != i + 1) {
			print_error(
				"request %zu (%s) came on nginx connection %lu as its request %lu; "
				"expected connection %lu, request %zu\n",
				i + 1, lines[i].request, lines[i].conn, lines[i].nreq,
				lines[0].conn, i + 1);
			fail();
		}
		if (lines[i].status != 200 && lines[i].status != 206)
			fail_msg("nginx answered %d to %s", lines[i].status, lines[i].request);
	}
	nginx_stop(&ng);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(curl_downloads_through_one_upstream_connection),
	};

	return E2E_RUN("e2e_nginx_curl", tests);
}
