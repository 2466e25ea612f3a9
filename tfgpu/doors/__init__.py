"""The doors: each kind of untrusted input or risky write passes through one module here.

Reads of files others wrote (untrusted), URLs (urls), requirement strings (requirements), text
that reaches a shell, YAML or a terminal (quoting, controls), credentials (secrets), output paths
(paths), ownership of what may be deleted (owner), Python source read as data (pysource) and
descriptor-relative tree walks and deletes (trees). tests/test_layering.py and tests/test_door*.py
fail when code goes around one.
"""
