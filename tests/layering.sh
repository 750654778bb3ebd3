#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# layering.sh - check the floors of the tree (docs/architecture.md): every
# #include "..." in a product folder names a header of a floor that folder
# may use (C and CUDA sources alike), DPDK headers appear only in nic/
# and dataplane/, and inside client/ every file lives in a room and
# includes only its room's headers and those of the rooms below it
# (transport < core < xfer < ops < gpu: libpbox's rooms).
#
#   bash tests/layering.sh [ROOT]      (ROOT: the tree to check, default .)
#
# Prints each offending line as FILE:LINE: FOLDER may not include HEADER,
# and exits 1 if there is any; exits 0 with one summary line otherwise.
set -u
root=${1:-.}
cd "$root" || exit 2

# What each floor may include, by folder prefix of the header's path.
# control/ reaches the data plane through dataplane/dp.h only.
allowed() {
	case $1 in
	common)    echo "common/" ;;
	nic)       echo "nic/ common/" ;;
	dataplane) echo "dataplane/ nic/ common/" ;;
	control)   echo "control/ dataplane/dp.h common/" ;;
	client)    echo "client/ common/ include/" ;;
	gpu)       echo "gpu/ common/ include/" ;;
	tools)     echo "tools/ common/ include/" ;;
	# the public headers are installed side by side: one names another
	# by its bare name (pbox_cuda.h includes "pbox.h"), nothing else
	include)   echo "pbox.h" ;;
	esac
}
# libpbox's rooms, lowest first: a room may include its own headers and
# those of the rooms before it.
client_rooms="transport core xfer ops gpu"
room_rank() {
	local i=0 r
	for r in $client_rooms; do
		[ "$r" = "$1" ] && { echo $i; return; }
		i=$((i + 1))
	done
	echo -1
}

# Floors whose files may include DPDK's <rte_*.h>.
dpdk_ok="nic dataplane"

bad=0 files=0
for floor in common nic dataplane control client gpu tools include; do
	[ -d "$floor" ] || continue
	ok=$(allowed "$floor")
	while IFS= read -r f; do
		files=$((files + 1))
		room="" rank=-1
		if [ "$floor" = client ]; then
			room=${f#client/}; room=${room%%/*}
			rank=$(room_rank "$room")
			if [ "$rank" -lt 0 ]; then
				echo "$f: client/ files live in a room ($client_rooms)"
				bad=$((bad + 1))
			fi
		fi
		while IFS=: read -r line hdr; do
			pass=0
			for p in $ok; do
				case $hdr in "$p"*) pass=1 ;; esac
			done
			if [ $pass = 0 ]; then
				echo "$f:$line: $floor/ may not include \"$hdr\" (allowed: ${ok:-nothing})"
				bad=$((bad + 1))
			elif [ "$rank" -ge 0 ] && [ "${hdr#client/}" != "$hdr" ]; then
				hroom=${hdr#client/}; hroom=${hroom%%/*}
				hrank=$(room_rank "$hroom")
				if [ "$hrank" -lt 0 ] || [ "$hrank" -gt "$rank" ]; then
					echo "$f:$line: client/$room/ may not include \"$hdr\" (a room above it, or none; rooms from the bottom: $client_rooms)"
					bad=$((bad + 1))
				fi
			fi
		done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
			 sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1:\2/')
		case " $dpdk_ok " in
		*" $floor "*) ;;
		*)	if grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<rte_' "$f" >/dev/null; then
				grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<rte_' "$f" |
					sed "s|^\([0-9]*\):.*<\(.*\)>.*|$f:\1: $floor/ may not include DPDK's <\2> (only nic/ and dataplane/)|"
				bad=$((bad + 1))
			fi ;;
		esac
	done < <(find "$floor" -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' | sort)
done

# control/ includes dataplane/dp.h only; what that header includes from
# dataplane/, and so on, is what control/ sees of the data plane: only the
# façade, not the lcore's side of the engine (engine.h) nor lcore.h.
facade="dataplane/dp.h dataplane/engine_control.h dataplane/optim.h"
todo="dataplane/dp.h" seen=" "
while [ -n "$todo" ]; do
	set -- $todo
	h=$1; shift; todo="$*"
	case $seen in *" $h "*) continue ;; esac
	seen="$seen$h "
	[ -f "$h" ] || continue
	while IFS=: read -r line inc; do
		case " $facade " in
		*" $inc "*) todo="$todo $inc" ;;
		*)	echo "$h:$line: control/ sees \"$inc\" through dataplane/dp.h (the control plane's façade: $facade)"
			bad=$((bad + 1)) ;;
		esac
	done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"dataplane/' "$h" |
		 sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1:\2/')
done
if [ $bad -gt 0 ]; then
	echo "layering: $bad include(s) cross the floors (docs/architecture.md)"
	exit 1
fi
echo "layering: $files files, every include within its floor and client/'s rooms, control/ sees only the façade of dataplane/"
