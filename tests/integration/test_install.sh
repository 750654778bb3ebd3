#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_install.sh - `make install PREFIX=...` gives a usable pbox: a program
# outside the project, compiled with `pkg-config --cflags --libs pbox`
# against the installed copy, allreduces with 4 ranks through pboxd on a veth
# in a namespace and gets exact sums; the installed libraries define the
# same public functions and no other global symbol.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
PREFIX=$WORKDIR/prefix
make -s install PREFIX="$PREFIX" BUILD="$BUILD" > "$WORKDIR/install.log" 2>&1 || { cat "$WORKDIR/install.log"; die "make install failed"; }
for f in bin/pboxd bin/pboxctl bin/pbox-perf include/pbox.h include/pbox_cuda.h lib/libpbox.a lib/libpbox.so lib/pkgconfig/pbox.pc \
	 share/man/man8/pboxd.8 share/man/man8/pboxctl.8 share/man/man3/libpbox.3 \
	 share/bash-completion/completions/pboxctl; do
	[ -e "$PREFIX/$f" ] || die "make install did not install $f"
done
# the installed static library defines only the API globally (tests/exports.sh
# checks the build's against the headers and the map)
other=$(nm -g --defined-only "$PREFIX/lib/libpbox.a" | awk 'NF == 3 && $3 !~ /^pbox_/ { print $3 }' | head -5)
[ -z "$other" ] || die "installed libpbox.a defines internal symbols globally: $other ..."
cmp -s <(nm -g --defined-only "$PREFIX/lib/libpbox.a" | awk 'NF == 3 { print $3 }' | sort) \
	<(nm -D --defined-only "$PREFIX/lib/libpbox.so" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' | sort) ||
	die "installed libpbox.a and libpbox.so define different functions"
if command -v man > /dev/null; then
	man -l --warnings "$PREFIX/share/man/man8/pboxctl.8" 2>&1 > /dev/null | grep . && die "pboxctl.8 has troff warnings"
fi
# every manual page's .TH names the version of the installed pbox.h (MAJOR.MINOR)
ver=$(sed -n 's/^#define PBOX_VERSION_MAJOR *\([0-9]*\).*/\1/p' "$PREFIX/include/pbox.h").$(sed -n 's/^#define PBOX_VERSION_MINOR *\([0-9]*\).*/\1/p' "$PREFIX/include/pbox.h")
for m in man8/pboxd.8 man8/pboxctl.8 man3/libpbox.3; do
	th=$(grep '^\.TH' "$PREFIX/share/man/$m")
	case $th in *"\"pbox $ver\""*) ;; *) die "$m: .TH says '$th', not \"pbox $ver\" (include/pbox.h)";; esac
done
# the completion offers the commands, and job's subcommands
bash -c ". '$PREFIX/share/bash-completion/completions/pboxctl'
COMP_WORDS=(pboxctl job ''); COMP_CWORD=2; _pboxctl; echo \"\${COMPREPLY[*]}\"" > "$WORKDIR/compl.txt" 2>&1
grep -q "show abort create save" "$WORKDIR/compl.txt" || die "bash completion: $(cat "$WORKDIR/compl.txt")"
ls "$PREFIX"/lib/python3.*/dist-packages/pbox/__init__.py >/dev/null 2>&1 || die "make install did not install the python package"
# the installed python package finds the installed library, and its
# load-time check (version, struct sizes) accepts it
PYTHONPATH=$(echo "$PREFIX"/lib/python3.*/dist-packages) /usr/bin/python3 -c 'import pbox; print("python package: pbox", pbox.__version__, pbox.__file__, "on libpbox", pbox.library_version(), pbox.library_path())' \
	|| die "installed python package does not import or does not accept the installed libpbox"
mkdir -p "$WORKDIR/ext" && cp "$(dirname "$0")/extprog.c" "$WORKDIR/ext/"
export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
( cd "$WORKDIR/ext" && cc -O2 -o extprog extprog.c $(pkg-config --cflags --libs pbox) ) || die "external program does not build with pkg-config pbox"
topo_up
box_start af_packet
WK_PIDS=()
for r in 0 1 2 3; do
	ip netns exec "$NS_WK" env LD_LIBRARY_PATH="$PREFIX/lib" "$WORKDIR/ext/extprog" "$CONTROL" ext $r 4 > "$WORKDIR/ext.$r.log" 2>&1 &
	WK_PIDS+=($!); PIDS+=($!)
done
wait_workers 60 || { cat "$WORKDIR"/ext.*.log; die "external program failed"; }
cat "$WORKDIR"/ext.*.log
LD_LIBRARY_PATH="$PREFIX/lib" ldd "$WORKDIR/ext/extprog" | grep -q "$PREFIX/lib/libpbox.so" || die "extprog is not linked to the installed libpbox.so"
box_stop || die "pboxd exited non-zero"
echo "install: external program exact"
