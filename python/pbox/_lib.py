# SPDX-License-Identifier: BSD-3-Clause
"""Locate and load libpbox.so and declare its functions for ctypes.

Search order (first that loads wins):
  1. $PBOX_LIB (a path to libpbox.so; an error if set but unloadable),
  2. build/libpbox.so of the source tree this package sits in
     (python/pbox -> ../../build/libpbox.so),
  3. PREFIX/lib/libpbox.so.0 when the package was installed by `make
     install` into PREFIX/lib/pythonX.Y/dist-packages,
  4. the system loader: libpbox.so.0, then libpbox.so.

A library that loads is then checked against what this package was written
for (include/pbox.h, "ABI rules"): its pbox_version() must have our MAJOR
and at least our MINOR (while MAJOR is 0, exactly our MINOR: before 1.0 a
minor version may break the ABI), and pbox_opts_size(), pbox_stats_size(),
pbox_optim_size(), pbox_topk_opts_size() and pbox_dev_opts_size() must
equal the sizes of Opts, Stats, Optim, TopkOpts and DevOpts below (or
exceed them, for a newer minor version whose structs grew). A mismatch
raises OSError saying what was found and what was expected; it is never
skipped.

ctypes releases the GIL around every foreign call, so a thread blocked in
pbox_wait() does not stop other Python threads.

pbox_optim (PS mode, Optim below) is checked the same way, by
pbox_optim_size() (0.10.0 on; before it a library wrote its own size into
the size field, so a newer program's fields went unseen).

Everything typed here by hand from include/pbox.h and include/pbox_cuda.h
(the version, dtypes, error codes in __init__.py, the structs' fields, the
functions' parameters) is compared with the headers by
tests/python/test_abi.py (make pycheck). The codes' names are the
library's (pbox_err_name), not a copy.
"""
import ctypes
import os

from . import _env

# The libpbox version this package was written for: equal to
# PBOX_VERSION_MAJOR.MINOR.PATCH of include/pbox.h (checked by the test), and
# the package's own version (pyproject.toml reads it from here).
__version__ = "0.17.0"
VERSION = tuple(int(x) for x in __version__.split("."))

PBOX_F32 = 0
PBOX_F16 = 1
PBOX_BF16 = 2

# pbox_transport
TRANSPORT_AUTO = 0
TRANSPORT_UDP = 1
TRANSPORT_XDP = 2
TRANSPORT_VERBS = 3
TRANSPORTS = {"auto": TRANSPORT_AUTO, "udp": TRANSPORT_UDP, "xdp": TRANSPORT_XDP,
              "verbs": TRANSPORT_VERBS}

# pbox_optim_kind
PBOX_OPTIM_SGD = 1
PBOX_OPTIM_ADAM = 2
PBOX_OPTIM_ADAMW = 3
OPTIMIZERS = {"sgd": PBOX_OPTIM_SGD, "adam": PBOX_OPTIM_ADAM, "adamw": PBOX_OPTIM_ADAMW}

# pbox_ps_part
PBOX_PS_WEIGHTS = 0
PBOX_PS_STATE0 = 1
PBOX_PS_STATE1 = 2
PS_PARTS = {"weights": PBOX_PS_WEIGHTS, "state0": PBOX_PS_STATE0, "state1": PBOX_PS_STATE1}

# pbox_nonfinite (0: $PBOX_NONFINITE, else abort)
NONFINITE = {"abort": 1, "skip": 2, "pass": 3}


class Opts(ctypes.Structure):
    """pbox_opts. Fill with pbox_opts_init_sized(byref(o), sizeof(Opts))."""
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("timeout_ms", ctypes.c_uint32),
        ("rto_ms", ctypes.c_uint32),
        ("window", ctypes.c_uint32),
        ("mtu", ctypes.c_uint32),
        ("udp_offload", ctypes.c_uint32),
        ("join_secret", ctypes.c_char_p),
        ("transport", ctypes.c_uint32),
        ("busy_poll", ctypes.c_uint32),
        ("job_bytes", ctypes.c_uint64),   # 0.5.0
        ("key_bytes", ctypes.c_uint64),   # 0.8.0
        ("nonfinite", ctypes.c_uint32),   # 0.12.0
        ("local_rank", ctypes.c_uint32),  # 0.14.0: host-local aggregation
        ("local_world", ctypes.c_uint32),
    ]


class Stats(ctypes.Structure):
    """pbox_stats. Read with pbox_get_stats_sized(c, byref(s), sizeof(Stats))."""
    _fields_ = [
        ("pkts_sent", ctypes.c_uint64),
        ("pkts_recv", ctypes.c_uint64),
        ("retransmits", ctypes.c_uint64),
        ("dup_results", ctypes.c_uint64),
        ("bad_packets", ctypes.c_uint64),
        ("calls", ctypes.c_uint64),
        ("rtt_samples", ctypes.c_uint64),
        ("srtt_us", ctypes.c_uint64),
        ("rttvar_us", ctypes.c_uint64),
        ("rto_us", ctypes.c_uint64),
        ("gso_sends", ctypes.c_uint64),
        ("gro_receives", ctypes.c_uint64),
        ("window", ctypes.c_uint64),
        ("mtu", ctypes.c_uint64),
        ("seg_bytes", ctypes.c_uint64),
        ("transport", ctypes.c_uint64),
        ("tx_dropped", ctypes.c_uint64),
        ("rx_lost", ctypes.c_uint64),
        ("wakeups", ctypes.c_uint64),
        ("nacks", ctypes.c_uint64),
        ("waits", ctypes.c_uint64),
        ("fast_retransmits", ctypes.c_uint64),
        ("timeouts", ctypes.c_uint64),
        ("ce_marks", ctypes.c_uint64),
        ("bytes_sent", ctypes.c_uint64),        # 0.6.0
        ("bytes_recv", ctypes.c_uint64),
        ("sparse_entries", ctypes.c_uint64),
        ("key_bytes", ctypes.c_uint64),
        ("gpu_direct_calls", ctypes.c_uint64),  # 0.9.0
        ("gpu_staged_calls", ctypes.c_uint64),
        ("ps_skipped", ctypes.c_uint64),        # 0.12.0
        ("foreign_packets", ctypes.c_uint64),
        ("rejoins", ctypes.c_uint64),           # 0.13.0
        ("finals_sent", ctypes.c_uint64),
    ]


class Optim(ctypes.Structure):
    """pbox_optim. Fill with pbox_optim_init_sized(byref(o), sizeof(Optim), kind)."""
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("kind", ctypes.c_uint32),
        ("lr", ctypes.c_double),
        ("momentum", ctypes.c_double),
        ("dampening", ctypes.c_double),
        ("weight_decay", ctypes.c_double),
        ("beta1", ctypes.c_double),
        ("beta2", ctypes.c_double),
        ("eps", ctypes.c_double),
        ("nesterov", ctypes.c_uint32),
        ("sum", ctypes.c_uint32),
        ("weights_dtype", ctypes.c_uint32),
        ("mean_over", ctypes.c_uint32),   # 0.14.0
    ]


class TopkOpts(ctypes.Structure):
    """pbox_topk_opts. Fill with pbox_topk_opts_init_sized(byref(o), sizeof(TopkOpts))."""
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("error_feedback", ctypes.c_uint32),
        ("density", ctypes.c_double),
        ("momentum", ctypes.c_double),
        ("local_rank", ctypes.c_uint32),
        ("local_size", ctypes.c_uint32),
    ]


class DevOpts(ctypes.Structure):
    """pbox_dev_opts (include/pbox_cuda.h). Fill with
    pbox_dev_opts_init_sized(byref(o), sizeof(DevOpts))."""
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("wire_dtype", ctypes.c_int32),
        ("scale", ctypes.c_double),
        ("chunk_bytes", ctypes.c_uint64),
        ("gpudirect", ctypes.c_int32),          # 0.9.0
    ]


def _candidates():
    env = _env.text("PBOX_LIB")
    if env:
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.normpath(os.path.join(here, "..", "..", "build", "libpbox.so"))
    # installed by `make install`: PREFIX/lib/pythonX.Y/dist-packages/pbox
    # -> PREFIX/lib/libpbox.so.0 (works before ldconfig has run)
    prefix_lib = os.path.normpath(os.path.join(here, "..", "..", "..", "libpbox.so.0"))
    out = [p for p in (tree, prefix_lib) if os.path.exists(p)]
    out += ["libpbox.so.0", "libpbox.so"]
    return out, False


def _declare(lib):
    c_client_p = ctypes.c_void_p
    c_req_p = ctypes.c_void_p
    lib.pbox_version.argtypes = []
    lib.pbox_version.restype = ctypes.c_uint
    lib.pbox_version_string.argtypes = []
    lib.pbox_version_string.restype = ctypes.c_char_p
    lib.pbox_opts_size.argtypes = []
    lib.pbox_opts_size.restype = ctypes.c_size_t
    lib.pbox_stats_size.argtypes = []
    lib.pbox_stats_size.restype = ctypes.c_size_t
    lib.pbox_optim_size.argtypes = []
    lib.pbox_optim_size.restype = ctypes.c_size_t
    lib.pbox_topk_opts_size.argtypes = []                   # 0.11.0
    lib.pbox_topk_opts_size.restype = ctypes.c_size_t
    lib.pbox_dev_opts_size.argtypes = []
    lib.pbox_dev_opts_size.restype = ctypes.c_size_t
    lib.pbox_opts_init_sized.argtypes = [ctypes.POINTER(Opts), ctypes.c_size_t]
    lib.pbox_opts_init_sized.restype = ctypes.c_int
    lib.pbox_connect.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                 ctypes.POINTER(Opts), ctypes.POINTER(c_client_p)]
    lib.pbox_connect.restype = ctypes.c_int
    lib.pbox_allreduce.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                                   ctypes.c_int]
    lib.pbox_allreduce.restype = ctypes.c_int
    lib.pbox_iallreduce.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                                    ctypes.c_int, ctypes.POINTER(c_req_p)]
    lib.pbox_iallreduce.restype = ctypes.c_int
    lib.pbox_wait.argtypes = [c_req_p]
    lib.pbox_wait.restype = ctypes.c_int
    lib.pbox_test.argtypes = [c_req_p]
    lib.pbox_test.restype = ctypes.c_int
    lib.pbox_close.argtypes = [c_client_p]
    lib.pbox_close.restype = None
    lib.pbox_strerror.argtypes = [ctypes.c_int]
    lib.pbox_strerror.restype = ctypes.c_char_p
    lib.pbox_err_name.argtypes = [ctypes.c_int]             # 0.11.0
    lib.pbox_err_name.restype = ctypes.c_char_p
    lib.pbox_last_error.argtypes = [c_client_p]
    lib.pbox_last_error.restype = ctypes.c_char_p
    lib.pbox_get_stats_sized.argtypes = [c_client_p, ctypes.POINTER(Stats), ctypes.c_size_t]
    lib.pbox_get_stats_sized.restype = ctypes.c_int
    lib.pbox_transport_info.argtypes = [c_client_p]
    lib.pbox_transport_info.restype = ctypes.c_char_p
    # PS mode (0.5.0)
    lib.pbox_optim_init_sized.argtypes = [ctypes.POINTER(Optim), ctypes.c_size_t, ctypes.c_int]
    lib.pbox_optim_init_sized.restype = ctypes.c_int
    lib.pbox_declare_optimizer.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_size_t,
                                           ctypes.c_int, ctypes.POINTER(Optim)]
    lib.pbox_declare_optimizer.restype = ctypes.c_int
    lib.pbox_ps_init.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p]
    lib.pbox_ps_init.restype = ctypes.c_int
    lib.pbox_push_pull.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_size_t, ctypes.c_int]
    lib.pbox_push_pull.restype = ctypes.c_int
    lib.pbox_ipush_pull.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_void_p,
                                    ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                    ctypes.POINTER(c_req_p)]
    lib.pbox_ipush_pull.restype = ctypes.c_int
    lib.pbox_set_lr.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_double]
    lib.pbox_set_lr.restype = ctypes.c_int
    lib.pbox_ps_read.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_void_p,
                                 ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint64)]
    lib.pbox_ps_read.restype = ctypes.c_int
    lib.pbox_ps_write.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_void_p,
                                  ctypes.c_size_t]
    lib.pbox_ps_write.restype = ctypes.c_int
    lib.pbox_ps_set_steps.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_uint64]
    lib.pbox_ps_set_steps.restype = ctypes.c_int
    # sparse keys (0.6.0)
    lib.pbox_topk_opts_init_sized.argtypes = [ctypes.POINTER(TopkOpts), ctypes.c_size_t]
    lib.pbox_topk_opts_init_sized.restype = ctypes.c_int
    lib.pbox_iallreduce_topk.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_void_p,
                                         ctypes.c_size_t, ctypes.c_int,
                                         ctypes.POINTER(TopkOpts), ctypes.POINTER(c_req_p)]
    lib.pbox_iallreduce_topk.restype = ctypes.c_int
    lib.pbox_iallreduce_sparse.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_size_t,
                                           ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                           ctypes.c_size_t, ctypes.c_void_p,
                                           ctypes.POINTER(c_req_p)]
    lib.pbox_iallreduce_sparse.restype = ctypes.c_int
    lib.pbox_topk_reset.argtypes = [c_client_p, ctypes.c_uint32]
    lib.pbox_topk_reset.restype = ctypes.c_int
    # the host level's own calls (0.16.0)
    lib.pbox_allreduce_host.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_void_p,
                                        ctypes.c_size_t, ctypes.c_int]
    lib.pbox_allreduce_host.restype = ctypes.c_int
    lib.pbox_host_layout.argtypes = [c_client_p, ctypes.POINTER(ctypes.c_uint32),
                                     ctypes.POINTER(ctypes.c_uint32)]
    lib.pbox_host_layout.restype = ctypes.c_int
    lib.pbox_topk.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p,
                              ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    lib.pbox_topk.restype = ctypes.c_int
    # collectives (0.7.0)
    lib.pbox_ibroadcast.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_void_p,
                                    ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                    ctypes.POINTER(c_req_p)]
    lib.pbox_ibroadcast.restype = ctypes.c_int
    for name in ("pbox_iallgather", "pbox_ireduce_scatter"):
        fn = getattr(lib, name)
        fn.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_size_t, ctypes.c_int, ctypes.POINTER(c_req_p)]
        fn.restype = ctypes.c_int
    lib.pbox_barrier.argtypes = [c_client_p, ctypes.c_uint32]
    lib.pbox_barrier.restype = ctypes.c_int
    # key release (0.8.0)
    lib.pbox_release_keys.argtypes = [c_client_p, ctypes.POINTER(ctypes.c_uint32),
                                      ctypes.c_size_t]
    lib.pbox_release_keys.restype = ctypes.c_int
    # device buffers (0.8.0, include/pbox_cuda.h); a stream is a void *
    lib.pbox_dev_opts_init_sized.argtypes = [ctypes.POINTER(DevOpts), ctypes.c_size_t]
    lib.pbox_dev_opts_init_sized.restype = ctypes.c_int
    lib.pbox_gpu_init.argtypes = [c_client_p]
    lib.pbox_gpu_init.restype = ctypes.c_int
    lib.pbox_iallreduce_dev.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_void_p,
                                        ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p,
                                        ctypes.POINTER(DevOpts), ctypes.POINTER(c_req_p)]
    lib.pbox_iallreduce_dev.restype = ctypes.c_int
    lib.pbox_allreduce_dev.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_void_p,
                                       ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p,
                                       ctypes.POINTER(DevOpts)]
    lib.pbox_allreduce_dev.restype = ctypes.c_int
    # top-k on the device (0.9.0)
    lib.pbox_iallreduce_topk_dev.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_void_p,
                                             ctypes.c_size_t, ctypes.c_void_p,
                                             ctypes.POINTER(TopkOpts), ctypes.POINTER(DevOpts),
                                             ctypes.POINTER(c_req_p)]
    lib.pbox_iallreduce_topk_dev.restype = ctypes.c_int
    lib.pbox_allreduce_topk_dev.argtypes = [c_client_p, ctypes.c_uint32, ctypes.c_void_p,
                                            ctypes.c_size_t, ctypes.c_void_p,
                                            ctypes.POINTER(TopkOpts), ctypes.POINTER(DevOpts)]
    lib.pbox_allreduce_topk_dev.restype = ctypes.c_int
    return lib


class LibraryMismatch(OSError):
    """A libpbox that loads but is not one this package was written for."""


def _vstr(v):
    return "%d.%d.%d" % tuple(v)


def _need(expect):
    """What a library version must be for a package written for `expect`:
    (test of a found (major, minor, patch), text for messages)."""
    if expect[0] == 0:
        return (lambda f: tuple(f[:2]) == tuple(expect[:2]),
                f"{expect[0]}.{expect[1]}.x (before 1.0 the minor version must match too)")
    return (lambda f: f[0] == expect[0] and f[1] >= expect[1],
            f"{expect[0]}.y.z with y >= {expect[1]}")


STRUCTS = (("pbox_opts", Opts), ("pbox_stats", Stats), ("pbox_optim", Optim),
           ("pbox_topk_opts", TopkOpts), ("pbox_dev_opts", DevOpts))


def check(lib, where, expect=VERSION, structs=STRUCTS):
    """Raise LibraryMismatch (an OSError) unless lib, a CDLL loaded from
    `where`, is a libpbox this package can use (module docstring); return
    lib. expect and structs are parameters for the tests only."""
    ok, need = _need(expect)
    fn = getattr(lib, "pbox_version", None)
    if fn is None:
        raise LibraryMismatch(f"pbox: {where} has no pbox_version(), so it is a libpbox older "
                              f"than 0.2.0; this package (pbox {_vstr(expect)}) needs "
                              f"libpbox {need}")
    fn.argtypes = []
    fn.restype = ctypes.c_uint
    v = fn()
    found = (v >> 16, (v >> 8) & 0xFF, v & 0xFF)
    if not ok(found):
        raise LibraryMismatch(f"pbox: {where} is libpbox {_vstr(found)}; this package (pbox "
                              f"{_vstr(expect)}) needs libpbox {need}: install matching "
                              "versions of both, or point PBOX_LIB at the right library")
    # Same MAJOR.MINOR: the same structs. A newer minor version may have
    # grown them; we then use only the part we declare.
    same = tuple(found[:2]) == tuple(expect[:2])
    for name, struct in structs:
        fn = getattr(lib, name + "_size")
        fn.argtypes = []
        fn.restype = ctypes.c_size_t
        theirs, ours = fn(), ctypes.sizeof(struct)
        bad = theirs != ours if same else theirs < ours
        if bad:
            raise LibraryMismatch(f"pbox: struct {name} is {theirs} bytes in {where} (libpbox "
                                  f"{_vstr(found)}) but {ours} bytes as this package declares "
                                  f"it (pbox._lib.{struct.__name__}): the declaration does "
                                  "not match include/pbox.h")
    return lib


_lib = None
_lib_path = None


def load():
    """Return the loaded library (loaded and checked once), or raise OSError.
    A library that loads but fails check() is passed over for the next place
    in the search order (unless it is $PBOX_LIB); if no place is left, the
    LibraryMismatch names it and what was expected."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    names, explicit = _candidates()
    missing, mismatched = [], []
    for n in names:
        try:
            lib = ctypes.CDLL(n)
        except OSError as e:
            missing.append(f"{n}: {e}")
            continue
        try:
            check(lib, n)
        except LibraryMismatch as e:
            if explicit:
                raise
            mismatched.append(str(e))
            continue
        _lib = _declare(lib)
        _lib_path = n
        return _lib
    if explicit:
        raise OSError(f"pbox: cannot load PBOX_LIB: {missing[0].split(': ', 1)[1]}")
    if mismatched:
        raise LibraryMismatch("; ".join(mismatched) + " (also tried: " + "; ".join(missing)
                              + ")")
    raise OSError("pbox: cannot find libpbox.so (set PBOX_LIB=/path/to/libpbox.so, build the "
                  "tree with `make`, or `make install`); tried: " + "; ".join(missing))


def path():
    load()
    return _lib_path
