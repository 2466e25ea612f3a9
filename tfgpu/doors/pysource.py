"""Python source the tool reads but never runs: an env's ``build_info.py`` and load hook, a wheel's
``torch/version.py`` and ``torch/cuda/__init__.py``, a METADATA marker. All of it is someone else's
text (an env's files are the env's to craft; a wheel is the index's answer), and CPython's parser
and ``ast.literal_eval`` answer hostile text with more than SyntaxError: ValueError for a NUL,
MemoryError for ``-`` repeated 200,000 times, RecursionError for ``1+1+…`` a million long, TypeError
for a literal no caller can use. Each was a traceback of doctor's. Here every parse and every
literal is one call that answers ``None`` / :data:`NOT_LITERAL` for all of them, and source past
:data:`MAX_SOURCE` characters is not parsed at all (a few MB took seconds).
"""

from __future__ import annotations

import ast
import threading

MAX_SOURCE = 1 << 20
"""The longest source parsed (characters): the files read are a few KiB (torch's cuda/__init__.py,
the largest, about 70 KiB)."""
NOT_LITERAL = object()
"""What :func:`literal` answers for a node that is no literal (or one too deep to evaluate)."""
_FAILURES = (SyntaxError, ValueError, TypeError, MemoryError, RecursionError)
# CPython 3.11's parser is not safe to run from two threads at once ("AST constructor recursion
# depth mismatch"), and the data-generating script reads releases in parallel.
_PARSING = threading.Lock()


def parse(source: str, mode: str = "exec") -> ast.AST | None:
    """``source`` parsed (never run); None when it is not Python, or too long, deep or large to parse."""
    if len(source) > MAX_SOURCE:
        return None
    with _PARSING:
        try:
            return ast.parse(source, mode=mode)
        except _FAILURES:
            return None


def literal(node: ast.AST | None):
    """``ast.literal_eval`` of ``node``; :data:`NOT_LITERAL` when it is none (a call, a name, too deep)."""
    if node is None:
        return NOT_LITERAL
    try:
        return ast.literal_eval(node)
    except _FAILURES:
        return NOT_LITERAL
