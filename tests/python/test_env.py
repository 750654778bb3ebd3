#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""test_env.py - the Python package's environment variables are one table
(python/pbox/_env.py VARS), checked without a box (make pycheck):

- no module of the package but _env.py reads os.environ or os.getenv;
- every row is named in docs/pytorch.md, and every variable the package
  passes to _env.text/_env.integer is a row;
- an empty variable is an unset one; an integer row refuses a text that is
  no whole number, naming the variable and its text; pbox.Client's rank
  from $RANK does the same as pbox.Error(EINVAL).

Explicit checks (no assert statements: python -O keeps them).
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import pbox  # noqa: E402
from pbox import _env  # noqa: E402

sys.path.insert(0, HERE)
import checks  # noqa: E402  (tests/python/checks.py)

failed = 0
passed = 0


def check(cond, what):
    """checks.check, counted: every failure is listed, then the count."""
    global failed, passed
    try:
        checks.check(cond, what)
        passed += 1
    except checks.CheckFailed as e:
        failed += 1
        print(f"test_env: FAIL: {e}")


pkg = os.path.join(ROOT, "python", "pbox")
for f in sorted(os.listdir(pkg)):
    if not f.endswith(".py") or f == "_env.py":
        continue
    text = open(os.path.join(pkg, f)).read()
    check(not re.search(r"os\.environ|os\.getenv|getenv\(", text),
          f"python/pbox/{f} reads the environment itself (use pbox._env)")
    for name in re.findall(r"_env\.(?:text|integer)\(\s*\"([A-Z_]+)\"", text):
        check(name in {v.name for v in _env.VARS}, f"{f} reads {name}, which is no row")

doc = open(os.path.join(ROOT, "docs", "pytorch.md")).read()
for v in _env.VARS:
    check(v.name in doc, f"docs/pytorch.md does not name {v.name}")
    check(v.kind in ("text", "int"), f"{v.name}: kind {v.kind!r}")

os.environ["PBOX_JOB"] = ""
check(_env.text("PBOX_JOB") is None, "an empty PBOX_JOB is not unset")
os.environ["PBOX_JOB"] = "run42"
check(_env.text("PBOX_JOB") == "run42", "PBOX_JOB's text")
del os.environ["PBOX_JOB"]
os.environ["LOCAL_RANK"] = "3"
check(_env.integer("LOCAL_RANK") == 3, "LOCAL_RANK=3")
os.environ["LOCAL_RANK"] = "three"
try:
    _env.integer("LOCAL_RANK")
    check(False, "LOCAL_RANK=three was taken")
except ValueError as e:
    check("$LOCAL_RANK='three'" in str(e), f"LOCAL_RANK's refusal names it: {e}")
del os.environ["LOCAL_RANK"]
try:
    _env.text("PBOX_NOSUCH")
    check(False, "a name that is no row was read")
except KeyError:
    check(True, "")

os.environ["RANK"] = "x"
try:
    pbox.Client(control="127.0.0.1:1", job="env", world=2)
    check(False, "pbox.Client took RANK=x")
except pbox.Error as e:
    check(e.code == pbox.EINVAL and "$RANK='x'" in str(e), f"RANK=x: {e}")
del os.environ["RANK"]

print(f"pyenv: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
