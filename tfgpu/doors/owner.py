"""Who could have written a file: the rule the tool trusts its own caches and hard links by.

A file no one but this user could write (owned by the effective user, no group or other write) is
one a forger would already have to be this user to change: OpenSSH's rule for a private key, and
what Python assumes of its ``__pycache__``. ``tfgpu.doors.untrusted.read_own`` reads the tool's caches
only under it; the cache dedupe makes more names only of an inode that passes it.
"""

from __future__ import annotations

import os
import stat


def only_mine(info: os.stat_result, *, own_group: bool = False) -> bool:
    """Whether ``info``'s file could be written by no one but this user (owner, no group or other
    write): an inode the dedupe makes more names of is one no one else may change afterwards.
    ``own_group``: group write in the user's private group is fine (``umask 002``, Debian's default)."""
    if info.st_uid != os.geteuid() or info.st_mode & stat.S_IWOTH:
        return False
    return not info.st_mode & stat.S_IWGRP or (own_group and _private_group(info.st_gid))


def _private_group(gid: int) -> bool:
    """Whether ``gid`` is the user's primary group, named as the user, with no other member."""
    # Start-up cost: `plan --json --no-detect` loads this module but not grp, pwd.
    import grp
    import pwd

    try:
        user, group = pwd.getpwuid(os.geteuid()), grp.getgrgid(gid)
    except (KeyError, OSError):
        return False
    return gid == user.pw_gid and group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}
