"""Package discovery, the one part of the build pyproject.toml cannot declare.

The framework's Alembic folder stays at the top of the repository (`migrations/`: env.py,
script.py.mako, the control database's and the framework tables' branches, beside `alembic.ini`
for the `alembic` command) and ships inside the `app` package as `app.migrations`, so a wheel
install migrates without the repository (app/storage/migrations.py).
`[tool.setuptools.packages.find]` cannot rename a folder, so the packages are listed here;
everything else is in pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

# The Alembic folder and its branch folders; `package_dir` maps the prefix onto migrations/.
MIGRATIONS = [
    "app.migrations",
    "app.migrations.versions",
    "app.migrations.versions.control",
    "app.migrations.versions.framework",
]

setup(
    packages=find_namespace_packages(include=["app*", "envs*"]) + MIGRATIONS,
    package_dir={"app.migrations": "migrations"},
)
