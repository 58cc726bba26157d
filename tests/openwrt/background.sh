# Sourced by the tests that run programs in the background: a working
# directory ($work), removed on exit, the programs started ($pids), each
# ended on exit, and started().

work=$(mktemp -d)
pids=
cleanup()
{
	for p in $pids; do
		kill "$p" 2>/dev/null || :
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# started NAME PATTERN COMMAND...: runs COMMAND in the background, its
# output into $work/NAME.log, and returns once it prints a line with
# PATTERN (then in $line), or fails if it exits first. Sets $pid.
started()
{
	started_name="$1" started_pattern="$2"
	shift 2
	rm -f "$work/$started_name.fifo"
	mkfifo "$work/$started_name.fifo"
	"$@" >"$work/$started_name.fifo" 2>&1 &
	pid=$!
	pids="$pids $pid"
	exec 3<"$work/$started_name.fifo"
	: >"$work/$started_name.log"
	while IFS= read -r line <&3; do
		printf '%s\n' "$line" >>"$work/$started_name.log"
		case "$line" in
		*"$started_pattern"*)
			# Read on, or a chatty process would stop on a full pipe.
			cat <&3 >>"$work/$started_name.log" &
			exec 3<&-
			return 0
			;;
		esac
	done
	exec 3<&-
	return 1
}
