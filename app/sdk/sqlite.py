"""The old path of `app.authoring.sqlite`, kept importing for packages written against it: import
`app.authoring.sqlite` instead."""

from app.authoring.sqlite import *  # noqa: F403
from app.authoring.sqlite import __all__ as __all__
