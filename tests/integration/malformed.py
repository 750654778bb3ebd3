#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""malformed.py - send malformed and forged pbox datagrams to a box data
endpoint: each kind a fixed number of times. Used by test_malformed.sh; the
box must count every one under its drop reason and keep serving."""
import os
import random
import socket
import struct
import sys
import time

HDR = ">IBBBBIHHQIIIHH"  # docs/protocol.md
MAGIC = 0x50424F58


def hdr(magic=MAGIC, version=1, typ=1, dtype=0, flags=0, job=1, rank=0, count=1,
        token=0, key=0, seg=0, rnd=1, status=0, reserved=0):
    return struct.pack(HDR, magic, version, typ, dtype, flags, job, rank, count,
                       token, key, seg, rnd, status, reserved)


def main():
    ip, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(1234)
    kinds = {
        "bad_len": lambda: os.urandom(rng.randrange(0, 40)),
        "bad_magic": lambda: hdr(magic=0xDEADBEEF) + b"\0" * 4,
        "bad_version": lambda: hdr(version=9) + b"\0" * 4,
        "bad_type": lambda: hdr(typ=9) + b"\0" * 4,
        "bad_dtype": lambda: hdr(dtype=5) + b"\0" * 4,
        "bad_flags": lambda: hdr(flags=0x80) + b"\0" * 4,
        "bad_len_count": lambda: hdr(count=100) + b"\0" * 4,
        "no_job": lambda: hdr(job=rng.randrange(1 << 20, 1 << 30)) + b"\0" * 4,
    }
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sent = 0
    for name, make in kinds.items():
        for i in range(n):
            s.sendto(make(), (ip, port))
            sent += 1
            if i % 32 == 31:
                time.sleep(0.002)   # paced: the box's rx ring holds 512 frames
    # a datagram to a UDP port no lcore owns
    for _ in range(n):
        s.sendto(hdr() + b"\0" * 4, (ip, port + 1000))
        sent += 1
    print(f"sent {sent} malformed datagrams ({n} of each of {len(kinds) + 1} kinds)")


if __name__ == "__main__":
    main()
