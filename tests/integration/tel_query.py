#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""tel_query.py SOCKET CMD... - a DPDK telemetry client (what
dpdk-telemetry.py does, without its prompt): connect to SOCKET (a
SOCK_SEQPACKET Unix socket, /run/dpdk/<file-prefix>/dpdk_telemetry.v2),
read the greeting, send each CMD ("/pbox/jobs", "/pbox/stats,lcores/0")
and print each reply's JSON on a line of its own. Exit 1 if the socket
cannot be reached or a reply is not JSON."""
import json
import socket
import sys


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(5)
    try:
        s.connect(sys.argv[1])
        hello = json.loads(s.recv(4096).decode())
        size = int(hello.get("max_output_len", 16384))
        for cmd in sys.argv[2:]:
            s.send(cmd.encode())
            reply = s.recv(size).decode()
            json.loads(reply)
            print(reply)
    except (OSError, ValueError) as e:
        print("tel_query: %s: %s" % (sys.argv[1], e), file=sys.stderr)
        return 1
    finally:
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
