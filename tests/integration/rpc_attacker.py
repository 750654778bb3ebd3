#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""rpc_attacker.py - an unauthenticated client against pboxd's TCP control
port, for test_control_abuse.sh. Every attack is bounded in count and time
and prints one JSON line of what it did and what the box answered.

usage: rpc_attacker.py SRC_IP HOST:PORT MODE [ARGS]
  bigjob NAME NKEYS SECONDS  join NAME as the only rank and declare NKEYS
                             keys (a large job_status), then hold it
  amplify NAME CONNS REQS SECONDS
                             CONNS connections each pipeline REQS job_status
                             requests for NAME and never read
  idle CONNS SECONDS [SETTLE] open CONNS connections and send nothing; the
                             last count waits SECONDS from the start and at
                             least SETTLE after the last connection opened
  flood SECONDS              connect, job_join, close, as fast as it can
  hijack JOB                 read JOB's id, declare rank 0's key 0 with
                             another size; job_create; job_abort
  slow SECONDS               send half a request line and wait
"""
import json
import resource
import socket
import sys
import time


def conn(src, host, port, timeout=5.0):
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
    while not buf.endswith(b"\n"):
        chunk = s.recv(1 << 20)
        if not chunk:
            raise ConnectionError("closed by the box")
        buf += chunk
        while b"\n" in buf[:-1]:   # skip notifications before the answer
            line, buf = buf.split(b"\n", 1)
            msg = json.loads(line)
            if msg.get("id") == rid:
                return msg
    return json.loads(buf)


def out(**kw):
    print(json.dumps(kw), flush=True)


def bigjob(src, host, port, name, nkeys, seconds):
    s = conn(src, host, port)
    r = call(s, "job_join", {"job": name, "rank": 0, "world": 1, "data_ip": src,
                             "data_port": 40999})
    jid = r["result"]["job_id"]
    ok = 0
    for k in range(nkeys):
        r = call(s, "key_declare", {"job_id": jid, "rank": 0, "key": k, "count": 16,
                                    "dtype": "f32"}, rid=k + 2)
        ok += "result" in r
    out(mode="bigjob", job=name, keys=ok)
    time.sleep(seconds)
    s.close()


def amplify(src, host, port, name, nconns, nreqs, seconds):
    line = (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "job_status",
                        "params": {"job": name}}) + "\n").encode()
    socks, sent, blocked = [], 0, 0
    for _ in range(nconns):
        try:
            s = conn(src, host, port)
            s.setblocking(False)
            socks.append(s)
        except OSError:
            pass
    end = time.time() + seconds
    pending = {s: line * nreqs for s in socks}
    while time.time() < end and any(pending.values()):
        for s, data in pending.items():
            if not data:
                continue
            try:
                n = s.send(data)
                sent += n
                pending[s] = data[n:]
            except BlockingIOError:
                blocked += 1
            except OSError:
                pending[s] = b""
        time.sleep(0.01)
    out(mode="amplify", conns=len(socks), bytes_sent=sent, requests=sent // len(line),
        send_blocked=blocked)
    time.sleep(max(0.0, end - time.time()))
    for s in socks:
        s.close()


def idle(src, host, port, nconns, seconds, settle=0.0):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, nconns + 64), hard))
    socks, failed = [], 0
    end = time.time() + seconds
    for _ in range(nconns):
        try:
            socks.append(conn(src, host, port, timeout=1.0))
        except OSError:
            failed += 1
        if time.time() > end:
            break
    last_open = time.time()
    for s in socks:
        s.setblocking(False)

    def count_closed():
        n = 0
        for s in socks:
            try:
                if s.recv(1) == b"":
                    n += 1
            except BlockingIOError:
                pass
            except OSError:
                n += 1
        return n

    # connections the box refused: closed at once, i.e. as fast as its
    # control thread gets to them (under load, 2100 of them take a while):
    # count until the count holds for half a second, 5 s at most
    closed, deadline = -1, time.time() + 5.0
    while True:
        time.sleep(0.5)
        now_closed = count_closed()
        if now_closed == closed or time.time() > deadline:
            closed = now_closed
            break
        closed = now_closed
    # a connection opened late (opening 2000 takes seconds on a loaded box)
    # has been idle long enough only SETTLE after it opened
    time.sleep(max(0.0, end - time.time(), last_open + settle - time.time()))
    later = count_closed()   # now also those the idle timeout closed
    for s in socks:
        s.close()
    out(mode="idle", opened=len(socks) - closed, refused=closed + failed,
        closed_by_box=later - closed)


def flood(src, host, port, seconds):
    end, n, errors = time.time() + seconds, 0, 0
    while time.time() < end:
        try:
            s = conn(src, host, port, timeout=2.0)
            call(s, "job_join", {"job": "flood%d" % (n % 4), "rank": 0, "world": 2,
                                 "data_ip": src, "data_port": 41000 + n % 1000})
            s.close()
            n += 1
        except OSError:
            errors += 1
            time.sleep(0.05)
    out(mode="flood", joins=n, errors=errors)


def hijack(src, host, port, job):
    s = conn(src, host, port)
    st = call(s, "job_status", {"job": job})
    res = {"mode": "hijack"}
    if "result" in st:
        jid = st["result"]["job_id"]
        r = call(s, "key_declare", {"job_id": jid, "rank": 0, "key": 0, "count": 3,
                                    "dtype": "f16"}, rid=2)
        res["declare"] = r.get("error", {}).get("message", "accepted")
        r = call(s, "job_leave", {"job_id": jid, "rank": 0}, rid=3)
        res["leave"] = r.get("error", {}).get("message", "accepted")
    else:
        res["status"] = st.get("error", {}).get("message")
    r = call(s, "job_create", {"job": "squat", "world": 4}, rid=4)
    res["create"] = r.get("error", {}).get("message", "accepted")
    r = call(s, "job_abort", {"job": job}, rid=5)
    res["abort"] = r.get("error", {}).get("message", "accepted")
    out(**res)
    s.close()


def slow(src, host, port, seconds):
    s = conn(src, host, port)
    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"job_l')
    start = time.time()
    s.settimeout(seconds)
    data = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    out(mode="slow", closed_after_s=round(time.time() - start, 1),
        answer=json.loads(data.split(b"\n")[0])["error"]["message"] if data else None)


def main():
    src, hostport, mode = sys.argv[1:4]
    host, port = hostport.rsplit(":", 1)
    port = int(port)
    a = sys.argv[4:]
    if mode == "bigjob":
        bigjob(src, host, port, a[0], int(a[1]), float(a[2]))
    elif mode == "amplify":
        amplify(src, host, port, a[0], int(a[1]), int(a[2]), float(a[3]))
    elif mode == "idle":
        idle(src, host, port, int(a[0]), float(a[1]), float(a[2]) if len(a) > 2 else 0.0)
    elif mode == "flood":
        flood(src, host, port, float(a[0]))
    elif mode == "hijack":
        hijack(src, host, port, a[0])
    elif mode == "slow":
        slow(src, host, port, float(a[0]))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
