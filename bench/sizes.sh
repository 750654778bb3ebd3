# SPDX-License-Identifier: BSD-3-Clause
# sizes.sh - sourced by the bench scripts: to_bytes SIZE prints 4K, 16M,
# 1G or 4096 in bytes (powers of 1024); status 1 if SIZE is not one.
to_bytes() {
	local s=$1 m=1
	case $s in
	*[kK]) m=1024; s=${s%?} ;;
	*[mM]) m=$((1024 * 1024)); s=${s%?} ;;
	*[gG]) m=$((1024 * 1024 * 1024)); s=${s%?} ;;
	esac
	[[ $s =~ ^[0-9]+$ ]] || return 1
	echo $((s * m))
}
