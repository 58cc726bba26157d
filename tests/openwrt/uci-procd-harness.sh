#!/bin/sh
# shellcheck disable=SC3043
# (dash and busybox ash have "local", and the init script needs it anyway.)
#
# Runs the OpenWrt init script with stand-ins for what OpenWrt provides
# around it. Two ways:
#
#   uci-procd-harness.sh INIT-SCRIPT UCI-FILE [FUNCTION [PROG]]
#     runs the script's start_service() (or FUNCTION, a command the script
#     adds with extra_command, such as make_ca, with the script's PROG
#     replaced by the program named; or "help") and prints the command line
#     procd would be given, one word per line; what else the script asks of
#     procd, and what it sends to logger, go to standard error ("param
#     NAME ...", "log ...").
#
#   The script's RUN_DIR, where it writes what the daemon reads at start
#   (a parent's credentials), is $KP_RUN_DIR; else, with "rc" (below),
#   DIR/.run, kept from call to call; else a directory of its own, removed
#   at the end.
#
#   KP_PROCD_STATE=DIR uci-procd-harness.sh INIT-SCRIPT UCI-FILE rc ACTION
#     does what "/etc/init.d/keepalive-proxy ACTION" does on a router, for
#     ACTION start, reload, stop or restart (rc.common's stop, then start): rc.common's start() (and reload(),
#     which is start() for a script without reload_service) sends procd the
#     service's instances with "ubus call service set", and procd starts,
#     restarts, signals or leaves alone each running instance as
#     instance_update() decides; stop() deletes them, then runs the
#     script's service_stopped, as rc.common's stop() does. The processes really
#     run; DIR keeps what procd would remember between calls (each
#     instance's config and pid). Every instance's stdout and stderr go to
#     DIR/NAME.log.
#
# Real: the init script, unchanged, and the UCI file, read as OpenWrt's
# /lib/functions.sh reads it (a UCI file is shell once "config", "option"
# and "list" are functions). Stand-ins: config_load, config_get,
# config_get_bool, config_foreach and config_list_foreach over that file;
# uci_load_validate and uci_validate_section as procd.sh has them, calling
# validate-data-stand-in.py for ubox's /sbin/validate_data (also called
# by the script itself, as "validate_data DATATYPE VALUE"); chown, which
# only records (the owner named need not exist here); procd_*
# functions that record; and procd's own decisions, modelled below on its
# source (procd.git, service/instance.c and service/service.c), quoted
# where they are.

set -eu

init=${1:?usage: $0 INIT-SCRIPT UCI-FILE [FUNCTION [PROG] | rc ACTION]}
uci=${2:?usage: $0 INIT-SCRIPT UCI-FILE [FUNCTION [PROG] | rc ACTION]}
fn=${3:-start_service}
prog=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
case "$uci" in /*) ;; *) uci="$(pwd)/$uci" ;; esac

# --- UCI, as /lib/functions.sh does it -------------------------------------
sections=
current=

config()
{
	current=$2
	sections="$sections $current"
	eval "uci_type_$current=\$1"
}

option()
{
	eval "uci_opt_${current}_$1=\$2"
}

list()
{
	eval "uci_list_${current}_$1=\"\${uci_list_${current}_$1:-}\$2
\""
}

config_load()
{
	# shellcheck disable=SC1090
	. "$uci"
}

config_get()
{
	eval "$1=\${uci_opt_$2_$3:-\${4:-}}"
}

config_get_bool()
{
	local value
	config_get value "$2" "$3" "${4:-0}"
	case "$value" in
	1 | on | true | yes | enabled) eval "$1=1" ;;
	*) eval "$1=0" ;;
	esac
}

config_foreach()
{
	local fn="$1" type="$2" s t
	shift 2
	for s in $sections; do
		eval "t=\$uci_type_$s"
		[ "$t" = "$type" ] && "$fn" "$s" "$@"
	done
	return 0
}

# The callback runs in this shell, as in OpenWrt's: what it sets is kept.
# Its locals have the names of OpenWrt's own (section, option, function,
# val, len, c), which the callback sees and must not trip over.
config_list_foreach()
{
	local section="$1" option="$2" function="$3" val len c
	eval "len=\${uci_list_${section}_${option}:-}"
	c=0
	while IFS= read -r val; do
		[ -n "$val" ] && "$function" "$val"
		c=$((c + 1))
	done <<EOF
$len
EOF
	return 0
}

# --- rc.common and busybox's logger ----------------------------------------
# rc.common (package/base-files/files/etc/rc.common) defines extra_command
# before it sources the script, lists its own commands with it, adds the
# old EXTRA_COMMANDS, and runs an action only if it is in that list:
#   extra_command() { ... ALL_HELP="${ALL_HELP}\t${extra}\n"; ALL_COMMANDS="${ALL_COMMANDS} ${cmd}"; }
#   ALL_COMMANDS="${ALL_COMMANDS} ${EXTRA_COMMANDS}"
#   list_contains ALL_COMMANDS "$action" || action=help
ALL_COMMANDS=
ALL_HELP=
extra_command()
{
	ALL_HELP="${ALL_HELP}	$(printf '%-16s%s' "$1" "$2")
"
	ALL_COMMANDS="$ALL_COMMANDS $1"
}
for c in start stop restart reload enable disable enabled running status trace info; do
	extra_command "$c" ""
done

# What goes to the system log, on standard error.
logger()
{
	echo "log $*" >&2
}

# The owner a file is given: recorded, on standard error.
chown()
{
	[ "$mode" = rc ] || echo "chown $*" >&2
}

# --- validation, as procd.sh has it (package/system/procd/files/procd.sh) --
# Its lines, with /sbin/validate_data replaced by the stand-in:
#   _result=$(/sbin/validate_data "$_package" "$_type" "$_name" "$@" 2> /dev/null)
#   _error=$?
#   eval "$_result"
# and uci_load_validate: "local" for each option, then
#   eval "$_function \"\$_name\" \"\$_result\""
validate_data()
{
	KP_UCI_FILE="$uci" python3 "$here/validate-data-stand-in.py" "$@"
}

uci_validate_section()
{
	local _package="$1" _type="$2" _name="$3" _result _error
	shift 3
	_error=0
	_result=$(validate_data "$_package" "$_type" "$_name" "$@" 2>/dev/null) || _error=$?
	eval "$_result"
	if [ "$_error" != 0 ]; then
		validate_data "$_package" "$_type" "$_name" "$@" >/dev/null || :
	fi
	return "$_error"
}

uci_load_validate()
{
	local _package="$1" _type="$2" _name="$3" _function="$4" _option _result
	shift 4
	for _option in "$@"; do
		eval "local ${_option%%:*}"
	done
	_result=0
	uci_validate_section "$_package" "$_type" "$_name" "$@" || _result=$?
	[ -n "$_function" ] || return "$_result"
	eval "$_function \"\$_name\" \"\$_result\""
}

# --- procd, recorded ---------------------------------------------------------
# An instance as procd keeps it: the parts instance_config_changed()
# compares, one per line in $record, and the command line, one word per
# line in $command.
instances=
inst=
command=
record=
validation=

procd_open_instance()
{
	inst=${1:-instance1}
	command=
	record=
}

procd_set_param()
{
	local name="$1" f sum
	shift
	case "$name" in
	command)
		command=$(printf '%s\n' "$@")
		;;
	file)
		# procd hashes each file's contents (instance_fill_file:
		# md5_begin/md5_hash/md5_end), so a changed file is a change.
		# The UCI file is the router's /etc/config/keepalive-proxy.
		for f in "$@"; do
			[ "$f" != /etc/config/keepalive-proxy ] || f=$uci
			sum=$(md5sum "$f" 2>/dev/null | cut -d' ' -f1) || sum=
			record="${record}file $f ${sum:-missing}
"
		done
		;;
	respawn)
		# procd.sh fills in system's defaults: 3600 5 5.
		record="${record}respawn ${*:-3600 5 5}
"
		;;
	reload_signal)
		record="${record}reload_signal $(kill -l "$1" 2>/dev/null || echo "$1")
"
		;;
	stdout | stderr)
		# Not compared by instance_config_changed().
		;;
	*)
		record="${record}$name $*
"
		;;
	esac
	[ "$mode" = rc ] || echo "param $name $*" >&2
}

procd_append_param()
{
	local name="$1"
	shift
	case "$name" in
	command) command=$(printf '%s\n%s' "$command" "$(printf '%s\n' "$@")") ;;
	*) record="${record}$name $*
" ;;
	esac
}

procd_close_instance()
{
	instances="$instances $inst"
	if [ "$mode" = rc ]; then
		mkdir -p "$state/new/$inst"
		printf '%s\n' "$command" >"$state/new/$inst/command"
		printf '%s' "$record" >"$state/new/$inst/record"
	else
		printf '%s\n' "$command"
	fi
}

procd_add_reload_trigger() { [ "$mode" = rc ] || echo "reload trigger $*" >&2; }

# procd.sh runs the given function with no section: validate_data then
# prints the types as json_add_* commands, which go into the message to
# procd ("ubus call service validate" shows them). Recorded as
# "OPTION TYPE" lines in $validation.
json_add_object() { :; }
json_close_object() { :; }
json_add_string()
{
	case "$1" in
	package | type) ;;
	*) validation="${validation}$1 $2
" ;;
	esac
}

procd_add_validation()
{
	validation=
	"$@"
	[ "$mode" = rc ] || printf '%s' "$validation" | sed 's/^/validate /' >&2
}

# --- procd's decisions (service/instance.c) ----------------------------------
# running: "bool running = in->proc.pending;"
instance_running()
{
	local pid
	pid=$(cat "$state/$1/pid" 2>/dev/null) || return 1
	kill -0 "$pid" 2>/dev/null
}

# instance_start(): fork and exec the command; stdout and stderr to a log.
instance_start()
{
	local name="$1" cmd
	cmd=$(cat "$state/$name/command")
	# shellcheck disable=SC2086
	(
		set -f
		IFS='
'
		exec $cmd
	) >>"$state/$name.log" 2>&1 &
	echo $! >"$state/$name/pid"
}

# instance_stop(): SIGTERM, and SIGKILL once term_timeout (5 s) has passed:
#   kill(in->proc.pid, SIGTERM);
#   uloop_timeout_set(&in->timeout, in->term_timeout * 1000);
instance_stop()
{
	local pid tries=0
	pid=$(cat "$state/$1/pid" 2>/dev/null) || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	while kill -0 "$pid" 2>/dev/null; do
		tries=$((tries + 1))
		if [ "$tries" -gt 50 ]; then
			kill -KILL "$pid" 2>/dev/null || :
			break
		fi
		sleep 0.1
	done
	rm -f "$state/$1/pid"
}

# instance_config_changed(): "if (!blob_attr_equal(in->command,
# in_new->command)) return true;" and likewise for env, netdev, file (by
# md5), nice, user, group, pidfile, respawn, reload_signal, term_timeout.
instance_config_changed()
{
	! cmp -s "$state/$1/command" "$state/new/$1/command" ||
		! cmp -s "$state/$1/record" "$state/new/$1/record"
}

# instance_config_move(): the new config replaces the old one, whether or
# not the process was restarted to run it.
instance_config_move()
{
	cp "$state/new/$1/command" "$state/new/$1/record" "$state/$1/"
}

reload_signal_of()
{
	sed -n 's/^reload_signal //p' "$state/$1/record"
}

# instance_restart():
#   if (in->reload_signal) {
#           kill(in->proc.pid, in->reload_signal);
#           return;
#   }
#   in->halt = true;
#   in->restart = true;
#   kill(in->proc.pid, SIGTERM);
# and on the child's exit, instance_exit(): "if (in->halt) { ... if
# (in->restart) restart = true; ... } if (restart) instance_start(in);"
# (The record read is the old one: instance_update() restarts before it
# moves the config.)
instance_restart()
{
	local name="$1" sig
	sig=$(reload_signal_of "$name")
	if [ -n "$sig" ]; then
		kill "-$sig" "$(cat "$state/$name/pid")"
		instance_config_move "$name"
		return 0
	fi
	instance_stop "$name"
	instance_config_move "$name"
	instance_start "$name"
}

# instance_update():
#   if (!running || stopping) {
#           instance_config_move(in, in_new);
#           instance_start(in);
#   } else {
#           if (changed)
#                   instance_restart(in);
#           ...
#           instance_config_move(in, in_new);
#   }
instance_update()
{
	local name="$1"
	if [ ! -d "$state/$name" ] || ! instance_running "$name"; then
		mkdir -p "$state/$name"
		instance_config_move "$name"
		instance_start "$name"
		echo "procd: $name started"
	elif instance_config_changed "$name"; then
		if [ -n "$(reload_signal_of "$name")" ]; then
			echo "procd: $name changed: signal $(reload_signal_of "$name")"
		else
			echo "procd: $name changed: restarted"
		fi
		instance_restart "$name"
	else
		instance_config_move "$name"
		echo "procd: $name unchanged"
	fi
}

# "ubus call service set": the service's instances replace the ones procd
# has (service/service.c, vlist_add into s->instances): a name seen before
# is updated, a new one started, one no longer sent stopped.
service_set()
{
	local name old
	for name in $instances; do
		instance_update "$name"
	done
	for old in "$state"/*/; do
		old=$(basename "$old")
		[ "$old" = new ] && continue
		case " $instances " in
		*" $old "*) ;;
		*)
			instance_stop "$old"
			rm -rf "${state:?}/$old"
			echo "procd: $old removed"
			;;
		esac
	done
	rm -rf "$state/new"
}

mode=print
[ "$fn" = rc ] && mode=rc

# The script starts with "#!/bin/sh /etc/rc.common": rc.common sources it,
# without set -u, and calls start_service (or the command given).
set +u
# shellcheck disable=SC1090
. "$init"
[ -z "$prog" ] || [ "$mode" = rc ] || PROG=$prog
if [ -n "${KP_RUN_DIR:-}" ]; then
	RUN_DIR=$KP_RUN_DIR
elif [ "$mode" = rc ]; then
	# A dot: no instance of procd's by that name (see service_set).
	RUN_DIR=${KP_PROCD_STATE:?KP_PROCD_STATE names no directory}/.run
else
	RUN_DIR=$(mktemp -d)
	trap 'rm -rf "$RUN_DIR"' EXIT
fi

if [ "$mode" = print ]; then
	case "$fn" in
	start_service | service_triggers) ;;
	help)
		printf 'Available commands:\n%s%s' "$ALL_HELP" "${EXTRA_HELP:-}"
		exit 0
		;;
	*)
		case " $ALL_COMMANDS ${EXTRA_COMMANDS:-} " in
		*" $fn "*) ;;
		*)
			echo "rc.common: $fn is no command of this script" >&2
			exit 1
			;;
		esac
		;;
	esac
	"$fn"
	exit 0
fi

state=${KP_PROCD_STATE:?KP_PROCD_STATE names no directory}
action=${prog:?usage: $0 INIT-SCRIPT UCI-FILE rc start|reload|stop|restart}
mkdir -p "$state"
PROG=${KP_PROG:-$PROG}
# rc.common: restart() { trap '' TERM; stop "$@"; trap - TERM; start "$@"; }
rc_stop()
{
	for old in "$state"/*/; do
		[ -d "$old" ] || continue
		old=$(basename "$old")
		[ "$old" = new ] && continue
		instance_stop "$old"
		rm -rf "${state:?}/$old"
	done
	# rc.common: stop() { ...; stop_service "$@"; procd_kill ...; if eval
	# "type service_stopped" ...; then service_stopped; fi }
	if type service_stopped >/dev/null 2>&1; then
		service_stopped
	fi
}
case "$action" in
restart)
	rc_stop
	rm -rf "$state/new"
	mkdir -p "$state/new"
	start_service
	service_triggers
	service_set
	;;
start | reload)
	# rc.common: start() { rc_procd start_service "$@"; ... } and, with no
	# reload_service, reload() { ... start }; rc_procd() opens the service,
	# runs start_service, and procd_close_service sends "set" after
	# service_triggers.
	rm -rf "$state/new"
	mkdir -p "$state/new"
	start_service
	service_triggers
	service_set
	;;
stop)
	rc_stop
	;;
*)
	echo "rc: start, reload, stop or restart" >&2
	exit 1
	;;
esac
