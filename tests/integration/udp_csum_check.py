#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""udp_csum_check.py IFACE BOX_IP COUNT SECONDS - capture (AF_PACKET, in
the workers' namespace) up to COUNT UDP datagrams from BOX_IP on IFACE
within SECONDS and check that each carries a non-zero, correct UDP
checksum (pboxd --udp-checksum on). Prints the count; exit 1 on any bad
or zero checksum or when none was seen."""
import socket
import struct
import sys
import time


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def main():
    iface, box_ip, count, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    box = socket.inet_aton(box_ip)
    # ETH_P_ALL: taps see a bridge port's frames too (lib.sh WK_HOSTS)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((iface, 0))
    s.settimeout(0.2)
    seen = bad = zero = 0
    end = time.monotonic() + secs
    while seen < count and time.monotonic() < end:
        try:
            f = s.recv(65535)
        except socket.timeout:
            continue
        ip = f[14:]
        if f[12:14] != b"\x08\x00" or len(ip) < 28 or ip[9] != 17 or ip[12:16] != box:
            continue
        ihl = (ip[0] & 15) * 4
        tot = struct.unpack("!H", ip[2:4])[0]
        udp = ip[ihl:tot]
        seen += 1
        if udp[6:8] == b"\0\0":
            zero += 1
            continue
        pseudo = ip[12:20] + struct.pack("!BBH", 0, 17, len(udp))
        if csum(pseudo + udp) != 0xFFFF:
            bad += 1
    print("udp checksums of %d results from the box: %d zero, %d wrong" % (seen, zero, bad))
    return 0 if seen and not zero and not bad else 1


sys.exit(main())
