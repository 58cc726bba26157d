#!/usr/bin/env python3
"""A stand-in for ubox's /sbin/validate_data, not validate_data.

    validate-data-stand-in.py PACKAGE TYPE SECTION 'option:datatype:default'...
    validate-data-stand-in.py DATATYPE VALUE

reads the UCI file named by $KP_UCI_FILE as PACKAGE and, for the named
SECTION, prints what validate_data prints for procd.sh's
uci_validate_section() to eval (one "name=value; " or "unset -v name; " per
option) and exits 0 when every option validates, 255 when one does not.
With an empty SECTION it prints the json_add_* commands that
procd_add_validation sends to procd instead. With two arguments it judges
VALUE alone, as cli.c's main() does for "argc == 3": exit 0 when it
validates, 1 when not, a line on standard error either way.

Modelled on ubox.git validate/cli.c (validate_value, export_value,
escape_value, bool_to_num) and validate/validate.c (the datatypes this
project's init script uses: bool, port, uinteger, ufloat, string, ipaddr,
ip4addr, ip6addr, cidr, range(min,max), list(...) and regex('...')). Values are judged as a person types
them; C library corner cases (a sign before a port, say) are not modelled.
A datatype not modelled here is an error, so a new one in the init script
cannot pass unchecked.
"""

import ipaddress
import os
import re
import shlex
import socket
import sys

DT_INVALID, DT_BOOL, DT_NUMBER, DT_STRING = range(4)
TRUE_WORDS = ("1", "on", "true", "yes", "enabled")
FALSE_WORDS = ("0", "off", "false", "no", "disabled")
FLOAT = re.compile(r"[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?)$")


def c_strtoul_base0(text):
    """strtoul(text, &e, 0) over the whole string, or None."""
    m = re.fullmatch(r"0[xX]([0-9a-fA-F]+)|0([0-7]*)|([1-9]\d*)", text)
    if not m:
        return None
    if m.group(1) is not None:
        return int(m.group(1), 16)
    if m.group(2) is not None:
        return int(m.group(2) or "0", 8)
    return int(m.group(3))


def is_cidr(value, family, bits, maxlen):
    if len(value) >= maxlen:
        return False
    addr, slash, prefix = value.partition("/")
    if slash and (not re.fullmatch(r"\d*", prefix) or int(prefix or "0") > bits):
        return False
    try:
        (ipaddress.IPv4Address if family == 4 else ipaddress.IPv6Address)(addr)
    except ValueError:
        return False
    return True


def inet_pton(family, value):
    """validate.c's dt_type_ip4addr/ip6addr: inet_pton() itself, which
    Python's socket module calls (ipaddress would take "fe80::1%eth0")."""
    try:
        socket.inet_pton(family, value)
    except (OSError, ValueError):
        return False
    return True


def is_ipaddr(value):
    return inet_pton(socket.AF_INET, value) or inet_pton(socket.AF_INET6, value)


def parse_expr(expr):
    """'list(cidr)' -> ('list', ['cidr']); 'range(0,3)' -> ('range', ['0', '3'])."""
    m = re.fullmatch(r"([a-z0-9]+)(?:\((.*)\))?", expr)
    if not m:
        raise SystemExit(f"validate_data stand-in: cannot read datatype {expr!r}")
    args = []
    depth, cur = 0, ""
    for ch in m.group(2) or "":
        if ch == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    if cur.strip():
        args.append(cur.strip())
    return m.group(1), args


def dt_parse(expr, value):
    """The datatype's value type when VALUE validates, else DT_INVALID."""
    if not value:
        return DT_INVALID
    name, args = parse_expr(expr)
    if name == "list":
        inner = DT_INVALID
        for word in re.split(r"[ \t]+", value.strip(" \t")):
            inner = dt_parse(args[0], word)
            if inner == DT_INVALID:
                return DT_INVALID
        return inner
    if name == "bool":
        return DT_BOOL if value.lower() in TRUE_WORDS + FALSE_WORDS else DT_INVALID
    if name == "string":
        return DT_STRING
    if name == "port":
        ok = re.fullmatch(r"\d+", value) and int(value) <= 65535
        return DT_NUMBER if ok else DT_INVALID
    if name == "uinteger":
        ok = value[0] in "0123456789abcdefABCDEF" and c_strtoul_base0(value) is not None
        return DT_NUMBER if ok else DT_INVALID
    if name == "ufloat":
        # validate.c: "n = strtod(s->value, &e); return (e > s->value &&
        # *e == 0 && n >= 0.0);" with n an int, so -0.5 passes as 0.
        ok = FLOAT.fullmatch(value) and int(float(value)) >= 0
        return DT_NUMBER if ok else DT_INVALID
    if name == "range":
        n = c_strtoul_base0(value)
        ok = n is not None and int(args[0]) <= n <= int(args[1])
        return DT_NUMBER if ok else DT_INVALID
    if name == "regex":
        # validate.c, dt_type_regex(): the quoted argument, as written,
        # between "^" and "$", compiled with REG_EXTENDED | REG_NOSUB; a
        # value of type string. Python's re reads the ERE subset allowed
        # here the same way; anything beyond it is refused as unmodelled.
        if len(args) != 1 or len(args[0]) < 2 or args[0][0] not in "'\"" \
                or args[0][-1] != args[0][0]:
            return DT_INVALID
        pattern = args[0][1:-1]
        if not re.fullmatch(r"[][0-9A-Za-z+?*.-]*", pattern):
            raise SystemExit(f"validate_data stand-in: regex {pattern!r} is not modelled here")
        return DT_STRING if re.fullmatch(pattern, value) else DT_INVALID
    if name == "ipaddr":
        return DT_STRING if is_ipaddr(value) else DT_INVALID
    if name in ("ip4addr", "ip6addr"):
        family = socket.AF_INET if name == "ip4addr" else socket.AF_INET6
        return DT_STRING if inet_pton(family, value) else DT_INVALID
    if name == "cidr":
        ok = is_cidr(value, 4, 32, 19) or is_cidr(value, 6, 128, 50)
        return DT_STRING if ok else DT_INVALID
    raise SystemExit(f"validate_data stand-in: datatype {name!r} is not modelled here")


def escape(vtype, value):
    if vtype == DT_BOOL:
        low = value.lower()
        return "1" if low in TRUE_WORDS else "0" if low in FALSE_WORDS else ""
    if vtype == DT_STRING:
        return "'" + value.replace("'", "'\"'\"'") + "'"
    return value


def export(vtype, name, value):
    if vtype == DT_INVALID or not value:
        return f"unset -v {name}; "
    return f"{name}={escape(vtype, value)}; "


def parse_tuple(text):
    """'option:expr:default', with backslash escapes, as cli.c's parse_tuple."""
    parts, cur, esc = [], "", False
    for ch in text:
        if not esc and ch == "\\":
            esc = True
            continue
        if not esc and ch == ":" and len(parts) < 2:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
        esc = False
    parts.append(cur)
    if len(parts) < 2:
        return None
    return parts[0], parts[1], parts[2] if len(parts) > 2 else None


def load_section(path, section):
    """The options of a named section: name -> str, or list of str."""
    found, opts = False, {}
    with open(path) as f:
        for line in f:
            try:
                words = shlex.split(line, comments=True)
            except ValueError:
                continue
            if not words:
                continue
            if words[0] == "config":
                found = len(words) > 2 and words[2] == section
            elif found and words[0] == "option" and len(words) > 2:
                opts[words[1]] = words[2]
            elif found and words[0] == "list" and len(words) > 2:
                opts.setdefault(words[1], [])
                if isinstance(opts[words[1]], list):
                    opts[words[1]].append(words[2])
    return opts


def validate_value(out, err, package, section, name, value, expr, default):
    empty, vtype = True, DT_INVALID
    if isinstance(value, list):
        for i, item in enumerate(value):
            if not item:
                continue
            out.append(f"{name}=" if empty else "\\ ")
            empty = False
            vtype = dt_parse(expr, item)
            if vtype != DT_INVALID:
                out.append(escape(vtype, item))
            err.append(f"{package}.{section}.{name}[{i}]={item} validates as {expr} "
                       f"with {'true' if vtype else 'false'}")
        if not empty:
            out.append("; ")
    elif value:
        empty = False
        vtype = dt_parse(expr, value)
        out.append(export(vtype, name, value))
        err.append(f"{package}.{section}.{name}={value} validates as {expr} "
                   f"with {'true' if vtype else 'false'}")
    if empty:
        vtype = dt_parse(expr, default or "")
        if vtype == DT_INVALID:
            vtype = DT_STRING
        out.append(export(vtype, name, default or ""))
        err.append(f"{package}.{section}.{name} is unset and defaults to {expr} {default}")
    return vtype != DT_INVALID


def main(argv):
    if len(argv) == 3:
        # cli.c: rv = dt_parse(argv[1], argv[2]); fprintf(stderr, "%s - %s = %s\n",
        # argv[1], argv[2], rv ? "true" : "false"); return rv ? 0 : 1;
        ok = dt_parse(argv[1], argv[2]) != DT_INVALID
        sys.stderr.write("%s - %s = %s\n" % (argv[1], argv[2], "true" if ok else "false"))
        return 0 if ok else 1
    if len(argv) < 5:
        sys.stderr.write("usage: validate-data-stand-in.py PACKAGE TYPE SECTION 'opt:type:def'...\n")
        return 255
    package, stype, section, tuples = argv[1], argv[2], argv[3], argv[4:]
    if section == "":
        out = ['json_add_object; ', f'json_add_string "package" "{package}"; ',
               f'json_add_string "type" "{stype}"; ', 'json_add_object "data"; ']
        for t in tuples:
            parsed = parse_tuple(t)
            if parsed:
                parse_expr(parsed[1])
                out.append(f'json_add_string "{parsed[0]}" "{parsed[1]}"; ')
        out += ["json_close_object; ", "json_close_object; "]
        sys.stdout.write("".join(out))
        return 0
    opts = load_section(os.environ["KP_UCI_FILE"], section)
    out, err, ok = [], [], True
    for t in tuples:
        parsed = parse_tuple(t)
        if not parsed:
            err.append(f"{t} is not a valid option")
            ok = False
            continue
        name, expr, default = parsed
        if not validate_value(out, err, package, section, name, opts.get(name), expr, default):
            ok = False
    sys.stdout.write("".join(out))
    sys.stderr.write("".join(line + "\n" for line in err))
    return 0 if ok else 255


if __name__ == "__main__":
    sys.exit(main(sys.argv))
