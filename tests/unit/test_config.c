/*
 * Command-line configuration: defaults, every option in short and long form,
 * the limits each value must respect, and what goes to which stream.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kp/config.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* What config_parse is told of the TLS library; each test runs both kinds of build. */
#define TEST_TLS "TestTLS 1.2.3"

struct outcome {
	enum config_parse_result result;
	struct kp_config cfg;
	char *out;   /* what went to the output stream */
	char *err;   /* what went to the error stream */
};

static void
outcome_free(struct outcome *o)
{
	free(o->out);
	free(o->err);
	o->out = o->err = NULL;
}

/* Runs config_parse on a NULL-terminated argv, starting from the defaults. */
static void
run_argv_tls(struct outcome *o, char **argv, const char *tls_name)
{
	size_t out_len = 0, err_len = 0;
	FILE *out, *err;
	int argc = 0;

	while (argv[argc])
		argc++;
	memset(o, 0, sizeof(*o));
	out = open_memstream(&o->out, &out_len);
	err = open_memstream(&o->err, &err_len);
	assert_non_null(out);
	assert_non_null(err);
	config_defaults(&o->cfg);
	o->result = config_parse(&o->cfg, argc, argv, tls_name, out, err);
	fclose(out);
	fclose(err);
	assert_non_null(o->out);
	assert_non_null(o->err);
}

static void
run_argv(struct outcome *o, char **argv)
{
	run_argv_tls(o, argv, TEST_TLS);
}

#define RUN(o, ...) run_argv((o), (char *[]){"keepalive-proxy", __VA_ARGS__, NULL})
/* As a binary built with -DKP_TLS=OFF parses. */
#define RUN_NO_TLS(o, ...) \
	run_argv_tls((o), (char *[]){"keepalive-proxy", __VA_ARGS__, NULL}, NULL)

static void
assert_defaults_except_nothing(const struct kp_config *cfg)
{
	struct kp_config d;

	config_defaults(&d);
	assert_string_equal(cfg->bind_addr, d.bind_addr);
	assert_int_equal(cfg->port, d.port);
	assert_true(cfg->idle_timeout == d.idle_timeout);
	assert_int_equal(cfg->max_idle_per_host, d.max_idle_per_host);
	assert_int_equal(cfg->max_idle_total, d.max_idle_total);
	assert_true(cfg->connect_timeout == d.connect_timeout);
	assert_true(cfg->response_timeout == d.response_timeout);
	assert_true(cfg->io_timeout == d.io_timeout);
	assert_true(cfg->client_idle_timeout == d.client_idle_timeout);
	assert_int_equal(cfg->max_header_bytes, d.max_header_bytes);
	assert_int_equal(cfg->max_url_bytes, d.max_url_bytes);
	assert_int_equal(cfg->max_clients, d.max_clients);
	assert_true(cfg->dns_cache_ttl == d.dns_cache_ttl);
	assert_int_equal(cfg->verbosity, d.verbosity);
}

#define assert_seconds(actual, expected) \
	do { \
		if ((actual) != (expected)) \
			fail_msg("%s is %g, not %g", #actual, (double)(actual), (double)(expected)); \
	} while (0)

/* Each default as --help, the man page and the README state it. */
static void
test_defaults(void **state)
{
	struct kp_config cfg;

	(void)state;
	memset(&cfg, 0xa5, sizeof(cfg));
	config_defaults(&cfg);
	assert_string_equal(cfg.bind_addr, "127.0.0.1");
	assert_int_equal(cfg.port, 9250);
	assert_int_equal(cfg.nallow, 0);
	assert_null(cfg.auth_file);
	assert_null(cfg.user);
	assert_null(cfg.access_log);
	assert_false(cfg.syslog);
	assert_null(cfg.pidfile);
	assert_false(cfg.log_query);
	assert_null(cfg.stats_addr);
	assert_seconds(cfg.stats_interval, 10);
	assert_int_equal(cfg.ndeny_dest, 0);
	assert_int_equal(cfg.nallow_dest, 0);
	assert_seconds(cfg.idle_timeout, 50);
	assert_int_equal(cfg.max_idle_per_host, 8);
	assert_int_equal(cfg.max_idle_total, 256);
	assert_int_equal(cfg.max_conns_per_host, 0);
	assert_seconds(cfg.queue_timeout, 30);
	assert_false(cfg.no_connect_race);
	/* Buffers unset: Linux autotunes them. */
	assert_int_equal(cfg.upstream_rcvbuf, 0);
	assert_int_equal(cfg.upstream_sndbuf, 0);
	assert_null(cfg.congestion);
	assert_int_equal(cfg.tcp_keepalive, 15);
	assert_seconds(cfg.connect_timeout, 10);
	assert_seconds(cfg.response_timeout, 60);
	assert_seconds(cfg.io_timeout, 300);
	assert_seconds(cfg.client_idle_timeout, 60);
	assert_seconds(cfg.header_timeout, 30);
	assert_int_equal(cfg.max_header_bytes, 32768);
	assert_int_equal(cfg.max_url_bytes, 8192);
	assert_int_equal(cfg.max_clients, 10000);
	assert_seconds(cfg.tunnel_timeout, 600);
	assert_seconds(cfg.grace, 10);
	assert_false(cfg.connect_any_port);
	for (unsigned port = 0; port <= 65536; port++)
		if (config_connect_port_allowed(&cfg, port) != (port == 443))
			fail_msg("CONNECT to port %u allowed: %d", port,
			         config_connect_port_allowed(&cfg, port));
	assert_false(cfg.no_splice);
	assert_int_equal(cfg.pipe_size, 1048576);
	assert_int_equal(cfg.nintercept, 0);
	assert_null(cfg.ca_cert);
	assert_null(cfg.ca_key);
	assert_null(cfg.upstream_ca);
	assert_null(cfg.make_ca_dir);
	assert_int_equal(cfg.leaf_cache, 256);
	assert_false(cfg.read_ahead);
	assert_int_equal(cfg.fetch_memory, 33554432);
	assert_int_equal(cfg.read_ahead_depth, 4);
	assert_seconds(cfg.dns_cache_ttl, 60);
	/* No path given: the host check judges its own default path (hostcheck.h). */
	assert_false(cfg.check_host);
	assert_false(cfg.check_json);
	assert_null(cfg.check_url);
	assert_int_equal(cfg.path_rtt_ms, 0);
	assert_int_equal(cfg.path_rate_mbit, 0);
	assert_int_equal(cfg.verbosity, 0);
}

/* A listener other than loopback needs a rule for who may use it. */
static void
test_open_proxy_refused(void **state)
{
	static const char *const open_binds[] = {"0.0.0.0", "::", "192.168.1.1", "fd00::1"};
	struct outcome o;

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(open_binds); i++) {
		RUN(&o, "-b", (char *)open_binds[i]);
		assert_int_equal(o.result, CONFIG_ERROR);
		if (!strstr(o.err, "--allow") || !strstr(o.err, "--auth-file"))
			fail_msg("-b %s: the refusal does not say what to do: %s", open_binds[i], o.err);
		outcome_free(&o);
	}
	RUN(&o, "-b", "127.0.0.2");
	assert_int_equal(o.result, CONFIG_RUN);
	outcome_free(&o);
	RUN(&o, "-b", "::1");
	assert_int_equal(o.result, CONFIG_RUN);
	outcome_free(&o);
	RUN(&o, "-b", "0.0.0.0", "--allow", "192.168.1.0/24", "--allow", "fd00::/8");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.nallow, 2);
	assert_int_equal(o.cfg.allow[0].prefix, 24);
	assert_int_equal(o.cfg.allow[1].prefix, 8);
	outcome_free(&o);
	RUN(&o, "-b", "::", "--auth-file", "/etc/keepalive-proxy/users");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_string_equal(o.cfg.auth_file, "/etc/keepalive-proxy/users");
	outcome_free(&o);
}

static void
test_dispatch_and_tuning_options(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "--max-conns-per-host", "6", "--queue-timeout", "2.5", "--no-connect-race",
	    "--upstream-rcvbuf", "8388608", "--upstream-sndbuf", "4096", "--congestion", "bbr",
	    "--tcp-keepalive", "0");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.max_conns_per_host, 6);
	assert_true(o.cfg.queue_timeout == 2.5);
	assert_true(o.cfg.no_connect_race);
	assert_int_equal(o.cfg.upstream_rcvbuf, 8388608);
	assert_int_equal(o.cfg.upstream_sndbuf, 4096);
	assert_string_equal(o.cfg.congestion, "bbr");
	assert_int_equal(o.cfg.tcp_keepalive, 0);
	assert_string_equal(o.err, "");
	outcome_free(&o);

	RUN(&o, "--max-conns-per-host", "0", "--upstream-rcvbuf", "1073741824",
	    "--tcp-keepalive", "32767", "--congestion", "123456789012345");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.max_conns_per_host, 0);
	assert_int_equal(o.cfg.upstream_rcvbuf, 1073741824);
	assert_int_equal(o.cfg.tcp_keepalive, 32767);
	outcome_free(&o);
}

static void
test_no_arguments(void **state)
{
	char *argv[] = {"keepalive-proxy", NULL};
	struct outcome o;

	(void)state;
	run_argv(&o, argv);
	assert_int_equal(o.result, CONFIG_RUN);
	assert_defaults_except_nothing(&o.cfg);
	assert_string_equal(o.out, "");
	assert_string_equal(o.err, "");
	outcome_free(&o);
}

static void
test_short_options(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "-p", "8080", "-b", "::1", "-t", "5", "-m", "2", "-M", "10", "-v", "-v");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 8080);
	assert_string_equal(o.cfg.bind_addr, "::1");
	assert_true(o.cfg.idle_timeout == 5);
	assert_int_equal(o.cfg.max_idle_per_host, 2);
	assert_int_equal(o.cfg.max_idle_total, 10);
	assert_int_equal(o.cfg.verbosity, 2);
	/* What was not given keeps its default. */
	assert_int_equal(o.cfg.max_header_bytes, 32768);
	assert_int_equal(o.cfg.max_url_bytes, 8192);
	assert_string_equal(o.out, "");
	assert_string_equal(o.err, "");
	outcome_free(&o);
}

static void
test_long_options(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "--port", "8081", "--bind", "0.0.0.0", "--allow", "0.0.0.0/0", "--idle-timeout", "2.5",
	    "--max-idle-per-host", "3", "--max-idle", "4", "--connect-timeout", "1.5",
	    "--response-timeout", "30", "--io-timeout", "120", "--client-timeout", "15",
	    "--max-header-size", "65536", "--max-url-size", "4096", "--max-clients", "500",
	    "--dns-ttl", "300", "--verbose");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 8081);
	assert_string_equal(o.cfg.bind_addr, "0.0.0.0");
	assert_true(o.cfg.idle_timeout == 2.5);
	assert_int_equal(o.cfg.max_idle_per_host, 3);
	assert_int_equal(o.cfg.max_idle_total, 4);
	assert_true(o.cfg.connect_timeout == 1.5);
	assert_true(o.cfg.response_timeout == 30);
	assert_true(o.cfg.io_timeout == 120);
	assert_true(o.cfg.client_idle_timeout == 15);
	assert_int_equal(o.cfg.max_header_bytes, 65536);
	assert_int_equal(o.cfg.max_url_bytes, 4096);
	assert_int_equal(o.cfg.max_clients, 500);
	assert_true(o.cfg.dns_cache_ttl == 300);
	assert_int_equal(o.cfg.verbosity, 1);
	assert_string_equal(o.err, "");
	outcome_free(&o);
}

static void
test_option_spellings(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "--port=8082", "--idle-timeout=0.25", "--dns-ttl=1e1");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 8082);
	assert_true(o.cfg.idle_timeout == 0.25);
	assert_true(o.cfg.dns_cache_ttl == 10);
	outcome_free(&o);

	RUN(&o, "-p8083", "-vvv", "-t0.5");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 8083);
	assert_int_equal(o.cfg.verbosity, 3);
	assert_true(o.cfg.idle_timeout == 0.5);
	outcome_free(&o);

	/* A later value wins. */
	RUN(&o, "-p", "1000", "--port", "2000");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 2000);
	outcome_free(&o);
}

static void
test_boundaries(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "-p", "1", "-t", "86400", "-m", "0", "-M", "0", "--max-header-size", "1024",
	    "--max-url-size", "64", "--max-clients", "1");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 1);
	assert_true(o.cfg.idle_timeout == 86400);
	assert_int_equal(o.cfg.max_idle_per_host, 0);
	assert_int_equal(o.cfg.max_idle_total, 0);
	assert_int_equal(o.cfg.max_header_bytes, 1024);
	assert_int_equal(o.cfg.max_url_bytes, 64);
	assert_int_equal(o.cfg.max_clients, 1);
	outcome_free(&o);

	RUN(&o, "-p", "65535", "--max-header-size", "1048576", "--max-url-size", "1048576");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 65535);
	assert_int_equal(o.cfg.max_header_bytes, 1048576);
	assert_int_equal(o.cfg.max_url_bytes, 1048576);
	outcome_free(&o);
}

static void
test_url_limit_follows_head_limit(void **state)
{
	struct outcome o;

	(void)state;
	/* A request-target cannot be longer than the head that holds it. */
	RUN(&o, "--max-header-size", "2048", "--max-url-size", "4096");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.max_header_bytes, 2048);
	assert_int_equal(o.cfg.max_url_bytes, 2048);
	outcome_free(&o);

	RUN(&o, "--max-header-size", "4096");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.max_url_bytes, 4096);
	outcome_free(&o);
}

struct error_case {
	const char *args[4];
	const char *says;   /* expected in the message */
};

static const struct error_case errors[] = {
	{{"-p", "0"}, "'0'"},
	{{"-p", "65536"}, "'65536'"},
	{{"-p", "abc"}, "'abc'"},
	{{"-p", ""}, "port"},
	{{"-p", "-1"}, "'-1'"},
	{{"-p", "80x"}, "'80x'"},
	{{"-p", "99999999999999999999999"}, "port"},
	{{"--port=8080x"}, "'8080x'"},
	{{"-t", "0"}, "idle timeout"},
	{{"-t", "-1"}, "'-1'"},
	{{"-t", "abc"}, "'abc'"},
	{{"-t", "inf"}, "idle timeout"},
	{{"-t", "nan"}, "idle timeout"},
	{{"-t", "86401"}, "idle timeout"},
	{{"-t", "5s"}, "'5s'"},
	{{"--idle-timeout", "0"}, "idle timeout"},
	{{"--connect-timeout", "0"}, "connect timeout"},
	{{"--connect-timeout", "-2"}, "connect timeout"},
	{{"--response-timeout", "-5"}, "response timeout"},
	{{"--response-timeout", "0"}, "response timeout"},
	{{"--io-timeout", "0"}, "io timeout"},
	{{"--io-timeout", "-1"}, "io timeout"},
	{{"--client-timeout", "-0.5"}, "client timeout"},
	{{"--client-timeout", "0"}, "client timeout"},
	{{"--dns-ttl", "0"}, "dns ttl"},
	{{"--dns-ttl", "-60"}, "dns ttl"},
	{{"-m", "x"}, "per host"},
	{{"-m", "-1"}, "per host"},
	{{"-M", "-1"}, "max idle"},
	{{"--max-header-size", "1023"}, "header size"},
	{{"--max-header-size", "1048577"}, "header size"},
	{{"--max-url-size", "63"}, "url size"},
	{{"--max-clients", "0"}, "max clients"},
	{{"--max-clients", "many"}, "max clients"},
	{{"--max-conns-per-host", "-1"}, "conns per host"},
	{{"--max-conns-per-host", "lots"}, "conns per host"},
	{{"--queue-timeout", "0"}, "queue timeout"},
	{{"--upstream-rcvbuf", "4095"}, "buffer size"},
	{{"--upstream-sndbuf", "1073741825"}, "buffer size"},
	{{"--congestion", ""}, "congestion"},
	{{"--congestion", "1234567890123456"}, "congestion"},
	{{"--tcp-keepalive", "32768"}, "tcp keepalive"},
	{{"--tcp-keepalive", "-1"}, "tcp keepalive"},
	{{"--no-connect-race=1"}, "keepalive-proxy:"},
	{{"--allow", "10.0.0.0/33"}, "--allow"},
	{{"--allow", "example.com"}, "--allow"},
	{{"--allow", "10.0.0.0/"}, "--allow"},
	{{"--allow", "::/129"}, "--allow"},
	{{"--auth-file"}, "needs a value"},
	{{"--header-timeout", "0"}, "header timeout"},
	{{"--deny-dest", "10.0.0.0/40"}, "--deny-dest"},
	{{"--grace", "-1"}, "grace"},
	{{"--stats-listen", "9251"}, "--stats-listen"},
	{{"--stats-listen", "localhost:9251"}, "--stats-listen"},
	{{"--stats-listen", "::1:9251"}, "--stats-listen"},
	{{"--stats-listen", "0.0.0.0:9251"}, "--allow"},
	{{"--grace", "soon"}, "grace"},
	{{"--allow-dest", "lan"}, "--allow-dest"},
	{{"--header-timeout", "x"}, "header timeout"},
	{{"-x"}, "unknown option"},
	{{"--bogus"}, "unknown option"},
	{{"--bogus=1"}, "unknown option"},
	{{"--verbose=2"}, "keepalive-proxy:"},
	{{"-p"}, "needs a value"},
	{{"--port"}, "needs a value"},
	{{"-v", "-t"}, "needs a value"},
	{{"--dns-ttl"}, "needs a value"},
	{{"stray"}, "'stray'"},
	{{"-v", "stray"}, "'stray'"},
	{{"-p", "80", "extra"}, "'extra'"},
};

static void
test_errors(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(errors); i++) {
		char *argv[6] = {"keepalive-proxy"};
		struct outcome o;
		size_t n = 1;

		for (size_t k = 0; k < ARRAY_LEN(errors[i].args) && errors[i].args[k]; k++)
			argv[n++] = (char *)errors[i].args[k];
		argv[n] = NULL;
		run_argv(&o, argv);
		if (o.result != CONFIG_ERROR)
			fail_msg("case %zu (%s %s): result %d", i, errors[i].args[0],
			         errors[i].args[1] ? errors[i].args[1] : "", o.result);
		if (strncmp(o.err, "keepalive-proxy: ", 17) != 0 || !strstr(o.err, errors[i].says) ||
		    o.err[strlen(o.err) - 1] != '\n')
			fail_msg("case %zu (%s %s): message \"%s\" lacks \"%s\"", i, errors[i].args[0],
			         errors[i].args[1] ? errors[i].args[1] : "", o.err, errors[i].says);
		assert_string_equal(o.out, "");
		outcome_free(&o);
	}
}

static void
test_help(void **state)
{
	static const char *const documented[] = {
		"--port", "--bind", "--idle-timeout", "--max-idle-per-host", "--max-idle",
		"--connect-timeout", "--response-timeout", "--io-timeout", "--client-timeout",
		"--max-header-size", "--max-url-size", "--max-clients", "--dns-ttl", "--verbose",
		"--version", "--help", "--max-conns-per-host", "--queue-timeout",
		"--no-connect-race", "--upstream-rcvbuf", "--upstream-sndbuf", "--congestion",
		"--tcp-keepalive", "--allow", "--auth-file", "--header-timeout", "--deny-dest",
		"--allow-dest", "--user", "--grace", "--stats-listen", "--access-log", "--log-query",
		"--syslog", "--pidfile",
	};
	struct outcome o;

	(void)state;
	RUN(&o, "-h");
	assert_int_equal(o.result, CONFIG_EXIT_OK);
	assert_non_null(strstr(o.out, "Usage: keepalive-proxy"));
	for (size_t i = 0; i < ARRAY_LEN(documented); i++)
		if (!strstr(o.out, documented[i]))
			fail_msg("--help does not mention %s", documented[i]);
	/* The defaults printed are the defaults used. */
	assert_non_null(strstr(o.out, "(default 9250)"));
	assert_non_null(strstr(o.out, "(default 127.0.0.1)"));
	assert_string_equal(o.err, "");
	outcome_free(&o);

	RUN(&o, "--help");
	assert_int_equal(o.result, CONFIG_EXIT_OK);
	assert_non_null(strstr(o.out, "Usage: keepalive-proxy"));
	assert_string_equal(o.err, "");
	outcome_free(&o);

	/* Help stops the parse: what follows is not looked at. */
	RUN(&o, "-h", "-p", "0");
	assert_int_equal(o.result, CONFIG_EXIT_OK);
	assert_string_equal(o.err, "");
	outcome_free(&o);
}

static void
test_version(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "-V");
	assert_int_equal(o.result, CONFIG_EXIT_OK);
	assert_string_equal(o.out, "keepalive-proxy " KP_VERSION "\nTLS: " TEST_TLS "\n");
	assert_string_equal(o.err, "");
	outcome_free(&o);

	RUN(&o, "--version", "-p", "0");
	assert_int_equal(o.result, CONFIG_EXIT_OK);
	assert_string_equal(o.out, "keepalive-proxy " KP_VERSION "\nTLS: " TEST_TLS "\n");
	assert_string_equal(o.err, "");
	outcome_free(&o);

	/* Which package a router has says so, and how it was built. */
	RUN_NO_TLS(&o, "--version");
	assert_int_equal(o.result, CONFIG_EXIT_OK);
	assert_string_equal(o.out,
	                    "keepalive-proxy " KP_VERSION "\nTLS: none (built with -DKP_TLS=OFF)\n");
	outcome_free(&o);
}

/* ---- the option table, entry by entry ---------------------------------------- */

static bool
takes_value(enum config_option_kind kind)
{
	return kind != CONFIG_OPT_FLAG && kind != CONFIG_OPT_COUNT && kind != CONFIG_OPT_HELP &&
	       kind != CONFIG_OPT_VERSION;
}

static unsigned long
number_at(const struct kp_config *cfg, const struct config_option *opt)
{
	const char *p = (const char *)cfg + opt->field;

	return opt->kind == CONFIG_OPT_SIZE ? *(const size_t *)p : *(const unsigned *)p;
}

static double
seconds_at(const struct kp_config *cfg, const struct config_option *opt)
{
	return *(const double *)((const char *)cfg + opt->field);
}

static const char *
string_at(const struct kp_config *cfg, const struct config_option *opt)
{
	return *(const char *const *)((const char *)cfg + opt->field);
}

static unsigned
count_at(const struct kp_config *cfg, const struct config_option *opt)
{
	return *(const unsigned *)((const char *)cfg + opt->count_field);
}

/*
 * Parses "--NAME=value"; a 1 MiB head limit goes first so that
 * --max-url-size keeps what it was given (a later --max-header-size wins).
 */
static void
run_value(struct outcome *o, const struct config_option *opt, const char *value)
{
	char arg[128];

	snprintf(arg, sizeof(arg), "--%s=%s", opt->name, value);
	RUN(o, "--max-header-size=1048576", arg);
}

/* value is refused with the entry's own message, and nothing else is said. */
static void
assert_refused(const struct config_option *opt, const char *value)
{
	struct outcome o;
	char want[256];

	run_value(&o, opt, value);
	snprintf(want, sizeof(want), "keepalive-proxy: %s: '%s'\n", opt->bad, value);
	if (o.result != CONFIG_ERROR || strcmp(o.err, want) != 0)
		fail_msg("--%s=%s: result %d, message \"%s\", not \"%s\"", opt->name, value, o.result,
		         o.err, want);
	assert_string_equal(o.out, "");
	outcome_free(&o);
}

static void
test_option_table_is_well_formed(void **state)
{
	const struct config_option *a, *b;
	size_t n = 0;

	(void)state;
	for (a = config_options; a->name; a++, n++) {
		assert_int_equal(strspn(a->name, "abcdefghijklmnopqrstuvwxyz-"), strlen(a->name));
		for (b = a + 1; b->name; b++) {
			if (strcmp(a->name, b->name) == 0)
				fail_msg("--%s is in the table twice", a->name);
			if (a->short_name && a->short_name == b->short_name)
				fail_msg("-%c stands for --%s and --%s", a->short_name, a->name, b->name);
		}
		if (takes_value(a->kind) != (a->arg != NULL))
			fail_msg("--%s: kind %d with argument name %s", a->name, a->kind,
			         a->arg ? a->arg : "(none)");
		if (!a->help || !*a->help || a->help[strlen(a->help) - 1] == '\n')
			fail_msg("--%s: no help, or a help that ends in a blank line", a->name);
		switch (a->kind) {
		case CONFIG_OPT_UNSIGNED:
		case CONFIG_OPT_SIZE:
			assert_true(a->min <= a->max);
			/* fall through */
		case CONFIG_OPT_SECONDS:
			assert_non_null(a->bad);
			break;
		case CONFIG_OPT_CUSTOM:
			assert_non_null(a->parse);
			break;
		default:
			break;
		}
	}
	assert_true(n > 40);
}

/* Sizes take K, M or G (KiB, MiB, GiB), either case; the limits hold after the unit. */
static void
test_size_units(void **state)
{
	static const struct {
		const char *arg;
		size_t want;   /* 0: refused */
	} cases[] = {
		{"67108864", 67108864}, {"64M", 67108864}, {"64m", 67108864},
		{"65536K", 67108864},   {"1G", 1073741824}, {"1g", 1073741824},
		{"1023K", 0},           {"M", 0},           {"-1M", 0},
		{"64 M", 0},            {"64MB", 0},        {"1T", 0},
		{"18014398509481984G", 0}, {"4294967296G", 0},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct outcome o;

		RUN(&o, "--read-ahead-memory", (char *)cases[i].arg);
		if (cases[i].want) {
			assert_int_equal(o.result, CONFIG_RUN);
			assert_int_equal(o.cfg.fetch_memory, cases[i].want);
		} else {
			if (o.result != CONFIG_ERROR)
				fail_msg("--read-ahead-memory %s was taken", cases[i].arg);
			assert_non_null(strstr(o.err, "read-ahead memory must be"));
		}
		outcome_free(&o);
	}
}

/* Every BYTES option takes the units, as --help says: the socket buffers too. */
static void
test_every_bytes_option_takes_units(void **state)
{
	(void)state;
	for (const struct config_option *opt = config_options; opt->name; opt++) {
		char flag[64], value[32];
		struct outcome o;

		if (!opt->arg || strcmp(opt->arg, "BYTES") != 0)
			continue;
		snprintf(flag, sizeof(flag), "--%s", opt->name);
		snprintf(value, sizeof(value), "%luK", (unsigned long)(opt->min + 1023) / 1024);
		RUN(&o, flag, value);
		if (o.result != CONFIG_RUN)
			fail_msg("%s %s was refused: %s", flag, value, o.err);
		outcome_free(&o);
	}
}

/* The ranges the error messages state; a number option added or changed must be listed. */
static const struct {
	const char *name;
	unsigned long min, max;
} number_limits[] = {
	{"port", 1, 65535},
	{"max-idle-per-host", 0, 1000000},
	{"max-idle", 0, 1000000},
	{"max-conns-per-host", 0, 1000000},
	{"max-header-size", 1024, 1048576},
	{"max-url-size", 64, 1048576},
	{"max-clients", 1, 10000000},
	{"pipe-size", 4096, 67108864},
	{"upstream-rcvbuf", 4096, 1073741824},
	{"upstream-sndbuf", 4096, 1073741824},
	{"tcp-keepalive", 0, 32767},
	{"leaf-cache", 1, 1000000},
#if SIZE_MAX > 0xffffffffu
	{"fetch-memory", 1048576, 17179869184UL},
	{"read-ahead-memory", 1048576, 17179869184UL},
#else
	{"fetch-memory", 1048576, 2147483648UL},
	{"read-ahead-memory", 1048576, 2147483648UL},
#endif
	{"read-ahead-depth", 1, 8},
	{"split-size", 65536, 1073741824},
	{"split-connections", 1, 4},
	{"rtt", 1, 60000},
	{"rate", 1, 1000000},
};

/* Above 0, at most a day. */
static const char *const seconds_options[] = {
	"idle-timeout", "queue-timeout", "connect-timeout", "response-timeout", "io-timeout",
	"client-timeout", "header-timeout", "dns-ttl", "tunnel-timeout", "read-ahead-ttl",
	"stats-interval",
};

static const struct config_option *
option_named(const char *name)
{
	for (const struct config_option *opt = config_options; opt->name; opt++)
		if (strcmp(opt->name, name) == 0)
			return opt;
	fail_msg("--%s is not in the option table", name);
	return NULL;
}

static void
assert_number_limits(const struct config_option *opt, unsigned long min, unsigned long max)
{
	const unsigned long ends[] = {min, max};
	struct outcome o;
	char v[32];

	if ((opt->kind != CONFIG_OPT_UNSIGNED && opt->kind != CONFIG_OPT_SIZE) ||
	    opt->min != min || opt->max != max)
		fail_msg("--%s: kind %d, range %lu-%lu, not %lu-%lu", opt->name, opt->kind, opt->min,
		         opt->max, min, max);
	for (size_t i = 0; i < ARRAY_LEN(ends); i++) {
		snprintf(v, sizeof(v), "%lu", ends[i]);
		run_value(&o, opt, v);
		if (o.result != CONFIG_RUN || number_at(&o.cfg, opt) != ends[i])
			fail_msg("--%s=%s: result %d, value %lu, error \"%s\"", opt->name, v, o.result,
			         number_at(&o.cfg, opt), o.err);
		outcome_free(&o);
	}
	if (min > 0) {
		snprintf(v, sizeof(v), "%lu", min - 1);
		assert_refused(opt, v);
	}
	snprintf(v, sizeof(v), "%lu", max + 1);
	assert_refused(opt, v);
	assert_refused(opt, "-1");
	assert_refused(opt, "");
	assert_refused(opt, "12x");
}

static void
assert_seconds_limits(const struct config_option *opt)
{
	static const double fine[] = {0.25, 86400};
	struct outcome o;
	char v[32];

	if (opt->kind != CONFIG_OPT_SECONDS)
		fail_msg("--%s: kind %d, not seconds", opt->name, opt->kind);
	for (size_t i = 0; i < ARRAY_LEN(fine); i++) {
		snprintf(v, sizeof(v), "%g", fine[i]);
		run_value(&o, opt, v);
		if (o.result != CONFIG_RUN || seconds_at(&o.cfg, opt) != fine[i])
			fail_msg("--%s=%s: result %d, value %g, error \"%s\"", opt->name, v, o.result,
			         seconds_at(&o.cfg, opt), o.err);
		outcome_free(&o);
	}
	assert_refused(opt, "0");
	assert_refused(opt, "86401");
	assert_refused(opt, "-1");
	assert_refused(opt, "inf");
	assert_refused(opt, "nan");
	assert_refused(opt, "5s");
}

/* Every number takes the ends of its range and refuses one past each, in its own words. */
static void
test_option_limits(void **state)
{
	size_t numbers = 0, seconds = 0;
	struct outcome o;

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(number_limits); i++)
		assert_number_limits(option_named(number_limits[i].name), number_limits[i].min,
		                     number_limits[i].max);
	for (size_t i = 0; i < ARRAY_LEN(seconds_options); i++)
		assert_seconds_limits(option_named(seconds_options[i]));
	for (const struct config_option *opt = config_options; opt->name; opt++) {
		numbers += opt->kind == CONFIG_OPT_UNSIGNED || opt->kind == CONFIG_OPT_SIZE;
		seconds += opt->kind == CONFIG_OPT_SECONDS;
	}
	assert_int_equal(numbers, ARRAY_LEN(number_limits));
	assert_int_equal(seconds, ARRAY_LEN(seconds_options));

	/* --grace is seconds too, and 0 besides. */
	RUN(&o, "--grace", "0");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_seconds(o.cfg.grace, 0);
	outcome_free(&o);
	RUN(&o, "--grace", "86400");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_seconds(o.cfg.grace, 86400);
	outcome_free(&o);
	RUN(&o, "--grace", "86401");
	assert_string_equal(o.err, "keepalive-proxy: grace must be 0 or a number of seconds: "
	                           "'86401'\n");
	outcome_free(&o);
}

/*
 * The read-ahead cap is a size_t, and readahead.c adds what is held to one
 * more piece of at most half the cap: that sum must not wrap. On 32-bit
 * targets a 16 GiB cap once wrapped to 0 and every value was refused.
 */
static void
test_fetch_memory_cap_fits_size_t(void **state)
{
	const struct config_option *opt = option_named("read-ahead-memory");
	size_t cap = opt->max;
	struct outcome o;
	char v[32];

	(void)state;
	assert_true(cap == opt->max);
	assert_true(cap >= opt->min);
	assert_true(cap + cap / 2 > cap);
	snprintf(v, sizeof(v), "%zu", cap);
	RUN(&o, "--read-ahead-memory", v);
	assert_int_equal(o.result, CONFIG_RUN);
	assert_true(o.cfg.fetch_memory == cap);
	outcome_free(&o);
}

#define AT(member) offsetof(struct kp_config, member)

/* Where each option that stores its value directly stores it. */
static const struct {
	const char *name;
	size_t field;
} option_fields[] = {
	{"port", AT(port)},
	{"bind", AT(bind_addr)},
	{"allow", AT(allow)},
	{"auth-file", AT(auth_file)},
	{"deny-dest", AT(deny_dest)},
	{"allow-dest", AT(allow_dest)},
	{"user", AT(user)},
	{"idle-timeout", AT(idle_timeout)},
	{"max-idle-per-host", AT(max_idle_per_host)},
	{"max-idle", AT(max_idle_total)},
	{"max-conns-per-host", AT(max_conns_per_host)},
	{"queue-timeout", AT(queue_timeout)},
	{"no-connect-race", AT(no_connect_race)},
	{"connect-timeout", AT(connect_timeout)},
	{"response-timeout", AT(response_timeout)},
	{"io-timeout", AT(io_timeout)},
	{"client-timeout", AT(client_idle_timeout)},
	{"header-timeout", AT(header_timeout)},
	{"max-header-size", AT(max_header_bytes)},
	{"max-url-size", AT(max_url_bytes)},
	{"max-clients", AT(max_clients)},
	{"dns-ttl", AT(dns_cache_ttl)},
	{"tunnel-timeout", AT(tunnel_timeout)},
	{"access-log", AT(access_log)},
	{"log-query", AT(log_query)},
	{"syslog", AT(syslog)},
	{"pidfile", AT(pidfile)},
	{"stats-no-auth", AT(stats_no_auth)},
	{"stats-interval", AT(stats_interval)},
	{"pipe-size", AT(pipe_size)},
	{"no-splice", AT(no_splice)},
	{"upstream-rcvbuf", AT(upstream_rcvbuf)},
	{"upstream-sndbuf", AT(upstream_sndbuf)},
	{"tcp-keepalive", AT(tcp_keepalive)},
	{"ca-cert", AT(ca_cert)},
	{"ca-key", AT(ca_key)},
	{"make-ca", AT(make_ca_dir)},
	{"upstream-ca", AT(upstream_ca)},
	{"leaf-cache", AT(leaf_cache)},
	{"read-ahead", AT(read_ahead)},
	{"fetch-memory", AT(fetch_memory)},
	{"read-ahead-memory", AT(fetch_memory)},
	{"read-ahead-depth", AT(read_ahead_depth)},
	{"read-ahead-ttl", AT(read_ahead_ttl)},
	{"split-size", AT(split_size)},
	{"parent-credentials", AT(parent_credentials)},
	{"split-connections", AT(split_connections)},
	{"check-host", AT(check_host)},
	{"json", AT(check_json)},
	{"rtt", AT(path_rtt_ms)},
	{"rate", AT(path_rate_mbit)},
	{"verbose", AT(verbosity)},
};

/*
 * --parent-for takes two words and keeps the rules in the order given,
 * --direct among them; a malformed parent is refused when read, naming
 * what is wrong and never the password.
 */
static void
test_parent_rules_keep_their_order(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "--parent-for", "*.tv.example", "socks5h://127.0.0.1:1080", "-p", "9300",
	    "--direct", "10.0.0.0/8", "--parent", "http://u:p@10.0.0.7:3128", "--parent-for",
	    "cdn.example", "http://10.0.0.8:8080");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 9300);
	assert_int_equal(o.cfg.nparent_rules, 3);
	assert_string_equal(o.cfg.parent_rules[0].pattern, "*.tv.example");
	assert_string_equal(o.cfg.parent_rules[0].url, "socks5h://127.0.0.1:1080");
	assert_string_equal(o.cfg.parent_rules[1].pattern, "10.0.0.0/8");
	assert_null(o.cfg.parent_rules[1].url);
	assert_string_equal(o.cfg.parent_rules[2].url, "http://10.0.0.8:8080");
	assert_string_equal(o.cfg.parent_url, "http://u:p@10.0.0.7:3128");
	outcome_free(&o);

	RUN(&o, "--parent-for", "*.tv.example");
	assert_int_equal(o.result, CONFIG_ERROR);
	assert_non_null(strstr(o.err, "--parent-for needs PATTERN URL"));
	outcome_free(&o);
	RUN(&o, "--parent-for", "bad pattern", "socks5h://h:1");
	assert_int_equal(o.result, CONFIG_ERROR);
	outcome_free(&o);
	RUN(&o, "--parent", "socks5h://user:hunter2@h");
	assert_int_equal(o.result, CONFIG_ERROR);
	assert_non_null(strstr(o.err, "needs its port"));
	outcome_free(&o);
	RUN(&o, "--direct", "10.0.0.0/33");
	assert_int_equal(o.result, CONFIG_ERROR);
	outcome_free(&o);
}

static void
test_option_fields(void **state)
{
	size_t direct = 0;

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(option_fields); i++) {
		const struct config_option *opt = option_named(option_fields[i].name);

		if (opt->kind == CONFIG_OPT_CUSTOM || opt->kind == CONFIG_OPT_CUSTOM2 ||
		    opt->kind == CONFIG_OPT_HELP ||
		    opt->kind == CONFIG_OPT_VERSION || opt->field != option_fields[i].field)
			fail_msg("--%s does not store into the member it names", opt->name);
	}
	for (const struct config_option *opt = config_options; opt->name; opt++)
		direct += opt->kind != CONFIG_OPT_CUSTOM && opt->kind != CONFIG_OPT_CUSTOM2 &&
		          opt->kind != CONFIG_OPT_HELP && opt->kind != CONFIG_OPT_VERSION;
	assert_int_equal(direct, ARRAY_LEN(option_fields));
	assert_int_equal(option_named("allow")->count_field, AT(nallow));
	assert_int_equal(option_named("deny-dest")->count_field, AT(ndeny_dest));
	assert_int_equal(option_named("allow-dest")->count_field, AT(nallow_dest));
}

/* Strings are kept as given, flags set, lists grow to their cap and no further. */
static void
test_option_values(void **state)
{
	(void)state;
	for (const struct config_option *opt = config_options; opt->name; opt++) {
		char *argv[KP_MAX_CIDRS + 3] = {"keepalive-proxy"};
		char flag[64], values[KP_MAX_CIDRS + 1][32], want[160];
		struct outcome o;

		snprintf(flag, sizeof(flag), "--%s", opt->name);
		switch (opt->kind) {
		case CONFIG_OPT_STRING:
			/* Loopback, so that --bind passes the open-proxy check. */
			argv[1] = flag;
			argv[2] = "::1";
			run_argv(&o, argv);
			assert_int_equal(o.result, CONFIG_RUN);
			assert_ptr_equal(string_at(&o.cfg, opt), argv[2]);
			outcome_free(&o);
			break;
		case CONFIG_OPT_FLAG:
			argv[1] = flag;
			/* --json shapes --check-host's report and means nothing alone. */
			if (strcmp(opt->name, "json") == 0)
				argv[2] = "--check-host";
			run_argv(&o, argv);
			assert_int_equal(o.result, CONFIG_RUN);
			assert_true(*(const bool *)((const char *)&o.cfg + opt->field));
			outcome_free(&o);
			break;
		case CONFIG_OPT_CIDRS:
			for (unsigned i = 0; i <= KP_MAX_CIDRS; i++) {
				snprintf(values[i], sizeof(values[i]), "--%s=10.%u.0.0/16", opt->name, i);
				argv[1 + i] = values[i];
			}
			/* One past the cap first, then exactly the cap. */
			run_argv(&o, argv);
			snprintf(want, sizeof(want),
			         "keepalive-proxy: too many --%s ranges (at most %d): '10.%d.0.0/16'\n",
			         opt->name, KP_MAX_CIDRS, KP_MAX_CIDRS);
			assert_int_equal(o.result, CONFIG_ERROR);
			assert_string_equal(o.err, want);
			outcome_free(&o);
			argv[1 + KP_MAX_CIDRS] = "-b::1";
			run_argv(&o, argv);
			assert_int_equal(o.result, CONFIG_RUN);
			assert_int_equal(count_at(&o.cfg, opt), KP_MAX_CIDRS);
			outcome_free(&o);
			argv[1] = flag;
			argv[2] = "lan";
			argv[3] = NULL;
			run_argv(&o, argv);
			assert_int_equal(o.result, CONFIG_ERROR);
			snprintf(want, sizeof(want),
			         "keepalive-proxy: --%s wants an address or a range such as "
			         "192.168.1.0/24: 'lan'\n",
			         opt->name);
			assert_string_equal(o.err, want);
			outcome_free(&o);
			break;
		default:
			break;
		}
	}
}

/* Each value-taking option, long and short, without its value; each flag given one. */
static void
test_option_missing_or_extra_value(void **state)
{
	(void)state;
	for (const struct config_option *opt = config_options; opt->name; opt++) {
		char flag[64], want[128];
		struct outcome o;

		if (opt->arg) {
			snprintf(flag, sizeof(flag), "--%s", opt->name);
			RUN(&o, flag);
			snprintf(want, sizeof(want), "keepalive-proxy: option %s needs a value\n", flag);
			assert_int_equal(o.result, CONFIG_ERROR);
			assert_string_equal(o.err, want);
			outcome_free(&o);
			if (opt->short_name) {
				snprintf(flag, sizeof(flag), "-%c", opt->short_name);
				RUN(&o, "-v", flag);
				snprintf(want, sizeof(want), "keepalive-proxy: option %s needs a value\n",
				         flag);
				assert_int_equal(o.result, CONFIG_ERROR);
				assert_string_equal(o.err, want);
				outcome_free(&o);
			}
		} else {
			snprintf(flag, sizeof(flag), "--%s=1", opt->name);
			RUN(&o, flag);
			assert_int_equal(o.result, CONFIG_ERROR);
			assert_string_equal(o.out, "");
			outcome_free(&o);
		}
	}
}

/* A one-letter alias does what its long name does. */
static void
test_short_alias_is_long_name(void **state)
{
	(void)state;
	for (const struct config_option *opt = config_options; opt->name; opt++) {
		char short_flag[3] = {'-', opt->short_name, '\0'}, long_flag[64];
		const char *value = opt->kind == CONFIG_OPT_STRING ? "::1" : "7";
		struct outcome by_short, by_long;

		if (!opt->short_name || opt->kind == CONFIG_OPT_HELP || opt->kind == CONFIG_OPT_VERSION)
			continue;
		snprintf(long_flag, sizeof(long_flag), "--%s", opt->name);
		if (opt->arg) {
			RUN(&by_short, short_flag, (char *)value);
			RUN(&by_long, long_flag, (char *)value);
		} else {
			RUN(&by_short, short_flag);
			RUN(&by_long, long_flag);
		}
		assert_int_equal(by_short.result, CONFIG_RUN);
		assert_int_equal(by_long.result, CONFIG_RUN);
		if (memcmp(&by_short.cfg, &by_long.cfg, sizeof(by_short.cfg)) != 0)
			fail_msg("-%c and --%s set different things", opt->short_name, opt->name);
		outcome_free(&by_short);
		outcome_free(&by_long);
	}
}

/* --check-host takes one URL after it and --json; without it, neither means anything. */
static void
test_check_host(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "--check-host");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_true(o.cfg.check_host);
	assert_false(o.cfg.check_json);
	assert_null(o.cfg.check_url);
	assert_int_equal(o.cfg.path_rtt_ms, 0);
	assert_int_equal(o.cfg.path_rate_mbit, 0);
	outcome_free(&o);
	/* getopt moves the URL behind the flags, wherever it was written. */
	RUN(&o, "--check-host", "http://example.com/v.mp4", "--json", "--rate", "1000");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_true(o.cfg.check_json);
	assert_string_equal(o.cfg.check_url, "http://example.com/v.mp4");
	assert_int_equal(o.cfg.path_rate_mbit, 1000);
	outcome_free(&o);
	RUN(&o, "--check-host", "--rtt", "150", "--upstream-rcvbuf", "67108864", "-u", "nobody");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.path_rtt_ms, 150);
	assert_string_equal(o.cfg.user, "nobody");
	outcome_free(&o);
	RUN(&o, "--check-host", "http://a/", "http://b/");
	assert_int_equal(o.result, CONFIG_ERROR);
	assert_string_equal(o.err, "keepalive-proxy: unexpected argument 'http://a/' (see --help)\n");
	outcome_free(&o);
	RUN(&o, "http://example.com/");
	assert_int_equal(o.result, CONFIG_ERROR);
	assert_string_equal(o.err,
	                    "keepalive-proxy: unexpected argument 'http://example.com/' (see --help)\n");
	outcome_free(&o);
	RUN(&o, "--json");
	assert_int_equal(o.result, CONFIG_ERROR);
	assert_string_equal(o.err, "keepalive-proxy: --json goes with --check-host\n");
	outcome_free(&o);
	/* The path also sets what the start-up check judges, so it parses without --check-host. */
	RUN(&o, "--rtt", "300", "--rate", "100");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_false(o.cfg.check_host);
	assert_int_equal(o.cfg.path_rtt_ms, 300);
	assert_int_equal(o.cfg.path_rate_mbit, 100);
	outcome_free(&o);
	RUN(&o, "--check-host", "--rtt", "0");
	assert_int_equal(o.result, CONFIG_ERROR);
	assert_string_equal(o.err, "keepalive-proxy: rtt must be 1-60000 milliseconds: '0'\n");
	outcome_free(&o);
}

static void
test_unknown_option(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "--bogus");
	assert_int_equal(o.result, CONFIG_ERROR);
	assert_string_equal(o.err, "keepalive-proxy: unknown option --bogus (see --help)\n");
	outcome_free(&o);
	RUN(&o, "-x");
	assert_string_equal(o.err, "keepalive-proxy: unknown option -x (see --help)\n");
	outcome_free(&o);
	/* getopt_long takes a prefix of one long name for it; of several, for none. */
	RUN(&o, "--max-idle-", "1");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.max_idle_per_host, 1);
	outcome_free(&o);
	RUN(&o, "--max", "1");
	assert_int_equal(o.result, CONFIG_ERROR);
	assert_string_equal(o.err, "keepalive-proxy: unknown option --max (see --help)\n");
	outcome_free(&o);
}

/* Every entry prints under its own flag, each help line in its place. */
static void
test_help_from_table(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "--help");
	assert_int_equal(o.result, CONFIG_EXIT_OK);
	assert_true(strncmp(o.out, "Usage: keepalive-proxy [options]\n", 33) == 0);
	for (const struct config_option *opt = config_options; opt->name; opt++) {
		/* Text at column 31, or 34 for flags without an alias. */
		size_t column = opt->short_name ? 31 : 34, skip;
		const char *at, *line = opt->help;
		char alias[8] = "    ", label[96];

		if (opt->short_name)
			snprintf(alias, sizeof(alias), "-%c, ", opt->short_name);
		snprintf(label, sizeof(label), "\n  %s--%s%s%s", alias, opt->name, opt->arg ? " " : "",
		         opt->arg ? opt->arg : "");
		at = strstr(o.out, label);
		if (!at)
			fail_msg("--help has no line for --%s", opt->name);
		at++;
		skip = strlen(label) - 1;
		for (;;) {
			size_t len = strcspn(line, "\n");

			if (skip + strspn(at + skip, " ") != column || strncmp(at + column, line, len) != 0 ||
			    at[column + len] != '\n')
				fail_msg("--%s: help line \"%.*s\" out of place", opt->name, (int)len, line);
			at += column + len + 1;
			skip = 0;
			if (!line[len])
				break;
			line += len + 1;
		}
	}
	outcome_free(&o);
}

static void
test_parse_again_after_error(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "-p", "0");
	assert_int_equal(o.result, CONFIG_ERROR);
	outcome_free(&o);
	RUN(&o, "-p", "8080", "-v");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 8080);
	assert_int_equal(o.cfg.verbosity, 1);
	outcome_free(&o);
}

/*
 * config_parse resets getopt itself, so a second parse must not see anything
 * of the first, even when the first stopped in the middle of "-hv".
 */
static void
test_parse_again_after_early_exit_in_cluster(void **state)
{
	char *first[] = {"keepalive-proxy", "-hv", NULL};
	char *second[] = {"keepalive-proxy", "-p", "8080", NULL};
	struct outcome o;

	(void)state;
	run_argv(&o, first);
	assert_int_equal(o.result, CONFIG_EXIT_OK);
	outcome_free(&o);
	run_argv(&o, second);
	if (o.result != CONFIG_RUN || o.cfg.port != 8080 || o.cfg.verbosity != 0)
		fail_msg("second parse: result %d, port %u, verbosity %d, error \"%s\"", o.result,
		         o.cfg.port, o.cfg.verbosity, o.err);
	outcome_free(&o);
}

static void
test_interception_options(void **state)
{
	struct outcome o;

	(void)state;
	RUN(&o, "--intercept", "*.example.com", "--intercept", "192.0.2.7", "--ca-cert", "c.pem",
	    "--ca-key", "k.pem", "--upstream-ca", "u.pem", "--leaf-cache", "10");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.nintercept, 2);
	assert_string_equal(o.cfg.intercept[0], "*.example.com");
	assert_string_equal(o.cfg.intercept[1], "192.0.2.7");
	assert_string_equal(o.cfg.ca_cert, "c.pem");
	assert_string_equal(o.cfg.ca_key, "k.pem");
	assert_string_equal(o.cfg.upstream_ca, "u.pem");
	assert_int_equal(o.cfg.leaf_cache, 10);
	assert_string_equal(o.err, "");
	outcome_free(&o);
#if KP_TLS
	/* A pattern that is no host (only a build with TLS reads patterns at all). */
	RUN(&o, "--intercept", "a.*.example.com", "--ca-cert", "c", "--ca-key", "k");
	assert_int_equal(o.result, CONFIG_ERROR);
	assert_non_null(strstr(o.err, "a.*.example.com"));
	outcome_free(&o);
#endif
	/* Interception without a CA to sign with. */
	RUN(&o, "--intercept", "example.com");
	assert_int_equal(o.result, CONFIG_ERROR);
	assert_non_null(strstr(o.err, "--ca-cert"));
	outcome_free(&o);
	RUN(&o, "--leaf-cache", "0");
	assert_int_equal(o.result, CONFIG_ERROR);
	outcome_free(&o);
	/* --make-ca needs nothing else. */
	RUN(&o, "--make-ca", "/tmp/ca", "--intercept", "example.com");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_string_equal(o.cfg.make_ca_dir, "/tmp/ca");
	outcome_free(&o);
}

/* A binary built without TLS refuses the flags that need it, whatever else is given. */
static void
test_interception_without_tls(void **state)
{
	static const char refusal[] = "keepalive-proxy: --intercept and --make-ca need TLS, and "
	                              "this binary was built without it (-DKP_TLS=OFF)\n";
	struct outcome o;

	(void)state;
	RUN_NO_TLS(&o, "--intercept", "example.com", "--ca-cert", "c.pem", "--ca-key", "k.pem");
	assert_int_equal(o.result, CONFIG_ERROR);
	assert_string_equal(o.err, refusal);
	outcome_free(&o);
	RUN_NO_TLS(&o, "--make-ca", "/tmp/ca");
	assert_int_equal(o.result, CONFIG_ERROR);
	assert_string_equal(o.err, refusal);
	outcome_free(&o);
	/* The other TLS settings alone ask for nothing the build lacks. */
	RUN_NO_TLS(&o, "--ca-cert", "c.pem", "--upstream-ca", "u.pem", "--leaf-cache", "10");
	assert_int_equal(o.result, CONFIG_RUN);
	outcome_free(&o);
	RUN_NO_TLS(&o, "-p", "8080");
	assert_int_equal(o.result, CONFIG_RUN);
	assert_int_equal(o.cfg.port, 8080);
	outcome_free(&o);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_no_arguments),
		cmocka_unit_test(test_short_options),
		cmocka_unit_test(test_long_options),
		cmocka_unit_test(test_option_spellings),
		cmocka_unit_test(test_boundaries),
		cmocka_unit_test(test_dispatch_and_tuning_options),
		cmocka_unit_test(test_open_proxy_refused),
		cmocka_unit_test(test_interception_options),
		cmocka_unit_test(test_interception_without_tls),
		cmocka_unit_test(test_url_limit_follows_head_limit),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_help),
		cmocka_unit_test(test_help_from_table),
		cmocka_unit_test(test_option_table_is_well_formed),
		cmocka_unit_test(test_option_limits),
		cmocka_unit_test(test_fetch_memory_cap_fits_size_t),
		cmocka_unit_test(test_parent_rules_keep_their_order),
		cmocka_unit_test(test_option_fields),
		cmocka_unit_test(test_size_units),
		cmocka_unit_test(test_every_bytes_option_takes_units),
		cmocka_unit_test(test_option_values),
		cmocka_unit_test(test_option_missing_or_extra_value),
		cmocka_unit_test(test_short_alias_is_long_name),
		cmocka_unit_test(test_check_host),
		cmocka_unit_test(test_unknown_option),
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_parse_again_after_error),
		/* Last: when it fails, getopt state it leaves must not touch the others. */
		cmocka_unit_test(test_parse_again_after_early_exit_in_cluster),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
