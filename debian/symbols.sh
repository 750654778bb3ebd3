#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# debian/symbols.sh - libpbox0's symbols file (dpkg-gensymbols(1)) from
# libpbox's version script, client/libpbox.map: each function under the
# node that names it, each node a symbol of its own, and as the lowest
# version a program using it needs, the release the node names (PBOX_0.11:
# 0.11). Run from the tree's root.
#   debian/symbols.sh          print the symbols file
#   debian/symbols.sh --write  write debian/libpbox0.symbols
#   debian/symbols.sh --check  fail unless debian/libpbox0.symbols is what
#                              the map gives (make deb and debian/rules run it;
#                              dpkg-gensymbols -c4 then holds the built
#                              library to the file)
set -eu
MAP=client/libpbox.map
FILE=debian/libpbox0.symbols
soname=libpbox.so.$(sed -n 's/^#define PBOX_VERSION_MAJOR *\([0-9]*\).*/\1/p' include/pbox.h)

gen() {
	echo "$soname libpbox0 #MINVER#"
	echo "* Build-Depends-Package: libpbox-dev"
	# strip comments, then walk the nodes: "NAME {" opens one, "pbox_x;" is
	# a function in it
	sed -e 's|/\*.*\*/||g' -e '/\/\*/,/\*\//d' "$MAP" | awk '
		/^[A-Z][A-Z0-9_.]* *\{/ { node = $1; ver = node; sub(/^[A-Z_]*_/, "", ver)
			printf " %s@%s %s\n", node, node, ver; next }
		/^[ \t]*pbox_[a-z0-9_]* *;/ { s = $1; sub(/;$/, "", s)
			if (node == "") { print "symbols.sh: " s " outside a node" > "/dev/stderr"; exit 1 }
			printf " %s@%s %s\n", s, node, ver }'
}

case ${1:-} in
"") gen ;;
--write) gen > "$FILE.tmp" && mv "$FILE.tmp" "$FILE" ;;
--check)
	gen > "$FILE.want"
	if ! cmp -s "$FILE.want" "$FILE"; then
		diff -u "$FILE" "$FILE.want" >&2 || true
		rm -f "$FILE.want"
		echo "debian/symbols.sh: $FILE is not what $MAP gives: run debian/symbols.sh --write" >&2
		exit 1
	fi
	rm -f "$FILE.want"
	echo "debian/symbols.sh: $FILE matches $MAP" ;;
*) echo "usage: debian/symbols.sh [--write|--check]" >&2; exit 2 ;;
esac
