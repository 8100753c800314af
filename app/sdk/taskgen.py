"""The old path of `app.authoring.taskgen`, kept importing for packages written against it: import
`app.authoring.taskgen` instead."""

from app.authoring.taskgen import *  # noqa: F403
from app.authoring.taskgen import __all__ as __all__
