"""Run inside a framework's process (``verify``, ``verify --with``, doctor's library probe): which
copy of each CUDA library this process USES, as the loader answers it, and which wheel it came from.

A process can map two files of one SONAME (an env with TensorFlow's CUDA 12 set kept apart next to
torch's CUDA 13 set maps two ``libcudnn.so.9``). Every ``dlopen("libnccl.so.2")`` that TensorFlow's
stubs make, every sub-library cuDNN's ``libcudnn.so.9`` opens, and every DT_NEEDED of torch's
libraries is answered by the FIRST object loaded with that SONAME (glibc's ``_dl_map_object``
matches the names of loaded objects before it searches), whichever file the other copy is. So the
copy in use is read from the loader with ``dlopen(soname, RTLD_NOLOAD)`` and ``dlinfo``, not from
the list of files mapped. The version is asked of that copy (``cudnnGetVersion``,
``ncclGetVersion``, ...), and the wheel that installed the file is read from its RECORD.

Standard library only: it runs on whatever Python the env has. Files are read with bounded reads
(an ELF's headers, a RECORD's first MiB): a file the loader has mapped is a regular file.
"""

import ctypes
import os
import stat
import struct

PREFIXES = ("libcudart", "libcublas", "libcudnn", "libcufft", "libcurand", "libcusolver", "libcusparse",
            "libnccl", "libnvrtc", "libnvJitLink", "libcupti", "libnvshmem")
"""The CUDA libraries whose copy matters (the driver's libcuda and libnvidia-* have one copy)."""

RTLD_DI_LINKMAP = 2
_ELF_HEAD = 64
_MAX_PHDRS = 128
_MAX_DYNAMIC = 4096
_MAX_RECORD = 1 << 20


class _LinkMap(ctypes.Structure):
    _fields_ = [("l_addr", ctypes.c_void_p), ("l_name", ctypes.c_char_p)]


def _dlinfo():
    for name in (None, "libdl.so.2"):
        try:
            return ctypes.CDLL(name).dlinfo
        except (OSError, AttributeError):
            continue
    return None


DLINFO = _dlinfo()


def origin(handle):
    """The file the loader mapped for a handle (a ``ctypes.CDLL``), links resolved, or None."""
    if DLINFO is None:
        return None
    pointer = ctypes.POINTER(_LinkMap)()
    if DLINFO(ctypes.c_void_p(handle._handle), RTLD_DI_LINKMAP, ctypes.byref(pointer)) != 0 or not pointer:
        return None
    name = pointer.contents.l_name
    return os.path.realpath(name.decode("utf-8", "replace")) if name else None


def mapped_libraries():
    """Every CUDA library file mapped into this process (/proc/self/maps), in map order."""
    found = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.split(None, 5)[-1].strip() if line.count(" ") >= 5 else ""
                if path.startswith("/") and os.path.basename(path).startswith(PREFIXES) and path not in found:
                    found.append(path)
    except OSError:
        pass
    return found


def _open_regular(path):
    """A binary file object for ``path`` if it is a regular file, else None: a FIFO or a device
    planted where a RECORD is looked for would block or never end a read."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.close(descriptor)
            return None
    except OSError:
        os.close(descriptor)
        return None
    return os.fdopen(descriptor, "rb")


def soname(path):
    """DT_SONAME of a 64-bit little-endian ELF file, or None: its dynamic section found through the
    program headers, the string table's address turned into a file offset through PT_LOAD."""
    handle = _open_regular(path)
    if handle is None:
        return None
    try:
        with handle:
            head = handle.read(_ELF_HEAD)
            if len(head) < _ELF_HEAD or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            phoff, = struct.unpack_from("<Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            if phentsize < 56 or phnum > _MAX_PHDRS:
                return None
            handle.seek(phoff)
            table = handle.read(phentsize * phnum)
            loads, dynamic = [], None
            for i in range(len(table) // phentsize):
                kind, _, offset, vaddr, _, filesz, _, _ = struct.unpack_from("<IIQQQQQQ", table, i * phentsize)
                if kind == 1:
                    loads.append((vaddr, offset, filesz))
                elif kind == 2:
                    dynamic = (offset, min(filesz, 16 * _MAX_DYNAMIC))
            if dynamic is None:
                return None
            handle.seek(dynamic[0])
            raw = handle.read(dynamic[1])
            strtab = name_at = None
            for i in range(len(raw) // 16):
                tag, value = struct.unpack_from("<qQ", raw, i * 16)
                if tag == 0:
                    break
                if tag == 5:
                    strtab = value
                elif tag == 14:
                    name_at = value
            if strtab is None or name_at is None:
                return None
            where = next((offset + strtab - vaddr for vaddr, offset, size in loads if vaddr <= strtab < vaddr + size),
                         None)
            if where is None:
                return None
            handle.seek(where + name_at)
            text = handle.read(256).split(b"\0", 1)[0]
            return text.decode("ascii", "replace") or None
    except (OSError, struct.error, ValueError):
        return None


_RECORDS = {}  # type: dict


def _records(site):
    """{relative file path: "dist version"} from the RECORDs of the wheels installed in ``site``."""
    if site in _RECORDS:
        return _RECORDS[site]
    owners = {}
    try:
        names = sorted(os.listdir(site))
    except OSError:
        names = []
    for name in names:
        if not name.endswith(".dist-info"):
            continue
        dist, _, version = name[: -len(".dist-info")].partition("-")
        record = _open_regular(os.path.join(site, name, "RECORD"))
        if record is None:
            continue
        try:
            with record:
                text = record.read(_MAX_RECORD).decode("utf-8", "replace")
        except OSError:
            continue
        for line in text.splitlines():
            owners.setdefault(line.split(",", 1)[0], "%s %s" % (dist.replace("_", "-"), version))
    _RECORDS[site] = owners
    return owners


def package(path):
    """The wheel that installed ``path`` ("nvidia-cudnn-cu13 9.19.0.56"): the RECORD of the
    site directory above its ``nvidia/`` folder (site-packages, or a CUDA set kept apart)."""
    parts = path.split(os.sep)
    if "nvidia" not in parts:
        return None
    at = len(parts) - 1 - parts[::-1].index("nvidia")
    site = os.sep.join(parts[:at]) or os.sep
    return _records(site).get("/".join(parts[at:]))


def _int_out(library, symbol, *first):
    function = getattr(library, symbol)
    value = ctypes.c_int(0)
    if function(*first, ctypes.byref(value)) != 0:
        return None
    return value.value


def _property(library, symbol):
    parts = [_int_out(library, symbol, ctypes.c_int(kind)) for kind in (0, 1, 2)]
    return None if None in parts else "%d.%d.%d" % tuple(parts)


def version(library, name):
    """The version the copy itself reports, or None where it has no such call."""
    try:
        if name.startswith("libcudnn"):
            function = library.cudnnGetVersion
            function.restype = ctypes.c_size_t
            value = function()
            if value >= 90000:
                return "%d.%d.%d" % (value // 10000, value % 10000 // 100, value % 100)
            return "%d.%d.%d" % (value // 1000, value % 1000 // 100, value % 100)
        if name.startswith("libnccl"):
            value = _int_out(library, "ncclGetVersion")
            if value is None:
                return None
            if value >= 20900:
                return "%d.%d.%d" % (value // 10000, value % 10000 // 100, value % 100)
            return "%d.%d.%d" % (value // 1000, value % 1000 // 100, value % 100)
        if name.startswith("libcudart"):
            value = _int_out(library, "cudaRuntimeGetVersion")
            return None if value is None else "%d.%d" % (value // 1000, value % 1000 // 10)
        if name.startswith("libcusparse"):
            return _property(library, "cusparseGetProperty")
        if name.startswith("libcurand"):
            return _property(library, "curandGetProperty")
        if name.startswith("libcublasLt"):
            return _property(library, "cublasLtGetProperty")
        if name.startswith("libcublas"):
            return _property(library, "cublasGetProperty")
        if name.startswith("libcufft"):
            return _property(library, "cufftGetProperty")
    except (AttributeError, OSError, ValueError):
        return None
    return None


def uses(with_versions=True):
    """{soname: {"path", "version", "package", "copies"}} for each CUDA library mapped here:
    ``path`` the copy a lookup by SONAME gets (what the frameworks and cuDNN's sub-library loads
    get), ``copies`` every file of that SONAME mapped (more than one: two stacks in one process)."""
    copies = {}
    for path in mapped_libraries():
        name = soname(path) or os.path.basename(path)
        copies.setdefault(name, []).append(path)
    result = {}
    for name in sorted(copies):
        entry = {"path": None, "version": None, "package": None, "copies": copies[name]}
        try:
            library = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
        except OSError:
            library = None  # mapped but not under that name (loaded by a path of another soname)
        if library is not None:
            entry["path"] = origin(library)
            if with_versions:
                entry["version"] = version(library, name)
        path = entry["path"] or copies[name][0]
        entry["package"] = package(path)
        result[name] = entry
    return result
