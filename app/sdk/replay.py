"""The old path of `app.authoring.replay`, kept importing for packages written against it: import
`app.authoring.replay` instead."""

from app.authoring.replay import *  # noqa: F403
from app.authoring.replay import __all__ as __all__
