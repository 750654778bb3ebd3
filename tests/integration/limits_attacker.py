#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""limits_attacker.py - what one peer may hold on pboxd, for
test_control_limits.sh. Every mode is bounded in count and time and prints
one JSON line of what it did and what the box answered.

usage: limits_attacker.py SRC_IP HOST:PORT MODE [ARGS]
  squat N SECONDS          one connection joins N jobs of world 1
                           (squat0..), then holds them SECONDS
  cycles COUNT N MAXBYTES  join a job of world 1 with MAXBYTES of memory and
                           N times declare a COUNT-float key and release it;
                           meanwhile a second connection calls box_endpoints
                           every 5 ms: the longest answer is the control
                           thread's longest stall
  scrape N SECONDS         N times GET /metrics from HOST:PORT, one
                           connection each, 2 s timeout each, within SECONDS
  mflood SECONDS           open connections to the metrics HOST:PORT in
                           bursts of 32 every 10 ms for SECONDS, sending
                           nothing
"""
import json
import socket
import sys
import threading
import time


def conn(src, host, port, timeout=10.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(timeout)
    s.connect((host, port))
    return s


def call(s, method, params=None, rid=1):
    req = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        req["params"] = params
    s.sendall((json.dumps(req) + "\n").encode())
    buf = b""
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            raise ConnectionError("closed by the box")
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            msg = json.loads(line)
            if msg.get("id") == rid:
                return msg


def out(**kw):
    print(json.dumps(kw), flush=True)


def err_of(r):
    return r.get("error", {}).get("message")


def squat(src, host, port, n, seconds):
    s = conn(src, host, port)
    joined, first_err = 0, None
    for i in range(n):
        r = call(s, "job_join", {"job": "squat%d" % i, "rank": 0, "world": 1,
                                 "data_ip": src, "data_port": 40000 + i}, rid=i + 1)
        if "result" in r:
            joined += 1
        elif first_err is None:
            first_err = err_of(r)
    out(mode="squat", joined=joined, error=first_err)
    end = time.time() + seconds
    while time.time() < end:   # hold, with a heartbeat now and then
        time.sleep(1.0)
        try:
            call(s, "box_endpoints", rid=1000)
        except OSError:
            break
    s.close()


def cycles(src, host, port, count, n, max_bytes):
    s = conn(src, host, port, timeout=60.0)
    r = call(s, "job_join", {"job": "cycles", "rank": 0, "world": 1, "data_ip": src,
                             "data_port": 40900, "max_bytes": max_bytes})
    if "result" not in r:
        out(mode="cycles", error=err_of(r))
        return
    jid = r["result"]["job_id"]
    stop = threading.Event()
    worst = [0.0]

    def probe():
        p = conn(src, host, port)
        rid = 1
        while not stop.is_set():
            t = time.monotonic()
            call(p, "box_endpoints", rid=rid)
            worst[0] = max(worst[0], time.monotonic() - t)
            rid += 1
            time.sleep(0.005)
        p.close()

    th = threading.Thread(target=probe, daemon=True)
    th.start()
    done, errors = 0, []
    for i in range(n):
        r = call(s, "key_declare", {"job_id": jid, "rank": 0, "key": i, "count": count,
                                    "dtype": "f32"}, rid=10 + 2 * i)
        if "result" not in r:
            errors.append(err_of(r))
            time.sleep(1.0)
            continue
        r = call(s, "key_release", {"job_id": jid, "rank": 0, "keys": [i]}, rid=11 + 2 * i)
        if "result" not in r:
            errors.append(err_of(r))
        done += 1
        time.sleep(0.5)   # the box frees the block once its lcores let go
    time.sleep(1.0)
    stop.set()
    th.join(5)
    out(mode="cycles", cycles=done, errors=errors, worst_stall_ms=round(worst[0] * 1e3, 1))
    s.close()


def scrape(src, host, port, n, seconds):
    ok, failed, end = 0, 0, time.time() + seconds
    for _ in range(n):
        if time.time() >= end:
            break
        t = time.time()
        try:
            s = conn(src, host, port, timeout=2.0)
            s.sendall(b"GET /metrics HTTP/1.0\r\nHost: box\r\n\r\n")
            data = b""
            while True:
                c = s.recv(65536)
                if not c:
                    break
                data += c
            s.close()
            if data.startswith(b"HTTP/1.") and b" 200 " in data.split(b"\r\n", 1)[0] \
                    and b"pbox_" in data:
                ok += 1
            else:
                failed += 1
        except OSError:
            failed += 1
        time.sleep(max(0.0, seconds / n - (time.time() - t)))
    out(mode="scrape", ok=ok, failed=failed)


def mflood(src, host, port, seconds):
    """Open connections in bursts of 32 every 10 ms (about 3,000 a second,
    as the red team's flood), sending nothing; each burst is closed when
    the next one is out."""
    end, n, errors, held = time.time() + seconds, 0, 0, []
    while time.time() < end:
        burst = []
        for _ in range(32):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((src, 0))
                s.setblocking(False)
                s.connect_ex((host, port))
                burst.append(s)
                n += 1
            except OSError:
                errors += 1
                s.close()
        for s in held:
            s.close()
        held = burst
        time.sleep(0.01)
    for s in held:
        s.close()
    out(mode="mflood", conns=n, errors=errors)


def main():
    src, hostport, mode = sys.argv[1:4]
    host, port = hostport.rsplit(":", 1)
    port = int(port)
    a = sys.argv[4:]
    if mode == "squat":
        squat(src, host, port, int(a[0]), float(a[1]))
    elif mode == "cycles":
        cycles(src, host, port, int(a[0]), int(a[1]), int(a[2]))
    elif mode == "scrape":
        scrape(src, host, port, int(a[0]), float(a[1]))
    elif mode == "mflood":
        mflood(src, host, port, float(a[0]))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
