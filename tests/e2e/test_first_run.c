/*
 * The quick start, typed as README gives it: in a fresh copy of the sources,
 * configured once into build/, "cmake --build build && ./keepalive-proxy -p
 * PORT" starts the daemon, through the link the build leaves at the top of
 * the sources, which git ignores. The copy is configured with the tests and
 * the benchmark helpers off (the command needs neither), so its build takes
 * seconds. A build outside the sources leaves them without the link.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* Everything at the top of the sources but build trees, git's data and an earlier link. */
static const char copy_script[] =
	"cd \"$1\" || exit 1\n"
	"for f in * .[!.]*; do\n"
	"\tcase $f in build* | .git | keepalive-proxy) continue ;; esac\n"
	"\t[ -e \"$f\" ] || continue\n"
	"\tcp -R \"$f\" \"$2/\" || exit 1\n"
	"done\n";

/* The quick start's second command, word for word, with the cmake of this build on PATH. */
static const char quick_start[] =
	"PATH=\"$3:$PATH\"; cd \"$1\" && cmake --build build && exec ./keepalive-proxy -p \"$2\"";

static void
configure(const char *src, const char *build, const char *log)
{
	const char *argv[] = {KP_CMAKE_COMMAND, "-S", src, "-B", build, "-DKP_BUILD_TESTS=OFF",
	                      "-DKP_BUILD_BENCH=OFF", NULL};
	int rc = run_process(argv, log, 120000);

	if (rc != 0)
		fail_msg("cmake -S %s -B %s: exit %d", src, build, rc);
}

static void
quick_start_command_runs_the_daemon(void)
{
	const char *tree = harness_temp_dir();
	char log[512], build[512], link[512], cmake_dir[512], port_text[16];
	const char *copy[] = {"/bin/sh", "-c", copy_script, "sh", KP_SOURCE_DIR, tree, NULL};
	const char *ignored[] = {"/bin/sh", "-c",
	                         "command -v git >/dev/null || exit 77; cd \"$1\" && git init -q "
	                         "&& git check-ignore -q keepalive-proxy",
	                         "sh", tree, NULL};
	struct stat st;
	char *slash;
	int port, status, rc;
	pid_t pid;

	path_join(log, sizeof(log), harness_temp_dir(), "first-run.log");
	harness_watch_log(log, "copy, configure, build and run");
	assert_int_equal(run_process(copy, log, 60000), 0);
	path_join(build, sizeof(build), tree, "build");
	configure(tree, build, log);

	snprintf(cmake_dir, sizeof(cmake_dir), "%s", KP_CMAKE_COMMAND);
	if ((slash = strrchr(cmake_dir, '/')))
		*slash = '\0';
	port = free_port();
	snprintf(port_text, sizeof(port_text), "%d", port);
	pid = spawn_process((const char *const[]){"/bin/sh", "-c", quick_start, "sh", tree,
	                                          port_text, cmake_dir, NULL},
	                    log);
	if (!wait_listening(pid, port, 240000))
		fail_msg("\"cmake --build build && ./keepalive-proxy -p %d\" did not start the "
		         "daemon", port);
	path_join(link, sizeof(link), tree, "keepalive-proxy");
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	status = stop_process(pid, SIGTERM, 5000);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* 77: no git here; the rule in .gitignore is then left unchecked. */
	rc = run_process(ignored, log, 20000);
	if (rc != 0 && rc != 77)
		fail_msg("git does not ignore the link (exit %d)", rc);
}

static void
build_elsewhere_leaves_sources_alone(void)
{
	const char *tree = harness_temp_dir(), *elsewhere = harness_temp_dir();
	const char *copy[] = {"/bin/sh", "-c", copy_script, "sh", KP_SOURCE_DIR, tree, NULL};
	char log[512], cache_path[512], *cache;

	path_join(log, sizeof(log), harness_temp_dir(), "configure.log");
	harness_watch_log(log, "copy and configure");
	assert_int_equal(run_process(copy, log, 60000), 0);
	configure(tree, elsewhere, log);
	path_join(cache_path, sizeof(cache_path), elsewhere, "CMakeCache.txt");
	assert_non_null(cache = read_file_all(cache_path, NULL));
	if (!strstr(cache, "\nKP_SOURCE_LINK:BOOL=OFF\n"))
		fail_msg("a build outside the sources would link into them");
	free(cache);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		E2E_TEST(quick_start_command_runs_the_daemon),
		E2E_TEST(build_elsewhere_leaves_sources_alone),
	};

	return E2E_RUN("e2e_first_run", tests);
}
