#!/bin/sh
# shellcheck disable=SC3043
# (dash and busybox ash have "local", and the init script needs it anyway.)
#
# Runs the OpenWrt init script's own start_service() with stand-ins for
# what OpenWrt provides, and prints the command line procd would be given,
# one word per line. Given a FUNCTION, runs that one instead (an
# EXTRA_COMMANDS entry such as make_ca), with the script's PROG replaced by
# the program named, if any.
#
# Usage: uci-procd-harness.sh INIT-SCRIPT UCI-FILE [FUNCTION [PROG]]
#
# Real: the init script, unchanged, and the UCI file, read as OpenWrt's
# /lib/functions.sh reads it (a UCI file is shell once "config", "option"
# and "list" are functions). Stand-ins: config_load, config_get,
# config_get_bool, config_foreach and config_list_foreach over that file,
# and procd_* functions that record instead of talking to procd.

set -eu

init=${1:?usage: $0 INIT-SCRIPT UCI-FILE [FUNCTION [PROG]]}
uci=${2:?usage: $0 INIT-SCRIPT UCI-FILE [FUNCTION [PROG]]}
fn=${3:-start_service}
prog=${4:-}

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
	for s in $sections; do
		eval "t=\$uci_type_$s"
		[ "$t" = "$type" ] && "$fn" "$s"
	done
	return 0
}

# The callback runs in this shell, as in OpenWrt's: what it sets is kept.
config_list_foreach()
{
	local items item
	eval "items=\${uci_list_$1_$2:-}"
	while IFS= read -r item; do
		[ -n "$item" ] && "$3" "$item"
	done <<EOF
$items
EOF
	return 0
}

# --- procd, recorded --------------------------------------------------------
procd_open_instance() { echo "instance $1" >&2; }
procd_close_instance() { :; }
procd_set_param()
{
	local name="$1"
	shift
	case "$name" in
	command) printf '%s\n' "$@" ;;
	*) echo "param $name $*" >&2 ;;
	esac
}
procd_append_param()
{
	shift
	printf '%s\n' "$@"
}
procd_add_reload_trigger() { echo "reload trigger $*" >&2; }

# The script starts with "#!/bin/sh /etc/rc.common": rc.common would source
# it and call start_service (or the command given). So does this.
# shellcheck disable=SC1090
. "$init"
[ -z "$prog" ] || PROG=$prog
"$fn"
