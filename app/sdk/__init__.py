"""What an environment author imports: the declarations, `from app.sdk import tool, ...`.

Schema (`DeclarativeBase`, `make_metadata`, `Money`, `one_of`, `AnyRow`), tools (`tool`, `Tool`,
`ToolArgs`, `ToolContext`, `ToolError`), the environment and its comparison spec, the policy's
decline codes, money and a seed's id blocks, and a conversational task's user
(`UserScript`, `UserFact`, `UserChange`: docs/conversations.md). Every name here imports only
app.core and the shared modules, so importing the SDK never loads the engine; the facades over
the engine (replay, testing, the generation kit, SQLite plumbing) are `app.authoring`.
`__all__` is pinned by tests/authoring/test_sdk_front_door.py: a name added here is a promise to
authors.
"""

from app.core.conversation import UserChange, UserFact, UserScript
from app.sdk.compare_spec import ANSWER_TABLE, CompareSpec, TableSpec
from app.sdk.environment import (
    Environment,
    Invariant,
    Tool,
    ToolArgs,
    ToolContext,
    ToolError,
    make_metadata,
    tool,
)
from app.sdk.models import DeclarativeBase, Money, one_of
from app.sdk.money import cents, money
from app.sdk.policy import decline_code_lines, policy_text
from app.sdk.rows import AnyRow
from app.sdk.seed_builder import SeedBuilder

__all__ = [
    "ANSWER_TABLE",
    "AnyRow",
    "CompareSpec",
    "DeclarativeBase",
    "Environment",
    "Invariant",
    "Money",
    "SeedBuilder",
    "TableSpec",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolError",
    "UserChange",
    "UserFact",
    "UserScript",
    "cents",
    "decline_code_lines",
    "make_metadata",
    "money",
    "one_of",
    "policy_text",
    "tool",
]
