"""Run in a child process by doctor (it lives with the other child-side scripts): load CUDA
libraries by absolute path, in order, then the names CUDA libraries dlopen without a version, and
report every file the process mapped.

argv[1]: JSON list of {"soname", "path", "version_symbol"}; on stdin an optional third list:
the paths the env's load hook loads before TensorFlow's own (another CUDA stack's copies), loaded
first here too so that the probe's process holds what TensorFlow's does. argv[2] (optional): JSON list of
{"name", "caller", "runpath"}: a name such as ``libnvrtc.so`` that the library ``caller`` (an
absolute path) passes to ``dlopen``, and the caller's RUNPATH with ``$ORIGIN`` expanded. Without
arguments, both lists come on stdin as one JSON array (doctor's way: a long RUNPATH list or many
names would pass the kernel's limit on one argument, 128 KiB, and the probe would not start).

Prints one JSON object: "libraries", for each of argv[1] whether it loaded, the file a lookup by its
SONAME gets (``mapped``; ``own``, the file named), and the version that copy reports where named; "dlopened", for each of argv[2] the file the name resolved to and how; "mapped", every
shared object in /proc/self/maps; "uses", ``libuse.uses()``. A crash of a library cannot take doctor down with it: this is a
separate process.

The dlopened names are looked up in the order glibc's loader uses for a ``dlopen`` called from a
library with DT_RUNPATH (man 3 dlopen): an object already loaded under that name, LD_LIBRARY_PATH,
the caller's RUNPATH, then ld.so.cache and the default directories. A ``dlopen`` made from Python
has ctypes as its caller, not cuDNN, so the RUNPATH step is walked here by hand and the rest is
left to the loader; the file it maps is read back from the loader itself (``dlinfo``).
"""

import ctypes
import json
import os
import re
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # libuse beside this file; -I leaves it out
import libuse  # noqa: E402 - which copy of each library the process uses, as the loader answers

origin = libuse.origin
"""The file the loader mapped for a loaded library, links resolved (None if it cannot say)."""


def mapped_files():
    found = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.split(None, 5)[-1].strip() if line.count(" ") >= 5 else ""
                if path.startswith("/") and ".so" in os.path.basename(path) and path not in found:
                    found.append(path)
    except OSError:
        pass
    return found


def version(library, symbol):
    function = getattr(library, symbol)
    if symbol == "cudaRuntimeGetVersion":
        value = ctypes.c_int(0)
        function(ctypes.byref(value))
        return "%d.%d" % (value.value // 1000, value.value % 1000 // 10)
    function.restype = ctypes.c_size_t
    value = function()
    if value >= 90000:  # cuDNN 9: major*10000 + minor*100 + patch
        return "%d.%d.%d" % (value // 10000, value % 10000 // 100, value % 100)
    return "%d.%d.%d" % (value // 1000, value % 1000 // 100, value % 100)  # cuDNN <= 8


def open_library(path):
    """``dlopen`` of the file at ``path``, only when it is a regular file: the loader opens and reads
    whatever the name is, so a FIFO named like a library (an env's file is the env's to craft) would
    block this probe until doctor's timeout, and a device would be read for ever. OSError, as
    ``dlopen``'s own refusals, when it is something else."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        raise OSError("%s: %s" % (path, error.strerror)) from None
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode) else "a device or socket"
        raise OSError("%s: not a regular file (%s): not loaded" % (path, kind))
    return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


def load(entry):
    result = {"soname": entry["soname"], "loaded": False, "mapped": None, "own": None, "version": None,
              "error": None}
    try:
        library = open_library(entry["path"])
        result["loaded"] = True
        result["own"] = origin(library) or entry["path"]
        # What TensorFlow's dlopen(soname) gets: the first object loaded with that SONAME, which is
        # not this file where the load hook loaded the other CUDA stack's copy first.
        library = loaded_copy(entry["soname"]) or library
        result["mapped"] = origin(library) or result["own"]
        if entry.get("version_symbol"):
            result["version"] = version(library, entry["version_symbol"])
    except (OSError, AttributeError) as error:
        result["error"] = str(error)
    return result


def loaded_copy(name):
    """The object already loaded under the SONAME ``name`` (``RTLD_NOLOAD``: a lookup by name that
    loads nothing and opens no file), or None when none is."""
    try:
        return ctypes.CDLL(name, mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
    except OSError:
        return None


def load_first(paths):
    """What the env's load hook loads before TensorFlow's own libraries (its OTHER_FIRST), each
    through :func:`open_library` (a path in the hook is the env's to craft)."""
    for path in paths:
        try:
            open_library(path)
        except OSError:
            pass  # the hook skips it the same way; doctor's libs.* findings name missing files


def ld_library_path(value):
    """LD_LIBRARY_PATH's directories as glibc's loader splits them (elf/dl-load.c): ':' and ';' both
    separate, and an empty entry (``:x``, ``x:``, ``a::b``) is the current directory."""
    return [directory or "." for directory in re.split("[:;]", value)] if value else []


def resolve(entry):
    """Where ``dlopen(name)`` called from ``caller`` lands, in the loader's order."""
    name = entry["name"]
    # "found": the name as the search found it (a link in the caller's RUNPATH), before links are followed
    result = {"name": name, "caller": entry["caller"], "path": None, "via": None, "error": None, "found": None}
    try:
        open_library(entry["caller"])
    except OSError as error:
        result["error"] = "the caller does not load: %s" % error
    try:
        library = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
        result["via"], result["path"] = "already loaded", origin(library)
        return result
    except OSError:
        pass
    steps = (("LD_LIBRARY_PATH", ld_library_path(os.environ.get("LD_LIBRARY_PATH", ""))),
             ("RUNPATH of " + os.path.basename(entry["caller"]), entry["runpath"]))
    for via, directories in steps:
        for directory in directories:
            candidate = os.path.join(directory, name) if directory else ""
            if candidate and os.path.exists(candidate):
                result["found"] = candidate
                try:
                    library = open_library(candidate)
                    result["via"], result["path"] = via, origin(library) or os.path.realpath(candidate)
                except OSError as error:
                    result["via"], result["path"], result["error"] = via, os.path.realpath(candidate), str(error)
                return result
    try:
        library = ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)  # what is left: ld.so.cache, default dirs
        result["via"], result["path"] = "ld.so.cache", origin(library)
    except OSError as error:
        result["via"], result["error"] = "missing", str(error)
    return result


def main():
    if len(sys.argv) > 1:
        todo, names = json.loads(sys.argv[1]), json.loads(sys.argv[2]) if len(sys.argv) > 2 else []
    else:  # on stdin, the two lists in one array: no length is too long for an argument
        lists = json.loads(sys.stdin.read())
        todo, names = lists[0], lists[1]
        load_first(lists[2] if len(lists) > 2 else [])
    libraries = [load(entry) for entry in todo]
    dlopened = [resolve(entry) for entry in names]
    print(json.dumps({"libraries": libraries, "dlopened": dlopened, "mapped": mapped_files(),
                      "uses": libuse.uses()}))


if __name__ == "__main__":
    main()
