'use strict';
'require view';
'require form';
'require poll';
'require rpc';
'require uci';
'require ui';

/*
 * keepalive-proxy's settings (/etc/config/keepalive-proxy), its interception
 * CA, its live numbers and its host check. The numbers come through the rpcd
 * plugin luci.keepalive-proxy (/usr/libexec/rpcd/luci.keepalive-proxy),
 * which fetches /stats from the daemon's stats listener on loopback: the
 * listener is never opened to the LAN for this page. The host check is
 * keepalive-proxy --check-host, run by the plugin with the applied settings.
 *
 * The plugin's calls reject on a ubus error too (reject: true), as they do
 * on an RPC error, so that the page says what failed instead of showing an
 * empty answer.
 */

const callStatus = rpc.declare({
	object: 'luci.keepalive-proxy',
	method: 'status',
	expect: { '': {} },
	reject: true
});

const callMakeCa = rpc.declare({
	object: 'luci.keepalive-proxy',
	method: 'make_ca',
	params: [ 'intercept' ],
	expect: { '': {} },
	reject: true
});

const callCaCertificate = rpc.declare({
	object: 'luci.keepalive-proxy',
	method: 'ca_certificate',
	expect: { '': {} },
	reject: true
});

const callCheckHost = rpc.declare({
	object: 'luci.keepalive-proxy',
	method: 'check_host',
	expect: { '': {} },
	reject: true
});

/* This service alone: rpcd's rc init would reach every service. */
const callRestart = rpc.declare({
	object: 'luci.keepalive-proxy',
	method: 'restart',
	expect: { '': {} },
	reject: true
});

const noAnswer = _('No answer from the rpcd plugin luci.keepalive-proxy.');

/* A failed call as an answer with its reason, as the plugin gives one. */
function failed(e) {
	return { error: (e && e.message) || String(e) };
}

function count(n) {
	return (typeof(n) == 'number') ? String(n) : '-';
}

function bytes(n) {
	const units = [ 'B', 'KiB', 'MiB', 'GiB', 'TiB' ];
	let i = 0;

	if (typeof(n) != 'number')
		return '-';
	for (; n >= 1024 && i < units.length - 1; i++)
		n /= 1024;
	return (i ? n.toFixed(1) : String(n)) + ' ' + units[i];
}

function duration(s) {
	if (typeof(s) != 'number')
		return '-';
	if (s < 120)
		return s.toFixed(1) + ' s';
	if (s < 7200)
		return (s / 60).toFixed(1) + ' min';
	return (s / 3600).toFixed(1) + ' h';
}

/*
 * A size as keepalive-proxy reads one (--split-size 8M), in bytes: digits,
 * then K, M or G for KiB, MiB or GiB; NaN for anything else.
 */
function sizeBytes(value) {
	const m = /^([0-9]+)([KkMmGg]?)$/.exec(value || '');

	return m ? +m[1] * Math.pow(1024, ' kmg'.indexOf(m[2].toLowerCase() || ' ')) : NaN;
}

/*
 * A size from min to max bytes. true, or why not. No datatype does it:
 * LuCI's uinteger refuses 8M, which the daemon takes.
 */
function size(value, min, max) {
	const n = sizeBytes(value);

	if (!value || (n >= min && n <= max))
		return true;
	return _('a number of bytes from %s to %s, K, M or G after it if you like (8M)').format(bytes(min), bytes(max));
}

/* "n (a: 1, b: 2)" for an object of counts, zeros left out. */
function breakdown(total, parts) {
	const list = Object.keys(parts || {}).filter((k) => parts[k] > 0)
		.map((k) => k + ': ' + parts[k]);

	return list.length ? count(total) + ' (' + list.join(', ') + ')' : count(total);
}

function sum(parts) {
	return Object.keys(parts || {}).reduce((n, k) => n + (+parts[k] || 0), 0);
}

const checkStatus = { ok: _('ok'), note: _('note'), limits: _('limits'), unknown: _('unknown') };

/*
 * What a finding of the host check means to the router's owner, in words
 * and numbers from the report (the path judged, cap_mbit), or null when
 * the daemon's own line says it best. The kernel's names (sysctls, qdisc,
 * congestion control) come after it, in the daemon's line (f.what).
 */
function meaning(f, path) {
	const cap = (typeof(f.cap_mbit) == 'number') ? Math.round(f.cap_mbit) : null;
	const rtt = path.rtt_ms, rate = path.rate_mbit;
	const ok = (f.status == 'ok');
	let m;

	switch (f.key) {
	case 'tcp_rmem':
		if (cap == null)
			return null;
		return ok
			? _('One download over a %d ms path can reach %d Mbit/s: more than the %d Mbit/s the path has.').format(rtt, cap, rate)
			: _('One download over a %d ms path is held to %d Mbit/s, of the %d Mbit/s the path has.').format(rtt, cap, rate);
	case 'rmem_max':
		if (cap == null)
			return ok ? _('Nothing to do: the kernel sizes the proxy\'s download buffers as a download needs.') : null;
		return ok
			? _('One download through the proxy over a %d ms path can reach %d Mbit/s.').format(rtt, cap)
			: _('One download through the proxy over a %d ms path is held to %d Mbit/s: the buffer set for it is cut short.').format(rtt, cap);
	case 'tcp_wmem':
		if (cap == null)
			return null;
		return ok
			? _('What this router sends over a %d ms path can reach %d Mbit/s.').format(rtt, cap)
			: _('What this router sends over a %d ms path (uploads, a server on the router) is held to %d Mbit/s; downloads through the proxy are not.').format(rtt, cap);
	case 'wmem_max':
		return ok
			? _('Nothing to do for uploads through the proxy.')
			: _('Uploads through the proxy get smaller buffers than the settings ask for.');
	case 'slow_start_after_idle':
		return ok
			? _('A connection that pauses keeps its speed.')
			: _('A connection that pauses for a moment starts slowly again; for downloads that pause, read-ahead helps.');
	case 'congestion':
		if (f.status == 'limits')
			return _('keepalive-proxy will not start with the congestion control that is set: this router does not offer it to the proxy.');
		return _('Nothing to do for the proxy.');
	case 'loopback':
		return ok
			? _('Nothing to do.')
			: _('Programs on this router that use the proxy start each connection slowly, for microseconds: hardly measurable.');
	case 'fd_limit':
		m = /room for ([0-9]+) clients .*--max-clients ([0-9]+)/.exec(f.what || '');
		if (ok)
			return _('keepalive-proxy can serve as many clients at once as it is set to.');
		return m ? _('keepalive-proxy can serve %s clients at once, not the %s it is set to; the others wait.').format(m[1], m[2]) : null;
	case 'tls':
		return ok
			? _('HTTPS downloads from the hosts to intercept can be pooled too.')
			: _('HTTPS downloads cannot be pooled: this keepalive-proxy has no TLS (the keepalive-proxy-openssl package has).');
	}
	return null;
}

/*
 * One finding of the host check: what it means first, the kernel's names
 * after it; one line when nothing is to be done, its cost and fix folded
 * away when it costs little, all of it when it limits.
 */
function finding(f, path) {
	const status = checkStatus[f.status] || f.status;
	const lead = meaning(f, path);
	const more = [];
	/* No nulls in E()'s arrays: LuCI writes them out as "null". */
	const line = lead
		? [ E('span', { 'class': 'kp-meaning' }, [ lead ]), ' ', E('small', { 'class': 'kp-kernel' }, [ '(' + f.what + ')' ]) ]
		: [ E('span', { 'class': 'kp-meaning' }, [ f.what ]) ];

	if (f.cost)
		more.push(E('div', [ _('Cost: %s').format(f.cost) ]));
	if (f.fix)
		more.push(E('div', [ _('Fix:'), ' ', E('code', [ f.fix ]) ]));

	if (f.status == 'limits')
		return E('div', { 'class': 'alert-message warning', 'data-key': f.key, 'data-status': f.status },
			[ E('strong', [ status + ': ' ]), ...line, ...more ]);
	if (f.status == 'note' && (f.cost || f.fix))
		return E('details', { 'data-key': f.key, 'data-status': f.status },
			[ E('summary', [ status + ': ', ...line ]), ...more ]);
	return E('div', { 'data-key': f.key, 'data-status': f.status }, [ status + ': ', ...line ]);
}

/*
 * A parent proxy's URL as the init script takes one: socks5h://, socks5://
 * or http://, host:port (an IPv6 address in brackets), and no
 * user:password@, which the daemon's command line would show. true, or why
 * not.
 */
function parentUrl(value) {
	const m = /^(?:socks5h|socks5|http):\/\/(\[[0-9A-Za-z._:-]+\]|[0-9A-Za-z._-]+):0*([0-9]{1,5})\/?$/i.exec(value);

	if (/@/.test(value))
		return _('no user or password in the URL, where ps would show them: give them below');
	if (!m || +m[2] < 1 || +m[2] > 65535)
		return _('a parent proxy such as socks5h://127.0.0.1:9050 or http://proxy.example:3128');
	return true;
}

/* A rule's pattern: a host name, *.domain, an IP address or a CIDR. */
function parentPattern(value) {
	return /^(\*\.)?[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.?$|^[0-9A-Fa-f:.]+(\/[0-9]{1,3})?$/.test(value);
}

/* A parent_rule: "PATTERN URL" or "PATTERN direct". true, or why not. */
function parentRule(value) {
	const words = (value || '').trim().split(/\s+/);

	if (words.length != 2 || !parentPattern(words[0]))
		return _('a host name, *.domain, IP address or CIDR, then a parent URL or direct: *.example.com socks5h://10.0.0.5:1080, or 10.0.0.0/8 direct');
	return words[1] == 'direct' || parentUrl(words[1]);
}

/* A parent's handshakes that failed, by kind, in the owner's words. */
const parentFailures = {
	refused: _('refused'),
	auth: _('user or password refused'),
	origin_unreachable: _('origin unreachable from it'),
	bad_reply: _('bad reply'),
	timeout: _('timed out'),
	closed: _('closed')
};

/* One parent's numbers from /stats's "parents": connections, reuse, failures, round trip. */
function parentNumbers(p) {
	const h = p.handshakes || {};
	const failures = [];
	let total = p.unreachable || 0;

	if (p.unreachable > 0)
		failures.push(_('unreachable: %d').format(p.unreachable));
	Object.keys(parentFailures).forEach((k) => {
		if (h[k] > 0) {
			failures.push(parentFailures[k] + ': ' + h[k]);
			total += h[k];
		}
	});
	return _('%s connections, %s requests (%s on a reused connection), round trip %s')
		.format(count(p.connects), count(p.requests), count(p.reused),
			(typeof(p.rtt) == 'number' && p.rtt > 0) ? (p.rtt * 1000).toFixed(1) + ' ms' : '-') +
		'; ' + _('failed: %s').format(count(total) + (failures.length ? ' (' + failures.join(', ') + ')' : ''));
}

/* --fetch-memory when fetch_memory is unset (src/config.c). */
const fetchMemoryDefault = 33554432;

/*
 * The memory read-ahead and split downloads hold, of the applied
 * fetch_memory the plugin reads (read_ahead_memory in an older config),
 * and the fetches put off because it was full.
 */
function fetchMemory(s, st) {
	const bound = st.fetch_memory ? sizeBytes(st.fetch_memory) : fetchMemoryDefault;

	if (typeof(s.fetch_memory_bytes) != 'number')
		return '-';
	return _('%s in use, of %s; %s fetches put off while it, or a client\'s half of it, was full')
		.format(bytes(s.fetch_memory_bytes + (s.fetch_records_bytes || 0)),
			isNaN(bound) ? '-' : bytes(bound), count(s.fetch_throttled_total || 0));
}

/*
 * Each row of the status table: its id, its label, and its value from
 * /stats (and the plugin's whole answer).
 */
const statusRows = [
	[ 'saved', _('Time saved by reused connections (estimate)'),
		(s) => duration(s.saved_seconds_total) ],
	[ 'requests', _('Requests'), (s) => count(s.requests_total) ],
	[ 'reused', _('… on a reused connection'), (s) => count(s.upstream_reused_total) ],
	[ 'new', _('… on a new connection'), (s) => count(s.requests_on_new_connection_total) ],
	[ 'readahead', _('… from read-ahead'),
		(s) => count((s.readahead_hits_total || 0) + (s.readahead_joins_total || 0)) ],
	[ 'local', _('… answered by the proxy itself'), (s) => count(s.local_responses_total) ],
	[ 'fetch', _('Memory for read-ahead and split downloads'), fetchMemory ],
	[ 'split', _('Split downloads'),
		(s) => _('%s in pieces, %s pieces resumed, %s cut off (changed), %s hosts backed off to one connection')
			.format(count(s.split_downloads_total || 0), count(s.split_resumes_total || 0),
				count(s.split_mismatches_total || 0), count(s.split_backoffs_total || 0)) ],
	[ 'warm', _('Warm connections, waiting for the next request'),
		(s) => breakdown(s.idle_upstream_connections, s.idle_per_host) ],
	[ 'open', _('Connections open'),
		(s) => _('%s to origins, %s from clients').format(count(s.upstream_connections),
			count(s.clients)) ],
	[ 'errors', _('Errors'), (s) => breakdown(sum(s.errors_total), s.errors_total) ],
	[ 'bytes', _('Bytes'),
		(s) => _('%s to clients, %s to origins').format(bytes(s.bytes_to_clients_total),
			bytes(s.bytes_to_upstreams_total)) ]
];

return view.extend({
	load() {
		return Promise.all([
			callStatus().catch(failed),
			callCheckHost().catch(failed)
		]);
	},

	renderStatus() {
		this.stateEl = E('p', {}, _('Waiting for the first numbers…'));
		this.cells = {};
		this.tableEl = E('table', { 'class': 'table' }, statusRows.map((row) =>
			E('tr', { 'class': 'tr' }, [
				E('td', { 'class': 'td left', 'width': '40%' }, row[1]),
				this.cells[row[0]] = E('td', { 'class': 'td left', 'id': 'kp-' + row[0] }, '-')
			])));
		return E('div', { 'class': 'cbi-section', 'id': 'kp-status' }, [
			E('h3', _('Status')),
			this.stateEl,
			this.tableEl
		]);
	},

	/*
	 * A row per parent proxy, after the others, drawn anew on each poll:
	 * the parents are the running daemon's, labelled without credentials.
	 * A daemon that reports none while the applied settings name one (an
	 * older keepalive-proxy) gets a row saying so.
	 */
	updateParents(st) {
		const parents = (st.stats && Array.isArray(st.stats.parents)) ? st.stats.parents : [];
		const rows = parents.map((p) => [ p.parent, parentNumbers(p) ]);

		if (!rows.length && st.stats && st.parent)
			rows.push([ st.parent, _('no numbers: this keepalive-proxy does not report its parents') ]);
		this.tableEl.querySelectorAll('.kp-parent').forEach((tr) => tr.remove());
		rows.forEach(([ label, text ], i) => this.tableEl.appendChild(
			E('tr', { 'class': 'tr kp-parent' }, [
				E('td', { 'class': 'td left', 'width': '40%' }, [ _('Parent proxy %s').format(label) ]),
				E('td', { 'class': 'td left', 'id': 'kp-parent-' + i }, [ text ])
			])));
	},

	updateStatus(st) {
		const what = st.version ? st.version + (st.tls ? ' (TLS: ' + st.tls + ')' : '') : '';

		/* No numbers from before the error: they would pass for current ones. */
		if (st.error || !st.stats) {
			this.stateEl.textContent = st.error || noAnswer;
			this.stateEl.className = 'alert-message warning';
			statusRows.forEach((row) => {
				this.cells[row[0]].textContent = '-';
			});
			this.updateParents({});
			return;
		}
		this.stateEl.className = '';
		this.stateEl.textContent = _('%s, as of %s').format(what || 'keepalive-proxy',
			new Date().toLocaleTimeString());
		statusRows.forEach((row) => {
			this.cells[row[0]].textContent = row[2](st.stats, st);
		});
		this.updateParents(st);
	},

	renderCheck() {
		this.checkEl = E('div', { 'id': 'kp-check-report' });
		return E('div', { 'class': 'cbi-section', 'id': 'kp-check' }, [
			E('h3', _('Host check')),
			this.checkEl,
			E('button', { 'class': 'cbi-button cbi-button-action', 'id': 'kp-check-again',
				'click': ui.createHandlerFn(this, 'handleCheck') }, [ _('Check again') ])
		]);
	},

	updateCheck(res) {
		const r = res.report;

		if (res.error || !r || !Array.isArray(r.findings)) {
			this.checkEl.replaceChildren(E('p', { 'class': 'alert-message warning' },
				[ res.error || noAnswer ]));
			return;
		}
		/* What could not be read and asks nothing of the owner: folded away. */
		const unread = r.findings.filter((f) => f.status == 'unknown' && !f.fix);
		const shown = r.findings.filter((f) => !unread.includes(f));
		const folded = unread.length ? [ E('details', { 'class': 'kp-unread' }, [
			E('summary', [ N_(unread.length, '%d check could not be read', '%d checks could not be read')
				.format(unread.length) ]),
			...unread.map((f) => E('div', { 'data-key': f.key }, [ f.what ]))
		]) ] : [];

		this.checkEl.replaceChildren(
			E('p', [ (r.limited
				? _('Something on this router limits one download over %d ms at %d Mbit/s, with the applied settings:')
				: _('Nothing on this router limits one download over %d ms at %d Mbit/s, with the applied settings.'))
				.format(r.path.rtt_ms, r.path.rate_mbit) ]),
			...shown.map((f) => finding(f, r.path)),
			...folded);
	},

	handleCheck() {
		return callCheckHost().catch(failed).then((res) => this.updateCheck(res));
	},

	/*
	 * Messages go to E() in an array, where a string is text; alone it is HTML.
	 * The CA is made from the applied list, the one keepalive-proxy intercepts:
	 * the plugin is given the list the page shows, and refuses when that is
	 * not the applied one (edited here, or saved but not applied yet).
	 */
	handleMakeCa(section_id) {
		const shown = L.toArray(this.map.lookupOption('intercept', section_id)[0].formvalue(section_id));

		return callMakeCa(shown).then((res) => {
			if (res.error || !res.ca_dir)
				throw new Error(res.error || noAnswer);
			ui.addNotification(null, E('p', [ _('A new CA is in %s. Download its certificate and let each client trust it; keepalive-proxy restarts now to use it.').format(res.ca_dir) ]), 'info');
			return callRestart();
		}).then((res) => {
			if (res && res.error)
				throw new Error(res.error);
		}).catch((e) => {
			ui.addNotification(null, E('p', [ e.message ]), 'error');
		});
	},

	handleDownloadCa() {
		return callCaCertificate().then((res) => {
			if (res.error || !res.pem)
				throw new Error(res.error || noAnswer);
			const url = URL.createObjectURL(new Blob([ res.pem ],
				{ type: 'application/x-x509-ca-cert' }));
			const link = E('a', { 'href': url, 'download': 'keepalive-proxy-ca.crt' });

			document.body.appendChild(link);
			link.click();
			document.body.removeChild(link);
			/* After the click has handed the file over, not before. */
			window.setTimeout(() => URL.revokeObjectURL(url), 1000);
		}).catch((e) => {
			ui.addNotification(null, E('p', [ e.message ]), 'error');
		});
	},

	render([ status, check ]) {
		/* The title is the page's, above the status: the map redraws itself on save. */
		const m = this.map = new form.Map('keepalive-proxy');
		const s = m.section(form.NamedSection, 'main', 'keepalive-proxy', _('Settings'));
		let o;

		s.addremove = false;
		s.tab('general', _('General'));
		s.tab('https', _('HTTPS pooling'), status.version && !status.tls
			? _('This keepalive-proxy has no TLS: install the keepalive-proxy-openssl package instead to pool HTTPS connections.')
			: _('keepalive-proxy decrypts the traffic to these hosts with a CA of its own, which every client must trust, and pools its connections to them.'));
		s.tab('readahead', _('Read-ahead'),
			_('After a client got one byte range of a URL, fetch the range that follows before it is asked for.'));
		s.tab('parent', _('Parent proxy'),
			_('Reach origins through another proxy: Tor, ssh -D to a server, a VPN client\'s SOCKS port, an office HTTP proxy.'));

		o = s.taboption('general', form.Flag, 'enabled', _('Enabled'));
		o.default = o.enabled;
		o.rmempty = false;

		o = s.taboption('general', form.Value, 'port', _('Port'));
		o.datatype = 'and(port,min(1))';
		o.placeholder = '9250';

		o = s.taboption('general', form.Value, 'bind', _('Listen address'),
			_('127.0.0.1 serves this router alone. A LAN address serves the LAN, and then needs allowed clients or a users file.'));
		o.datatype = 'ipaddr(1)';
		o.placeholder = '127.0.0.1';
		o.validate = function(section_id, value) {
			const allow = this.section.formvalue(section_id, 'allow');
			const users = this.section.formvalue(section_id, 'auth_file');

			/* The other fields are not drawn yet on the first check. */
			if (!value || /^127\.|^::1$/.test(value) || (allow == null && users == null))
				return true;
			if ((!allow || !allow.length) && !users)
				return _('keepalive-proxy refuses to serve a LAN address to anyone: list the allowed clients or set a users file');
			return true;
		};

		o = s.taboption('general', form.DynamicList, 'allow', _('Allowed clients'),
			_('Addresses or networks that may use the proxy, such as 192.168.1.0/24.'));
		o.datatype = 'or(ipaddr(1),cidr)';

		o = s.taboption('general', form.Value, 'auth_file', _('Users file'),
			_('Clients must give a user name and password from this file, one user:password (or crypt hash) a line.'));
		o.placeholder = '/etc/keepalive-proxy/users';

		o = s.taboption('general', form.Value, 'stats_listen', _('Stats listener'),
			_('Where keepalive-proxy serves its counters; the status above is read from it. Loopback only.'));
		o.placeholder = '127.0.0.1:9251';
		/*
		 * No datatype: LuCI's ipaddrport() leaves its validator holding the
		 * port alone, and that is what validate() would be given.
		 */
		o.validate = function(section_id, value) {
			const m = /^(?:127\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})|\[::1\]):([0-9]{1,5})$/.exec(value);

			if (value && !(m && [ m[1], m[2], m[3] ].every((n) => n == null || +n <= 255) &&
			               +m[4] >= 1 && +m[4] <= 65535))
				return _('a loopback address and port, such as 127.0.0.1:9251');
			return true;
		};

		o = s.taboption('general', form.Flag, 'stats_auth', _('Stats listener asks for a password'),
			_('With a users file, the stats listener asks for a user and password from it too. Off, as shipped, for a listener on loopback: this page reads it there and has no password to give.'));
		o.default = o.enabled;

		o = s.taboption('https', form.DynamicList, 'intercept', _('Hosts to intercept'),
			_('Host names, *.domain patterns or IP addresses. The CA is limited to the list as it is when the CA is made.'));
		o.placeholder = '*.googlevideo.com';
		o.validate = function(section_id, value) {
			if (value && !/^(\*\.)?[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$|^[0-9A-Fa-f:.]+$/.test(value))
				return _('a host name, *.domain or an IP address');
			return true;
		};

		o = s.taboption('https', form.Value, 'ca_dir', _('CA directory'),
			_('Where the CA is made (ca.crt, ca.key) and read from.'));
		o.placeholder = '/etc/keepalive-proxy';

		o = s.taboption('https', form.Button, '_make_ca', _('Create the CA'),
			_('Once, after the hosts to intercept are applied with Save & Apply. An existing CA is never replaced: clients may trust it.'));
		o.inputtitle = _('Create CA');
		o.inputstyle = 'apply';
		o.onclick = (ev, section_id) => this.handleMakeCa(section_id);

		o = s.taboption('https', form.Button, '_download_ca', _('CA certificate'),
			_('For the clients to trust, e.g. installed as an authority in the browser or the system.'));
		o.inputtitle = _('Download certificate');
		o.inputstyle = 'action';
		o.onclick = () => this.handleDownloadCa();

		o = s.taboption('readahead', form.Flag, 'read_ahead', _('Read ahead'));

		o = s.taboption('readahead', form.Value, 'fetch_memory', _('Memory for read-ahead and split downloads'),
			_('Bytes, K, M or G after the number (64M), for all that read-ahead and split downloads fetch and hold at once: the two share it, and one client takes half of it at most.'));
		o.placeholder = '32M';
		o.validate = (section_id, value) => size(value, 1048576, 17179869184);
		/*
		 * fetch_memory was read_ahead_memory, which the init script still
		 * reads. A value set under that name shows here while fetch_memory
		 * is unset, and a save writes it as fetch_memory, the old name
		 * removed: form.js writes a field whose value is not what load()
		 * gave, and removes one left empty.
		 */
		o.load = function(section_id) {
			this.default = uci.get('keepalive-proxy', section_id, 'read_ahead_memory');
			return uci.get('keepalive-proxy', section_id, 'fetch_memory');
		};
		o.write = function(section_id, value) {
			uci.unset('keepalive-proxy', section_id, 'read_ahead_memory');
			uci.set('keepalive-proxy', section_id, 'fetch_memory', value);
		};
		o.remove = function(section_id) {
			uci.unset('keepalive-proxy', section_id, 'read_ahead_memory');
			uci.unset('keepalive-proxy', section_id, 'fetch_memory');
		};

		o = s.taboption('readahead', form.DynamicList, 'split', _('Split downloads from'),
			_('Hosts whose big downloads are fetched as ranges, ahead of the client, with a broken connection resumed: for origins that slow down a download asked for whole. Host names, *.domain patterns or IP addresses; HTTPS hosts need interception too.'));
		o.placeholder = '*.googlevideo.com';
		o.validate = function(section_id, value) {
			if (value && !/^(\*\.)?[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$|^[0-9A-Fa-f:.]+$/.test(value))
				return _('a host name, *.domain or an IP address');
			return true;
		};

		o = s.taboption('readahead', form.Value, 'split_size', _('Range size'),
			_('Bytes asked of the origin at a time, K, M or G after the number (8M).'));
		o.placeholder = '8M';
		o.validate = (section_id, value) => size(value, 65536, 1073741824);

		o = s.taboption('readahead', form.ListValue, 'split_connections', _('Connections per download'),
			_('More than one only for origins that allow it; a refusal drops the host to one for ten minutes.'));
		[ '1', '2', '3', '4' ].forEach((n) => o.value(n));
		o.default = '1';

		o = s.taboption('parent', form.Value, 'parent', _('Parent proxy'),
			_('For every origin no rule below names: socks5h:// (the parent resolves names), socks5:// or http://, then host:port. Empty: origins are reached directly.'));
		o.placeholder = 'socks5h://127.0.0.1:9050';
		o.validate = (section_id, value) => !value || parentUrl(value);

		o = s.taboption('parent', form.DynamicList, 'parent_rule', _('Rules'),
			_('Tried in this order, the first that matches wins, then the parent proxy above: a host name, *.domain, IP address or CIDR, then a parent URL, or direct.'));
		o.placeholder = '*.example.com socks5h://10.0.0.5:1080';
		o.validate = (section_id, value) => !value || parentRule(value);

		o = s.taboption('parent', form.Value, 'parent_user', _('User'),
			_('For the parent proxy above. Emptied, the user and the password are removed.'));

		/*
		 * Never drawn back: the field loads empty, and left empty keeps the
		 * saved password (form.js removes an option left empty, so remove()
		 * keeps it while a user is set). The daemon is given it in a file,
		 * never on its command line.
		 */
		o = s.taboption('parent', form.Value, 'parent_password', _('Password'),
			_('Not shown once saved: leave it empty to keep the saved one. keepalive-proxy reads it from a file only root and its user may read, never from its command line.'));
		o.password = true;
		o.load = function(section_id) {
			this.placeholder = uci.get('keepalive-proxy', section_id, 'parent_password')
				? _('(saved: unchanged unless typed anew)') : '';
			return null;
		};
		o.remove = function(section_id) {
			if (!this.section.formvalue(section_id, 'parent_user'))
				uci.unset('keepalive-proxy', section_id, 'parent_password');
		};
		o.validate = function(section_id, value) {
			if (value && !this.section.formvalue(section_id, 'parent_user'))
				return _('a password needs its user');
			return true;
		};

		o = s.taboption('parent', form.Value, 'parent_credentials', _('Credentials file'),
			_('Or a file of parent URLs with user:password@, one a line, %XX for special characters (chmod 600 it): for the rules\' parents too. Where both name the parent, the user and password above win.'));
		o.placeholder = '/etc/keepalive-proxy/parents';

		const statusEl = this.renderStatus();
		const checkEl = this.renderCheck();

		this.updateStatus(status);
		this.updateCheck(check);
		poll.add(() => callStatus().catch(failed).then((st) => this.updateStatus(st)), 5);

		return m.render().then((mapEl) => E('div', {}, [
			E('h2', _('Keepalive proxy')),
			E('div', { 'class': 'cbi-map-descr' },
				_('An HTTP forward proxy that keeps its connections to origin servers open and hands them from one request to the next, so that downloaders opening a connection per chunk skip the handshakes and slow start.')),
			statusEl,
			checkEl,
			mapEl
		]));
	}
});
