"""The old path of `app.authoring.testing`, kept importing for packages written against it: import
`app.authoring.testing` instead."""

from app.authoring.testing import *  # noqa: F403
from app.authoring.testing import __all__ as __all__
