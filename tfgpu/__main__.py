"""``python -m tfgpu`` runs the command-line tool."""

from tfgpu.cli import entry

entry()
