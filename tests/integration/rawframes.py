#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""rawframes.py - send hand-made Ethernet frames to the box from a worker's
interface (AF_PACKET), each kind n times, for test_checksum.sh: a pbox
datagram with a wrong UDP checksum, one with a wrong IPv4 header checksum,
an ICMP echo request with a wrong IPv4 checksum, a lone IPv4 fragment, and
a datagram cut into two fragments.

usage: rawframes.py IFACE DST_MAC SRC_IP DST_IP UDP_PORT N [KIND,...]
(KIND: udp_csum ip_csum icmp_ip_csum lone_fragment fragmented; default all)"""
import socket
import struct
import sys

MAGIC = 0x50424F58
HDR = ">IBBBBIHHQIIIHH"  # docs/protocol.md


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ipv4(src, dst, proto, payload, frag=0x4000, ident=1, bad_csum=False):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, frag, 64, proto, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    c = csum(h) ^ (0x5555 if bad_csum else 0)
    return h[:10] + struct.pack("!H", c) + h[12:] + payload


def udp(src, dst, sport, dport, data, bad_csum=False):
    u = struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 17, len(u))
    c = csum(pseudo + u) or 0xFFFF
    if bad_csum:
        c = (c ^ 0x00F0) or 0x1111
    return u[:6] + struct.pack("!H", c) + u[8:]


def main():
    iface, dmac, src, dst, port, n = sys.argv[1:7]
    port, n = int(port), int(n)
    only = sys.argv[7].split(",") if len(sys.argv) > 7 else None
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    smac = s.getsockname()[4]
    eth = bytes.fromhex(dmac.replace(":", "")) + smac + b"\x08\x00"
    push = struct.pack(HDR, MAGIC, 1, 1, 0, 0, 12345, 0, 1, 0, 0, 0, 1, 0, 0) + b"\0" * 4
    echo = b"\x08\x00\x00\x00" + b"\x12\x34\x00\x01" + b"pbox" * 4
    echo = echo[:2] + struct.pack("!H", csum(echo)) + echo[4:]
    big = udp(src, dst, 40000, port, push + b"\0" * 1760)  # reassembled: longer than the MTU
    kinds = {
        "udp_csum": lambda i: ipv4(src, dst, 17, udp(src, dst, 40000, port, push, bad_csum=True), ident=i),
        "ip_csum": lambda i: ipv4(src, dst, 17, udp(src, dst, 40000, port, push), ident=i, bad_csum=True),
        "icmp_ip_csum": lambda i: ipv4(src, dst, 1, echo, ident=i, bad_csum=True),
        "lone_fragment": lambda i: ipv4(src, dst, 17, big[:800], frag=0x2000, ident=i),
    }
    sent = 0
    for name, make in kinds.items():
        if only and name not in only:
            continue
        for i in range(n):
            s.send(eth + make(1000 + sent))
            sent += 1
    for i in range(n if not only or "fragmented" in only else 0):
        # both halves of one datagram: the kernel may reassemble it
        ident = 30000 + i
        s.send(eth + ipv4(src, dst, 17, big[:1000], frag=0x2000, ident=ident))
        s.send(eth + ipv4(src, dst, 17, big[1000:], frag=125, ident=ident))
        sent += 2
    print(f"sent {sent} raw frames")


if __name__ == "__main__":
    main()
