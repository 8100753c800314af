"""Docs are tested: every tool, setting and CLI command is documented."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from typer.main import get_command

from app.cli.main import cli
from app.registry import ENVIRONMENTS, load_environment
from tests.conftest import REPO

README = (REPO / "README.md").read_text()


@pytest.mark.parametrize("env_name", sorted(ENVIRONMENTS))
def test_every_tool_and_argument_is_described_and_in_the_env_readme(env_name):
    env = load_environment(env_name)
    readme = (REPO / "envs" / env_name / "README.md").read_text()
    for tool in env.tools:
        assert len(tool.description) > 20, tool.name
        # The framework's answer tools are documented once, in docs/verification.md.
        if not tool.framework:
            assert tool.name in readme, f"{env_name}/README.md does not mention {tool.name}"
        for name, field in tool.args_model.model_fields.items():
            assert field.description, f"{env_name}.{tool.name}.{name} has no description"


@pytest.mark.parametrize("env_name", sorted(ENVIRONMENTS))
def test_every_environment_is_in_the_readme_table(env_name):
    assert f"`{env_name}`" in README


def test_every_cli_command_is_in_the_readme():
    group = get_command(cli)
    for name in group.commands:
        assert f"stategym {name}" in README, f"README does not document `stategym {name}`"


def test_every_cli_command_has_help():
    group = get_command(cli)
    for name, command in group.commands.items():
        assert command.help or command.short_help, name


def test_docs_the_readme_links_exist():
    for line in README.splitlines():
        for word in line.replace("`", " ").split():
            if word.startswith("docs/") and word.endswith(".md"):
                assert (REPO / word).exists(), word


# A relative Markdown link: [text](target), target neither a URL nor an in-page anchor.
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(markdown: str) -> list[str]:
    """The relative targets of `markdown`'s links (URLs, mail and in-page anchors left out)."""
    found = []
    for target in _LINK.findall(markdown):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        found.append(target.split("#", 1)[0])
    return found


@pytest.mark.parametrize(
    "page", ["README.md", *sorted(p.name for p in (REPO / "docs").glob("*.md"))]
)
def test_every_relative_link_resolves(page):
    path = REPO / page if page == "README.md" else REPO / "docs" / page
    missing = [
        t for t in relative_links(path.read_text()) if not (path.parent / t).resolve().exists()
    ]
    assert missing == [], f"{page} links to what does not exist: {missing}"
    outside = [
        t
        for t in relative_links(path.read_text())
        if not (path.parent / t).resolve().is_relative_to(REPO)
    ]
    assert outside == [], f"{page} links outside the repository: {outside}"


def test_relative_links_sees_only_relative_ones():
    text = "[a](docs/x.md) [b](https://e.org) [c](#top) [d](../y.md#part) [e](mailto:a@b)"
    assert relative_links(text) == ["docs/x.md", "../y.md"]


# A repository path quoted in prose (`app/x.py`, `../shared/y.md`): it names a file of this
# repository, which must exist. Paths of other projects (NeMo Gym's) start otherwise.
_QUOTED_PATH = re.compile(
    r"`((?:\.\./|shared/|app/|docs/|tests/|bench/|envs/|scripts/)[\w./-]+\.\w+)`"
)


@pytest.mark.parametrize(
    "page", ["README.md", *sorted(p.name for p in (REPO / "docs").glob("*.md"))]
)
def test_every_quoted_repository_path_exists(page):
    path = REPO / page if page == "README.md" else REPO / "docs" / page
    missing = [
        quoted
        for quoted in _QUOTED_PATH.findall(path.read_text())
        if "<" not in quoted and not _in_repository(quoted, path.parent)
    ]
    assert missing == [], f"{page} names files that are not in the repository: {missing}"


def _in_repository(quoted: str, page_dir: Path) -> bool:
    """`quoted` is a file of the repository, or `module.attribute` of one of its .py files."""
    stem, _, suffix = quoted.rpartition(".")
    candidates = [quoted] if suffix in _FILE_SUFFIXES else [f"{stem}.py", f"{stem}/__init__.py"]
    return any(
        (base / c).resolve().is_relative_to(REPO) and (base / c).resolve().exists()
        for base in (REPO, page_dir)
        for c in candidates
    )


_FILE_SUFFIXES = {
    "md",
    "py",
    "toml",
    "yaml",
    "yml",
    "json",
    "sql",
    "txt",
    "sh",
    "cfg",
    "ini",
    "html",
}


def test_comments_name_the_property_not_an_issue_number():
    """A comment or docstring says what it guards; "issue N" means nothing outside the tracker."""
    pattern = re.compile(r"\b[Ii]ssue \d+")
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for top in ("app", "envs", "tests", "scripts")
        for path in (REPO / top).rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


MAX_MODULE_DOCSTRING_LINES = 12


def test_module_docstrings_are_short():
    """A module docstring says what the module is for and what it keeps true, in a few lines;
    measurements and history live in bench/history/ and docs/."""
    too_long = []
    for path in sorted((REPO / "app").rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text()))
        if doc is not None and len(doc.strip().splitlines()) > MAX_MODULE_DOCSTRING_LINES:
            too_long.append(f"{path.relative_to(REPO)}: {len(doc.strip().splitlines())} lines")
    assert too_long == [], f"module docstrings over {MAX_MODULE_DOCSTRING_LINES} lines: {too_long}"
