"""Run in a child process by doctor (it lives with the other child-side scripts): load CUDA
libraries by absolute path, in order, and report.

argv[1]: JSON list of {"soname", "path", "version_symbol"}. Prints one JSON list: for each,
whether it loaded, the file the process actually mapped for that soname, and its version from
``cudaRuntimeGetVersion``/``cudnnGetVersion`` where named. A crash of a library cannot take
doctor down with it: this is a separate process.
"""

import ctypes
import json
import os
import sys


def mapped(soname):
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rsplit(None, 1)[-1]
                if os.path.basename(path) == soname or os.path.basename(path).startswith(soname + "."):
                    return path
    except OSError:
        pass
    return None


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


def main():
    results = []
    for entry in json.loads(sys.argv[1]):
        result = {"soname": entry["soname"], "loaded": False, "mapped": None, "version": None, "error": None}
        try:
            library = ctypes.CDLL(entry["path"], mode=ctypes.RTLD_GLOBAL)
            result["loaded"] = True
            result["mapped"] = mapped(os.path.basename(entry["path"])) or entry["path"]
            if entry.get("version_symbol"):
                result["version"] = version(library, entry["version_symbol"])
        except (OSError, AttributeError) as error:
            result["error"] = str(error)
        results.append(result)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
