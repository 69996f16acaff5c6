"""A click group whose commands are imported when they are asked for by name, so that
`lamina --help` and each command import only what they need."""

from __future__ import annotations

from collections.abc import Mapping

import click

__all__ = ["LazyGroup"]


class LazyGroup(click.Group):
    """Subclasses name their commands in `lazy_commands` (name -> `module:attribute`, the
    module inside `package`), listed in that order (sorted with `sort_commands`)."""

    lazy_commands: Mapping[str, str] = {}
    package = "lamina"
    sort_commands = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = list(self.lazy_commands)
        return sorted(names) if self.sort_commands else names

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self.lazy_commands.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        # __import__ rather than importlib.import_module: only the former is seen by
        # `python -X importtime`, which the tests and profiles read.
        command = getattr(__import__(f"{self.package}.{module}", fromlist=[attr]), attr)
        assert isinstance(command, click.Command)
        return command
