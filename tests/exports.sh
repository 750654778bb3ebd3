#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# exports.sh - libpbox's surface is one list, kept in four places that must
# agree (docs/architecture.md, "libpbox's ABI"): the functions
# include/pbox.h and include/pbox_cuda.h declare (as the compiler reads
# them: gcc -aux-info), the names client/libpbox.map lists by release,
# what libpbox.so exports (nm -D) and the global symbols libpbox.a defines
# (nm -g). Also: every struct whose fields the headers show has its
# pbox_<struct>_size(), the map's nodes are releases no newer than pbox.h's
# version, and a program that links libpbox.a statically and defines names
# libpbox uses inside (topk_select, wire_encode, errmsg, sum_chosen) links
# and runs with the library's own.
#
#   bash tests/exports.sh [BUILD]      (BUILD: default build; make exports)
#
# Uses $CC (for the static program; the header listing needs gcc), and
# $SANFLAGS and $LIBS (the libraries libpbox needs) from the Makefile.
# Prints each disagreement and exits 1 if there is any; exits 0 with one
# summary line otherwise.
set -u
cd "$(dirname "$0")/.." || exit 2
BUILD=${1:-${BUILD:-build}}
CC=${CC:-cc}
SANFLAGS=${SANFLAGS:-}
LIBS=${LIBS:-$(pkg-config --libs jansson libxdp libbpf 2>/dev/null) -libverbs -lpthread -lm -ldl}
so=$BUILD/libpbox.so a=$BUILD/libpbox.a map=client/libpbox.map
for f in "$so" "$a"; do
	[ -e "$f" ] || { echo "exports: no $f (make $f first)"; exit 2; }
done
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
bad=0
fail() { echo "exports: $*"; bad=$((bad + 1)); }
# differ WHAT_A A WHAT_B B: each name in file A but not B, and back
differ() {
	local n
	for n in $(comm -23 "$2" "$4"); do fail "$n: in $1, not in $3"; done
	for n in $(comm -13 "$2" "$4"); do fail "$n: in $3, not in $1"; done
}

# The headers' functions: gcc lists every prototype it read with its file
# and line; NC marks a declaration, NF a definition (the static inlines,
# which are not exported).
printf '#include "include/pbox.h"\n#include "include/pbox_cuda.h"\n' > "$tmp/h.c"
gcc -I. -aux-info "$tmp/aux" -fsyntax-only "$tmp/h.c" || { echo "exports: gcc cannot read the headers"; exit 2; }
grep -E '^/\* (\./)?include/pbox(_cuda)?\.h:[0-9]+:NC \*/' "$tmp/aux" |
	sed -E 's/^[^*]*\*\/ *//; s/ *\(.*//; s/.*[ *]//' | sort > "$tmp/h"
[ -s "$tmp/h" ] || { echo "exports: no function found in include/pbox*.h"; exit 2; }
for n in $(grep -v '^pbox_' "$tmp/h"); do fail "$n: a function of include/pbox*.h without the pbox_ prefix"; done

# The map: nodes PBOX_MAJOR.MINOR, each "global:" names, "local: *;" in the
# first; anything else (a wildcard export) is an error.
awk '
	/^[[:space:]]*\/\*/, /\*\/[[:space:]]*$/ { next }   # comments
	/^[[:space:]]*$/ { next }
	/^PBOX_[0-9]+\.[0-9]+ \{$/ { node = $1; sect = ""; nodes++; next }
	/^\}( PBOX_[0-9]+\.[0-9]+)?;$/ { if (node == "") bad("} outside a node"); node = ""; next }
	/^[[:space:]]*global:$/ { sect = "global"; next }
	/^[[:space:]]*local:$/ { sect = "local"; next }
	sect == "global" && /^[[:space:]]*pbox_[a-z0-9_]+;$/ { n = $1; sub(/;/, "", n); print n, node; next }
	sect == "local" && /^[[:space:]]*\*;$/ && nodes == 1 { next }
	{ bad("line " NR " is not a name of a node'"'"'s global list: " $0) }
	function bad(m) { print "BAD " m }
' "$map" > "$tmp/mapraw"
while read -r m; do fail "$map: $m"; done < <(sed -n 's/^BAD //p' "$tmp/mapraw")
grep -v '^BAD ' "$tmp/mapraw" > "$tmp/mapnodes"
awk '{ print $1 }' "$tmp/mapnodes" | sort > "$tmp/m"
for n in $(uniq -d "$tmp/m"); do fail "$n: listed twice in $map"; done
sort -u "$tmp/m" -o "$tmp/m"
# nodes in order, none newer than the header's version
ver=$(sed -n 's/^#define PBOX_VERSION_\(MAJOR\|MINOR\) *\([0-9]*\).*/\2/p' include/pbox.h | paste -sd.)
last=0.0
for node in $(awk '{ print $2 }' "$tmp/mapnodes" | uniq); do
	v=${node#PBOX_}
	[ "$(printf '%s\n%s\n' "$last" "$v" | sort -V | tail -1)" = "$v" ] || fail "$map: node $node comes after a newer one"
	[ "$(printf '%s\n%s\n' "$v" "$ver" | sort -V | tail -1)" = "$ver" ] ||
		fail "$map: node $node is newer than include/pbox.h's version $ver"
	last=$v
done
differ "include/pbox*.h" "$tmp/h" "$map" "$tmp/m"

# libpbox.so: the map's names and nothing else, each in its node (T: a
# function, A: the nodes themselves).
nm -D --defined-only "$so" > "$tmp/dyn" || exit 2
awk '$2 != "A" { print $3 }' "$tmp/dyn" | sed 's/@.*//' | sort > "$tmp/d"
differ "$map" "$tmp/m" "$so's exports (nm -D; a declaration without PBOX_API is not exported)" "$tmp/d"
while read -r n node; do
	grep -qE " T $n@@$node\$" "$tmp/dyn" && continue
	got=$(awk -v n="$n" '{ split($3, p, "@") } p[1] == n { print $2, $3 }' "$tmp/dyn")
	[ -n "$got" ] && fail "$n: exported by $so as $got, not as a function of $node"
done < "$tmp/mapnodes"

# libpbox.a: the same names are its only global symbols.
nm -g --defined-only "$a" | awk 'NF == 3 { print $3 }' | sort > "$tmp/a"
differ "$map" "$tmp/m" "$a's global symbols (nm -g --defined-only)" "$tmp/a"

# Every struct whose fields the headers show has its size for bindings.
for s in $(cat include/pbox.h include/pbox_cuda.h | sed -n 's/^typedef struct \(pbox_[a-z0-9_]*\) {.*/\1/p'); do
	grep -qx "${s}_size" "$tmp/h" || fail "struct $s has no ${s}_size() in the headers"
done

# A program that links libpbox.a and has functions of the names libpbox
# uses inside: it links, and the library still calls its own (pbox_topk
# calls topk_select).
cat > "$tmp/prog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include "include/pbox.h"

void topk_select(void) { fputs("libpbox called the program's topk_select\n", stderr); abort(); }
void sum_chosen(void) { fputs("libpbox called the program's sum_chosen\n", stderr); abort(); }
int wire_encode(void) { return 7; }
const char *errmsg = "the program's";

int main(void)
{
	float x[8] = { 1, -8, 2, 7, 0, 3, -6, 5 }, val[PBOX_TOPK_MAX(2)];
	uint32_t idx[PBOX_TOPK_MAX(2)];
	size_t m;
	int rc = pbox_topk(x, 8, 2, idx, val, &m);

	if (rc != 0 || m < 1 || m > 3 || idx[0] != 1 || wire_encode() != 7) {
		printf("pbox_topk: %s, m %zu, idx[0] %u\n", pbox_err_name(rc), m, idx[0]);
		return 1;
	}
	printf("%s %s %s\n", pbox_version_string(), pbox_err_name(PBOX_EINVAL), errmsg);
	return 0;
}
EOF
if ! $CC -std=gnu11 $SANFLAGS -I. -o "$tmp/prog" "$tmp/prog.c" "$a" $LIBS > "$tmp/ld.log" 2>&1; then
	fail "a program defining topk_select, sum_chosen, wire_encode and errmsg does not link with $a:"
	sed 's/^/    /' "$tmp/ld.log" | head -20
elif ! out=$("$tmp/prog" 2>&1) || [ "${out#* PBOX_EINVAL the program\'s}" = "$out" ]; then
	fail "that program, linked with $a, fails: $out"
fi

if [ $bad -gt 0 ]; then
	echo "exports: $bad disagreement(s) between include/pbox*.h, $map, $so and $a"
	exit 1
fi
echo "exports: $(wc -l < "$tmp/m") functions in include/pbox*.h, $map ($(awk '{ print $2 }' "$tmp/mapnodes" | uniq | paste -sd' ')), $so and $a alike; a static program keeps its own names"
