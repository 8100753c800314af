"""`stategym serve` and `stategym prepare`: serve one environment, or build its template ahead."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from app.cli.common import environment_or_exit, settings_or_exit
from app.settings import Settings

DataDirOption = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Data folder (default: $STATEGYM_DATA_DIR or ./var)."),
]
EnvOption = Annotated[str | None, typer.Option("--env", help="Environment name.")]


def make_settings(**overrides: object) -> Settings:
    """Settings from the environment, with the CLI's explicit flags on top."""
    return settings_or_exit(**{k: v for k, v in overrides.items() if v is not None})


def serve(
    env: EnvOption = None,
    host: Annotated[str | None, typer.Option(help="Bind address.")] = None,
    port: Annotated[int | None, typer.Option(help="Port (0 picks a free one).")] = None,
    data_dir: DataDirOption = None,
    workers: Annotated[int | None, typer.Option(help="uvicorn worker processes.")] = None,
    database_url: Annotated[
        str | None,
        typer.Option(help="postgresql+psycopg://... to keep sessions in PostgreSQL."),
    ] = None,
    protocol: Annotated[
        str,
        typer.Option(
            help="nemo-gym: NeMo Gym's Resources Server routes. openenv: an OpenEnv server "
            "(needs the stategym[openenv] extra; docs/integrations.md)."
        ),
    ] = "nemo-gym",
) -> None:
    """Serve one environment as a NeMo Gym Resources Server (or, with --protocol openenv, as an
    OpenEnv environment)."""
    import os

    import uvicorn

    settings = make_settings(
        env=env,
        host=host,
        port=port,
        data_dir=data_dir,
        workers=workers,
        database_url=database_url,
    )
    environment = environment_or_exit(settings.env)  # fail fast on a bad name, before forking
    factory = _app_factory(protocol)
    _prepare_shared_files(settings, environment)
    # Workers rebuild Settings from the environment, so pass the resolved values down.
    os.environ.update(STATEGYM_ENV=settings.env, STATEGYM_DATA_DIR=str(settings.data_dir.resolve()))
    if settings.database_url:
        os.environ["STATEGYM_DATABASE_URL"] = settings.database_url
    uvicorn.run(
        factory,
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        log_level=settings.log_level,
        # Longer than clients' idle keep-alive (aiohttp: 15 s), so the server never closes a
        # connection a client is just reusing: that race fails a request it never saw.
        timeout_keep_alive=75,
    )


def _app_factory(protocol: str) -> str:
    """uvicorn's import string for the protocol; exit 2 when it is unknown or not installed."""
    if protocol == "nemo-gym":
        return "app.server.asgi:app_from_env"
    if protocol == "openenv":
        import importlib.util

        if importlib.util.find_spec("openenv") is None:
            typer.echo(
                "error: --protocol openenv needs the openenv package: "
                "pip install 'stategym[openenv]'",
                err=True,
            )
            raise typer.Exit(2)
        return "app.integrations.openenv_server:app_from_env"
    typer.echo(f"error: unknown protocol {protocol!r} (nemo-gym, openenv)", err=True)
    raise typer.Exit(2)


def warn_without_migration_branch(environment: Any) -> None:
    """Sessions made while an environment has no migration branch carry no revision: say so."""
    from app.storage.migrations import head_revision, version_location

    if head_revision(environment.name) is None:
        typer.secho(
            f"WARNING: environment {environment.name!r} has no migration branch (none in "
            f"{version_location(environment.name)}): the sessions served now can be upgraded "
            "later only with `stategym migrate sessions --adopt`. Write its first revision: "
            f'stategym migrate revision --env {environment.name} -m "initial schema"',
            err=True,
            fg="yellow",
        )


def _prepare_shared_files(settings: Settings, environment) -> None:  # noqa: ANN001
    """Build what every worker shares (control DB, template) once, so workers never race."""
    from app.storage.factory import prepare_shared

    warn_without_migration_branch(environment)
    try:
        prepare_shared(settings, environment)
    except ValueError as exc:  # an environment the backend cannot serve (Unsupported)
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def prepare(env: EnvOption = None, data_dir: DataDirOption = None) -> None:
    """Build the environment's template database (schema + base data) ahead of serving."""
    import time

    from app.storage.images import Store

    settings = make_settings(env=env, data_dir=data_dir)
    environment = environment_or_exit(settings.env)
    warn_without_migration_branch(environment)
    store = Store(settings.data_dir, environment)
    started = time.perf_counter()
    image = store.template_image()
    typer.echo(
        f"{settings.env}: template {store.template_path} ready "
        f"({len(image) / 1024:.0f} KiB, {time.perf_counter() - started:.2f}s)"
    )
