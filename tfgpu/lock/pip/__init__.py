"""Hashed pip locks: one requirements file per platform (``pip install --require-hashes -r``)
with a PEP 751 ``pylock.<platform>.toml`` beside it. ``lockfile`` is the file format (render,
read, refuse an edited one), ``write`` writes a lock per platform, ``install`` turns a lock into
what ``create --from-lock`` installs, ``check`` answers ``lock --check``.
"""
