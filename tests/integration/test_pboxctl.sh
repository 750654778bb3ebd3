#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_pboxctl.sh - pboxctl's command line and its bash completion, against
# a stand-in box (a JSON-RPC Unix socket in Python: no pboxd, no network):
# every command option counts however many are given (one a command does
# not take is exit 2 even after eight others); --help puts "unless --all"
# under stats, the command that takes it; a target that cannot name a box
# (ADDR without :PORT, an empty or too long socket path) is exit 2, not 3;
# over the socket a relative DIR that does not exist yet reaches the box
# absolute; `job save` waits for a save that takes longer than --timeout's
# default (5 s) unless --timeout is given. The completion runs in an
# interactive bash in a pty, as for a user (readline splits ADDR:PORT and
# --option=value), with and without bash-completion's _init_completion:
# commands after an option's value, --max-bytes, job names from the box
# the line's --socket names, a directory after `job save NAME`.
set -u
. "$(dirname "$0")/lib.sh"
CTL=$(realpath "$BUILD/pboxctl")
[ -x "$CTL" ] || die "$BUILD/pboxctl missing: run make first"
FAKE_PID=
trap '[ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null; rm -rf "$WORKDIR"' EXIT
SOCK=$WORKDIR/fake.sock

# the stand-in box: job_list names two jobs; job_save answers after 6 s
# when DIR ends in "slow", with the dir it got; job_create answers the
# restore directory it got
python3 - "$SOCK" > "$WORKDIR/fake.log" 2>&1 <<'PY' &
import json, os, socket, sys, threading, time
def serve(c):
    f = c.makefile("rwb")
    for line in f:
        m = json.loads(line)
        p = m.get("params") or {}
        meth = m["method"]
        if meth == "job_list":
            r = {"jobs": [{"job": "alpha", "job_id": 64, "state": "active"},
                          {"job": "beta", "job_id": 65, "state": "forming"}]}
        elif meth == "job_save":
            if p["dir"].endswith("slow"):
                time.sleep(6)
            r = {"dir": p["dir"], "keys": [{"key": 1, "bytes": 10}], "bytes": 10}
        elif meth == "job_create":
            r = {"job_id": 66, "restore": p.get("restore")}
        else:
            r = {}
        f.write((json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n").encode())
        f.flush()
    c.close()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(8)
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
PY
FAKE_PID=$!
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || die "the stand-in box did not start: $(cat "$WORKDIR/fake.log")"
ctl() { "$CTL" --socket "$SOCK" "$@"; }
expect_rc() { local want=$1; shift; "$@" > "$WORKDIR/rc.txt" 2>&1; local got=$?
	[ "$got" = "$want" ] || die "'$*' exited $got, not $want: $(cat "$WORKDIR/rc.txt")"; }

# command options: all of them count
expect_rc 2 ctl job create x --world 2 --world 2 --world 2 --world 2 --world 2 --world 2 \
	--world 2 --world 2 --reason r
grep -q "'job create' does not take --reason" "$WORKDIR/rc.txt" || die "no message: $(cat "$WORKDIR/rc.txt")"
expect_rc 2 ctl status --all --all --all --all --all --all --all --all --all --reason x
expect_rc 2 ctl job show alpha --reason x
[ "$(wc -l < "$WORKDIR/rc.txt")" = 1 ] || die "more than one message: $(cat "$WORKDIR/rc.txt")"
expect_rc 2 ctl job frobnicate alpha
grep -q "unknown job command 'frobnicate'" "$WORKDIR/rc.txt" || die "$(cat "$WORKDIR/rc.txt")"
expect_rc 0 ctl --memory 1G job create x --world 2 --weight 3
echo "command options checked however many"

# --help: each command's entry names the options it takes
"$CTL" --help > "$WORKDIR/help.txt" || die "--help"
awk '/^  stats/,/^  top/' "$WORKDIR/help.txt" | grep -q "unless --all" || die "--help: stats does not say --all"
awk '/^  top/,/^$/' "$WORKDIR/help.txt" | grep -q -- "--all" && die "--help: top's entry names --all, which top refuses"
echo "--help: --all under stats"

# a target that cannot name a box: 2; one that does not answer: 3
expect_rc 2 "$CTL" --control localhost status
expect_rc 2 "$CTL" --control '' status
expect_rc 2 "$CTL" --socket '' status
expect_rc 2 "$CTL" --socket "/tmp/$(head -c 110 /dev/zero | tr '\0' a)" status
expect_rc 3 "$CTL" --socket "$WORKDIR/none.sock" status
echo "bad targets: 2"

# a relative DIR that does not exist (yet) reaches the box absolute
mkdir -p "$WORKDIR/cwd"
(cd "$WORKDIR/cwd" && "$CTL" --socket "$SOCK" job save alpha newdir) > "$WORKDIR/save.txt" 2>&1 ||
	die "job save: $(cat "$WORKDIR/save.txt")"
grep -q "saved in $WORKDIR/cwd/newdir " "$WORKDIR/save.txt" || die "relative DIR not made absolute: $(cat "$WORKDIR/save.txt")"
(cd "$WORKDIR/cwd" && "$CTL" --socket "$SOCK" --json job create x --world 2 --restore ck/later) > "$WORKDIR/create.txt" 2>&1 ||
	die "job create: $(cat "$WORKDIR/create.txt")"
grep -q "\"restore\": \"$WORKDIR/cwd/ck/later\"" "$WORKDIR/create.txt" || die "relative --restore not made absolute: $(cat "$WORKDIR/create.txt")"
echo "relative DIRs made absolute"

# job save waits for a long save (6 s here) unless --timeout says otherwise
expect_rc 0 ctl job save alpha /ck/slow
grep -q "saved in /ck/slow" "$WORKDIR/rc.txt" || die "$(cat "$WORKDIR/rc.txt")"
expect_rc 1 ctl --timeout 1000 job save alpha /ck/slow
grep -q "no answer to job_save within 1000 ms" "$WORKDIR/rc.txt" || die "$(cat "$WORKDIR/rc.txt")"
echo "job save waits for the box"

# bash completion, typed into an interactive bash
cat > "$WORKDIR/complete.py" <<'PY'
# complete.py COMPLETION OUT [BASH_COMPLETION] -- LINE...: type each LINE
# and a TAB into an interactive bash in a pty; OUT gets "LINE|COMPREPLY".
import os, pty, select, sys, time
args = sys.argv[1:]
sep = args.index("--")
comp, out, bc = args[0], args[1], (args[2] if sep > 2 else "")
pid, fd = pty.fork()
if pid == 0:
    os.execvpe("bash", ["bash", "--norc", "--noprofile", "-i"],
               dict(os.environ, TERM="dumb", PS1="$ ", HISTFILE="/dev/null"))
def drain(t):
    end = time.time() + t
    while time.time() < end:
        if select.select([fd], [], [], 0.05)[0]:
            try:
                os.read(fd, 65536)
            except OSError:
                return
def send(s, t=0.3):
    os.write(fd, s.encode())
    drain(t)
def lines():
    try:
        with open(out) as f:
            return sum(1 for _ in f)
    except OSError:
        return 0
def complete(l):
    # TAB, then wait (up to 5 s) for _rec's line rather than a fixed second
    n = lines()
    os.write(fd, (l + "\t").encode())
    end = time.time() + 5.0
    while lines() == n and time.time() < end:
        drain(0.02)
    drain(0.05)
if bc:
    send(f". '{bc}'\n")
send(f". '{comp}'\n")
send("_rec() { _pboxctl \"$@\"; printf '%s|%s\\n' \"$COMP_LINE\" \"${COMPREPLY[*]}\" >> '" + out + "'; }\n")
send("complete -F _rec pboxctl\n")
for l in args[sep + 1:]:
    complete(l)
    send("\x15", 0.1)  # ^U
send("exit\n")
os.waitpid(pid, 0)
PY
COMPLETION=$(pwd)/deploy/pboxctl.bash-completion
mkdir -p "$WORKDIR/cwd/ckdir"
BC=${BASH_COMPLETION:-/usr/share/bash-completion/bash_completion}
modes=("")
[ -f "$BC" ] && modes+=("$BC") || log "no $BC: completion checked without bash-completion only"
for mode in "${modes[@]}"; do
	rm -f "$WORKDIR/compl.txt"
	(cd "$WORKDIR/cwd" && PATH=$(dirname "$CTL"):$PATH python3 "$WORKDIR/complete.py" "$COMPLETION" \
		"$WORKDIR/compl.txt" $mode -- \
		"pboxctl " \
		"pboxctl --socket $SOCK " \
		"pboxctl --control 198.18.1.1:7470 job " \
		"pboxctl -o json st" \
		"pboxctl --output=w" \
		"pboxctl --timeout 100 job cr" \
		"pboxctl job create x --m" \
		"pboxctl --socket $SOCK job show " \
		"pboxctl job abort --socket $SOCK --reason why " \
		"pboxctl --socket $SOCK job show alpha " \
		"pboxctl --socket $SOCK job save alpha ck")
	want() { grep -qxF "$1|$2" "$WORKDIR/compl.txt" ||
		die "completion${mode:+ (with $mode)} of '$1' is not '$2': $(grep -F "$1|" "$WORKDIR/compl.txt")"; }
	want "pboxctl " "status jobs job stats top"
	want "pboxctl --socket $SOCK " "status jobs job stats top"
	want "pboxctl --control 198.18.1.1:7470 job " "show abort create save"
	want "pboxctl -o json st" "status stats"
	want "pboxctl --output=w" "wide"
	want "pboxctl --timeout 100 job cr" "create"
	want "pboxctl job create x --m" "--memory --max-bytes"
	want "pboxctl --socket $SOCK job show " "alpha beta"
	want "pboxctl job abort --socket $SOCK --reason why " "alpha beta"
	want "pboxctl --socket $SOCK job show alpha " ""
	want "pboxctl --socket $SOCK job save alpha ck" "ckdir"
	echo "completion ok${mode:+ (with $mode)}"
done
echo "pboxctl: ok"
