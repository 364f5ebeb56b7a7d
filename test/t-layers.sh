#!/bin/sh
# t-layers.sh - the library's folders stay layered (lib/README.md): a file
# of lib/STAGE includes headers of its own folder and of the stages before
# it only, in the order base source rules plan stream output verify load;
# cuda/ (the validator's backends) includes only base/; cmd/ only the
# public header; lib/wshard.h nothing of the library.  No source file of
# lib/, cmd/ or cuda/ is over 650 lines, and nothing but wshard.h,
# README.md and vllm/ (the Python plugin over libwshard.so) stands in lib/
# itself.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

STAGES="base source rules plan stream output verify load"

# rank NAME: the position of stage NAME (1 = base), or 0 for no stage.
rank() {
	i=0
	for s in $STAGES; do
		i=$((i + 1))
		[ "$s" = "$1" ] && { echo $i; return; }
	done
	echo 0
}

cd "$ROOT" || exit 1
for f in lib/*; do
	case $f in
	lib/wshard.h | lib/README.md | lib/vllm) ;;
	*) [ -d "$f" ] && [ "$(rank "${f#lib/}")" -gt 0 ] ||
		fail "$f: lib/ holds only stage folders, wshard.h and README.md" ;;
	esac
done

# includes FILE: the folder of each quoted include with one ("base/x.h" -> base).
includes() {
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\)\/[^"]*".*/\1/p' "$1"
}

for d in $STAGES; do
	mine=$(rank "$d")
	for f in lib/"$d"/*.c lib/"$d"/*.h; do
		[ -e "$f" ] || continue
		for inc in $(includes "$f"); do
			r=$(rank "$inc")
			if [ "$r" -eq 0 ]; then
				fail "$f includes from '$inc/', which is no stage of lib/"
			elif [ "$r" -gt "$mine" ]; then
				fail "$f ($d) includes from '$inc/', a later stage"
			elif [ "$r" -eq "$mine" ]; then
				fail "$f includes its own folder as '$inc/': name the header bare"
			fi
		done
	done
done

for f in cuda/*.c cuda/*.h cuda/*.cu; do
	[ -e "$f" ] || continue
	for inc in $(includes "$f"); do
		[ "$inc" = base ] || fail "$f includes from '$inc/': cuda/ uses only base/"
	done
done

for f in cmd/*.c cmd/*.h; do
	[ -z "$(includes "$f")" ] || fail "$f includes a private header: cmd/ uses only wshard.h"
done

[ -z "$(includes lib/wshard.h)" ] || fail "lib/wshard.h includes a private header"

for f in lib/*/*.c lib/*/*.h lib/wshard.h cmd/*.c cmd/*.h cuda/*.c cuda/*.h cuda/*.cu; do
	[ -e "$f" ] || continue
	n=$(wc -l <"$f")
	[ "$n" -le 650 ] || fail "$f has $n lines (at most 650)"
done

echo "   $(ls lib/*/*.c cuda/*.c cuda/*.cu | wc -l) sources in $(echo $STAGES | wc -w) stages and cuda/ checked"
finish
