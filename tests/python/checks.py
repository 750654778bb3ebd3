# SPDX-License-Identifier: BSD-3-Clause
"""checks.py - the explicit checks of pbox's Python tests (tests/python and
the Python scripts of tests/integration), in place of `assert`.

`python3 -O` (or PYTHONOPTIMIZE) compiles every assert statement out: a
test written with them passes without checking anything there, and a call
made inside one (`assert ev.wait(10)`) is not made at all. These functions
always run, whatever the interpreter's flags, and fail with CheckFailed,
an AssertionError (so the tests' runners, and any `except AssertionError`,
treat it as they treated a failed assert), whose message says what was
checked, what was expected and what came.

    check(cond, msg)                  cond is true
    check_eq(got, want, what)         got == want
    check_is(got, want, what)         got is want
    check_in(item, container, what)   item in container
    check_le(got, limit, what)        got <= limit
    check_lt(got, limit, what)        got < limit
    Tally()                           checks that count (.ok, .bad) for a
                                      script that reports all at its end
    check_raises(exc, fn, *args, words=(), what=None, **kw)
                                      fn(*args, **kw) raises exc whose text
                                      holds every word; returns it
    fail(msg)                         fails at once

msg may be a callable returning the message, for one that is costly to
build or valid only when the check fails. The tests import it so:

    tests/python:       from checks import check, check_eq  (the script's folder)
    tests/integration:  sys.path.insert(0, <this folder>) first

`python3 tests/python/checks.py --no-asserts FILE...` (make pycheck) lists
every assert statement in the files and exits 1 if there is one, so that
none comes back.
"""
import ast
import sys


class CheckFailed(AssertionError):
    """A check of checks.py failed (an AssertionError, as a failed assert was)."""


def _text(msg):
    return str(msg() if callable(msg) else msg)


def fail(msg):
    raise CheckFailed(_text(msg))


def check(cond, msg="check failed"):
    """cond is true; else fail with msg (say what was expected and what came)."""
    if not cond:
        fail(msg)


class Tally:
    """Checks that count instead of raising, for a script that reports
    every failure at its end (daso_check.py, host_topk_check.py):
    tally(cond, what) counts a pass in .ok or appends what to .bad."""

    def __init__(self):
        self.ok, self.bad = 0, []

    def __call__(self, cond, what):
        if cond:
            self.ok += 1
        else:
            self.bad.append(_text(what))


def check_eq(got, want, what="value"):
    if not got == want:
        fail(lambda: f"{_text(what)}: expected {want!r}, got {got!r}")


def check_is(got, want, what="value"):
    if got is not want:
        fail(lambda: f"{_text(what)}: expected the object {want!r} itself, got {got!r}")


def check_in(item, container, what="value"):
    if item not in container:
        fail(lambda: f"{_text(what)}: expected {item!r} in {container!r}")


def check_le(got, limit, what="value"):
    if not got <= limit:
        fail(lambda: f"{_text(what)}: expected at most {limit!r}, got {got!r}")


def check_lt(got, limit, what="value"):
    if not got < limit:
        fail(lambda: f"{_text(what)}: expected less than {limit!r}, got {got!r}")


def check_raises(exc, fn, *args, words=(), what=None, **kw):
    """fn(*args, **kw) raises exc (an exception of another kind goes
    through unchanged, as from a plain call) whose str() holds every one of
    words; returns the exception."""
    try:
        fn(*args, **kw)
    except exc as e:
        for w in words:
            check_in(w, str(e), lambda: f"{_text(what or exc.__name__)}: the message")
        return e
    name = " or ".join(_name(x) for x in (exc if isinstance(exc, tuple) else (exc,)))
    fail(f"{_text(what or getattr(fn, '__name__', fn))}: expected {name}, nothing raised")


def _name(exc):
    return exc.__name__ if exc.__module__ == "builtins" else f"{exc.__module__}.{exc.__name__}"


def assert_statements(paths):
    """[(path, line)] of every assert statement in the Python files paths."""
    found = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            tree = ast.parse(f.read(), p)
        found += [(p, n.lineno) for n in ast.walk(tree) if isinstance(n, ast.Assert)]
    return sorted(found)


def main(argv):
    if len(argv) < 2 or argv[0] != "--no-asserts":
        print("usage: checks.py --no-asserts FILE...", file=sys.stderr)
        return 2
    found = assert_statements(argv[1:])
    for p, line in found:
        print(f"{p}:{line}: an assert statement (python3 -O removes it): use tests/python/"
              "checks.py's check, check_eq, ...")
    if not found:
        print(f"no assert statements in {len(argv) - 1} files")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
