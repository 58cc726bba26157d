#!/bin/sh
# shellcheck disable=SC3043
# A stand-in for OpenWrt's uci, not uci: it answers
# "uci [-q] get CONFIG.SECTION.OPTION" from the UCI file $KP_UCI_FILE,
# read as uci-procd-harness.sh reads one (a UCI file is shell once
# "config", "option" and "list" are functions). A list answers with its
# items separated by spaces, as uci does; an option not set fails, as with
# uci. Nothing else is here.

set -eu

[ "${1:-}" = -q ] && shift
if [ "${1:-}" != get ] || [ $# -ne 2 ]; then
	echo "uci stand-in: only 'uci [-q] get CONFIG.SECTION.OPTION' is here" >&2
	exit 1
fi
want_section=${2#*.}
want_section=${want_section%%.*}
want_option=${2##*.}
current=
value=
found=

config()
{
	current=$2
}

option()
{
	if [ "$current" = "$want_section" ] && [ "$1" = "$want_option" ]; then
		value=$2
		found=1
	fi
}

list()
{
	if [ "$current" = "$want_section" ] && [ "$1" = "$want_option" ]; then
		value=${value:+$value }$2
		found=1
	fi
}

# shellcheck disable=SC1090
. "${KP_UCI_FILE:?uci stand-in: KP_UCI_FILE names no UCI file}"
[ -n "$found" ] || exit 1
printf '%s\n' "$value"
