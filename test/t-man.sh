#!/bin/sh
# t-man.sh - each man page agrees with its command's --help (after git's
# t/t0450-txt-doc-vs-help.sh).  For wshard.1 and wshard `wshard --help`,
# and for man/wshard-CMD.1 and `wshard CMD --help`:
#   - --help exits 0, prints on stdout and nothing on stderr;
#   - every usage line of --help ("usage: X", and "or: X" lines after it)
#     appears as X in the page's SYNOPSIS, once both are normalised (below);
#   - every long option --help prints (--[a-z-]+) appears in the page;
#   - every long option the page's OPTIONS section lists as an item (the
#     line after .TP) is printed by --help, so the page lists no stale one;
#   - the page renders without groff warnings (when groff is installed).
# Also: every command `wshard --help` lists has a man page; no page holds a
# control character but tabs; wshard-rules.5
# and wshard-families.7 exist and render without warnings; and every
# environment variable the sources read (getenv("NAME"), or a "WSHARD_*"
# string constant) is named in wshard.1's ENVIRONMENT section, except the
# WSHARD_BENCH_* ones, which only scripts/bench sets: they are named there
# instead, as they are no concern of a user.
#
# Normalisation of a page (roff source): font escapes (\fB \fI \fR \fP,
# \f(XX, \f[...]) are removed; \- becomes -, \(aq ', \(dq ", "\ " a space,
# \e a backslash, \& nothing.  In SYNOPSIS, request lines (starting with .)
# are dropped, except .B and .I whose argument text is kept without quotes:
# write each synopsis form as one text line with inline font escapes inside
# .nf/.fi.  The SYNOPSIS lines are then joined with spaces and runs of
# blanks collapsed to one space; so are the usage lines of --help.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

MAN=$ROOT/man

# unroff: roff source on stdin, normalised text on stdout.
unroff() {
	sed -e 's/\\f[BIRP]//g' -e 's/\\f([A-Za-z][A-Za-z]//g' -e 's/\\f\[[^]]*\]//g' \
	    -e 's/\\-/-/g' -e "s/\\\\(aq/'/g" -e 's/\\(dq/"/g' -e 's/\\ / /g' \
	    -e 's/\\&//g' -e 's/\\e/\\/g'
}

# squeeze: joins stdin's lines with spaces, one space between words.
squeeze() {
	tr '\n\t' '  ' | tr -s ' ' | sed -e 's/^ //' -e 's/ $//'
}

# synopsis PAGE: the normalised SYNOPSIS section of PAGE.
synopsis() {
	awk '/^\.SH/ { on = ($0 ~ /^\.SH +"?SYNOPSIS"?[ \t]*$/); next }
	     on && /^\.[BI][ \t]/ { sub(/^\.[BI][ \t]+/, ""); gsub(/"/, ""); print; next }
	     on && /^\./ { next }
	     on { print }' "$1" | unroff | squeeze
}

# option_items PAGE: the long options of the items of PAGE's OPTIONS section.
option_items() {
	awk '/^\.SH/ { on = ($0 ~ /^\.SH +"?OPTIONS"?[ \t]*$/); next }
	     on && item { print; item = 0; next }
	     on && /^\.TP/ { item = 1 }' "$1" | unroff |
		grep -o -e '--[a-z][a-z-]*' | sort -u
}

# check_page PAGE CMD...: compares PAGE with the --help output of CMD.
check_page() {
	page=$1; shift
	name=$(basename "$page")
	if [ ! -f "$page" ]; then
		fail "$name: no such man page"
		return
	fi
	"$@" --help </dev/null >"$T/help" 2>"$T/help.err"
	rc=$?
	[ "$rc" -eq 0 ] || fail "$name: '$* --help' exited $rc, expected 0"
	[ -s "$T/help.err" ] &&
		fail "$name: '$* --help' wrote on stderr: $(head -c 300 "$T/help.err")"
	if [ ! -s "$T/help" ]; then
		fail "$name: '$* --help' printed nothing on stdout"
		return
	fi

	syn=$(synopsis "$page")
	[ -n "$syn" ] || fail "$name: no SYNOPSIS section"
	# usage lines: "usage: X" and the "or: X" lines right after it
	awk '/^usage: / { on = 1; sub(/^usage: /, ""); print; next }
	     on && /^[ \t]+or: / { sub(/^[ \t]+or: /, ""); print; next }
	     { on = 0 }' "$T/help" >"$T/usage"
	[ -s "$T/usage" ] || fail "$name: '$* --help' prints no 'usage: ' line"
	while IFS= read -r line; do
		u=$(printf '%s\n' "$line" | squeeze)
		case " $syn " in
		*" $u "*) ;;
		*) fail "$name: SYNOPSIS does not show the usage line of '$* --help'"
		   echo "    usage:    $u"
		   echo "    SYNOPSIS: $syn" ;;
		esac
	done <"$T/usage"

	unroff <"$page" >"$T/page"
	grep -o -e '--[a-z][a-z-]*' "$T/help" | sort -u >"$T/help.opts"
	while read -r opt; do
		grep -E -q -e "(^|[^a-z-])$opt([^a-z-]|\$)" "$T/page" ||
			fail "$name: does not mention $opt, which '$* --help' prints"
	done <"$T/help.opts"
	option_items "$page" >"$T/page.opts"
	while read -r opt; do
		grep -E -q -e "(^|[^a-z-])$opt([^a-z-]|\$)" "$T/help" ||
			fail "$name: OPTIONS lists $opt, which '$* --help' does not print"
	done <"$T/page.opts"

	if command -v groff >/dev/null 2>&1; then
		groff -man -Tutf8 -ww -z "$page" >"$T/groff" 2>&1
		[ -s "$T/groff" ] &&
			fail "$name: groff warns: $(head -c 300 "$T/groff")"
	fi
}

check_page "$MAN/wshard.1" "$WSHARD"

# The commands `wshard --help` lists: the indented lines after "commands:".
"$WSHARD" --help 2>/dev/null |
	awk '/^commands:/ { on = 1; next }
	     on && /^[ \t]+[a-z]/ { print $1; next }
	     on && /^[ \t]*$/ { exit }' >"$T/commands"
[ -s "$T/commands" ] || fail "'$WSHARD --help' lists no commands"
while read -r cmd; do
	check_page "$MAN/wshard-$cmd.1" "$WSHARD" "$cmd"
done <"$T/commands"

# wshard-rules.5 (the rules-file format) and wshard-families.7 (each
# built-in family's layout) have no command to compare with.
for page in wshard-rules.5 wshard-families.7; do
	if [ ! -f "$MAN/$page" ]; then
		fail "$page: no such man page"
	elif command -v groff >/dev/null 2>&1; then
		groff -man -Tutf8 -ww -z "$MAN/$page" >"$T/groff" 2>&1
		[ -s "$T/groff" ] && fail "$page: groff warns: $(head -c 300 "$T/groff")"
	fi
done

# The environment variables the sources read, against wshard.1's ENVIRONMENT
# (WSHARD_BENCH_*: against scripts/bench).
awk '/^\.SH/ { on = ($0 ~ /^\.SH +"?ENVIRONMENT"?[ \t]*$/); next } on' \
	"$MAN/wshard.1" | unroff >"$T/env"
[ -s "$T/env" ] || fail "wshard.1: no ENVIRONMENT section"
find "$ROOT/lib" "$ROOT/cmd" "$ROOT/cuda" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) \
	-exec grep -hoE 'getenv\("[A-Za-z_][A-Za-z0-9_]*"\)|"WSHARD_[A-Z0-9_]+"' {} + 2>/dev/null |
	sed -e 's/^getenv("//' -e 's/")$//' -e 's/"//g' | sort -u >"$T/vars"
[ -s "$T/vars" ] || fail "found no getenv() in the sources under $ROOT"
while read -r var; do
	case $var in
	WSHARD_BENCH_*)
		grep -q -e "$var" "$ROOT/scripts/bench" ||
			fail "scripts/bench does not name $var, which the sources read"
		continue ;;
	esac
	grep -E -q -e "(^|[^A-Za-z0-9_])$var([^A-Za-z0-9_]|\$)" "$T/env" ||
		fail "wshard.1: ENVIRONMENT does not name $var, which the sources read"
done <"$T/vars"

# No control characters but tabs (a "\f" a script wrote unescaped becomes
# a form feed, which groff passes over without a warning)
for f in "$MAN"/*.[157]; do
	tr -d '\n\t' <"$f" | LC_ALL=C grep -q '[[:cntrl:]]' &&
		fail "$(basename "$f"): holds a control character"
done

finish
