#!/bin/sh
# The LuCI app's view in headless Chromium, on a stand-in for LuCI's module
# API (luci-stand-in.js, which is not LuCI), with a router's UCI values and
# rpcd answers made up in luci-view.html: the settings form must show its
# fields with those values, the status its numbers as polled, the host
# check its findings (what limits with its cost and fix) and a fresh report
# on "Check again", the CA buttons must offer the certificate as a file and
# make the CA with the list shown, a port of 70000 must be refused by its
# datatype and Save with it, each list entry be checked alone, Save stage
# the values, a status poll that fails show its ubus error without the
# numbers from before and the next poll recover, and a LAN left open must
# be flagged. The memory for read-ahead and split downloads is fetch_memory:
# a value under its former name, read_ahead_memory, shows in its field and
# is saved as fetch_memory; fetch_memory set beside it wins; the field
# emptied and saved leaves neither name. The parent proxy's fields show
# their values, refuse a URL with a user and password and a rule that is
# no pattern and URL (or direct); the parent's password is never drawn,
# not even in its field, which is one of type password; Save with it left
# empty keeps the saved one, a password typed in is saved, and the user
# emptied and saved removes both; the status has a row per parent, with
# its connections, reuse, failures by kind and round trip, rows that a
# failed poll removes. A screenshot, luci-view.png, is left in the working directory.
#
# This runs everywhere, CI included. test_luci_real.sh runs the same view on
# LuCI's own modules where a checkout of openwrt/luci is given (not in CI);
# the stand-in keeps the rules that test checks (see luci-stand-in.js).
#
# Usage: test_luci_view.sh
# Exits 77 (skipped) without Chromium (or $KP_CHROMIUM) or python3.

set -eu

here=$(cd "$(dirname "$0")" && pwd)
chromium=${KP_CHROMIUM:-$(command -v chromium || command -v chromium-browser || :)}
if [ -z "$chromium" ] || ! command -v python3 >/dev/null 2>&1; then
	echo "skipped: this test needs chromium (or KP_CHROMIUM) and python3"
	exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'exit 1' INT TERM

# dom QUERY: the page's DOM, once its script is done, in $work/dom.html
dom()
{
	"$chromium" --headless --no-sandbox --disable-gpu --no-first-run \
		--user-data-dir="$work/profile" --allow-file-access-from-files \
		--virtual-time-budget=5000 --dump-dom "file://$here/luci-view.html$1" \
		>"$work/dom.html" 2>"$work/chromium.log"
}

dom ""
cp "$work/dom.html" "$work/ok.html"
# For people to look at (CI names it as an artifact); checked below from the DOM.
"$chromium" --headless --no-sandbox --disable-gpu --no-first-run \
	--user-data-dir="$work/profile" --allow-file-access-from-files \
	--virtual-time-budget=5000 --window-size=1100,1500 --screenshot="$PWD/luci-view.png" \
	"file://$here/luci-view.html" >/dev/null 2>&1 || :
dom "?open-lan"
cp "$work/dom.html" "$work/open-lan.html"
dom "?renamed"
cp "$work/dom.html" "$work/renamed.html"

exec python3 - "$work/ok.html" "$work/open-lan.html" "$work/renamed.html" <<'EOF'
import json, sys
from html.parser import HTMLParser


class Page(HTMLParser):
    """Each element's attributes and text, by id, and every element in order."""

    def __init__(self, path=None, html=""):
        super().__init__()
        self.ids, self.elements, self.open, self.text = {}, [], [], ""
        self.feed(open(path).read() if path else html)

    def handle_starttag(self, tag, attrs):
        e = dict(attrs, tag=tag, text="")
        self.elements.append(e)
        if "id" in e:
            self.ids[e["id"]] = e
        if tag not in ("input", "br", "meta"):
            self.open.append(e)

    def handle_endtag(self, tag):
        while self.open and self.open.pop()["tag"] != tag:
            pass

    def handle_data(self, data):
        self.text += data
        for e in self.open:
            e["text"] += data


failed = 0


def check(name, ok, why=""):
    global failed
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else "\n  " + str(why)))
    failed += not ok


page = Page(sys.argv[1])
check("the page ran to its end",
      any(e["tag"] == "body" and e.get("data-done") == "yes" for e in page.elements),
      page.ids.get("failure", {}).get("text", "no data-done on the body, and no failure"))
if failed:
    sys.exit(1)

labels = [e["text"] for e in page.elements if e.get("class") == "cbi-value-title"]
for label in ("Enabled", "Port", "Listen address", "Allowed clients", "Users file",
              "Stats listener", "Hosts to intercept", "CA directory", "Create the CA",
              "CA certificate", "Read ahead", "Memory for read-ahead and split downloads",
              "Parent proxy", "Rules", "User", "Password", "Credentials file"):
    check("the form has the field " + label, label in labels, labels)


def field(option):
    return page.ids.get("cbid.keepalive-proxy.main." + option, {})


check("the port shows its UCI value", field("port").get("value") == "3128")
check("the stats listener shows its UCI value", field("stats_listen").get("value") == "127.0.0.1:9251")
check("the allow list shows its items",
      [e["data-value"] for e in page.elements if "data-value" in e][:2] == ["192.168.1.0/24", "fd00::/8"])
check("read-ahead is ticked", "checked" in field("read_ahead"))
check("the memory for read-ahead shows the value set under its former name, read_ahead_memory",
      field("fetch_memory").get("value") == "64M", field("fetch_memory"))
check("the form has no field of the former name", not field("read_ahead_memory"), field("read_ahead_memory"))
check("the parent proxy shows its UCI value", field("parent").get("value") == "socks5h://10.0.0.5:1080",
      field("parent"))
check("the parent's placeholder is an example", field("parent").get("placeholder") == "socks5h://127.0.0.1:9050")
check("the rules show their items, in order",
      [e["data-value"] for e in page.elements if " " in e.get("data-value", "")] ==
      ["192.168.0.0/16 direct", "*.example-tv.net http://[fd00::1]:3128"],
      [e["data-value"] for e in page.elements if "data-value" in e])
check("the parent's user shows its UCI value", field("parent_user").get("value") == "me")
check("the parent's password is a password field, empty, saying one is saved",
      field("parent_password").get("type") == "password" and not field("parent_password").get("value")
      and "saved" in field("parent_password").get("placeholder", ""), field("parent_password"))
drawn = json.loads(page.ids["password-drawn"]["text"])
check("the saved password is nowhere in what the page drew, its fields' values included",
      drawn == {"type": "password", "drawn": False}, drawn)
parent_checks = json.loads(page.ids["parent-checks"]["text"])
check("the parent proxy is checked: socks5h, socks5 or http, host:port, no user or password",
      parent_checks["parents"] == {"socks5h://127.0.0.1:9050": True, "SOCKS5://h:1": True,
                                   "http://[::1]:3128/": True, "http://me:pw@h:3128": False,
                                   "https://h:3128": False, "http://h": False, "http://h:70000": False},
      parent_checks["parents"])
check("each rule is checked alone: a pattern and a parent URL, or direct",
      parent_checks["rules"] == {"10.0.0.0/8 direct": True, "*.example.com socks5h://10.0.0.5:1080": True,
                                 "fd00::/8 http://[fd00::1]:3128": True, "*.example.com": False,
                                 "example.com direct extra": False, "ex*ample.com direct": False,
                                 "example.com http://me:pw@h:3128": False},
      parent_checks["rules"])
buttons = {e.get("for"): e["text"] for e in page.elements if e["tag"] == "output"}
check("the CA buttons are there, drawn as form.js draws a Button",
      buttons.get("cbid.keepalive-proxy.main._make_ca") == "Create CA"
      and buttons.get("cbid.keepalive-proxy.main._download_ca") == "Download certificate", buttons)
check("no field of a sound setup is flagged",
      not [e for e in page.elements if "cbi-input-invalid" in e.get("class", "")])

shown = {k[3:]: v["text"] for k, v in page.ids.items() if k.startswith("kp-") and k != "kp-status"}
want = {
    "requests": "4244",  # the last poll's answer, not load()'s 4242
    "reused": "4002",
    "new": "200",
    "readahead": "37",
    "local": "5",
    "fetch": "4.0 MiB in use, of 64.0 MiB; 2 fetches put off while it, or a client's half of it, was full",
    "saved": "12.6 min",
    "warm": "3 (cdn.example.com:443: 2, example.org:80: 1)",
    "open": "4 to origins, 2 from clients",
    "errors": "3 (timeout: 2, reset: 1)",
    "bytes": "1.5 MiB to clients, 2.0 KiB to origins",
}
for k, v in want.items():
    check("the status shows %s = %s" % (k, v), shown.get(k) == v, shown.get(k))
check("the status names the daemon", "keepalive-proxy 0.1.0 (TLS: OpenSSL 3.0.0), as of" in page.text)
rows = [e for e in page.elements if e["tag"] == "tr" and "kp-parent" in e.get("class", "")]
check("the status has a row per parent, labelled as the daemon labels it",
      len(rows) == 2 and rows[0]["text"].startswith("Parent proxy socks5h://10.0.0.5:1080")
      and rows[1]["text"].startswith("Parent proxy http://[fd00::1]:3128"), [r["text"] for r in rows])
check("a parent's row: connections, reuse, failures by kind, round trip (the last poll's)",
      shown.get("parent-0") == "12 connections, 42 requests (28 on a reused connection), round trip 34.5 ms; "
      "failed: 4 (unreachable: 1, origin unreachable from it: 2, timed out: 1)", shown.get("parent-0"))
check("a parent without numbers yet", shown.get("parent-1") ==
      "0 connections, 0 requests (0 on a reused connection), round trip -; failed: 0", shown.get("parent-1"))
check("the status is polled every 5 s", json.loads(page.ids["polls"]["text"]) == [5])



def finding(p, key):
    """The host check's element for a finding (the first of them), or an empty one."""
    found = [e for e in p.elements if e.get("data-key") == key]
    return found[0] if found else {"tag": "", "text": ""}


# The host check as the page loaded it, kept before "Check again", and as
# it is after: the fresh report in place of the first.
first = Page(html=page.ids.get("check-first", {}).get("text", ""))
check("the host check as loaded: nothing limits, on which path",
      "Nothing on this router limits one download over 200 ms at 500 Mbit/s" in first.text
      and finding(first, "rmem_max")["text"] == "ok: Nothing to do: the kernel sizes the proxy's "
      "download buffers as a download needs. (net.core.rmem_max 208 KiB: not in play, "
      "--upstream-rcvbuf is unset)", first.text[:300])
again = [c for c in json.loads(page.ids["calls"]["text"]) if c["method"] == "check_host"]
check("Check again runs the check again", len(again) == 2, again)
report = page.ids.get("kp-check-report", {"text": ""})
check("Check again shows the new report in place of the old",
      "Something on this router limits one download over 200 ms at 500 Mbit/s" in report["text"]
      and "Nothing" not in report["text"]
      and len([e for e in page.elements if e.get("data-key") == "rmem_max"]) == 1, report)
check("Check again can be pressed again", "disabled" not in page.ids.get("kp-check-again", {}),
      page.ids.get("kp-check-again"))
limit = finding(page, "rmem_max")
check("a limiting finding is highlighted with what limits",
      "alert-message warning" in limit.get("class", "")
      and "cuts --upstream-rcvbuf 8 MiB to 208 KiB" in limit["text"], limit)


def leads(text, meaning, kernel):
    """MEANING is in TEXT, and before KERNEL, the kernel's names."""
    return meaning in text and kernel in text and text.index(meaning) < text.index(kernel)


check("a limiting finding leads with what it means to the owner, in numbers; the sysctl after",
      leads(limit["text"], "limits: One download through the proxy over a 200 ms path is held to 11 Mbit/s",
            "net.core.rmem_max"), limit["text"])
check("an ok finding leads with what it means; the sysctl after",
      leads(finding(page, "tcp_rmem")["text"],
            "ok: One download over a 200 ms path can reach 832 Mbit/s: more than the 500 Mbit/s the path has.",
            "net.ipv4.tcp_rmem max 32 MiB"), finding(page, "tcp_rmem"))
check("a note leads with what it means; the sysctl after",
      leads(finding(page, "slow_start_after_idle")["text"],
            "note: A connection that pauses for a moment starts slowly again",
            "net.ipv4.tcp_slow_start_after_idle"), finding(page, "slow_start_after_idle"))
check("the open-file limit says how many clients, in the owner's words",
      leads(finding(page, "fd_limit")["text"],
            "keepalive-proxy can serve 496 clients at once, not the 10000 it is set to",
            "open-file limit 1024"), finding(page, "fd_limit"))
check("a limiting finding shows its cost and its fix",
      "gave up root with -u" in limit["text"]
      and any(e["tag"] == "code" and e["text"] == "sysctl -w net.core.rmem_max=8388608"
              for e in page.elements), limit)
note = finding(page, "slow_start_after_idle")
check("a note is folded, its fix inside",
      note["tag"] == "details" and "open" not in note
      and "tcp_slow_start_after_idle=0" in note["text"], note)
check("an ok finding is one line, without its cost",
      finding(page, "tcp_rmem")["text"] == "ok: One download over a 200 ms path can reach 832 Mbit/s: "
      "more than the 500 Mbit/s the path has. (net.ipv4.tcp_rmem max 32 MiB: one stream at most "
      "832 Mbit/s at 200 ms)", finding(page, "tcp_rmem"))
unread = [e for e in page.elements if e["tag"] == "details" and e.get("class") == "kp-unread"]
summary = [e for e in page.elements if e["tag"] == "summary" and e["text"].endswith("could not be read")]
check("findings that could not be read, with nothing to do, are folded under one line",
      len(unread) == 1 and "open" not in unread[0] and summary
      and summary[0]["text"] == "2 checks could not be read"
      and "loopback route to 127.0.0.1" in unread[0]["text"]
      and "net.ipv4.tcp_wmem: could not be read" in unread[0]["text"]
      and not [e for e in page.elements if e.get("data-status") == "unknown"], unread)
shown_text = first.text + page.ids.get("maincontent", {}).get("text", "")
check("the page shows no null or undefined",
      "null" not in shown_text and "undefined" not in shown_text, shown_text[:300])

offered = json.loads(page.ids["downloaded"]["text"])
check("the certificate is offered as a file, as the plugin gave it",
      offered == [{"name": "keepalive-proxy-ca.crt", "type": "application/x-x509-ca-cert",
                   "text": "-----BEGIN CERTIFICATE-----\nMIIBstandinNOTAREALCERTIFICATE\n-----END CERTIFICATE-----\n"}],
      offered)
calls = [(c["object"], c["method"], c["params"]) for c in json.loads(page.ids["calls"]["text"])]
check("Create CA calls make_ca, then the plugin's restart (this service alone)",
      ("luci.keepalive-proxy", "make_ca", {"intercept": ["*.googlevideo.com"]}) in calls
      and calls[calls.index(("luci.keepalive-proxy", "make_ca", {"intercept": ["*.googlevideo.com"]})) + 1]
      == ("luci.keepalive-proxy", "restart", {}), calls)
check("the page calls nothing of rpcd's rc (rc init reaches every service)",
      not [c for c in calls if c[0] == "rc"], calls)
check("Create CA says where the CA is", "A new CA is in /etc/keepalive-proxy." in page.text)

refused = json.loads(page.ids["save-refused"]["text"])
check("a port of 70000 is refused by its datatype, and Save with it",
      refused and refused["flagged"] and refused["saved"] == 0
      and refused["message"] == 'Option "Port" contains an invalid input value.', refused)
lists = json.loads(page.ids["lists"]["text"])
check("a list entry is checked alone: a second host to intercept passes, a bad network is refused",
      lists == {"intercept": True, "allow": False}, lists)
sizes = json.loads(page.ids["sizes"]["text"])
check("the memory for read-ahead takes sizes as the daemon does (64M, 1G, bytes) and refuses the rest",
      sizes == {"8Q": False, "0x100": False, "512K": False, "17G": False, "64M": True,
                "16777216": True, "1G": True}, sizes)
saved = json.loads(page.ids["saved"]["text"])
check("Save stages the values",
      saved["saved"] == 1 and saved["uci"]["intercept"] == ["*.googlevideo.com", "cdn.example.org"]
      and saved["uci"]["port"] == "3128" and "_make_ca" not in saved["uci"], saved)
check("Save writes the memory as fetch_memory, and the former name is removed",
      saved["uci"].get("fetch_memory") == "64M" and "read_ahead_memory" not in saved["uci"], saved)
check("Save with the password's field left empty keeps the saved password, and the rest as it was",
      saved["uci"].get("parent_password") == "S3cret-never-drawn" and saved["uci"].get("parent_user") == "me"
      and saved["uci"].get("parent") == "socks5h://10.0.0.5:1080"
      and saved["uci"].get("parent_rule") == ["192.168.0.0/16 direct", "*.example-tv.net http://[fd00::1]:3128"],
      saved)
no_user = json.loads(page.ids["saved-no-user"]["text"])
check("the user emptied and saved: the user and the password are gone",
      "parent_user" not in no_user and "parent_password" not in no_user, no_user)
err = json.loads(page.ids["poll-error"]["text"])
check("a status poll that fails shows the ubus error, not the numbers from before",
      err == {"state": "RPC call to luci.keepalive-proxy/status failed with ubus code 7: Request timeout",
              "requests": "-", "parents": 0}, err)
again = json.loads(page.ids["poll-again"]["text"])
check("the next poll shows numbers again", again["requests"] == "4244" and again["parents"] == 2, again)

page = Page(sys.argv[2])
check("open LAN: the listen address is flagged",
      "allowed clients" in field("bind").get("data-error", ""), field("bind"))
check("open LAN: the LAN stats listener is flagged",
      "loopback" in field("stats_listen").get("data-error", ""), field("stats_listen"))
state = [e for e in page.elements if e.get("class") == "alert-message warning"]
check("open LAN: the plugin's refusal is shown",
      state and "not on loopback" in state[0]["text"], state)
check("open LAN: the host check shows why it could not run",
      "without --allow or --auth-file" in page.ids.get("kp-check-report", {}).get("text", ""),
      page.ids.get("kp-check-report"))

page = Page(sys.argv[3])
check("fetch_memory beside read_ahead_memory: the field shows fetch_memory",
      field("fetch_memory").get("value") == "48M", field("fetch_memory"))
saved = json.loads(page.ids.get("saved", {}).get("text", "{}")).get("uci", {})
check("the memory's field emptied and saved: neither name is left, the daemon's default applies",
      saved.get("port") == "3128" and "fetch_memory" not in saved and "read_ahead_memory" not in saved,
      saved)
check("a password typed in is saved", saved.get("parent_password") == "N3w-typed", saved)

if failed:
    sys.exit("%d case(s) failed" % failed)
print("all cases passed")
EOF
