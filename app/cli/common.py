"""Helpers every CLI module shares: settings and environments that fail with one clear line."""

from __future__ import annotations

import typer
from pydantic import ValidationError

from app.registry import load_environment
from app.sdk.environment import Environment
from app.settings import Settings


def settings_or_exit(**values: object) -> Settings:
    """Settings, or a one-line error per bad value and exit 2 (never a traceback)."""
    try:
        return Settings(**values)  # type: ignore[arg-type]
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            name = ".".join(str(p) for p in error["loc"]) or "settings"
            typer.echo(f"error: setting {name}: {error['msg']}", err=True)
        raise typer.Exit(2) from None


def environment_or_exit(name: str) -> Environment:
    try:
        return load_environment(name)
    except KeyError as exc:
        typer.echo(f"error: {exc.args[0]}", err=True)
        raise typer.Exit(2) from None
