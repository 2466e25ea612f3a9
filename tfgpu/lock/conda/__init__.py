"""Conda locks: one conda-lock.yml (conda-lock's own file format, tfgpu format 2) for every
platform. ``write`` solves and writes it, ``read`` reads it back and refuses an edited one,
``install`` turns it into what ``create --from-lock`` installs, ``check`` answers ``lock --check``.
"""
