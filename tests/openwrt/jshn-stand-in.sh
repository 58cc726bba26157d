# shellcheck shell=sh disable=SC3043
# A stand-in for libubox's /usr/share/libubox/jshn.sh and its jshn program,
# NOT libubox and no copy of it: Debian packages neither. The rpcd plugin
# sources it in place of jshn.sh off the router (see luci-plugin.sh). It
# has the functions the plugin calls, with the same names and arguments,
# and keeps what is built as jshn.sh does, in exported variables that the
# "jshn" part (here python3) reads: per table T, K_T lists its keys, T_v
# the value, T_T_v the type, N_T_v the original name of a key that is not
# all letters, digits and "_"; U_T is the table above; an array's keys are
# 1, 2, ... These rules of jshn's are kept because a plugin meets them:
#   - json_load writes every character of a key that is not a letter or a
#     digit as "_" (jshn.c's write_key_string): "a.b:1" comes back "a_b_1";
#   - numbers load as int (64 bits) or double, printed as "%lf";
#   - json_dump prints one object, compact but with spaces, as json-c does:
#     { "a": "b", "n": 1 }
#   - json_get_values joins an array's values with single spaces.
# Functions jshn.sh has and the plugin does not call are not here.

_jshn_name() {
	printf '%s' "$1" | tr -c 'a-zA-Z0-9_' '_'
}

_jshn_get() {
	eval "$1=\"\${$2-}\""
}

_jshn_add() {
	# type=$1 name=$2 value=$3
	local cur var n
	cur=$JSON_CUR
	case "$cur" in
	J_A*)
		_jshn_get n "S_$cur"
		n=$((${n:-0} + 1))
		export "S_$cur=$n"
		var=$n
		;;
	*)
		var=$(_jshn_name "$2")
		[ "$var" = "$2" ] || export "N_${cur}_$var=$2"
		;;
	esac
	export "${cur}_$var=$3" "T_${cur}_$var=$1"
	_jshn_get n "K_$cur"
	export "K_$cur=${n:+$n }$var"
	JSON_UNSET="$JSON_UNSET ${cur}_$var"
}

_jshn_table() {
	# name=$1 type=$2 letter=$3
	local table
	JSON_SEQ=$((JSON_SEQ + 1))
	table="J_$3$JSON_SEQ"
	export "U_$table=$JSON_CUR" "K_$table="
	_jshn_add "$2" "$1" "$table"
	JSON_CUR=$table
	JSON_UNSET="$JSON_UNSET $table"
}

json_cleanup() {
	local v
	for v in ${JSON_UNSET:-}; do
		unset "U_$v" "K_$v" "S_$v" "T_$v" "N_$v" "$v"
	done
	unset K_J_V S_J_V
	JSON_UNSET=
}

json_init() {
	json_cleanup
	JSON_SEQ=0
	JSON_CUR=J_V
	export K_J_V=
}

json_add_object() { _jshn_table "$1" object T; }
json_add_array() { _jshn_table "$1" array A; }
json_close_object() { _jshn_get JSON_CUR "U_$JSON_CUR"; }
json_close_array() { json_close_object; }
json_add_string() { _jshn_add string "$1" "$2"; }
json_add_int() { _jshn_add int "$1" "$2"; }
json_add_double() { _jshn_add double "$1" "$2"; }
json_add_boolean() { _jshn_add boolean "$1" "$2"; }
json_add_null() { _jshn_add null "$1" ""; }

json_get_type() {
	_jshn_get "$1" "T_${JSON_CUR}_$(_jshn_name "$2")"
	eval "[ -n \"\${T_${JSON_CUR}_$(_jshn_name "$2")+x}\" ]"
}

json_get_var() {
	local var
	var="${JSON_CUR}_$(_jshn_name "$2")"
	eval "$1=\"\${$var:-\${3-}}\""
	eval "[ -n \"\${$var+x}\${3+x}\" ]"
}

json_get_keys() {
	_jshn_get "$1" "K_$JSON_CUR"
}

json_select() {
	local type
	case "$1" in
	'') JSON_CUR=J_V ;;
	..)
		_jshn_get JSON_CUR "U_$JSON_CUR"
		[ -n "$JSON_CUR" ] || JSON_CUR=J_V
		;;
	*)
		json_get_type type "$1" || return 1
		case "$type" in
		object | array) json_get_var JSON_CUR "$1" ;;
		*) return 1 ;;
		esac
		;;
	esac
}

json_get_values() {
	local keys key value all=
	if [ -n "${2:-}" ]; then
		json_select "$2" || return 1
	fi
	json_get_keys keys
	for key in $keys; do
		json_get_var value "$key"
		all="${all:+$all }$value"
	done
	[ -z "${2:-}" ] || json_select ..
	eval "$1=\"\$all\""
}

# jshn -r: the object as json_init and json_add_* calls, for eval.
json_load() {
	eval "$(python3 -c '
import json, sys

Q = chr(39)

def q(s):
    return Q + s.replace(Q, Q + "\\" + Q + Q) + Q

def key(k):
    return "".join(c if c.isascii() and c.isalnum() else "_" for c in k)

def add(k, v):
    if isinstance(v, dict):
        print("json_add_object %s;" % q(key(k)))
        for k2, v2 in v.items():
            add(k2, v2)
        print("json_close_object;")
    elif isinstance(v, list):
        print("json_add_array %s;" % q(key(k)))
        for i, v2 in enumerate(v):
            add(str(i), v2)
        print("json_close_array;")
    elif isinstance(v, bool):
        print("json_add_boolean %s %d;" % (q(key(k)), v))
    elif isinstance(v, int):
        print("json_add_int %s %d;" % (q(key(k)), v))
    elif isinstance(v, float):
        print("json_add_double %s %f;" % (q(key(k)), v))
    elif v is None:
        print("json_add_null %s;" % q(key(k)))
    else:
        print("json_add_string %s %s;" % (q(key(k)), q(v)))

try:
    o = json.loads(sys.argv[1])
except ValueError:
    o = None
if not isinstance(o, dict):
    sys.exit("Failed to parse message data")
print("json_init;")
for k, v in o.items():
    add(k, v)
' "$1")"
}

# jshn -w: the object built, from the exported variables.
json_dump() {
	python3 -c '
import json, os

env = os.environ

def table(t, array):
    out = [] if array else {}
    for k in env.get("K_" + t, "").split():
        v, ty = env.get(t + "_" + k), env.get("T_" + t + "_" + k)
        if v is None or ty is None:
            continue
        if ty == "object":
            v = table(v, False)
        elif ty == "array":
            v = table(v, True)
        elif ty == "int":
            v = int(v or 0)
        elif ty == "double":
            v = float(v or 0)
        elif ty == "boolean":
            v = bool(int(v or 0))
        elif ty == "null":
            v = None
        if array:
            out.append(v)
        else:
            out[env.get("N_" + t + "_" + k, k)] = v
    return out

o = table("J_V", False)
print("{ }" if not o else "{ " + json.dumps(o, ensure_ascii=False, separators=(", ", ": "))[1:-1] + " }")
'
}
