"""The command table: each command's name, and the module and function that run it.

This is the tool's start-up budget, kept in one place (as pip's ``commands/__init__.py`` keeps its
``create_command``): a command's module is imported only when that command runs, so ``plan`` never
loads what ``create``, ``lock`` or ``doctor`` need, and every command module imports what it uses at
its top, as a reader expects. A command function takes the one frozen ``tfgpu.settings.Settings``
and returns a typed result (``tfgpu.results``) that ``tfgpu.cli.output.show`` renders, or raises a
``TfgpuError``. Nothing here decides policy: option rules are ``tfgpu.installers.options``', what a
lock allows is ``tfgpu.lock``'s, what a create does is ``tfgpu.ops``'.
"""

from __future__ import annotations

from importlib import import_module

COMMANDS: dict[str, tuple[str, str]] = {
    "create": ("tfgpu.cli.commands.create", "cmd_create"),
    "plan": ("tfgpu.cli.commands.plan", "cmd_plan"),
    "lock": ("tfgpu.cli.commands.lock", "cmd_lock"),
    "bundle": ("tfgpu.cli.commands.bundle", "cmd_bundle"),
    "script": ("tfgpu.cli.commands.script", "cmd_script"),
    "doctor": ("tfgpu.cli.commands.doctor", "cmd_doctor"),
    "verify": ("tfgpu.cli.commands.verify", "cmd_verify"),
    "matrix": ("tfgpu.cli.commands.matrix", "cmd_matrix"),
    "update-data": ("tfgpu.cli.commands.update_data", "cmd_update_data"),
    "remove": ("tfgpu.cli.envs", "cmd_remove"),
    "repair": ("tfgpu.cli.repair", "cmd_repair"),
    "list": ("tfgpu.cli.envs", "cmd_list"),
    "completion": ("tfgpu.cli.completion", "cmd_completion"),
    "cache": ("tfgpu.cli.commands.cache", "cmd_cache"),
    "run": ("tfgpu.cli.enter", "cmd_run"),
    "activate": ("tfgpu.cli.enter", "cmd_activate"),
    "shell": ("tfgpu.cli.enter", "cmd_shell"),
}
"""Command name -> (module, function). The parser's ``COMMANDS`` lists the same names (a test holds them equal)."""


def handler(command: str):
    """The function that runs ``command``, its module imported now (and only now)."""
    module, function = COMMANDS[command]
    return getattr(import_module(module), function)
