#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# fatbin_list.py - list the device code in an ELF file's fat binaries as
# `cuobjdump --list-elf` / `--list-ptx` do, for toolkits without cuobjdump
# (CUDA 13 installed from NVIDIA's pip wheels has nvcc but not cuobjdump):
#
#   fatbin_list.py --list-elf|--list-ptx FILE
#
# prints one line per entry, "ELF file    1: NAME.1.sm_75.cubin" or
# "PTX file    1: NAME.1.sm_90.ptx", numbered per kind like cuobjdump.
# Reads the .nv_fatbin section: fat binaries (magic 0xba55ed50, u16
# version, u16 header size, u64 size) of entries (u16 kind: 1 PTX, 2 ELF;
# u16 version; u32 header size; u64 payload size; ...; u32 sm at +28).
import struct
import sys

FATBIN_MAGIC = 0xBA55ED50


def section(data, want):
    """The bytes of the ELF64 little-endian section named want, or None."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        sys.exit("fatbin_list: not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx]
    for name, _type, _flags, _addr, off, size in heads:
        end = data.index(b"\0", strtab[4] + name)
        if data[strtab[4] + name:end].decode() == want:
            return data[off:off + size]
    return None


def entries(fb):
    """(kind, sm) of every entry of every fat binary in fb."""
    off = 0
    while off + 16 <= len(fb):
        magic, _ver, hsize, size = struct.unpack_from("<IHHQ", fb, off)
        if magic != FATBIN_MAGIC:
            off += 8  # fat binaries are 8-byte aligned
            continue
        p, end = off + hsize, off + hsize + size
        while p < end:
            kind, _v, ehsize, psize = struct.unpack_from("<HHIQ", fb, p)
            sm, = struct.unpack_from("<I", fb, p + 28)
            yield kind, sm
            p += ehsize + psize
        off = end


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("--list-elf", "--list-ptx"):
        sys.exit("usage: fatbin_list.py --list-elf|--list-ptx FILE")
    path = sys.argv[2]
    with open(path, "rb") as f:
        fb = section(f.read(), ".nv_fatbin")
    if fb is None:
        return
    base = path.rsplit("/", 1)[-1].split(".so")[0]
    want = 2 if sys.argv[1] == "--list-elf" else 1
    n = 0
    for kind, sm in entries(fb):
        if kind != want:
            continue
        n += 1
        if want == 2:
            print("ELF file %4d: %s.%d.sm_%d.cubin" % (n, base, n, sm))
        else:
            print("PTX file %4d: %s.%d.sm_%d.ptx" % (n, base, n, sm))


if __name__ == "__main__":
    main()
