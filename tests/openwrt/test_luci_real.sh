#!/bin/sh
# The LuCI app's view on LuCI's own JavaScript: luci-base's luci.js, rpc.js,
# uci.js, form.js, ui.js, validation.js, fs.js and cbi.js, and
# luci-theme-bootstrap's stylesheet and menu, from openwrt/luci at the
# commit pinned below, in headless Chromium, behind luci-rpcd.py, which
# answers as uhttpd's ubus plugin, rpcd and LuCI's dispatcher do (see
# there). The page is LuCI's header and view templates; LuCI loads the view
# as it loads any, form.js renders it, uci.js loads the UCI file, ui.js runs
# Save & Apply, and every call passes the session's ACL, made by rpcd's
# rules from luci-base's ACL file and the app's. Real here as on a router:
# those modules, the view, the ACL and menu files, the rpcd plugin (on
# jshn-stand-in.sh), keepalive-proxy (the binary under test, serving
# traffic to a local origin), the UCI file.
#
# Checked (luci-real-driver.py): the page renders, with the UCI file's
# values and the daemon's numbers; LuCI's datatype check flags a port of
# 70000 and Save is refused; a DynamicList entry is validated on its own;
# Create CA with an edited or saved-but-not-applied list asks for Save &
# Apply and makes nothing; Save & Apply writes the UCI file; then Create
# CA makes the CA from the applied list, restarts keepalive-proxy through
# the plugin's restart (never rc init), and Download certificate offers
# it; a status call that fails is shown, the poll goes on and recovers; an
# expired session is shown, with no stale numbers and no unhandled
# rejection. A screenshot, luci-view-real.png, is left in the working
# directory.
#
# LuCI's sources are not in this repository and cannot be fetched here: the
# test takes them from KP_LUCI_SOURCE, a checkout of openwrt/luci at the
# pinned commit, checks each file it serves against its SHA-256 below, and
# exits 77 (skipped), saying how to get them, when they are not given or do
# not match. CI has no such checkout, so there this test is skipped and
# test_luci_view.sh, the view on luci-stand-in.js, is what runs.
#
# Usage: test_luci_real.sh KEEPALIVE-PROXY-BINARY
# Exits 77 (skipped) without KP_LUCI_SOURCE, Chromium (or $KP_CHROMIUM),
# python3 or curl.

set -eu

# openwrt/luci, 2025-04-25, "treewide: vectorise iconography"
LUCI_COMMIT=ae5d91da903b6f1d3086d6082ca622231e34f555
LUCI_FILES='
bef1900ffb13ac5684665e68e5cbdf2d222cd11116b74f4aef798c78278b60cb  modules/luci-base/htdocs/luci-static/resources/luci.js
ebdb47b45dcb6de4d3f209f034dcc408c36cb429b717424fe84e22274cf3dea4  modules/luci-base/htdocs/luci-static/resources/rpc.js
7ab1014f2ebb524be1c03fcf9168dec64f01a2441fb9a40d7f2377ebfc599df3  modules/luci-base/htdocs/luci-static/resources/uci.js
9217a91687dc5fc6d1943fe324feeef57ffd7d686b5c3e22a12a184919a5f2a9  modules/luci-base/htdocs/luci-static/resources/ui.js
13250bccaeecc7b9c57901554a511197ac8891fd1348443ce15784a8aa62bb31  modules/luci-base/htdocs/luci-static/resources/form.js
ff910b042192b73845a2b257c5f694a17c653a0efe8cb8a6a20db6e51f370ed4  modules/luci-base/htdocs/luci-static/resources/validation.js
f0ad83acce0d39830715ad0528855553d96a951ea62118f01c2a6280e756e445  modules/luci-base/htdocs/luci-static/resources/fs.js
ab4fe6f00f28f8e7951dfac06650a12579a2047de32fd93496b21e00120bb20a  modules/luci-base/htdocs/luci-static/resources/cbi.js
473cc2a6f6717aacc5fe097d273ed282b71e36d150f7a5c8d7260a30836d829d  themes/luci-theme-bootstrap/htdocs/luci-static/resources/menu-bootstrap.js
d3726b782f96a6b03c03ea77287540f20e92ed946f3e14d253ba2e433c41a1f2  themes/luci-theme-bootstrap/htdocs/luci-static/bootstrap/cascade.css
575c357d547eb9bb5ca2cf970b6d789a3e006924aad56d14573f613d95c1b574  themes/luci-theme-bootstrap/htdocs/luci-static/bootstrap/mobile.css
45ccf7f76afde26960fd30349150e30635fe2e4e7491126dd90c49099812e6db  modules/luci-base/root/usr/share/rpcd/acl.d/luci-base.json
'

bin=${1:?usage: $0 KEEPALIVE-PROXY-BINARY}
case "$bin" in /*) ;; *) bin="$(pwd)/$bin" ;; esac
here=$(cd "$(dirname "$0")" && pwd)
app="$here/../../contrib/openwrt/luci-app-keepalive-proxy"

skip()
{
	printf 'skipped: %s\n' "$1"
	exit 77
}

how="set KP_LUCI_SOURCE to a checkout of openwrt/luci at $LUCI_COMMIT:
  git clone https://github.com/openwrt/luci && git -C luci checkout $LUCI_COMMIT
  KP_LUCI_SOURCE=\$PWD/luci (or cmake -DKP_LUCI_SOURCE=\$PWD/luci)"
src=${KP_LUCI_SOURCE:-}
[ -n "$src" ] || skip "this test runs LuCI's own JavaScript; $how"
for tool in python3 curl sha256sum; do
	command -v "$tool" >/dev/null 2>&1 || skip "this test needs $tool"
done
chromium=${KP_CHROMIUM:-$(command -v chromium || command -v chromium-browser || :)}
[ -n "$chromium" ] || skip "this test needs chromium (or KP_CHROMIUM)"
if ! (cd "$src" && printf '%s' "$LUCI_FILES" | sed '/^$/d' | sha256sum -c --quiet >/dev/null 2>&1); then
	skip "$src is not openwrt/luci at $LUCI_COMMIT (a file differs or is missing); $how"
fi

# shellcheck source=tests/openwrt/background.sh
. "$here/background.sh"

# The router: keepalive-proxy with its stats listener on loopback, after two
# requests through it to a local origin; its UCI file; the rpcd plugin with
# its PATH (stand-ins for uci and uclient-fetch, see test_rpcd.sh).
mkdir -p "$work/etc/config" "$work/rpcd" "$work/bin" "$work/www"
sh "$here/luci-plugin.sh" "$work/rpcd"
ln -s "$bin" "$work/bin/keepalive-proxy"
ln -s "$here/uci-stand-in.sh" "$work/bin/uci"
ln -s "$here/uclient-fetch-stand-in.sh" "$work/bin/uclient-fetch"
printf '%s\n' "$work/bin:/usr/sbin:/usr/bin:/sbin:/bin" >"$work/path"

printf 'hello\n' >"$work/www/a.txt"
started origin "Serving HTTP" python3 -u -m http.server --bind 127.0.0.1 \
	--directory "$work/www" 0 || { cat "$work/origin.log"; exit 1; }
origin="127.0.0.1:$(printf '%s\n' "$line" | sed -n 's/.* port \([0-9]*\) .*/\1/p')"
attempt=0
while :; do
	attempt=$((attempt + 1))
	port=$((20000 + ($$ * 11 + attempt * 2) % 12000))
	stats=$((port + 1))
	if started "proxy$attempt" "listening on" "$bin" -p "$port" -b 127.0.0.1 \
		--stats-listen "127.0.0.1:$stats"; then
		break
	fi
	[ "$attempt" -lt 5 ] || { cat "$work/proxy$attempt.log"; exit 1; }
done
curl -sSf -x "http://127.0.0.1:$port" -o /dev/null -o /dev/null \
	"http://$origin/a.txt" "http://$origin/a.txt"

cat >"$work/etc/config/keepalive-proxy" <<EOF

config keepalive-proxy 'main'
	option enabled '1'
	option port '3128'
	option bind '192.168.1.1'
	list allow '127.0.0.1'
	list allow '192.168.1.0/24'
	option stats_listen '127.0.0.1:$stats'
	list intercept '*.googlevideo.com'
	option ca_dir '$work/ca'
	option read_ahead '1'

EOF

# The init script the plugin's restart runs, under $IPKG_INSTROOT: it
# records the call (the restart itself is test_rpcd.sh's).
mkdir -p "$work/root/etc/init.d"
printf '#!/bin/sh\necho "keepalive-proxy $*" >>"%s"\n' "$work/init.log" >"$work/root/etc/init.d/keepalive-proxy"
chmod +x "$work/root/etc/init.d/keepalive-proxy"
export IPKG_INSTROOT="$work/root"

export KP_UCI_FILE="$work/etc/config/keepalive-proxy"
started rpcd "listening on" python3 -u "$here/luci-rpcd.py" "$src" "$app" "$work" ||
	{ cat "$work/rpcd.log"; exit 1; }
base="http://127.0.0.1:${line##* }"

PATH="$work/bin:$PATH" python3 "$here/luci-real-driver.py" "$chromium" "$base" "$work" \
	"$PWD/luci-view-real.png"
