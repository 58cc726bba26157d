#!/bin/sh
# shellcheck disable=SC3043
# A stand-in for OpenWrt's uci, not uci, over the one UCI file named by
# $KP_UCI_FILE:
#   uci [-q] get CONFIG.SECTION.OPTION   the value; a list's items separated
#                                        by spaces, as uci prints them; an
#                                        option not set fails, as with uci
#   uci set CONFIG.SECTION.OPTION=VALUE  staged, as uci stages changes (in
#                                        $KP_UCI_FILE.changes here, where uci
#                                        has /tmp/.uci/CONFIG), not yet in
#                                        the file
#   uci commit [CONFIG]                  the staged changes written into the
#                                        file, which is what procd's config
#                                        trigger and an init script read
# The file is read as uci-procd-harness.sh reads one (a UCI file is shell
# once "config", "option" and "list" are functions). Nothing else is here.

set -eu

file=${KP_UCI_FILE:?uci stand-in: KP_UCI_FILE names no UCI file}
[ "${1:-}" = -q ] && shift

case "${1:-}:$#" in
get:2) ;;
set:2)
	printf '%s\n' "$2" >>"$file.changes"
	exit 0
	;;
commit:1 | commit:2)
	[ -f "$file.changes" ] || exit 0
	# Each change replaces the option in its section, or is added at the
	# section's end; the file keeps uci's layout: tab, option, quoted value.
	while IFS= read -r change; do
		path=${change%%=*}
		value=${change#*=}
		section=${path#*.}
		section=${section%%.*}
		name=${path##*.}
		awk -v s="$section" -v o="$name" -v v="$value" '
			function flush() { if (insec && !done) { printf "\toption %s '\''%s'\''\n", o, v; done = 1 } }
			/^config[ \t]/ { flush(); n = split($0, w, /[ \t]+/); sec = w[3]; gsub(/'\''|"/, "", sec); insec = (sec == s) }
			insec && $1 == "option" && $2 == o { printf "\toption %s '\''%s'\''\n", o, v; done = 1; next }
			{ print }
			END { flush() }
		' "$file" >"$file.new"
		mv "$file.new" "$file"
	done <"$file.changes"
	rm -f "$file.changes"
	exit 0
	;;
*)
	echo "uci stand-in: only get, set and commit are here" >&2
	exit 1
	;;
esac

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
. "$file"
[ -n "$found" ] || exit 1
printf '%s\n' "$value"
