"""An environment's policy prompt: read from the Markdown file beside it, with the decline
codes listed in it by the framework.

The codes an environment declares (`Environment.decline_reasons`) are the enum of
`decline_request`; the policy lists the same mapping, so it is rendered from it, never copied.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources

# The marker in a policy file where `policy_text` puts the decline-code listing.
CODES_MARKER = "{decline_codes}"


def decline_code_lines(
    reasons: Mapping[str, str], *, indent: str = "", full_stop: bool = False
) -> str:
    """One `- code: rule` line per decline code, in declaration order, joined by newlines (no
    trailing one). `indent` nests the list under a bullet; `full_stop` ends each rule with `.`."""
    end = "." if full_stop else ""
    return "\n".join(f"{indent}- {code}: {rule}{end}" for code, rule in reasons.items())


def policy_text(
    package: str | None,
    reasons: Mapping[str, str],
    *,
    filename: str = "policy.md",
    indent: str = "",
    full_stop: bool = False,
) -> str:
    """The policy file `filename` of `package` (pass the policy module's `__package__`; the file
    ships as package data), its `{decline_codes}` marker replaced by `decline_code_lines(reasons,
    ...)`. Only that marker is replaced, so the file may hold any other braces."""
    if not package:
        raise ValueError("policy_text needs the package the policy file is in (`__package__`)")
    text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    if CODES_MARKER not in text and reasons:
        raise ValueError(f"{package}/{filename} has no {CODES_MARKER} marker for its codes")
    return text.replace(
        CODES_MARKER, decline_code_lines(reasons, indent=indent, full_stop=full_stop)
    )


__all__ = ["CODES_MARKER", "decline_code_lines", "policy_text"]
