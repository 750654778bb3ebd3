#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# gpu_archs.sh - the GPU library as gpu/Makefile.inc builds it: an ELF
# (SASS) for every architecture of GPU_ARCHS in each of its kernel files
# and the PTX of GPU_PTX (cuobjdump --list-elf / --list-ptx; where the
# toolkit has no cuobjdump, as CUDA 13's pip wheels, the fat binaries'
# own headers through tests/unit/fatbin_list.py); pbox_gpu_ops_v2 its one
# export; no CUDA library among its dependencies (the runtime is linked
# in, the driver is loaded at run time); libpbox not linked to it; and it
# loads and init() answers with a reason when there is no device
# (build/tests/gpu/kernels --init-only).
#
#   make gpucheck      (in make check), or: bash tests/unit/gpu_archs.sh
#
# Environment (make gpucheck sets it): BUILD (build), NVCC, CUDA_ROOT,
# GPU_ARCHS, GPU_PTX (else read from gpu/Makefile.inc), GPU_KERNEL_FILES
# (how many .cu files, 1), CUOBJDUMP. Exit 77 (skipped) without nvcc.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
build=${BUILD:-build}
lib=$build/libpbox-gpu.so.1
# NVCC set but empty (make found none): skip; unset: look for it.
nvcc=${NVCC-$(command -v "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" || command -v nvcc)}
if [ -z "$nvcc" ] || ! command -v "$nvcc" >/dev/null; then
	echo "gpu_archs: SKIP: needs nvcc (the CUDA toolkit, CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}) to build $lib"
	exit 77
fi
cuda_root=${CUDA_ROOT:-$(cd "$(dirname "$(command -v "$nvcc")")/.." && pwd)}
archs=${GPU_ARCHS:-$(sed -n 's/^GPU_ARCHS *?= *//p' gpu/Makefile.inc)}
ptx=${GPU_PTX:-$(sed -n 's/^GPU_PTX *?= *//p' gpu/Makefile.inc)}
files=${GPU_KERNEL_FILES:-1}
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "gpu_archs: FAIL: $*"; fail=$((fail + 1)); }

[ -f "$lib" ] || { bad "$lib is missing (make gpu)"; echo "gpu_archs: $pass passed, $fail failed"; exit 1; }

cuobjdump=${CUOBJDUMP:-$(command -v "$cuda_root/bin/cuobjdump" || command -v cuobjdump)}
if [ -n "$cuobjdump" ]; then
	how=$cuobjdump
	elf=$("$cuobjdump" --list-elf "$lib") || bad "cuobjdump --list-elf $lib failed"
	ptxs=$("$cuobjdump" --list-ptx "$lib") || bad "cuobjdump --list-ptx $lib failed"
elif command -v python3 >/dev/null; then
	how="tests/unit/fatbin_list.py (no cuobjdump in $cuda_root/bin or on PATH)"
	elf=$(python3 tests/unit/fatbin_list.py --list-elf "$lib") || bad "fatbin_list.py failed"
	ptxs=$(python3 tests/unit/fatbin_list.py --list-ptx "$lib") || bad "fatbin_list.py failed"
else
	echo "gpu_archs: SKIP: needs cuobjdump (CUDA toolkit) or python3 to list $lib's device code"
	exit 77
fi
echo "gpu_archs: device code of $lib by $how"

for a in $archs; do
	n=$(grep -c "\.sm_$a\.cubin" <<<"$elf")
	if [ "$n" -ge "$files" ]; then ok; else bad "$n ELF for sm_$a, want one in each of $files kernel files"; fi
done
n=$(grep -c "\.sm_$ptx\.ptx" <<<"$ptxs")
if [ "$n" -ge "$files" ]; then ok; else bad "$n PTX for compute_$ptx, want $files"; fi
echo "gpu_archs: ELF:" $(grep -o 'sm_[0-9]*' <<<"$elf" | sort -u) "PTX:" $(grep -o 'sm_[0-9]*' <<<"$ptxs" | sort -u)

exports=$(nm -D --defined-only "$lib" | awk '{print $3}')
if [ "$exports" = pbox_gpu_ops_v2 ]; then ok; else bad "exports" $exports", want pbox_gpu_ops_v2 alone"; fi
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
if grep -qi 'cuda' <<<"$needed"; then bad "needs" $needed "(CUDA must be linked statically)"; else ok; fi
if [ -f "$build/libpbox.so" ]; then
	if readelf -d "$build/libpbox.so" | grep -qiE 'NEEDED.*(pbox-gpu|cuda)'; then
		bad "libpbox.so links the GPU library or CUDA: it must dlopen it"
	else ok; fi
fi

if [ -x "$build/tests/gpu/kernels" ]; then
	if out=$("$build/tests/gpu/kernels" --init-only "$lib"); then ok; else bad "kernels --init-only: $out"; fi
	echo "$out"
fi

echo "gpu_archs: $pass passed, $fail failed"
[ $fail -eq 0 ]
