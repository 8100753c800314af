"""Docs are tested: every tool, setting and CLI command is documented."""

from __future__ import annotations

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
