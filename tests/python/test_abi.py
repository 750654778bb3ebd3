#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""test_abi.py - the Python package's hand-typed copy of include/pbox.h
against the header and the built library (make pycheck).

The package (python/pbox) types by hand what the C header declares: the
version it was written for, the dtype, PBOX_E*, optimizer-kind and PS-part
values, the ctypes structs and the functions' prototypes (the codes' names
it takes from the library: pbox_err_name). This test parses include/pbox.h and checks each copy against it, loads the
library ($PBOX_LIB, else the tree's build/libpbox.so) and checks the
package's load-time check (pbox._lib.check) both ways: it accepts this
library and refuses, with a message naming what was found and what was
expected, libraries of another version or with structs of another size.

Needs neither torch nor numpy nor root; plain `python3 tests/python/test_abi.py`.
Prints one line per failure and a closing "pyabi: N passed, M failed".
"""
import ctypes
import inspect
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import pbox            # noqa: E402  (after the path is set)
from pbox import _lib  # noqa: E402
from checks import check, check_eq, check_in  # noqa: E402  (tests/python/checks.py)

CTYPES = {"uint32_t": ctypes.c_uint32, "uint64_t": ctypes.c_uint64,
          "int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64, "int": ctypes.c_int,
          "unsigned": ctypes.c_uint, "size_t": ctypes.c_size_t,
          "const char *": ctypes.c_char_p, "double": ctypes.c_double}


# ---- include/pbox.h, parsed -------------------------------------------------

def _header(name="pbox.h"):
    with open(os.path.join(ROOT, "include", name)) as f:
        text = f.read()
    # comments out, so a name in a comment is never taken for a declaration;
    # PBOX_API (the export mark) out, so a declaration reads as plain C
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    return re.sub(r"\bPBOX_API\b", " ", text)


H = _header()
H_CUDA = _header("pbox_cuda.h")


def h_version():
    parts = {}
    for m in re.finditer(r"^\s*#\s*define\s+PBOX_VERSION_(MAJOR|MINOR|PATCH)\s+(\d+)\s*$", H, re.M):
        parts[m.group(1)] = int(m.group(2))
    check_eq(set(parts), {"MAJOR", "MINOR", "PATCH"}, f"pbox.h's PBOX_VERSION_* macros ({parts})")
    return parts["MAJOR"], parts["MINOR"], parts["PATCH"]


def h_error_codes():
    """{'EINVAL': -1, ...} and 'OK': 0 from the enum holding PBOX_OK."""
    m = re.search(r"enum\s*\{([^}]*\bPBOX_OK\b[^}]*)\}", H)
    check(m, "pbox.h: expected an enum holding PBOX_OK, found none")
    codes = {n: int(v) for n, v in re.findall(r"\bPBOX_(OK|E[A-Z0-9_]+)\s*=\s*(-?\d+)", m.group(1))}
    check(len(codes) >= 2, f"pbox.h: expected PBOX_OK and PBOX_E* codes in its enum, "
          f"parsed {codes}")
    return codes


def h_dtypes():
    m = re.search(r"typedef\s+enum\s+pbox_dtype\s*\{([^}]*)\}\s*pbox_dtype\s*;", H)
    check(m, "pbox.h: expected a typedef enum pbox_dtype, found none")
    return {n: int(v) for n, v in re.findall(r"\b(PBOX_[A-Z0-9_]+)\s*=\s*(\d+)", m.group(1))}


def h_struct(name, text=H):
    """[(field, C type), ...] of typedef struct name { ... } name; a
    declaration of several fields ("double beta1, beta2;") gives one each."""
    m = re.search(r"typedef\s+struct\s+%s\s*\{(.*?)\}\s*%s\s*;" % (name, name), text, re.S)
    check(m, f"pbox.h: expected a typedef struct {name}, found none")
    fields = []
    for decl in m.group(1).split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        first, *more = [d.strip() for d in decl.split(",")]
        fm = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_ ]*?(?:\s*\*)?)\s*([A-Za-z_][A-Za-z0-9_]*)", first)
        check(fm, f"pbox.h: {name}: cannot parse the field '{decl}' (extend this test)")
        fields.append((fm.group(2), fm.group(1)))
        for extra in more:
            check(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", extra),
                  f"pbox.h: {name}: cannot parse the field '{decl}' (extend this test)")
            fields.append((extra, fm.group(1)))
    return fields


def h_enum(name):
    """{'PBOX_X': value, ...} of typedef enum name { ... } name;"""
    m = re.search(r"typedef\s+enum\s+%s\s*\{([^}]*)\}\s*%s\s*;" % (name, name), H)
    check(m, f"pbox.h: expected a typedef enum {name}, found none")
    return {n: int(v) for n, v in re.findall(r"\b(PBOX_[A-Z0-9_]+)\s*=\s*(\d+)", m.group(1))}


# ---- the tests ----------------------------------------------------------------

def test_import_needs_no_torch():
    check("torch" not in sys.modules, "import pbox imported torch (expected it not to)")


def test_error_codes_match_header():
    codes = h_error_codes()
    for name, value in codes.items():
        check(hasattr(pbox, name), f"pbox has no {name} (pbox.h: PBOX_{name} = {value})")
        check_eq(getattr(pbox, name), value, f"pbox.{name} (pbox.h's PBOX_{name})")
    # nothing in Python that the header lacks
    ours = {n for n, v in vars(pbox).items()
            if re.fullmatch(r"OK|E[A-Z0-9_]+", n) and isinstance(v, int)}
    check(ours == set(codes), f"pbox's error names: expected pbox.h's {sorted(codes)}, got "
          f"{sorted(ours)} ({sorted(ours - set(codes))} not in pbox.h)")
    check(not hasattr(pbox, "_CODE_NAMES"), "pbox keeps a copy of the codes' names")


def test_error_names_from_library():
    """pbox.err_name and pbox.Error's .name are the library's pbox_err_name
    of each code of pbox.h, without PBOX_; a value that is no code is its
    number."""
    L = _lib.load()
    for name, value in h_error_codes().items():
        check_eq(L.pbox_err_name(value), b"PBOX_" + name.encode(), f"pbox_err_name({value})")
        check_eq(pbox.err_name(value), name, f"pbox.err_name({value})")
        check_eq(pbox.Error(value, "m").name, name, f"pbox.Error({value}).name")
    for value in (1, min(h_error_codes().values()) - 1, -999, 2**31 - 1):
        check_eq(L.pbox_err_name(value), b"PBOX_E?", f"pbox_err_name({value})")
        check_eq(pbox.err_name(value), str(value), f"pbox.err_name({value})")
        check_eq(pbox.Error(value, "m").name, str(value), f"pbox.Error({value}).name")
    e = pbox.Error(pbox.ETIMEDOUT, "key 3 timed out")
    check_eq(str(e), "pbox: key 3 timed out [ETIMEDOUT]", "str(pbox.Error(ETIMEDOUT, ...))")


def test_dtypes_match_header():
    dtypes = h_dtypes()
    check(dtypes, "pbox.h: expected PBOX_* values in enum pbox_dtype, parsed none")
    for name, value in dtypes.items():
        check_eq(getattr(pbox, name, None), value, f"pbox.{name} (pbox.h's {name})")
        check_eq(getattr(_lib, name), value, f"pbox._lib.{name} (pbox.h's {name})")


def _check_struct(cname, cls, text=H):
    want = h_struct(cname, text)
    got = [(n, t) for n, t in cls._fields_]
    check_eq([n for n, _ in got], [n for n, _ in want],
             f"{cls.__name__}'s fields (pbox.h's struct {cname})")
    for (n, t), (_, ctype) in zip(got, want):
        check(ctype in CTYPES, f"pbox.h: {cname}.{n} has type {ctype} (extend CTYPES)")
        check(t is CTYPES[ctype], f"{cls.__name__}.{n}: expected {CTYPES[ctype].__name__} "
              f"(pbox.h says {ctype}), got {t.__name__}")


def test_opts_fields_match_header():
    _check_struct("pbox_opts", _lib.Opts)
    check_eq(_lib.Opts._fields_[0][0], "size", "pbox._lib.Opts's first field (pbox_opts.size "
             "must come first)")


def test_stats_fields_match_header():
    _check_struct("pbox_stats", _lib.Stats)


def test_optim_fields_match_header():
    _check_struct("pbox_optim", _lib.Optim)
    check_eq(ctypes.sizeof(_lib.Optim), 80, "sizeof(pbox._lib.Optim)")


def test_topk_opts_match_header_and_library():
    _check_struct("pbox_topk_opts", _lib.TopkOpts)
    L = _lib.load()
    o = _lib.TopkOpts()
    rc = L.pbox_topk_opts_init_sized(ctypes.byref(o), ctypes.sizeof(o))
    check_eq(rc, 0, "pbox_topk_opts_init_sized(sizeof(TopkOpts))")
    got = (o.size, o.error_feedback, o.density, o.momentum)
    check_eq(got, (ctypes.sizeof(o), 1, 0.01, 0.0),
             "TopkOpts' (size, error_feedback, density, momentum) after init")


def test_dev_opts_match_header_and_library():
    _check_struct("pbox_dev_opts", _lib.DevOpts, H_CUDA)
    L = _lib.load()
    o = _lib.DevOpts()
    rc = L.pbox_dev_opts_init_sized(ctypes.byref(o), ctypes.sizeof(o))
    check_eq(rc, 0, "pbox_dev_opts_init_sized(sizeof(DevOpts))")
    got = (o.size, o.wire_dtype, o.scale, o.chunk_bytes, o.gpudirect)
    check_eq(got, (ctypes.sizeof(o), -1, 1.0, 0, -1),
             "DevOpts' (size, wire_dtype, scale, chunk_bytes, gpudirect) after init")
    check_eq(ctypes.sizeof(o), 32, "sizeof(DevOpts) (0.9.0)")
    # a caller of the first layout (24 bytes) gets the defaults for the rest
    o = _lib.DevOpts()
    rc = L.pbox_dev_opts_init_sized(ctypes.byref(o), 24)
    check_eq((rc, o.size, o.gpudirect), (0, 24, 0),
             "pbox_dev_opts_init_sized(size 24): (result, size, gpudirect)")
    rc = L.pbox_dev_opts_init_sized(ctypes.byref(o), 16)
    check_eq(rc, pbox.EINVAL, "pbox_dev_opts_init_sized(size 16)")


# C types of parameters and results -> what the ctypes declaration must be
_SCALARS = {"int": ctypes.c_int, "unsigned": ctypes.c_uint, "uint32_t": ctypes.c_uint32,
            "uint64_t": ctypes.c_uint64, "size_t": ctypes.c_size_t, "double": ctypes.c_double,
            "float": ctypes.c_float}
_ENUMS = {"pbox_dtype", "pbox_ps_part", "pbox_optim_kind", "pbox_transport"}
_STRUCTS = {"pbox_opts": "Opts", "pbox_stats": "Stats", "pbox_optim": "Optim",
            "pbox_topk_opts": "TopkOpts", "pbox_dev_opts": "DevOpts"}


def h_functions(text):
    """{name: (result C type, [parameter C types])} of the functions
    declared (not defined inline) in a header."""
    out = {}
    text = re.sub(r"^\s*#.*$", ";", text, flags=re.M)   # a directive ends what precedes it
    for m in re.finditer(r"(?:(?<=[;}])|\A)\s*((?:const\s+)?[A-Za-z_][A-Za-z0-9_]*\s*\**)\s*"
                         r"\b(pbox_[a-z0-9_]+)\s*\(([^;{}]*?)\)\s*;", text, re.S):
        ret, name, params = " ".join(m.group(1).split()), m.group(2), m.group(3)
        types = []
        for p in params.split(","):
            p = " ".join(p.split())
            if p in ("void", ""):
                continue
            pm = re.fullmatch(r"(.*?[\s*])([A-Za-z_][A-Za-z0-9_]*)", p)
            check(pm, f"{name}: cannot parse the parameter '{p}' (extend this test)")
            types.append(re.sub(r"\s*\*", " *", pm.group(1).strip()).replace("  ", " "))
        out[name] = (ret.replace(" *", "*").replace("*", " *"), types)
    return out


def _ctype_ok(ctype, decl, where):
    """Check that the ctypes declaration decl fits the C type ctype."""
    base = ctype.replace("const ", "").strip()
    if base.endswith("*"):
        stars = base.count("*")
        pointee = base.rstrip("* ").strip()
        if stars == 2:   # pbox_client **, pbox_req **: out-parameters of handles
            ok = getattr(decl, "_type_", None) is ctypes.c_void_p
        elif pointee in _STRUCTS:
            ok = decl is ctypes.POINTER(getattr(_lib, _STRUCTS[pointee]))
        elif pointee == "char":
            ok = decl is ctypes.c_char_p
        else:            # buffers and handles
            ok = decl is ctypes.c_void_p or (
                hasattr(decl, "_type_") and _SCALARS.get(pointee) is decl._type_)
    elif base in _ENUMS:
        ok = decl is ctypes.c_int
    elif base == "void":
        ok = decl is None
    else:
        check(base in _SCALARS, f"{where}: C type {ctype} (extend _SCALARS)")
        ok = decl is _SCALARS[base]
    check(ok, f"{where}: expected the ctypes type of C '{ctype}', ctypes declares "
          f"{getattr(decl, '__name__', decl)}")


def test_functions_match_headers():
    """Every function the package declares has the parameters and result
    pbox.h / pbox_cuda.h give it; every function of pbox_cuda.h is declared."""
    L = _lib.load()
    funcs = dict(h_functions(H))
    cuda = h_functions(H_CUDA)
    check_eq(sorted(cuda), sorted({"pbox_dev_opts_init_sized", "pbox_dev_opts_size",
                                   "pbox_gpu_init", "pbox_iallreduce_dev", "pbox_allreduce_dev",
                                   "pbox_iallreduce_topk_dev", "pbox_allreduce_topk_dev"}),
             "pbox_cuda.h's functions as parsed")
    funcs.update(cuda)
    check(len(funcs) > 40, f"pbox.h: expected more than 40 functions, parsed {len(funcs)}: "
          f"{sorted(funcs)}")
    checked = 0
    for name, (ret, params) in sorted(funcs.items()):
        fn = getattr(L, name, None)
        check(fn is not None, f"{_lib.path()} does not export {name}")
        if name not in cuda and fn.argtypes is None:
            continue        # not used by the package
        check(fn.argtypes is not None, f"pbox._lib declares no argtypes for {name}")
        check_eq(len(fn.argtypes), len(params),
                 f"{name}: parameters declared (the header's number)")
        for i, (ct, decl) in enumerate(zip(params, fn.argtypes)):
            _ctype_ok(ct, decl, f"{name} parameter {i + 1}")
        _ctype_ok(ret, fn.restype, f"{name} result")
        checked += 1
    declared = {n for n, v in vars(L).items()
                if n.startswith("pbox_") and getattr(v, "argtypes", None) is not None}
    check(declared <= set(funcs),
          f"pbox._lib declares {sorted(declared - set(funcs))}, which no header declares")
    check_eq(checked, len(declared), "functions checked (as many as pbox._lib declares)")


def test_optim_kinds_and_ps_parts_match_header():
    kinds = h_enum("pbox_optim_kind")
    want = {f"PBOX_OPTIM_{n.upper()}": v for n, v in _lib.OPTIMIZERS.items()}
    check_eq(want, kinds, "pbox._lib.OPTIMIZERS as PBOX_OPTIM_* (pbox.h's pbox_optim_kind)")
    for n, v in kinds.items():
        check_eq(getattr(_lib, n), v, f"pbox._lib.{n} (pbox.h's)")
    parts = h_enum("pbox_ps_part")
    want = {f"PBOX_PS_{n.upper()}": v for n, v in _lib.PS_PARTS.items()}
    check_eq(want, parts, "pbox._lib.PS_PARTS as PBOX_PS_* (pbox.h's pbox_ps_part)")


def test_client_takes_every_option():
    params = inspect.signature(pbox.Client.__init__).parameters
    kw = [n for n, p in params.items() if p.kind == p.KEYWORD_ONLY]
    opts = [n for n, _ in _lib.Opts._fields_ if n != "size"]
    check_eq(kw, opts, "pbox.Client's keyword options (pbox_opts' fields)")


def test_package_version_is_header_version():
    want = "%d.%d.%d" % h_version()
    check_eq(pbox.__version__, want, "pbox.__version__ (pbox.h's)")
    check_eq(_lib.VERSION, h_version(), "pbox._lib.VERSION (pbox.h's)")


def test_pyproject_takes_version_from_package():
    with open(os.path.join(ROOT, "python", "pyproject.toml")) as f:
        text = f.read()
    try:
        import tomllib
        doc = tomllib.loads(text)
        project, dyn = doc["project"], doc["tool"]["setuptools"]["dynamic"]
        check("version" not in project, "pyproject.toml writes a version of its own")
        check_in("version", project.get("dynamic", []), "pyproject.toml's [project] dynamic")
        check_eq(dyn["version"], {"attr": "pbox._lib.__version__"},
                 "pyproject.toml's [tool.setuptools.dynamic] version")
    except ImportError:  # Python < 3.11: the lines themselves
        check(not re.search(r"^version\s*=\s*\"", text, re.M), "pyproject.toml writes a version")
        check(re.search(r'^version\s*=\s*\{\s*attr\s*=\s*"pbox\._lib\.__version__"\s*\}',
                        text, re.M), "pyproject.toml does not read pbox._lib.__version__")


def test_library_loads_and_matches():
    L = _lib.load()
    v = h_version()
    want = v[0] << 16 | v[1] << 8 | v[2]
    where = _lib.path()
    got = L.pbox_version()
    check(got == want, f"{where}: pbox_version(): expected {want:#x} (pbox.h), got {got:#x}")
    check_eq(pbox.library_version(), "%d.%d.%d" % v, f"{where}: pbox_version_string() (pbox.h's)")
    # every struct the headers show is checked at load (exports.sh: each has its getter)
    shown = set(re.findall(r"typedef\s+struct\s+(pbox_[a-z0-9_]+)\s*\{", H + H_CUDA))
    check_eq({n for n, _ in _lib.STRUCTS}, shown, "pbox._lib.STRUCTS (the headers' structs)")
    for name, cls in _lib.STRUCTS:
        theirs = getattr(L, f"{name}_size")()
        check_eq(theirs, ctypes.sizeof(cls),
                 f"{where}: {name}_size() (sizeof(pbox._lib.{cls.__name__}))")


def test_library_opts_init_and_stats_sizes():
    L = _lib.load()
    o = _lib.Opts()
    rc = L.pbox_opts_init_sized(ctypes.byref(o), ctypes.sizeof(o))
    check_eq(rc, 0, "pbox_opts_init_sized(sizeof(Opts))")
    got = (o.size, o.timeout_ms, o.window)
    check_eq(got, (ctypes.sizeof(o), 1800000, 128), "Opts' (size, timeout_ms, window) after init")
    rc = L.pbox_opts_init_sized(ctypes.byref(o), 0)
    check_eq(rc, pbox.EINVAL, "pbox_opts_init_sized(size 0)")
    s = _lib.Stats()
    rc = L.pbox_get_stats_sized(None, ctypes.byref(s), ctypes.sizeof(s))
    check_eq(rc, pbox.EINVAL, "pbox_get_stats_sized(NULL client)")


def test_library_optim_init_takes_ours():
    """pbox_optim_init_sized fills ours whole and keeps our size (a larger
    one too: its unknown tail zeroed, for pbox_declare_optimizer to judge)."""
    L = _lib.load()
    o = _lib.Optim()
    rc = L.pbox_optim_init_sized(ctypes.byref(o), ctypes.sizeof(o), _lib.PBOX_OPTIM_ADAMW)
    check_eq(rc, 0, "pbox_optim_init_sized(sizeof(Optim), ADAMW)")
    got = (o.size, o.kind, o.lr, o.weight_decay, o.beta1, o.beta2, o.eps, o.weights_dtype)
    check_eq(got, (80, _lib.PBOX_OPTIM_ADAMW, 0.001, 0.01, 0.9, 0.999, 1e-8, 0),
             "Optim's (size, kind, lr, weight_decay, beta1, beta2, eps, weights_dtype) after init")
    rc = L.pbox_optim_init_sized(ctypes.byref(o), 72, _lib.PBOX_OPTIM_SGD)
    check_eq(rc, pbox.EINVAL, "pbox_optim_init_sized(size 72)")
    big = (ctypes.c_ubyte * (ctypes.sizeof(o) + 16))(*([0xAB] * (ctypes.sizeof(o) + 16)))
    rc = L.pbox_optim_init_sized(ctypes.cast(big, ctypes.POINTER(_lib.Optim)), len(big),
                                 _lib.PBOX_OPTIM_SGD)
    check_eq(rc, 0, f"pbox_optim_init_sized({len(big)} bytes)")
    size = ctypes.c_uint32.from_buffer(big).value
    check_eq(size, len(big), "the size field (the caller's size)")
    check_eq(bytes(big[ctypes.sizeof(o):]), bytes(16), "the unknown tail (zeroed)")


def test_library_names_every_code():
    unknown = pbox.strerror(-999)
    for name, value in h_error_codes().items():
        check(pbox.strerror(value) != unknown,
              f"libpbox has no text for PBOX_{name}: pbox.strerror({value}) is {unknown!r}, "
              "an unknown code's")


def test_client_opts_accepted_by_library():
    """pbox.Client's Opts (with its size) passes pbox_connect's checks: a
    refused port gives ECONNECT, not EINVAL."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))    # bound, not listening: refused at once
        port = s.getsockname()[1]
        try:
            pbox.Client(control=f"127.0.0.1:{port}", job="abi", rank=0, world=1, window=64,
                        mtu=9000, timeout_ms=2000)
        except pbox.Error as e:
            check_eq(e.code, pbox.ECONNECT, f"pbox.Client on a refused port: the code of "
                     f"{e.name}: {e.message}")
            return
    raise AssertionError("pbox.Client connected to a port nobody listens on")


# A fake library for check(): pbox_version and the size functions.
def _fake(version=None, **sizes):
    """sizes: opts=, stats=, optim=, topk_opts=, dev_opts= (default: ours)"""
    class Fake:
        pass
    lib = Fake()
    if version is not None:
        lib.pbox_version = lambda: version[0] << 16 | version[1] << 8 | version[2]
    for name, cls in _lib.STRUCTS:
        n = sizes.pop(name[len("pbox_"):], ctypes.sizeof(cls))
        setattr(lib, name + "_size", lambda n=n: n)
    check(not sizes, f"_fake: no struct {sorted(sizes)}")
    return lib


def _refused(lib, expect=None, *words):
    try:
        if expect is None:
            _lib.check(lib, "/x/libpbox.so")
        else:
            _lib.check(lib, "/x/libpbox.so", expect=expect)
    except _lib.LibraryMismatch as e:
        check(isinstance(e, OSError), f"expected LibraryMismatch to be an OSError, its classes "
              f"are {type(e).__mro__}")
        for w in ("/x/libpbox.so",) + words:
            check_in(w, str(e), "check()'s message")
        return str(e)
    raise AssertionError("check() accepted it")


def test_check_accepts_own_version():
    _lib.check(_fake(_lib.VERSION), "/x/libpbox.so")
    _lib.check(_fake((0, 2, 7)), "/x/libpbox.so", expect=(0, 2, 0))   # patch differs


def test_check_refuses_other_major():
    _refused(_fake((1, 2, 0)), (0, 2, 0), "libpbox 1.2.0", "pbox 0.2.0", "needs libpbox 0.2.x")
    _refused(_fake((2, 0, 0)), (1, 3, 0), "libpbox 2.0.0", "needs libpbox 1.y.z with y >= 3")


def test_check_refuses_other_minor_before_1_0():
    _refused(_fake((0, 1, 0)), (0, 2, 0), "libpbox 0.1.0", "minor version must match")
    _refused(_fake((0, 3, 0)), (0, 2, 0), "libpbox 0.3.0", "minor version must match")


def test_check_minor_after_1_0_older_refused_newer_may_grow():
    _refused(_fake((1, 2, 0)), (1, 3, 0), "libpbox 1.2.0", "y >= 3")
    big = ctypes.sizeof(_lib.Opts) + 8
    _lib.check(_fake((1, 4, 0), opts=big), "/x/libpbox.so", expect=(1, 3, 0))
    _refused(_fake((1, 4, 0), opts=ctypes.sizeof(_lib.Opts) - 4), (1, 3, 0), "pbox_opts")


def test_check_refuses_library_without_version():
    _refused(_fake(None), None, "no pbox_version()", "older than 0.2.0")


def test_check_refuses_struct_size_mismatch():
    n = ctypes.sizeof(_lib.Opts)
    _refused(_fake(_lib.VERSION, opts=n + 4), None, "struct pbox_opts", f"is {n + 4} bytes",
             f"but {n} bytes", "pbox._lib.Opts")
    n = ctypes.sizeof(_lib.Stats)
    _refused(_fake(_lib.VERSION, stats=n - 8), None, "struct pbox_stats", f"is {n - 8} bytes",
             f"but {n} bytes", "pbox._lib.Stats")
    # a library whose pbox_optim is smaller would not see our fields beyond it
    n = ctypes.sizeof(_lib.Optim)
    _refused(_fake(_lib.VERSION, optim=n - 8), None, "struct pbox_optim", f"is {n - 8} bytes",
             f"but {n} bytes", "pbox._lib.Optim")
    n = ctypes.sizeof(_lib.TopkOpts)
    _refused(_fake(_lib.VERSION, topk_opts=n + 8), None, "struct pbox_topk_opts",
             f"is {n + 8} bytes", f"but {n} bytes", "pbox._lib.TopkOpts")
    n = ctypes.sizeof(_lib.DevOpts)
    _refused(_fake(_lib.VERSION, dev_opts=n - 8), None, "struct pbox_dev_opts",
             f"is {n - 8} bytes", f"but {n} bytes", "pbox._lib.DevOpts")


def test_load_refuses_mismatched_pbox_lib():
    """End to end: PBOX_LIB names a library of another version; loading it
    (in a fresh interpreter) raises the mismatch."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise Skip("needs a C compiler (cc) to build a fake libpbox")
    with tempfile.TemporaryDirectory() as d:
        src, so = os.path.join(d, "fake.c"), os.path.join(d, "libpbox.so")
        with open(src, "w") as f:
            f.write("unsigned pbox_version(void) { return 0x010000; }\n")
        subprocess.run([cc, "-shared", "-fPIC", "-o", so, src], check=True)
        env = dict(os.environ, PBOX_LIB=so, PYTHONPATH=os.path.join(ROOT, "python"))
        r = subprocess.run([sys.executable, "-c", "import pbox\n"
                            "try:\n    pbox.Client(control='h:1', job='j', rank=0, world=1)\n"
                            "except OSError as e:\n    print(type(e).__name__, e)\n"],
                           env=env, capture_output=True, text=True, timeout=60)
        out = r.stdout + r.stderr
        check(r.returncode == 0 and out.startswith("LibraryMismatch"),
              f"expected exit 0 and LibraryMismatch printed, got exit {r.returncode}: {out}")
        for w in (so, "libpbox 1.0.0", "needs libpbox %d.%d.x" % _lib.VERSION[:2]):
            check_in(w, out, "the fresh interpreter's output")


class Skip(Exception):
    pass


def main():
    tests = [(n, f) for n, f in globals().items() if n.startswith("test_") and callable(f)]
    passed = failed = skipped = 0
    for name, f in tests:
        try:
            f()
        except Skip as e:
            skipped += 1
            print(f"SKIP {name}: {e}")
            continue
        except Exception as e:  # noqa: BLE001 (report every kind of failure)
            failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}")
            traceback.print_exc(limit=3)
            continue
        passed += 1
    print(f"pyabi: {passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
