#!/bin/sh
# shellcheck disable=SC3043
# The OpenWrt init script maps UCI options onto the flags keepalive-proxy
# takes: each case is a UCI file and the command line procd must be given;
# the flags are then handed to the real binary, which must accept them
# (it starts, and is stopped after a moment).
#
# Usage: test_init.sh KEEPALIVE-PROXY-BINARY

set -eu

bin=${1:?usage: $0 KEEPALIVE-PROXY-BINARY}
case "$bin" in /*) ;; *) bin="$(pwd)/$bin" ;; esac
here=$(cd "$(dirname "$0")" && pwd)
init="$here/../../contrib/openwrt/keepalive-proxy/files/keepalive-proxy.init"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
failed=0
# The init script's RUN_DIR: what it writes for the daemon (a parent's
# credentials) is looked at here, and read by the binary.
export KP_RUN_DIR="$work/run"

# check NAME UCI-TEXT EXPECTED-WORDS [tls|stats-no-auth]
check()
{
	local name="$1" got want needs="${4:-}"
	printf '%s\n' "$2" > "$work/uci"
	got=$(sh "$here/uci-procd-harness.sh" "$init" "$work/uci" 2>"$work/said" | tr '\n' ' ')
	printf '%s\n' "$got" >"$work/command"
	want="$3"
	if [ "$got" != "$want" ]; then
		echo "FAIL $name"
		echo "  got:  $got"
		echo "  want: $want"
		failed=$((failed + 1))
		return 0
	fi
	if [ "$needs" = tls ] && [ "$have_tls" = no ]; then
		echo "ok   $name (mapping only: the binary has no TLS)"
		return 0
	fi
	# A flag the daemon takes from a later version on: the command line
	# procd would run is checked, the binary only once it knows the flag.
	if [ "$needs" = stats-no-auth ] && ! "$bin" --help 2>&1 | grep -q -e --stats-no-auth; then
		echo "ok   $name (mapping only: this binary has no --stats-no-auth yet)"
		return 0
	fi
	[ -z "$got" ] || accepted "$name" "$got"
	echo "ok   $name"
}

# The binary takes the words (the port swapped for a free one, and no -u
# unless we are root); still running after a second means it started. Ports
# come from below the kernel's ephemeral range, and a taken one is retried.
attempt=0

accepted()
{
	local name="$1" words="$2" tries=0
	while [ "$tries" -lt 5 ]; do
		attempt=$((attempt + 1))
		run_once "$words" $((20000 + ($$ * 7 + attempt * 2) % 12000))
		[ "$status" = 124 ] && return 0
		grep -q "Address already in use" "$work/log" || break
		tries=$((tries + 1))
	done
	echo "FAIL $name: the binary refused $args (exit $status)"
	sed 's/^/  /' "$work/log"
	failed=$((failed + 1))
}

# run_once WORDS PORT: sets args and status
run_once()
{
	local port="$2"
	args=
	# shellcheck disable=SC2086
	set -- $1   # the recorded words, split again
	shift       # the program path
	while [ $# -gt 0 ]; do
		case "$1" in
		-p) args="$args -p $port"; shift ;;
		# The package creates its user; here, as root, an existing one.
		--user) [ "$(id -u)" = 0 ] && args="$args --user nobody"; shift ;;
		--auth-file) printf 'u:p\n' > "$work/users"; chmod 600 "$work/users"
			args="$args --auth-file $work/users"; shift ;;
		--stats-listen) args="$args --stats-listen 127.0.0.1:$((port + 1))"; shift ;;
		--ca-cert|--upstream-ca) args="$args $1 $work/ca/ca.crt"; shift ;;
		--ca-key) args="$args --ca-key $work/ca/ca.key"; shift ;;
		-b) args="$args -b 127.0.0.1"; shift ;;
		*) args="$args $1" ;;
		esac
		shift
	done
	# shellcheck disable=SC2086
	if timeout 1 "$bin" $args >"$work/log" 2>&1; then
		status=0
	else
		status=$?
	fi
}

# A CA for the interception case, if the binary has TLS.
if "$bin" --make-ca "$work/ca" --intercept example.com >/dev/null 2>&1; then
	have_tls=yes
else
	have_tls=no
fi

check "the shipped default: loopback only" \
	"$(cat "$here/../../contrib/openwrt/keepalive-proxy/files/keepalive-proxy.config")" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --idle-timeout 50 --max-idle-per-host 8 --max-idle 256 --tcp-keepalive 15 --stats-listen 127.0.0.1:9251 --grace 4 --user keepalive-proxy "

check "LAN with an allow list, a password file and the stats page" \
"config keepalive-proxy 'main'
	option port '3128'
	option bind '192.168.1.1'
	list allow '192.168.1.0/24'
	list allow 'fd00::/8'
	option auth_file '/etc/keepalive-proxy/users'
	option congestion 'reno'
	option upstream_rcvbuf '8388608'
	option stats_listen '127.0.0.1:9251'
	option verbose '2'" \
	"/usr/sbin/keepalive-proxy -p 3128 -b 192.168.1.1 --allow 192.168.1.0/24 --allow fd00::/8 --auth-file /etc/keepalive-proxy/users --upstream-rcvbuf 8388608 --congestion reno --stats-listen 127.0.0.1:9251 -v -v "

# The stats page asks the users file's credentials unless stats_auth is 0,
# which the shipped config sets for its listener on loopback.
check "a users file and the stats page on loopback without credentials (stats_auth 0)" \
"config keepalive-proxy 'main'
	option auth_file '/etc/keepalive-proxy/users'
	option stats_listen '127.0.0.1:9251'
	option stats_auth '0'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --auth-file /etc/keepalive-proxy/users --stats-listen 127.0.0.1:9251 --stats-no-auth " \
	stats-no-auth

check "a users file and the stats page with credentials (stats_auth unset: 1)" \
"config keepalive-proxy 'main'
	option auth_file '/etc/keepalive-proxy/users'
	option stats_listen '127.0.0.1:9251'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --auth-file /etc/keepalive-proxy/users --stats-listen 127.0.0.1:9251 "

check "stats_auth 0 without a users file is no flag" \
"config keepalive-proxy 'main'
	option stats_listen '127.0.0.1:9251'
	option stats_auth 'no'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --stats-listen 127.0.0.1:9251 "

check "disabled" \
"config keepalive-proxy 'main'
	option enabled '0'
	option port '3128'" \
	""

check "empty options are left out" \
"config keepalive-proxy 'main'
	option grace ''
	option congestion ''" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 "

check "HTTPS pooling for a CDN" \
"config keepalive-proxy 'main'
	list intercept '*.googlevideo.com'
	list intercept '192.0.2.7'
	option ca_cert '/etc/keepalive-proxy/ca.crt'
	option ca_key '/etc/keepalive-proxy/ca.key'
	option upstream_ca '/etc/ssl/certs/ca-certificates.crt'
	option leaf_cache '64'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --intercept *.googlevideo.com --intercept 192.0.2.7 --ca-cert /etc/keepalive-proxy/ca.crt --ca-key /etc/keepalive-proxy/ca.key --upstream-ca /etc/ssl/certs/ca-certificates.crt --leaf-cache 64 " \
	tls

check "HTTPS pooling with the CA make_ca wrote" \
"config keepalive-proxy 'main'
	list intercept '*.googlevideo.com'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --intercept *.googlevideo.com --ca-cert /etc/keepalive-proxy/ca.crt --ca-key /etc/keepalive-proxy/ca.key " \
	tls

check "HTTPS pooling with the CA in ca_dir" \
"config keepalive-proxy 'main'
	list intercept 'cdn.example.com'
	option ca_dir '/srv/kp-ca'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --intercept cdn.example.com --ca-cert /srv/kp-ca/ca.crt --ca-key /srv/kp-ca/ca.key " \
	tls

check "a CA with nothing to intercept is no flag" \
"config keepalive-proxy 'main'
	option ca_dir '/srv/kp-ca'
	option ca_cert '/etc/keepalive-proxy/ca.crt'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 "

check "read-ahead with a router's memory" \
"config keepalive-proxy 'main'
	option read_ahead '1'
	option fetch_memory '16777216'
	option read_ahead_depth '1'
	option read_ahead_ttl '10'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --read-ahead --fetch-memory 16777216 --read-ahead-depth 1 --read-ahead-ttl 10 "

# fetch_memory was read_ahead_memory: a config written then still works.
check "read_ahead_memory, fetch_memory's former name, is --fetch-memory" \
"config keepalive-proxy 'main'
	option read_ahead '1'
	option read_ahead_memory '24M'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --read-ahead --fetch-memory 24M "

check "fetch_memory and read_ahead_memory both set: fetch_memory wins" \
"config keepalive-proxy 'main'
	option read_ahead_memory '24M'
	option fetch_memory '48M'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --fetch-memory 48M "

check "read_ahead_memory beside an empty fetch_memory" \
"config keepalive-proxy 'main'
	option fetch_memory ''
	option read_ahead_memory '24M'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --fetch-memory 24M "

# Sizes as the daemon documents them (K, M or G), and as plain bytes.
check "sizes with K, M or G: split_size 8M, fetch_memory 64M" \
"config keepalive-proxy 'main'
	list split '*.googlevideo.com'
	option split_size '8M'
	option fetch_memory '64M'
	option upstream_rcvbuf '8388608'
	option upstream_sndbuf '4194304'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --upstream-rcvbuf 8388608 --upstream-sndbuf 4194304 --fetch-memory 64M --split *.googlevideo.com --split-size 8M "

check "split downloads from two hosts, on two connections" \
"config keepalive-proxy 'main'
	list split '*.googlevideo.com'
	list split '192.0.2.7'
	option split_size '4194304'
	option split_connections '2'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --split *.googlevideo.com --split 192.0.2.7 --split-size 4194304 --split-connections 2 "

check "five connections per download is refused by validation" \
"config keepalive-proxy 'main'
	list split 'cdn.example.com'
	option split_connections '5'" \
	""

check "read-ahead off is no flag" \
"config keepalive-proxy 'main'
	option read_ahead '0'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 "

# procd_add_validation's types refuse what the daemon would refuse: no
# instance is sent, so procd starts nothing, and the reason goes to the log.
check "a port out of range is refused by validation" \
"config keepalive-proxy 'main'
	option port '70000'" \
	""

check "an allow entry that is no CIDR is refused by validation" \
"config keepalive-proxy 'main'
	list allow '192.168.1.0/24'
	list allow '192.168.1.0/33'" \
	""

check "booleans as UCI writes them" \
"config keepalive-proxy 'main'
	option enabled 'yes'
	option read_ahead 'on'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --read-ahead "

# A parent proxy, and rules in the order listed, --direct and --parent-for
# interleaved as the list has them: the first that matches wins.
check "a parent for every origin" \
"config keepalive-proxy 'main'
	option parent 'socks5h://127.0.0.1:9050'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --parent socks5h://127.0.0.1:9050 "

check "rules in the order listed, direct ones among them, then the parent" \
"config keepalive-proxy 'main'
	option parent 'http://[fd00::1]:3128/'
	list parent_rule '192.168.0.0/16 direct'
	list parent_rule '*.example-tv.net socks5h://10.0.0.5:1080'
	list parent_rule 'cdn.example-tv.net direct'
	list parent_rule 'fd00::/8	direct'
	list parent_rule '203.0.113.7 SOCKS5://10.0.0.6:1080'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --direct 192.168.0.0/16 --parent-for *.example-tv.net socks5h://10.0.0.5:1080 --direct cdn.example-tv.net --direct fd00::/8 --parent-for 203.0.113.7 SOCKS5://10.0.0.6:1080 --parent http://[fd00::1]:3128/ "

check "rules without a parent: the rest direct" \
"config keepalive-proxy 'main'
	list parent_rule 'example.com http://10.0.0.1:3128'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --parent-for example.com http://10.0.0.1:3128 "

# The parent's password: in a file of mode 600 the daemon's user owns, its
# name alone on the command line. A password with characters a URL must
# encode, and a user too.
password='p@ss:w/rd %41#x'
check "parent_user and parent_password: a file, never the command line" \
"config keepalive-proxy 'main'
	option parent 'http://proxy.office.example:8080'
	option parent_user 'me@office'
	option parent_password '$password'
	option user 'keepalive-proxy'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --user keepalive-proxy --parent http://proxy.office.example:8080 --parent-credentials $work/run/main.parents "
# no_password NAME: nothing the script handed procd holds the password,
# and the file holds it, encoded, with the parent's scheme, host and port.
# stat -c is GNU's and busybox's.
no_password()
{
	local file="$work/run/main.parents"
	if grep -F -e "$password" -e "p%40ss" -e "me@office" "$work/said" >/dev/null ||
		grep -F -e "$password" -e "p%40ss" -e "@" "$work/command" >/dev/null; then
		echo "FAIL $1: the password is in what procd is given"
		grep -F -e "$password" -e "p%40ss" "$work/said" | sed 's/^/  /'
		failed=$((failed + 1))
	elif [ "$(stat -c %a "$file" 2>&1)" != 600 ] ||
		! grep -qx "chown keepalive-proxy $file.new" "$work/said"; then
		echo "FAIL $1: $file is not mode 600, given to the daemon's user"
		stat -c '  %A %U %n' "$file" 2>&1
		grep '^chown' "$work/said" | sed 's/^/  /'
		failed=$((failed + 1))
	elif ! grep -qxF "${2:-http://me%40office:p%40ss%3Aw%2Frd%20%2541%23x@proxy.office.example:8080}" "$file"; then
		echo "FAIL $1: $file does not hold the parent's URL with the credentials, encoded"
		sed 's/^/  /' "$file"
		failed=$((failed + 1))
	else
		echo "ok   $1"
	fi
}
no_password "the password is in a file of mode 600 for the daemon's user, and nowhere in what procd is given"

# The daemon reads the file as written (test_reload.sh has it send an
# HTTP parent the credentials the file's line decodes to).
if "$bin" --parent http://proxy.office.example:8080 \
	--parent-credentials "$work/run/main.parents" --check-host >/dev/null 2>"$work/log" ||
	[ $? = 1 ]; then
	echo "ok   keepalive-proxy reads the file the init script wrote"
else
	echo "FAIL keepalive-proxy refuses the file the init script wrote"
	sed 's/^/  /' "$work/log"
	failed=$((failed + 1))
fi

printf '# the rules parents\nsocks5h://tv:t%%40pe@10.0.0.5:1080\nhttp://other:x@proxy.office.example:8080\n' \
	>"$work/parents"
chmod 600 "$work/parents"
check "parent_credentials alone: the file named, as it is" \
"config keepalive-proxy 'main'
	option parent 'http://proxy.office.example:8080'
	list parent_rule '*.example-tv.net socks5h://10.0.0.5:1080'
	option parent_credentials '$work/parents'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --parent-for *.example-tv.net socks5h://10.0.0.5:1080 --parent http://proxy.office.example:8080 --parent-credentials $work/parents "
if [ ! -e "$work/run/main.parents" ] && grep -q "^param file .* $work/parents\$" "$work/said"; then
	echo "ok   parent_credentials alone: no file written, the one named is watched for changes"
else
	echo "FAIL parent_credentials alone: a file is left in the run directory, or procd does not watch the one named"
	grep "^param file" "$work/said" | sed 's/^/  /'
	failed=$((failed + 1))
fi

check "parent_user and parent_password beside parent_credentials: both in the file" \
"config keepalive-proxy 'main'
	option parent 'http://proxy.office.example:8080'
	list parent_rule '*.example-tv.net socks5h://10.0.0.5:1080'
	option parent_user 'me@office'
	option parent_password '$password'
	option parent_credentials '$work/parents'
	option user 'keepalive-proxy'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --user keepalive-proxy --parent-for *.example-tv.net socks5h://10.0.0.5:1080 --parent http://proxy.office.example:8080 --parent-credentials $work/run/main.parents "
no_password "parent_user and parent_password beside parent_credentials: in the file, not in what procd is given"
# parent_user and parent_password first: the daemon takes the first line
# naming a parent's scheme, host and port.
if [ "$(grep -v '^#' "$work/run/main.parents" | sed -n '1s/@.*//p;2p;3p')" = "http://me%40office:p%40ss%3Aw%2Frd%20%2541%23x
socks5h://tv:t%40pe@10.0.0.5:1080
http://other:x@proxy.office.example:8080" ]; then
	echo "ok   the file has parent_user's line first, then the parent_credentials file's"
else
	echo "FAIL the file does not have parent_user's line first, then the parent_credentials file's"
	sed 's/^/  /' "$work/run/main.parents"
	failed=$((failed + 1))
fi

check "the password's file goes once the password is gone" \
"config keepalive-proxy 'main'
	option parent 'http://proxy.office.example:8080'" \
	"/usr/sbin/keepalive-proxy -p 9250 -b 127.0.0.1 --parent http://proxy.office.example:8080 "
[ -e "$work/run/main.parents" ] && { echo "FAIL the password's file is left behind"; failed=$((failed + 1)); }
printf "config keepalive-proxy 'main'\n\toption parent 'socks5h://10.0.0.5:1080'\n\toption parent_user 'me'\n\toption parent_password 'x'\n" >"$work/uci"
sh "$here/uci-procd-harness.sh" "$init" "$work/uci" >/dev/null 2>&1
printf "config keepalive-proxy 'main'\n\toption enabled '0'\n\toption parent 'socks5h://10.0.0.5:1080'\n\toption parent_user 'me'\n\toption parent_password 'x'\n" >"$work/uci"
sh "$here/uci-procd-harness.sh" "$init" "$work/uci" >/dev/null 2>&1
if [ -e "$work/run/main.parents" ]; then
	echo "FAIL disabled: the password's file is left behind"
	failed=$((failed + 1))
else
	echo "ok   disabled: the password's file goes"
fi

# A refused option stops the start, and says which option and why in the
# system log (logger), where logread shows it after LuCI's Save & Apply.
# refusal NAME UCI-TEXT OPTION
refusal()
{
	printf '%s\n' "$2" >"$work/uci"
	got=$(sh "$here/uci-procd-harness.sh" "$init" "$work/uci" 2>"$work/said") || :
	if [ -z "$got" ] && grep -q "^log -t keepalive-proxy -p daemon.err option $3[: ]" "$work/said"; then
		echo "ok   $1"
	else
		echo "FAIL $1"
		printf '  command: %s\n' "$got"
		grep -v '^validate\|^param\|validates as\|defaults to' "$work/said" | sed 's/^/  /'
		failed=$((failed + 1))
	fi
}
refusal "split_size 8Q is refused, and the log names it" \
"config keepalive-proxy 'main'
	option split_size '8Q'" split_size
refusal "fetch_memory 0x100 (ubox's uinteger would take it) is refused, and the log names it" \
"config keepalive-proxy 'main'
	option fetch_memory '0x100'" fetch_memory
refusal "read_ahead_memory 0x100 (ubox's uinteger would take it) is refused, and the log names it" \
"config keepalive-proxy 'main'
	option read_ahead_memory '0x100'" read_ahead_memory
refusal "fetch_memory 512K, below the daemon's 1 MiB, is refused, and the log names it" \
"config keepalive-proxy 'main'
	option fetch_memory '512K'" fetch_memory
refusal "read_ahead_memory 17G, above the daemon's 16 GiB, is refused, and the log names it" \
"config keepalive-proxy 'main'
	option read_ahead_memory '17G'" read_ahead_memory
refusal "split_size 2G, above the daemon's 1 GiB, is refused, and the log names it" \
"config keepalive-proxy 'main'
	option split_size '2G'" split_size
refusal "upstream_rcvbuf 8MB (a size is digits and one of K, M or G) is refused, and the log names it" \
"config keepalive-proxy 'main'
	option upstream_rcvbuf '8MB'" upstream_rcvbuf
refusal "an allow list with a bad item is refused, and the log names it" \
"config keepalive-proxy 'main'
	list allow '192.168.1.0/24'
	list allow '192.168.1.0/33'" allow
refusal "a parent without a port is refused, and the log names it" \
"config keepalive-proxy 'main'
	option parent 'socks5h://127.0.0.1'" parent
refusal "a parent of another scheme is refused, and the log names it" \
"config keepalive-proxy 'main'
	option parent 'https://proxy.example:3128'" parent
refusal "a rule with a pattern alone is refused, and the log names it" \
"config keepalive-proxy 'main'
	list parent_rule '*.example.com'" parent_rule
refusal "a rule of three words is refused, and the log names it" \
"config keepalive-proxy 'main'
	list parent_rule 'example.com direct socks5h://10.0.0.5:1080'" parent_rule
refusal "a rule with a bad pattern is refused, and the log names it" \
"config keepalive-proxy 'main'
	list parent_rule 'ex*ample.com direct'" parent_rule
refusal "a rule with a bad parent is refused, and the log names it" \
"config keepalive-proxy 'main'
	list parent_rule '10.0.0.0/8 socks4://10.0.0.5:1080'" parent_rule
refusal "parent_password without parent_user is refused, and the log names it" \
"config keepalive-proxy 'main'
	option parent 'socks5h://10.0.0.5:1080'
	option parent_password 'x'" parent_password
refusal "parent_user without a parent is refused, and the log names it" \
"config keepalive-proxy 'main'
	list parent_rule '10.0.0.0/8 socks5h://10.0.0.5:1080'
	option parent_user 'me'" parent_user
refusal "a password of 256 bytes, more than the daemon takes, is refused, and the log names it" \
"config keepalive-proxy 'main'
	option parent 'socks5h://10.0.0.5:1080'
	option parent_user 'me'
	option parent_password '$(printf '%0256d' 0)'" parent_password
refusal "parent_credentials that cannot be read, beside parent_user, is refused, and the log names it" \
"config keepalive-proxy 'main'
	option parent 'socks5h://10.0.0.5:1080'
	option parent_user 'me'
	option parent_password 'x'
	option parent_credentials '$work/none'" parent_credentials
rules=$(i=0; while [ "$i" -le 64 ]; do printf "\tlist parent_rule '10.0.%d.0/24 direct'\n" "$i"; i=$((i + 1)); done)
refusal "65 rules, more than the daemon takes, are refused, and the log names it" \
"config keepalive-proxy 'main'
$rules" parent_rule

# A URL with user:password@ is refused before the command line could show
# it, and the log, which logread shows to anyone on the router, does not
# quote it either.
for case in "parent|socks5h://me:$password@10.0.0.5:1080" \
	"parent_rule|*.example.com http://me:$password@10.0.0.5:3128" \
	"parent_rule|*.example.com http://me:$password@10.0.0.5:3128 direct"; do
	option=${case%%|*}
	value=${case#*|}
	kind=option
	[ "$option" = parent ] || kind=list
	refusal "$option with user:password@ in a URL is refused, and the log names the option" \
		"config keepalive-proxy 'main'
	$kind $option '$value'" "$option"
	if grep -F -e "$password" -e "me:" "$work/said" | grep -q "^log "; then
		echo "FAIL $option with user:password@: the log quotes the password"
		grep "^log " "$work/said" | sed 's/^/  /'
		failed=$((failed + 1))
	fi
done

# Each size option's verdict is the daemon's: the init script starts it
# exactly when keepalive-proxy itself takes the value (--check-host exits 2
# on an option it refuses, before it checks anything).
agree=0
for case in \
	"split_size --split-size 8M 8m 8388608 65536 65535 64K 63K 1G 1025M 2G 0 08M 8Q 0x100 8MB -1 1.5M" \
	"fetch_memory --fetch-memory 64M 16M 1M 1048576 1048575 1023K 2G 16G 17179869185 0 64Q 0x100000" \
	"read_ahead_memory --read-ahead-memory 64M 16M 1M 1048576 1048575 1023K 2G 16G 17G 0 64Q 0x100000" \
	"upstream_rcvbuf --upstream-rcvbuf 8388608 4096 4095 1073741824 1073741825 8M 4K 3K 1G 2G 8MB 0x1000 010000" \
	"upstream_sndbuf --upstream-sndbuf 4194304 4096 4095 4M 8MB" \
	"max_clients --max-clients 1 0 512 10000000 10000001 0x10 0100 1K"; do
	# shellcheck disable=SC2086
	set -- $case
	option=$1 flag=$2
	shift 2
	for value in "$@"; do
		printf "config keepalive-proxy 'main'\n\toption %s '%s'\n" "$option" "$value" >"$work/uci"
		if [ -n "$(sh "$here/uci-procd-harness.sh" "$init" "$work/uci" 2>/dev/null)" ]; then
			ours=starts
		else
			ours=refuses
		fi
		rc=0
		"$bin" "$flag" "$value" --check-host >/dev/null 2>&1 || rc=$?
		if [ "$rc" = 2 ]; then daemon=refuses; else daemon=starts; fi
		if [ "$ours" != "$daemon" ]; then
			echo "FAIL $option '$value': the init script $ours, keepalive-proxy $flag $value $daemon"
			agree=1
		fi
	done
done
if [ "$agree" = 0 ]; then
	echo "ok   each size option is taken or refused as keepalive-proxy takes or refuses it"
else
	failed=$((failed + 1))
fi

# Each parent URL's and each rule pattern's verdict is the daemon's: the
# init script starts it exactly when keepalive-proxy takes --parent URL, or
# --direct PATTERN (URLs with credentials aside: the daemon takes them, the
# init script refuses them, above).
agree=0
for url in socks5h://127.0.0.1:9050 SOCKS5H://127.0.0.1:9050 socks5://h:1 http://proxy.example:3128/ \
	'http://[::1]:3128' 'http://[fd00::1]:08080' http://h:65535 http://h:0 http://h:65536 http://h:00080 \
	http://h:123456 http://h: http://h http://:80 'http://[::1]]:80' 'http://[::1]x:80' 'http://[::1' \
	'http://[]:80' http://h:80// http://h:80/x 'http://h:80?' 'http://h:80#' http://h:8x http://h:+80 \
	http://h_1.example-x:80 'http://h!:80' https://h:80 socks4://h:80 socks5h:/h:80 'http://h:80:90' \
	"http://$(printf '%0255d' 0):80" "http://$(printf '%0256d' 0):80"; do
	printf "config keepalive-proxy 'main'\n\toption parent '%s'\n" "$url" >"$work/uci"
	if [ -n "$(sh "$here/uci-procd-harness.sh" "$init" "$work/uci" 2>/dev/null)" ]; then
		ours=starts
	else
		ours=refuses
	fi
	rc=0
	"$bin" --parent "$url" --check-host >/dev/null 2>&1 || rc=$?
	if [ "$rc" = 2 ]; then daemon=refuses; else daemon=starts; fi
	if [ "$ours" != "$daemon" ]; then
		echo "FAIL parent '$url': the init script $ours, keepalive-proxy --parent $daemon"
		agree=1
	fi
done
for pattern in example.com '*.example.com' example.com. '*.' '*' '*.*.example.com' 'ex*ample.com' \
	.example.com example..com a.. under_score.example 192.0.2.7 300.1.2.3 ::1 fe80::1 'fe80::1%eth0' \
	1:::2 ::ffff:192.0.2.7 10.0.0.0/8 10.0.0.0/32 10.0.0.0/33 10.0.0.0/008 10.0.0.0/ 10.0.0.0/+8 \
	10.0.0.0/8/9 fd00::/8 fd00::/128 fd00::/129 example.com/8 010.0.0.0/8 '*.10.0.0.0/8' \
	"$(printf '%0253d' 0)" "$(printf '%0254d' 0)" "*.$(printf '%0253d' 0)" 'a,b'; do
	printf "config keepalive-proxy 'main'\n\tlist parent_rule '%s direct'\n" "$pattern" >"$work/uci"
	if [ -n "$(sh "$here/uci-procd-harness.sh" "$init" "$work/uci" 2>/dev/null)" ]; then
		ours=starts
	else
		ours=refuses
	fi
	rc=0
	"$bin" --direct "$pattern" --check-host >/dev/null 2>&1 || rc=$?
	if [ "$rc" = 2 ]; then daemon=refuses; else daemon=starts; fi
	if [ "$ours" != "$daemon" ]; then
		echo "FAIL parent_rule '$pattern direct': the init script $ours, keepalive-proxy --direct $daemon"
		agree=1
	fi
done
if [ "$agree" = 0 ]; then
	echo "ok   each parent URL and rule pattern is taken or refused as keepalive-proxy takes or refuses it"
else
	failed=$((failed + 1))
fi

# procd's limits: the open-file limit that lets the daemon serve its
# --max-clients (two descriptors a client, 32 kept back), checked against
# the daemon, which says when the limit it is given holds it to fewer.
# fits UCI-TEXT WANT-NOFILE CLIENTS
# (dash and busybox ash have "ulimit -n".)
# shellcheck disable=SC3045
fits()
{
	printf "config keepalive-proxy 'main'\n%s\n" "$1" >"$work/uci"
	sh "$here/uci-procd-harness.sh" "$init" "$work/uci" >/dev/null 2>"$work/said"
	got=$(sed -n 's/^param limits //p' "$work/said")
	if [ "$got" != "nofile=$2 $2" ]; then
		echo "FAIL procd's open-file limit for $3 clients: got '$got', want 'nofile=$2 $2'"
		failed=$((failed + 1))
		return 0
	fi
	if ! (ulimit -n "$2") 2>/dev/null; then
		echo "ok   procd's open-file limit for $3 clients is $2 (not run: this shell cannot raise its limit to it)"
		return 0
	fi
	port=$((20000 + ($$ * 7 + $2) % 12000))
	(ulimit -n "$2" && exec timeout 1 "$bin" -p "$port" -b 127.0.0.1 -v ${4:+--max-clients "$4"}) \
		>"$work/log" 2>&1 || :
	if grep -q "listening on" "$work/log" && ! grep -q "allows .* clients, not" "$work/log"; then
		echo "ok   procd's open-file limit for $3 clients is $2, and the daemon serves them all under it"
	else
		echo "FAIL the daemon under nofile $2 does not serve $3 clients"
		sed 's/^/  /' "$work/log"
		failed=$((failed + 1))
	fi
}
fits "	option port '9250'" 20032 10000
fits "	option max_clients '512'" 1056 512 512

# rc.common's way to add a command (extra_command, as it adds its own):
# make_ca is a command of the script, with its help; EXTRA_COMMANDS and
# EXTRA_HELP are the old form.
sh "$here/uci-procd-harness.sh" "$init" "$work/uci" help >"$work/help" 2>&1 || :
if grep -q "^	make_ca  *Create the interception CA" "$work/help" &&
	! grep -q '^[^#]*EXTRA_\(COMMANDS\|HELP\)' "$init"; then
	echo "ok   make_ca is declared with extra_command, and rc.common's help lists it"
else
	echo "FAIL make_ca is not declared with extra_command"
	sed 's/^/  /' "$work/help"
	failed=$((failed + 1))
fi

# Every option the shipped config names, set or commented out, has a type
# in the validation, and the validation names nothing the config lacks but
# the former names it still reads, which the config's comments name.
former="read_ahead_memory"
config="$here/../../contrib/openwrt/keepalive-proxy/files/keepalive-proxy.config"
printf "config keepalive-proxy 'main'\n" >"$work/uci"
sh "$here/uci-procd-harness.sh" "$init" "$work/uci" service_triggers 2>"$work/triggers" >/dev/null
typed=$(sed -n 's/^validate //p' "$work/triggers" | cut -d' ' -f1 | sort -u)
named=$({
	sed -n 's/^[[:space:]#]*\(option\|list\) \([a-z_]*\) .*/\2/p' "$config"
	for name in $former; do
		! grep -q "^[[:space:]]*#.*[^a-z_]${name}[^a-z_]" "$config" || echo "$name"
	done
} | sort -u)
if [ -n "$typed" ] && [ "$typed" = "$named" ]; then
	echo "ok   every option in the config has a type in procd_add_validation"
else
	echo "FAIL the config's options and the validation's differ:"
	printf '%s\n' "$typed" >"$work/typed"
	printf '%s\n' "$named" >"$work/named"
	diff "$work/named" "$work/typed" | sed 's/^/  /' || :
	failed=$((failed + 1))
fi

# "make_ca" writes the CA into ca_dir, limited to the intercept list as
# written: a file here that *.example.com matches must not turn the
# pattern into its name.
if [ "$have_tls" = yes ]; then
	printf "config keepalive-proxy 'main'\n\tlist intercept '*.example.com'\n\toption ca_dir '%s'\n" \
		"$work/made" > "$work/uci"
	: > "$work/x.example.com"
	if (cd "$work" && sh "$here/uci-procd-harness.sh" "$init" "$work/uci" make_ca "$bin") \
		>"$work/log" 2>&1 && [ -f "$work/made/ca.key" ] &&
		openssl x509 -in "$work/made/ca.crt" -noout -text | grep -q 'DNS:example\.com$'; then
		echo "ok   make_ca into ca_dir"
	else
		echo "FAIL make_ca into ca_dir"
		sed 's/^/  /' "$work/log"
		failed=$((failed + 1))
	fi
else
	echo "ok   make_ca into ca_dir (skipped: the binary has no TLS)"
fi

[ "$failed" = 0 ] || { echo "$failed case(s) failed"; exit 1; }
echo "all cases passed"
