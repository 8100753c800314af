"""Step rewards of a session migrated after some of its steps, on both backends.

Verify's fast path scores each step from the log's row images (app/verify/steps/step_states.py). The
images of the steps before a migration hold the rows as they were before it (here a SKU the
head's migration upper-cased), so scoring those steps from them would mix pre- and
post-migration rows. Such a session takes the undo path, which goes back no further than the
migration's step (`migrated_at_step`): step rewards are then omitted rather than guessed.
"""

from __future__ import annotations

import json
from typing import Any

from tests.storage.test_migrated_rewind import LOWER, PREVIOUS, Depot, _move
from tests.support.rollouts import response_object


def _response(calls: list[Any]) -> dict[str, Any]:
    """The agent's response listing `calls` (their outputs are not compared here)."""
    outputs: list[dict[str, Any]] = []
    for i, (name, args) in enumerate(calls):
        call_id = f"c{i}"
        outputs.append(
            {
                "type": "function_call",
                "call_id": call_id,
                "name": name,
                "arguments": json.dumps(args),
            }
        )
        outputs.append({"type": "function_call_output", "call_id": call_id, "output": "{}"})
    return response_object(outputs, "Done.")


async def _verified(d: Depot, before: list[Any], after: list[Any]) -> dict[str, Any]:
    session_id = await d.seed(LOWER, before)
    d.downgrade(session_id, PREVIOUS)  # as the release before the head's left it
    manager = await d.serve()
    await d.state(session_id)  # opened: upgraded to the head, after step len(before)
    await d.call(session_id, after)
    return await manager.verify(session_id, {**LOWER, "response": _response(before + after)})


async def test_steps_before_a_migration_are_not_scored_from_their_old_row_images(
    backend, depot, tmp_path, request
) -> None:
    d = Depot(backend, depot, tmp_path, request)
    try:
        result = await _verified(
            d, [_move("sku-0101", -3), _move("sku-0101", -1)], [_move("SKU-0101", -2)]
        )
    finally:
        await d.close()
    assert result["verification"]["trajectory"]["calls"] == 3
    assert "step_rewards" not in result and "turn_rewards" not in result, result


async def test_a_session_migrated_after_its_first_step_is_scored_from_the_migrated_rows(
    backend, depot, tmp_path, request
) -> None:
    """Back to step 1 is allowed, so every step is scored (from real, migrated states), and the
    step rewards still sum to the final state's potential."""
    d = Depot(backend, depot, tmp_path, request)
    try:
        result = await _verified(d, [_move("sku-0101", -3)], [_move("SKU-0101", -2)])
    finally:
        await d.close()
    assert result["verification"]["trajectory"]["calls"] == 2
    assert len(result["step_rewards"]) == 2, result
