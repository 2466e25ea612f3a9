"""How a command's result reaches the user: one JSON document with ``--json``, else ``tfgpu.render``."""

from __future__ import annotations

import argparse
import json
import sys


def render():
    from tfgpu import render as module  # rich is imported only when something is shown to a person

    return module


def emit(args: argparse.Namespace, document: dict, show) -> None:
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        show()
