/*
 * A stand-in for LuCI's client-side module API: NOT LuCI, and no copy of
 * it. It has just enough of L, E(), _(), N_(), String.prototype.format and
 * the modules view, form, rpc, poll, uci and ui for luci-app-keepalive-proxy's
 * view to load and render in a browser with no router behind it, as
 * uci-procd-harness.sh stands in for UCI and procd. What it shows follows
 * LuCI's markup loosely: a label, a field and a description per option, a
 * button per Button, every tab open at once.
 *
 * Data comes from window.standIn, which the page fills first:
 *   uci      { config: { section: { option: value or [items] } } }
 *   replies  { 'object.method': reply, or [first, second, ...] (the last
 *            one repeats) }
 * and it records there:
 *   calls    every rpc call, as { object, method, params }
 *   polls    every poll.add interval, in seconds
 *
 * L.loadView(url) loads a view as LuCI does: it fetches the source, reads
 * its 'require NAME' lines, runs it as a function of those modules, then
 * calls the view's load() and render() and puts the result in
 * #maincontent. E() writes a null or undefined in an array out as text, as
 * LuCI releases do, so that the page shows it.
 *
 * What LuCI does that this keeps, checked against LuCI's modules by
 * test_luci_real.sh where a checkout of openwrt/luci is at hand:
 *   - each option's datatype is checked as validation.js checks it, for the
 *     types the view uses (port, uinteger, min(), ipaddr(), cidr, and(),
 *     or()), then its validate(); a DynamicList checks each entry alone;
 *     a refusal marks the field cbi-input-invalid, the reason in data-error;
 *   - an option's value is what its load() gave when the map rendered
 *     (uci.get() unless the view says otherwise), drawn as its default
 *     when that is null;
 *   - standIn.save() saves as form.js's Map.save(): refused, with LuCI's
 *     message, while a field is invalid; else each field left empty is
 *     removed (remove(), rmempty being LuCI's default) and each whose value
 *     is not what load() gave is written (write()), into standIn.uci, as
 *     uci.js stages them (uci.set(), uci.unset()), and standIn.saved
 *     counts it;
 *   - a reply { ubus: CODE } is a ubus error: the call rejects with rpc.js's
 *     message when declared with reject: true, else resolves to expect's
 *     default; a reply { rpcError: [CODE, MESSAGE] } always rejects;
 *   - a ListValue is a select of the choices value() added;
 *   - a Button is drawn as form.js draws one: the button inside
 *     <output for="cbid..."> and a hidden field with the cbid;
 *   - standIn.poll() runs every poll.add function once more, as a tick.
 * What it does not: LuCI's markup beyond that, tabs, the apply and its
 * rollback, sessions and ACLs (see test_luci_real.sh and luci-rpcd.py).
 */
'use strict';

window.standIn = { uci: {}, replies: {}, calls: [], polls: [], saved: 0 };

/* E(tag, [attributes], [children]): a string alone is HTML, in an array text. */
window.E = function(tag, attrs, children) {
	const el = document.createElement(tag);

	if (attrs === undefined || typeof(attrs) != 'object' || attrs instanceof Node ||
	    Array.isArray(attrs)) {
		children = attrs;
		attrs = {};
	}
	for (const k in attrs) {
		if (typeof(attrs[k]) == 'function')
			el.addEventListener(k, attrs[k]);
		else if (attrs[k] != null)
			el.setAttribute(k, attrs[k] === true ? '' : attrs[k]);
	}
	append(el, children);
	return el;
};

function append(el, children) {
	if (Array.isArray(children))
		children.forEach((c) => {
			if (c instanceof Node)
				el.appendChild(c);
			else if (Array.isArray(c))
				append(el, c);
			else
				el.appendChild(document.createTextNode(String(c)));
		});
	else if (children instanceof Node)
		el.appendChild(children);
	else if (children != null)
		el.innerHTML = String(children);
}

window._ = (s) => s;
/* N_(count, singular, plural), as LuCI has it and i18n-scan.pl reads it. */
window.N_ = (n, s, p) => (n == 1 ? s : p);

String.prototype.format = function() {
	const args = arguments;
	let i = 0;

	return this.replace(/%([sdfh%])/g, (m, c) => {
		if (c == '%')
			return '%';
		const v = args[i++];
		return c == 'd' ? String(Math.floor(+v)) : c == 'f' ? String(+v) : String(v);
	});
};

function reply(key) {
	const r = window.standIn.replies[key];

	if (!Array.isArray(r))
		return r;
	return r.length > 1 ? r.shift() : r[0];
}

/* ---- modules ------------------------------------------------------------- */

const uci = {
	load: () => Promise.resolve(),
	get(config, section, option) {
		const s = (window.standIn.uci[config] || {})[section];
		return s && s[option] != null ? s[option] : null;
	},
	/* As uci.js: only in a section that exists; null or '' removes. */
	set(config, section, option, value) {
		const s = (window.standIn.uci[config] || {})[section];

		if (!s)
			return;
		if (value == null || value === '')
			delete s[option];
		else
			s[option] = value;
	},
	unset(config, section, option) {
		uci.set(config, section, option, null);
	}
};

const rpc = {
	declare(opts) {
		return function() {
			const params = {};

			(opts.params || []).forEach((p, i) => { params[p] = arguments[i]; });
			window.standIn.calls.push({ object: opts.object, method: opts.method, params: params });
			let r = JSON.parse(JSON.stringify(reply(opts.object + '.' + opts.method) ?? null));
			const where = opts.object + '/' + opts.method;

			if (r && r.rpcError)
				return Promise.reject(new Error('RPC call to %s failed with error %d: %s'
					.format(where, r.rpcError[0], r.rpcError[1])));
			if (r && typeof(r.ubus) == 'number') {
				if (opts.reject)
					return Promise.reject(new Error('RPC call to %s failed with ubus code %d: %s'
						.format(where, r.ubus, ubusStatus[r.ubus] || 'Unknown error code')));
				r = r.ubus;
			}
			/* expect, as LuCI reads it: one key, '' for the whole reply */
			for (const k in (opts.expect || {})) {
				if (r != null && k != '')
					r = r[k];
				if (r == null || typeof(r) != typeof(opts.expect[k]))
					r = opts.expect[k];
			}
			return Promise.resolve(r);
		};
	}
};

/* rpc.js's texts for ubus status codes */
const ubusStatus = [ 'Command OK', 'Invalid command', 'Invalid argument', 'Method not found',
	'Resource not found', 'No data received', 'Permission denied', 'Request timeout',
	'Not supported', 'Unspecified error', 'Connection lost' ];

/* The first tick is at once, as in LuCI; standIn.poll() is the next one. */
const pollFns = [];
const poll = {
	add(fn, interval) {
		window.standIn.polls.push(interval);
		pollFns.push(fn);
		window.setTimeout(fn, 0);
		return true;
	}
};
window.standIn.poll = () => Promise.all(pollFns.map((fn) => Promise.resolve(fn())));

/*
 * Datatypes, by the rules of LuCI's validation.js for the types the view
 * uses: "name" or "name(args)", and() and or() of them. true, or why not.
 */
function parseType(text) {
	let i = 0;
	const expr = () => {
		const m = /^[a-z0-9_.]+/i.exec(text.slice(i));
		const node = { name: m[0], args: [] };

		i += m[0].length;
		if (text[i] == '(') {
			i++;
			while (text[i] != ')') {
				node.args.push(expr());
				if (text[i] == ',')
					i++;
			}
			i++;
		}
		return node;
	};
	return expr();
}

function ip4(v) {
	const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(v);
	return m != null && m.slice(1).every((n) => +n <= 255);
}

function ip6(v) {
	if (!/^[0-9a-fA-F:.]+$/.test(v))
		return false;
	try {
		new URL('http://[' + v + ']/');
		return true;
	}
	catch (e) {
		return false;
	}
}

const datatypes = {
	port: (v) => /^-?[0-9]+$/.test(v) && +v >= 0 && +v <= 65535 || _('valid port value'),
	uinteger: (v) => /^-?[0-9]+$/.test(v) && +v >= 0 || _('positive integer value'),
	min: (v, min) => +v >= +min.name || _('value greater or equal to %f').format(min.name),
	ipaddr: (v, nomask) => (nomask ? ip4(v) || ip6(v)
		: datatypes.cidr(v) === true || ip4(v) || ip6(v)) || _('valid IP address'),
	cidr: (v) => {
		const m = /^(.+)\/([0-9]{1,3})$/.exec(v);
		return m != null && (ip4(m[1]) && +m[2] <= 32 || ip6(m[1]) && +m[2] <= 128) ||
			_('valid IPv4 or IPv6 CIDR');
	},
	and: (v, ...types) => {
		for (const t of types) {
			const r = checkType(t, v);
			if (r !== true)
				return r;
		}
		return true;
	},
	or: (v, ...types) => types.some((t) => checkType(t, v) === true) ||
		_('One of the following: %s').format(types.map((t) => t.name).join(', '))
};

function checkType(node, v) {
	if (!datatypes[node.name])
		throw new Error('the stand-in has no datatype ' + node.name);
	return datatypes[node.name](v, ...node.args);
}

const ui = {
	/* A click handler that disables its button while the promise fn returns runs. */
	createHandlerFn(ctx, fn, ...args) {
		if (typeof(fn) == 'string')
			fn = ctx[fn];
		return (ev) => {
			const button = ev.currentTarget;
			const r = fn.call(ctx, ...args, ev);

			if (!(r instanceof Promise))
				return r;
			button.disabled = true;
			return r.finally(() => { button.disabled = false; });
		};
	},

	addNotification(title, children, type) {
		const n = E('div', { 'class': 'alert-message ' + (type || '') }, children);

		document.getElementById('notifications').appendChild(n);
		return n;
	}
};

const view = {
	extend: (proto) => proto
};

class AbstractValue {
	constructor(map, section, option, title, description) {
		Object.assign(this, { map: map, section: section, option: option,
			title: title || '', description: description || '', deps: [] });
	}

	depends(field, value) {
		this.deps.push(typeof(field) == 'string' ? { [field]: value } : field);
	}

	cbid(sid) {
		return 'cbid.' + this.map.config + '.' + sid + '.' + this.option;
	}

	load(sid) {
		return uci.get(this.map.config, sid, this.option);
	}

	/* As form.js: what load() gave, kept when the map rendered. */
	cfgvalue(sid, value) {
		if (arguments.length == 2)
			(this.data = this.data || {})[sid] = value;
		return this.data ? this.data[sid] : null;
	}

	write(sid, value) {
		uci.set(this.map.config, sid, this.option, value);
	}

	remove(sid) {
		uci.unset(this.map.config, sid, this.option);
	}

	formvalue(sid) {
		const el = document.getElementById(this.cbid(sid));
		return el ? el.value : null;
	}

	/* A password is drawn as ui.Textfield draws one: an input of type password. */
	widget(sid, value) {
		return E('input', { 'type': this.password ? 'password' : 'text', 'id': this.cbid(sid),
			'value': value != null ? value : '', 'placeholder': this.placeholder });
	}

	render(sid) {
		const value = this.cfgvalue(sid);

		return E('div', { 'class': 'cbi-value', 'data-name': this.option }, [
			E('label', { 'class': 'cbi-value-title' }, [ this.title ]),
			E('div', { 'class': 'cbi-value-field' }, [
				this.widget(sid, value != null ? value : this.default),
				E('div', { 'class': 'cbi-value-description' }, [ this.description ])
			])
		]);
	}

	/* One value: empty is fine, then the datatype, then validate(). */
	verdict(sid, value) {
		if (value == null || value === '')
			return true;
		const why = this.datatype ? checkType(parseType(this.datatype), String(value)) : true;

		if (why !== true)
			return _('Expecting: %s').format(why);
		return this.validate ? this.validate(sid, value) : true;
	}

	/* Marks the field when its value is refused; true when it is not. */
	check(sid) {
		const el = document.getElementById(this.cbid(sid));
		const why = this.verdict(sid, this.formvalue(sid));

		if (el) {
			el.classList.toggle('cbi-input-invalid', why !== true);
			if (why !== true)
				el.setAttribute('data-error', why);
			else
				el.removeAttribute('data-error');
		}
		return why === true;
	}
}

class Flag extends AbstractValue {
	constructor(...args) {
		super(...args);
		this.enabled = '1';
		this.disabled = '0';
		this.default = this.disabled;
	}

	widget(sid, value) {
		return E('input', { 'type': 'checkbox', 'id': this.cbid(sid),
			'checked': value == this.enabled ? true : null });
	}

	formvalue(sid) {
		const el = document.getElementById(this.cbid(sid));
		return el ? (el.checked ? this.enabled : this.disabled) : null;
	}
}

class DynamicList extends AbstractValue {
	/* As LuCI: each entry alone, the first refusal is the list's. */
	verdict(sid, value) {
		for (const v of (value || [])) {
			const why = super.verdict(sid, v);
			if (why !== true)
				return why;
		}
		return true;
	}

	widget(sid, value) {
		const items = value == null ? [] : Array.isArray(value) ? value : [ value ];

		return E('div', { 'class': 'cbi-dynlist', 'id': this.cbid(sid) }, [
			...items.map((v) => E('div', { 'class': 'item', 'data-value': v }, [ v ])),
			E('input', { 'type': 'text', 'placeholder': this.placeholder })
		]);
	}

	formvalue(sid) {
		const el = document.getElementById(this.cbid(sid));
		return el ? Array.from(el.querySelectorAll('.item'), (i) => i.getAttribute('data-value'))
			: null;
	}
}

class ListValue extends AbstractValue {
	/* As form.js: choices added with value(), drawn as a select. */
	value(key, label) {
		(this.choices = this.choices || []).push([ key, label != null ? label : key ]);
	}

	widget(sid, value) {
		return E('select', { 'id': this.cbid(sid) }, (this.choices || []).map(([ k, l ]) =>
			E('option', { 'value': k, 'selected': k == value ? true : null }, [ l ])));
	}
}

class Button extends AbstractValue {
	widget(sid) {
		return E('div', {}, [
			E('output', { 'for': this.cbid(sid) }, [
				E('button', { 'class': 'cbi-button cbi-button-' + (this.inputstyle || 'button'),
					'click': (ev) => this.onclick(ev, sid) }, [ this.inputtitle || this.title ])
			]),
			E('input', { 'type': 'hidden', 'id': this.cbid(sid) })
		]);
	}

	formvalue() {
		return null;
	}
}

class NamedSection {
	constructor(map, name, type, title, description) {
		Object.assign(this, { map: map, name: name, type: type, title: title || '',
			description: description || '', children: [], tabs: [] });
	}

	tab(name, title, description) {
		this.tabs.push({ name: name, title: title, description: description });
	}

	option(cls, ...args) {
		const o = new cls(this.map, this, ...args);
		this.children.push(o);
		return o;
	}

	taboption(tab, ...args) {
		const o = this.option(...args);
		o.tab = tab;
		return o;
	}

	formvalue(sid, option) {
		const o = this.children.find((c) => c.option == option);
		return o ? o.formvalue(sid) : null;
	}

	render() {
		const opts = (tab) => this.children.filter((c) => c.tab == tab).map((c) => c.render(this.name));

		return E('div', { 'class': 'cbi-section', 'id': 'cbi-' + this.map.config + '-' + this.name }, [
			E('h3', [ this.title ]),
			E('div', { 'class': 'cbi-section-descr' }, [ this.description ]),
			...(this.tabs.length ? this.tabs.map((t) =>
				E('fieldset', { 'data-tab': t.name }, [
					E('legend', [ t.title ]),
					E('div', { 'class': 'cbi-tab-descr' }, [ t.description || '' ]),
					...opts(t.name)
				])) : opts(undefined))
		]);
	}
}

class FormMap {
	constructor(config, title, description) {
		Object.assign(this, { config: config, title: title || '', description: description || '',
			children: [] });
		window.standIn.maps.push(this);
	}

	section(cls, ...args) {
		const s = new cls(this, ...args);
		this.children.push(s);
		return s;
	}

	/*
	 * As form.js's Map.save(): every field checked, the first refusal
	 * rejects with LuCI's message; else the values are staged.
	 */
	save() {
		for (const s of this.children)
			for (const o of s.children) {
				if (o instanceof Button || o.check(s.name))
					continue;
				return Promise.reject(new TypeError('Option "%s" contains an invalid input value.'
					.format(o.title || o.option)));
			}
		for (const s of this.children)
			for (const o of s.children) {
				const v = o.formvalue(s.name);
				if (o instanceof Button)
					continue;
				if (v == null || v === '' || (Array.isArray(v) && !v.length))
					o.remove(s.name);
				else if (!same(o.cfgvalue(s.name), v))
					o.write(s.name, v);
			}
		window.standIn.saved++;
		return Promise.resolve();
	}

	/* [ option, section ] as in LuCI, or null */
	lookupOption(name, sid) {
		for (const s of this.children)
			for (const o of s.children)
				if (o.option == name && (sid == null || s.name == sid))
					return [ o, s.name ];
		return null;
	}

	/* As form.js's section load(): each option's value, from its load(). */
	load() {
		return Promise.all(this.children.map((s) => Promise.all(s.children.map((o) =>
			Promise.resolve(o.load(s.name)).then((v) => o.cfgvalue(s.name, v))))));
	}

	render() {
		return uci.load(this.config).then(() => this.load()).then(() => {
			const el = E('div', { 'class': 'cbi-map', 'id': 'cbi-' + this.config }, [
				E('h2', [ this.title ]),
				E('div', { 'class': 'cbi-map-descr' }, [ this.description ]),
				...this.children.map((s) => s.render())
			]);

			/* Validation needs the other fields, so it runs once all are drawn. */
			window.setTimeout(() => this.children.forEach((s) =>
				s.children.forEach((o) => o.check(s.name))), 0);
			return el;
		});
	}
}

/* form.js's isEqual() for the values a form holds: strings, and lists of them. */
function same(a, b) {
	if (Array.isArray(a) || Array.isArray(b))
		return Array.isArray(a) && Array.isArray(b) && a.length == b.length &&
			a.every((v, i) => same(v, b[i]));
	return a == null ? b == null : b != null && typeof(a) == typeof(b) && a == b;
}

window.standIn.maps = [];
window.standIn.save = () => Promise.all(window.standIn.maps.map((m) => m.save()));

const form = {
	Map: FormMap,
	NamedSection: NamedSection,
	Value: AbstractValue,
	Flag: Flag,
	DynamicList: DynamicList,
	ListValue: ListValue,
	Button: Button
};

const modules = { view: view, form: form, rpc: rpc, poll: poll, uci: uci, ui: ui };

/* ---- L ---------------------------------------------------------------------- */

window.L = {
	bind: (fn, self, ...args) => fn.bind(self, ...args),
	isObject: (v) => v != null && typeof(v) == 'object' && !Array.isArray(v),
	toArray: (v) => v == null ? [] : Array.isArray(v) ? v : String(v).split(/\s+/),
	resolveDefault: (p, def) => Promise.resolve(p).catch(() => def),

	require(name) {
		if (!modules[name])
			return Promise.reject(new Error('the stand-in has no module ' + name));
		return Promise.resolve(modules[name]);
	},

	loadView(url) {
		return new Promise((resolve, reject) => {
			const xhr = new XMLHttpRequest();

			xhr.open('GET', url);
			xhr.onload = () => resolve(xhr.responseText);
			xhr.onerror = () => reject(new Error('cannot load ' + url));
			xhr.send();
		}).then((src) => {
			const names = [], wanted = [];
			const re = /^\s*'require\s+([\w.]+)(?:\s+as\s+(\w+))?';/gm;
			let m;

			while ((m = re.exec(src)) != null) {
				names.push(m[2] || m[1]);
				wanted.push(L.require(m[1]));
			}
			return Promise.all(wanted).then((mods) =>
				new Function(...names, src + '\n//# sourceURL=' + url)(...mods));
		}).then((proto) => {
			const v = Object.create(proto);

			return Promise.resolve(v.load()).then((data) => v.render(data)).then((node) => {
				document.getElementById('maincontent').appendChild(node);
				return v;
			});
		});
	}
};
