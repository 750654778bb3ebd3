#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""tcp_rate.py - one TCP stream's goodput through a link, for compare.sh
--shape (does the shaped link carry what it should?).

    tcp_rate.py serve --addr A --port P [--timeout S]
    tcp_rate.py send  --addr A --port P --bytes B [--timeout S]

`serve` accepts one connection, reads until the sender closes, and prints

    bytes seconds bits_per_second

timed from the first byte received to the last (the connection's set-up
and TCP's first round trip are left out, slow start is not). `send` writes
B bytes as fast as the socket takes them and closes. Both give up after
--timeout seconds (default 30) with status 1. Standard library only.
"""
import argparse
import socket
import sys
import time

CHUNK = 1 << 20


def serve(a):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((a.addr, a.port))
    ls.listen(1)
    ls.settimeout(a.timeout)
    conn, _ = ls.accept()
    conn.settimeout(a.timeout)
    buf = bytearray(CHUNK)
    got = 0
    first = last = None
    while True:
        n = conn.recv_into(buf)
        if n == 0:
            break
        last = time.monotonic()
        if first is None:
            first = last
        got += n
    conn.close()
    ls.close()
    if not got or last <= first:
        print("tcp_rate.py: received %d bytes, too few to time" % got, file=sys.stderr)
        return 1
    secs = last - first
    print("%d %.6f %.0f" % (got, secs, got * 8 / secs))
    return 0


def send(a):
    deadline = time.monotonic() + a.timeout
    while True:  # the server may not be listening yet
        try:
            s = socket.create_connection((a.addr, a.port), timeout=a.timeout)
            break
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    data = bytes(CHUNK)
    left = a.bytes
    while left > 0:
        s.sendall(data[:min(left, CHUNK)])
        left -= min(left, CHUNK)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)  # the server's close: every byte is through
    s.close()
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["serve", "send"])
    p.add_argument("--addr", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--bytes", type=int, default=64 << 20)
    p.add_argument("--timeout", type=float, default=30.0)
    a = p.parse_args()
    try:
        return serve(a) if a.mode == "serve" else send(a)
    except (OSError, socket.timeout) as e:
        print("tcp_rate.py %s: %s" % (a.mode, e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
