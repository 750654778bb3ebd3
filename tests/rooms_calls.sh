#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rooms_calls.sh - libpbox's rooms by their calls, not only their includes
# (docs/architecture.md "libpbox's rooms"): no object of a room refers to a
# function or variable that only a room above it defines (an extern
# declared by hand would pass tests/layering.sh). Reads the built objects
# with nm.
#
#   bash tests/rooms_calls.sh [BUILD]   (default build; make rooms)
#   bash tests/rooms_calls.sh --selftest
#
# Prints each offending reference as OBJECT: ROOM/ uses SYMBOL of ROOM/ and
# exits 1 if there is any; exits 0 with one summary line otherwise.
set -u
rooms="transport core xfer ops gpu"

check() {   # $1: the directory holding one folder of objects per room
	local objdir=$1 bad=0 nobj=0 nref=0 i=0 r o sym
	declare -A home rank
	for r in $rooms; do
		rank[$r]=$i; i=$((i + 1))
		for o in "$objdir/$r"/*.o; do
			[ -e "$o" ] || continue
			while read -r sym; do home[$sym]=$r; done < <(nm -g --defined-only "$o" | awk 'NF == 3 { print $3 }')
		done
	done
	for r in $rooms; do
		for o in "$objdir/$r"/*.o; do
			[ -e "$o" ] || continue
			nobj=$((nobj + 1))
			while read -r sym; do
				local h=${home[$sym]:-}
				[ -n "$h" ] || continue
				nref=$((nref + 1))
				if [ "${rank[$h]}" -gt "${rank[$r]}" ]; then
					echo "${o#"$objdir"/}: $r/ uses $sym of $h/, a room above it"
					bad=$((bad + 1))
				fi
			done < <(nm -u "$o" | awk '{ print $NF }')
		done
	done
	if [ "$bad" -gt 0 ]; then
		echo "rooms_calls: $bad reference(s) reach up (rooms from the bottom: $rooms)"
		return 1
	fi
	[ "$nobj" -gt 0 ] || { echo "rooms_calls: no objects under $objdir (build first)"; return 2; }
	echo "rooms_calls: $nobj objects, $nref references between rooms, none reaching up"
}

if [ "${1:-}" = --selftest ]; then
	tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp/transport" "$tmp/core"
	echo 'int core_fn(void); int tp_fn(void) { return core_fn(); }' > "$tmp/transport/t.c"
	echo 'int tp_fn(void); int core_fn(void) { return 1; } int core_b(void) { return tp_fn(); }' > "$tmp/core/c.c"
	${CC:-cc} -c "$tmp/transport/t.c" -o "$tmp/transport/t.o" && ${CC:-cc} -c "$tmp/core/c.c" -o "$tmp/core/c.o" || exit 2
	out=$(check "$tmp"); rc=$?
	if [ $rc = 1 ] && grep -q '^transport/t.o: transport/ uses core_fn of core/' <<<"$out" &&
	   ! grep -q 'tp_fn' <<<"$out"; then
		echo "rooms_calls selftest: 1 passed, 0 failed"
		exit 0
	fi
	echo "rooms_calls selftest: FAIL: rc $rc: $out"
	exit 1
fi
check "${1:-build}/obj/client"
