#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_deb.sh - the Debian packages (debian/, make deb): built from the tree
# (without the GPU library and the package's own checks, 2 jobs), lintian
# without errors, installed into this machine with apt-get; then, from the
# installed files only: pboxd started with the installed unit's command
# line (ExecStart, its capability bounding set and no-new-privileges via
# setpriv, LimitMEMLOCK) on a veth in a namespace, configured by editing
# the installed /etc/pbox/pboxd.conf as an operator would; the installed
# pboxctl over the default socket; a 4-rank exact allreduce of the
# installed pbox-perf; a 2-rank DDP training step of the installed
# python3-pbox (deb_train.py); a program built with `pkg-config pbox`
# against libpbox-dev. Last, everything is purged and the machine checked:
# no pbox package, none of their files, the same packages, users and
# groups as before. Skips (77) where a pbox package is installed already
# (it would be removed) or the packaging tools are missing.
set -u
. "$(dirname "$0")/lib.sh"
need_root "$0"
PKGS="pboxd pboxctl libpbox0 libpbox-dev python3-pbox"
UNIT=/lib/systemd/system/pboxd.service
CONF=/etc/pbox/pboxd.conf

installed_pbox() { dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' 2>/dev/null | awk '$1 ~ /^.[^n]/ && $2 ~ /pbox/ { print $2 }'; }
if [ -n "$(installed_pbox)" ]; then
	log "SKIP: pbox packages are installed already ($(installed_pbox | paste -sd' ')): the test would remove them"
	exit 77
fi
for t in dpkg-buildpackage dh dh_python3 lintian setpriv prlimit; do
	command -v "$t" > /dev/null || { log "SKIP: $t missing (make deps installs debhelper, dh-python, lintian)"; exit 77; }
done

# what the machine had before: packages, users, groups
pkgs_before=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" { print $2 }' | sort)
passwd_before=$(cut -d: -f1 /etc/passwd | sort); group_before=$(cut -d: -f1 /etc/group | sort)
made_run_pbox=
pkg_files=

# deb_cleanup: purge what was installed (the packages and any dependency
# apt-get added), then fail unless nothing of them is left
deb_cleanup() {
	local bad=0 left new
	if [ -n "$(installed_pbox)" ]; then
		# the files each package owns, to check after the purge
		pkg_files=$(for p in $(installed_pbox); do dpkg -L "$p"; done | sort -u)
		dpkg --purge $(installed_pbox) > "$CLEAN_LOG" 2>&1 || { cat "$CLEAN_LOG" >&2; bad=1; }
	fi
	new=$(comm -13 <(echo "$pkgs_before") <(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" { print $2 }' | sort))
	if [ -n "$new" ]; then
		log "purging the dependencies apt-get added: $new"
		dpkg --purge $new >> "$CLEAN_LOG" 2>&1 || { cat "$CLEAN_LOG" >&2; bad=1; }
	fi
	[ -n "$made_run_pbox" ] && rm -rf /run/pbox
	[ -z "$(installed_pbox)" ] || { log "FAIL: still known to dpkg: $(installed_pbox)"; bad=1; }
	left=$(for f in $pkg_files; do [ -d "$f" ] && continue; [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done)
	[ -z "$left" ] || { log "FAIL: files left after the purge: $left"; bad=1; }
	for d in /etc/pbox /usr/libexec/pbox /usr/lib/python3/dist-packages/pbox /usr/share/doc/pboxd; do
		[ ! -e "$d" ] || { log "FAIL: $d left after the purge: $(find "$d" | head -5)"; bad=1; }
	done
	[ "$(cut -d: -f1 /etc/passwd | sort)" = "$passwd_before" ] || { log "FAIL: users changed"; bad=1; }
	[ "$(cut -d: -f1 /etc/group | sort)" = "$group_before" ] || { log "FAIL: groups changed"; bad=1; }
	return $bad
}
on_exit() {
	local rc=$?
	topo_down
	deb_cleanup || rc=1
	[ $rc = 0 ] && log "purged: no pbox package, file, user or group left"
	rm -f "$CLEAN_LOG"
	exit $rc
}
CLEAN_LOG=$(mktemp /tmp/pbox-deb-clean.XXXXXX)
trap on_exit EXIT
trap 'exit 130' INT TERM

# build (the figure goes to the log: make test's budget)
start=$SECONDS
make -s deb DEB_DIR="$WORKDIR/deb" DEB_GPU=0 DEB_J=2 DEB_OPTS="nocheck noddebs" > "$WORKDIR/make-deb.log" 2>&1 ||
	{ cat "$WORKDIR/make-deb.log"; die "make deb failed"; }
log "make deb (with lintian): $((SECONDS - start)) s"
grep -E '^[EW]: ' "$WORKDIR/make-deb.log" | sed 's/^/lintian: /' >&2
for p in $PKGS; do ls "$WORKDIR/deb/${p}_"*.deb > /dev/null 2>&1 || die "make deb built no package $p"; done

start=$SECONDS
debs=$(for p in $PKGS; do ls "$WORKDIR/deb/${p}_"*.deb; done)
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $debs > "$WORKDIR/apt.log" 2>&1 ||
	{ cat "$WORKDIR/apt.log"; die "apt-get install of the packages failed"; }
log "apt-get install: $((SECONDS - start)) s"
for p in $PKGS; do
	[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p")" = "ii " ] || die "$p is not installed"
done

# what the packages put where
dpkg-query -W -f='${Conffiles}\n' pboxd | grep -q "^ $CONF " || die "$CONF is not a conffile of pboxd"
cmp -s "$CONF" deploy/pboxd.conf || die "the installed $CONF differs from deploy/pboxd.conf"
exec_line=$(sed -n 's/^ExecStart=//p' "$UNIT")
[ "$exec_line" = "/usr/sbin/pboxd -- --config $CONF" ] || die "the unit's ExecStart is '$exec_line'"
systemd-analyze verify "$UNIT" > "$WORKDIR/verify.txt" 2>&1 || die "systemd-analyze verify $UNIT: $(cat "$WORKDIR/verify.txt")"
/usr/libexec/pbox/hugepages.sh --help | grep -q 'usage: hugepages.sh' || die "no hugepages helper"
man -w pboxd > /dev/null && man -w pboxctl > /dev/null && man -w 3 libpbox > /dev/null || die "manual pages missing"
bash -c ". /usr/share/bash-completion/completions/pboxctl
COMP_WORDS=(pboxctl job ''); COMP_CWORD=2; _pboxctl; echo \"\${COMPREPLY[*]}\"" 2>&1 | grep -q "show abort create save" ||
	die "pboxctl's bash completion does not complete"
ldconfig -p | grep -Eq 'libpbox.so.0 .*=> (/usr)?/lib/' || die "libpbox.so.0 is not in the loader's cache"
ls /var/lib/dpkg/info/libpbox0*.symbols > /dev/null 2>&1 || die "libpbox0 has no symbols file"
mkdir -p "$WORKDIR/ext" && cp tests/integration/extprog.c "$WORKDIR/ext/"
( cd "$WORKDIR/ext" && env -u PKG_CONFIG_PATH cc -O2 -o extprog extprog.c $(env -u PKG_CONFIG_PATH pkg-config --cflags --libs pbox) ) ||
	die "a program does not build with the installed pkg-config pbox"
ldd "$WORKDIR/ext/extprog" | grep -Eq 'libpbox.so.0 => (/usr)?/lib/' || die "extprog does not load the installed libpbox.so.0"
echo "installed: conffile, unit, man pages, completion, symbols, pkg-config"

# pboxd as the unit runs it, configured as an operator would: the EAL's
# ports (here the veth) on the eal line, one data port, and pauses in the
# data lcores' polls (a shared machine)
topo_up
trap on_exit EXIT   # topo_up set topo_down alone
sed -i -e "s|^# eal = .*|eal = -l 0-1 --no-huge -m 512 --no-pci --no-shconf --file-prefix=pbox$TAG --vdev=net_af_packet0,iface=$IF_BD --log-level=lib.eal:error|" \
	-e '/^ip = 1:/d' -e 's/^idle-sleep-us = 0$/idle-sleep-us = 20/' "$CONF"
grep -q "^ip = 0:$BOX_IP/24" "$CONF" || die "$CONF has no ip = 0:$BOX_IP/24"
# RuntimeDirectory=pbox: what systemd would make
[ -d /run/pbox ] || { mkdir -m 0755 /run/pbox && made_run_pbox=1; }
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$UNIT" | tr 'A-Z' 'a-z' | sed -e 's/cap_/+/g' -e 's/ /,/g')
grep -q '^NoNewPrivileges=yes' "$UNIT" && grep -q '^LimitMEMLOCK=infinity' "$UNIT" || die "the unit's sandbox changed: update this test"
[ -n "$caps" ] || die "the unit has no CapabilityBoundingSet"
# LimitMEMLOCK=infinity, where this machine lets root raise the limit
# (a container without CAP_SYS_RESOURCE does not: --no-huge needs none)
memlock="prlimit --memlock=unlimited:unlimited"
$memlock true 2> /dev/null || { log "note: cannot raise RLIMIT_MEMLOCK here: pboxd runs with $(ulimit -l) KiB"; memlock=; }
BOX_LOG=$WORKDIR/pboxd.log
ip netns exec "$NS_BOX" $memlock \
	setpriv --no-new-privs --bounding-set "-all,$caps" $exec_line > "$BOX_LOG" 2>&1 &
BOX_PID=$!
for _ in $(seq 200); do
	grep -q 'pboxd: ready' "$BOX_LOG" && break
	kill -0 $BOX_PID 2>/dev/null || { cat "$BOX_LOG"; die "the installed pboxd exited during start-up"; }
	sleep 0.1
done
grep -q 'pboxd: ready' "$BOX_LOG" || { cat "$BOX_LOG"; die "the installed pboxd not ready within 20 s"; }
grep -q '^CapBnd:.*' /proc/$BOX_PID/status && [ "$(awk '/^NoNewPrivs:/ { print $2 }' /proc/$BOX_PID/status)" = 1 ] ||
	die "pboxd does not run with no-new-privileges"
/usr/bin/pboxctl status > "$WORKDIR/status.txt" 2>&1 || { cat "$WORKDIR/status.txt"; die "installed pboxctl status (default socket) failed"; }
grep -q net_af_packet0 "$WORKDIR/status.txt" || die "pboxctl status shows no port: $(cat "$WORKDIR/status.txt")"
echo "pboxd: the unit's command line and capabilities, ready; pboxctl status over /run/pbox/pboxd.sock"

# the installed pbox-perf, 4 ranks, exact sums
BUILD=/usr/bin
PBOX_SOCKET=/run/pbox/pboxd.sock
workers 4 deb "$WORKDIR/perf" --minbytes 4 --maxbytes 1M --stepfactor 16 --iters 2 --warmup 1 --keys 2 --check
wait_workers 120 || { tail -n 5 "$WORKDIR"/perf.*.log; die "installed pbox-perf failed"; }
tail -n 2 "$WORKDIR/perf.0.log"
no_bad_drops

# the installed python package: a DDP step on 2 ranks (torch is only a
# Recommends: skipped with a message without it)
if /usr/bin/python3 -c 'import torch' 2> /dev/null; then
	cp tests/integration/deb_train.py "$WORKDIR/"
	WK_PIDS=()
	for r in 0 1; do
		( cd "$WORKDIR" && exec ip netns exec "$NS_WK" env -u PBOX_LIB -u PYTHONPATH PBOX_CONTROL="$CONTROL" \
			RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29710 \
			timeout -k 5 120 /usr/bin/python3 -I deb_train.py ) > "$WORKDIR/train.$r.log" 2>&1 &
		WK_PIDS+=($!); PIDS+=($!)
	done
	WK_OUT=
	wait_workers 150 || { cat "$WORKDIR"/train.*.log; die "the training step of the installed python3-pbox failed"; }
	cat "$WORKDIR"/train.*.log | grep 'deb train: rank'
	[ "$(grep -c 'deb train: rank [01] ok' "$WORKDIR"/train.*.log | awk -F: '{ s += $2 } END { print s }')" = 2 ] ||
		{ cat "$WORKDIR"/train.*.log; die "not both ranks ok"; }
else
	echo "SKIP the training step: /usr/bin/python3 has no torch (apt-get install python3-torch)"
fi
box_stop || { cat "$BOX_LOG"; die "the installed pboxd exited non-zero on SIGTERM"; }
echo "deb: packages built, installed, served, trained"
