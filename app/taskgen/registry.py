"""An environment's task generator: the `TASKGEN` of its `<module>.taskgen` package."""

from __future__ import annotations

import importlib

from app.registry import environment_module
from app.taskgen.kit import TaskGenerator


class NoGenerator(LookupError):
    """The environment ships no task generator: a readable error, not a ModuleNotFoundError."""


def load_generator(name: str) -> TaskGenerator:
    module = f"{environment_module(name)}.taskgen"
    try:
        package = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not module.startswith(exc.name):
            raise  # the generator exists but imports something missing: its own bug
        folder = module.replace(".", "/")
        raise NoGenerator(
            f"environment {name!r} has no task generator: add package {folder} (module "
            f"{module}) defining TASKGEN = TaskGenerator(...) (docs/generating_tasks.md, "
            "'Adding a family'), or write tasks by hand and check them with "
            "`stategym tasks check FILE`"
        ) from None
    gen = getattr(package, "TASKGEN", None)
    if not isinstance(gen, TaskGenerator):
        raise TypeError(f"{module}.TASKGEN is not a TaskGenerator")
    return gen
