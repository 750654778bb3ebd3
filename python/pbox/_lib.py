"""Locate and load libpbox.so and declare its functions for ctypes.

Search order (first that loads wins):
  1. $PBOX_LIB (a path to libpbox.so; an error if set but unloadable),
  2. build/libpbox.so of the source tree this package sits in
     (python/pbox -> ../../build/libpbox.so),
  3. PREFIX/lib/libpbox.so.0 when the package was installed by `make
     install` into PREFIX/lib/pythonX.Y/dist-packages,
  4. the system loader: libpbox.so.0, then libpbox.so.

ctypes releases the GIL around every foreign call, so a thread blocked in
pbox_wait() does not stop other Python threads.
"""
import ctypes
import os

PBOX_F32 = 0
PBOX_F16 = 1
PBOX_BF16 = 2


class Opts(ctypes.Structure):
    _fields_ = [
        ("timeout_ms", ctypes.c_uint32),
        ("rto_ms", ctypes.c_uint32),
        ("window", ctypes.c_uint32),
        ("mtu", ctypes.c_uint32),
        ("udp_offload", ctypes.c_uint32),
    ]


class Stats(ctypes.Structure):
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
    ]


def _candidates():
    env = os.environ.get("PBOX_LIB")
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
    lib.pbox_opts_init.argtypes = [ctypes.POINTER(Opts)]
    lib.pbox_opts_init.restype = None
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
    lib.pbox_last_error.argtypes = [c_client_p]
    lib.pbox_last_error.restype = ctypes.c_char_p
    lib.pbox_get_stats.argtypes = [c_client_p, ctypes.POINTER(Stats)]
    lib.pbox_get_stats.restype = None
    return lib


_lib = None
_lib_path = None


def load():
    """Return the loaded library (loaded once), or raise OSError naming
    every place tried."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    names, explicit = _candidates()
    errors = []
    for n in names:
        try:
            lib = ctypes.CDLL(n)
        except OSError as e:
            errors.append(f"{n}: {e}")
            continue
        _lib = _declare(lib)
        _lib_path = n
        return _lib
    if explicit:
        raise OSError(f"pbox: cannot load PBOX_LIB: {errors[0].split(': ', 1)[1]}")
    raise OSError("pbox: cannot find libpbox.so (set PBOX_LIB=/path/to/libpbox.so, build the "
                  "tree with `make`, or `make install`); tried: " + "; ".join(errors))


def path():
    load()
    return _lib_path
