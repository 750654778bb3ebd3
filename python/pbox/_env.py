# SPDX-License-Identifier: BSD-3-Clause
"""The environment variables the Python package reads itself, one table.

libpbox reads its own (PBOX_TRANSPORT, PBOX_MTU, PBOX_JOB_BYTES, ...: the
table in client/core/knobs.c, docs/man/libpbox.3 ENVIRONMENT); the rows
here are what the package decides before or around the library: which
library to load, and pbox.Client's and pbox.torch's defaults under
torchrun. An empty variable counts as unset. No other module of the
package reads os.environ (tests/python/test_env.py holds the package and
docs/pytorch.md to this table).
"""
import os
from collections import namedtuple

Var = namedtuple("Var", "name kind default doc")

# kind: "text" (the value as it is) or "int" (a whole number, else an error)
VARS = (
    Var("PBOX_LIB", "text", "build/libpbox.so of the source tree, then "
        "PREFIX/lib/libpbox.so.0, then the loader's libpbox.so.0",
        "the libpbox.so the package loads (an error if it does not load)"),
    Var("PBOX_CONTROL", "text", None,
        "pbox.Client's control address when control= is not given (libpbox's "
        "own default too)"),
    Var("PBOX_JOB", "text", "TORCHELASTIC_RUN_ID",
        "pbox.Client's job name when job= is not given"),
    Var("TORCHELASTIC_RUN_ID", "text", None,
        "torchrun's run id: the job name when PBOX_JOB is unset (characters "
        "outside [A-Za-z0-9._-] become -)"),
    Var("RANK", "int", None, "pbox.Client's rank when rank= is not given (torchrun sets it)"),
    Var("WORLD_SIZE", "int", None,
        "pbox.Client's world when world= is not given (torchrun sets it)"),
    Var("LOCAL_RANK", "int", None,
        "pbox.torch's hierarchical top-k with local='env': this rank on its host; "
        "libpbox's host-local aggregation (with LOCAL_WORLD_SIZE)"),
    Var("LOCAL_WORLD_SIZE", "int", None,
        "pbox.torch's hierarchical top-k with local='env', and pbox.torch.DASO's "
        "local_size when not given: the ranks on this host; above 1, libpbox's "
        "host-local aggregation (the torch backend's world group; PBOX_HOST_LOCAL=0 "
        "turns it off)"),
)
_BY_NAME = {v.name: v for v in VARS}


def text(name):
    """The variable's text, or None if it is unset or empty."""
    if name not in _BY_NAME:
        raise KeyError(f"{name} is no row of pbox._env.VARS")
    v = os.environ.get(name)
    return v if v else None


def integer(name):
    """The variable as an int, or None if it is unset or empty; ValueError
    naming it and its text if it is not a whole number."""
    if _BY_NAME[name].kind != "int":
        raise KeyError(f"{name} is not a number (pbox._env.VARS)")
    v = text(name)
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"${name}={v!r} is not an integer") from None
