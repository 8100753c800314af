"""Subcommands imported only when one runs: a group lists them from a table of one-line helps.

Importing every subcommand made each `stategym` start pay for all of them (FastAPI, the
server, taskgen, the explorer: about 1 s); now `--help` imports none and a command imports its
own module. tests/authoring/test_cli.py checks each listed help is the first line of the
command's own, and that `--help` leaves the server stack unimported.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import typer
from typer import main as typer_main
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class Lazy:
    """A subcommand: `target` is "module:attribute" (a command function or a `typer.Typer`),
    or, with `commands`, a group of lazy subcommands of its own."""

    help: str
    target: str = ""
    commands: Mapping[str, Lazy] = field(default_factory=dict)
    no_args_is_help: bool = True


def load(name: str, entry: Lazy) -> Any:
    """The click command `entry` names, its module imported now."""
    if entry.commands:
        return LazyGroup(
            name=name, table=entry.commands, help=entry.help, no_args_is_help=entry.no_args_is_help
        )
    module, _, attribute = entry.target.partition(":")
    obj = getattr(importlib.import_module(module), attribute)
    if isinstance(obj, typer.Typer):
        return typer_main.get_group(obj)
    single = typer.Typer(add_completion=False)
    single.command(name=name)(obj)
    return typer_main.get_command(single)


class Placeholder(TyperCommand):
    """What a group lists before its subcommand is loaded: the name and the one-line help."""

    def __init__(self, name: str, entry: Lazy) -> None:
        super().__init__(name, help=entry.help, short_help=entry.help)
        self.entry = entry


class LazyGroup(TyperGroup):
    """A group whose subcommands are placeholders until one is looked up to run."""

    table: Mapping[str, Lazy] = {}  # a subclass's, or the `table` argument's

    def __init__(self, *, table: Mapping[str, Lazy] | None = None, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.table = self.table if table is None else table
        self.listing = False
        for name, entry in self.table.items():
            self.commands.setdefault(name, Placeholder(name, entry))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = self.commands.get(cmd_name)
        if isinstance(command, Placeholder) and not self.listing:
            command = self.commands[cmd_name] = load(cmd_name, command.entry)
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The help lists the placeholders as they are: no subcommand is imported for it."""
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False
