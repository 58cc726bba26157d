#!/bin/sh
# The LuCI app's rpcd plugin as it runs off the router: luci-plugin.sh DIR
# writes DIR/luci.keepalive-proxy, the plugin with its one line
# ". /usr/share/libubox/jshn.sh" pointed at jshn-stand-in.sh (libubox is
# not on Debian), and fails if the plugin has not that line exactly once.
# Nothing else in it changes.

set -eu

here=$(cd "$(dirname "$0")" && pwd)
plugin="$here/../../contrib/openwrt/luci-app-keepalive-proxy/root/usr/libexec/rpcd/luci.keepalive-proxy"
out="${1:?usage: $0 DIR}/luci.keepalive-proxy"
line='. /usr/share/libubox/jshn.sh'

if [ "$(grep -cxF "$line" "$plugin")" != 1 ]; then
	echo "luci-plugin.sh: $plugin does not source jshn.sh as '$line'" >&2
	exit 1
fi
awk -v line="$line" -v standin=". $here/jshn-stand-in.sh" \
	'$0 == line { print standin; next } { print }' "$plugin" >"$out"
chmod +x "$out"
