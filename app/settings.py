"""All settings in one place: environment variables with the `STATEGYM_` prefix (or CLI flags)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

MIN_SECRET_LENGTH = 32
WEAK_SECRETS = {"secret", "changeme", "change-me", "password", "stategym", "test", "dev"}


class Settings(BaseSettings):
    """StateGym's configuration. Every field is documented (a test checks it)."""

    # An empty variable (`STATEGYM_TOOL_THREADS=`, a blank line in a deploy template) means
    # unset: the default, not a parse error at start.
    model_config = SettingsConfigDict(env_prefix="STATEGYM_", extra="ignore", env_ignore_empty=True)

    env: str = Field("retail", description="Name of the environment to serve (see `envs/`).")
    data_dir: Path = Field(
        Path("var"),
        description="Folder for session databases, templates, snapshots and the control database.",
    )
    host: str = Field("127.0.0.1", description="Address `stategym serve` binds to.")
    port: int = Field(8000, ge=0, le=65535, description="Port `stategym serve` binds to.")
    workers: int = Field(1, ge=1, le=64, description="Number of uvicorn worker processes.")
    secret_key: str | None = Field(
        None,
        description=(
            "Secret that signs session cookies (>= 32 characters). Unset: one is generated once "
            "and kept in `<data_dir>/secret_key` with mode 0600. Replicas must share it."
        ),
    )
    cookie_name: str = Field("stategym_session", description="Name of the session cookie.")
    cookie_max_age_seconds: int = Field(
        7 * 24 * 3600, ge=60, description="A session cookie older than this is refused as expired."
    )
    max_open_sessions: int = Field(
        256,
        ge=1,
        description="Open session-database connections kept per worker (LRU closes the rest).",
    )
    # Unset, the backend's own number (Capabilities.threads). SQLite: two, not more: its calls are
    # CPU-bound Python under one GIL, so extra threads only add GIL hand-offs (4 threads: -15 %
    # read and -20 % write throughput at c=64, bench/history/suite.md); two keep one lane free while
    # another call runs long (up to tool_time_limit_ms). PostgreSQL: six, since a thread waits
    # out each statement's round trip without the GIL (bench/history/rounds.md, round 8).
    tool_threads: int | None = Field(
        None,
        ge=1,
        le=64,
        description="Worker threads that run tool calls (one hop per call), and as many for "
        "seeds, verifies and closes; unset: 2 on SQLite, 6 on PostgreSQL.",
    )
    inline_tool_budget_ms: float = Field(
        2.0,
        ge=0,
        description="Tools whose calls finish under this many ms run on the event loop, without "
        "a thread hop (app/runtime/inline.py); 0 runs every call in a tool thread.",
    )
    open_on_seed: bool = Field(
        True,
        description="Open a new session's database in the background right after its seed "
        "answers, while the LRU of open sessions has room (app/runtime/open_sessions.py), so "
        "the rollout's first call does not wait for the open.",
    )
    open_ahead_sessions: int | None = Field(
        None,
        ge=0,
        description="At most this many seeded sessions opened ahead of their first call (with "
        "open_on_seed); unset: as many as max_open_sessions has room for.",
    )
    snapshot_cache_size: int = Field(
        256, ge=1, description="Seeded task snapshots kept in memory per worker."
    )
    gold_cache_size: int = Field(
        512, ge=1, description="Gold end states (verify) kept in memory per worker."
    )
    snapshot_cache_mb: int = Field(
        256,
        ge=1,
        description="Bytes (MiB) of seeded task snapshots kept in memory per worker (each is a "
        "whole database image, retail ~0.8 MB); the least recently used go past it and are "
        "rebuilt from the template and the task (a few ms) when needed again.",
    )
    gold_cache_mb: int = Field(
        128,
        ge=1,
        description="Bytes (MiB, estimated) of gold and seed states kept in memory per worker "
        "for verify; the least recently used go past it and are replayed again when needed.",
    )
    answer_cache_mb: int = Field(
        64,
        ge=1,
        description="Bytes (MiB, estimated) of each of the answer checker's caches per worker "
        "(the seeded states' text vocabularies and their per-table word counts).",
    )
    gold_on_seed: bool = Field(
        True,
        description="At the first seed of a task, build its gold state in the background (a "
        "worker thread) while the rollout runs, so its first verify does not replay the gold.",
    )
    gc_settle: bool = Field(
        True,
        description="When the server has started, freeze what start-up built out of the "
        "garbage collector's generations and collect the young one after 20,000 net "
        "allocations instead of 700: at training scale a full collection walked everything "
        "cached every ~10 s, holding every request for 0.1-0.25 s. Off: Python's defaults (for "
        "a process that starts many servers, as the test suite does).",
    )
    pristine_cache_size: int = Field(
        256,
        ge=1,
        description="Unwritten dumps (of snapshots; on PostgreSQL, of task templates) kept in "
        "memory per worker, which verify patches with a session's writes. The gold cache holds "
        "its tasks' snapshot dumps and puts them back here when used; a task in neither has its "
        "dump rebuilt at its next verify (retail: a few ms SQLite, ~100 ms PostgreSQL).",
    )
    pristine_cache_mb: int = Field(
        128,
        ge=1,
        description="Bytes (MiB, estimated) of those unwritten dumps kept per worker; the least "
        "recently used go past it.",
    )
    max_body_bytes: int = Field(
        2 * 1024 * 1024, ge=1024, description="Largest request body accepted (413 beyond)."
    )
    verify_diff_limit: int = Field(
        20, ge=0, description="Most differing rows listed per table in a verify response."
    )
    policy_violation_penalty: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="What each refused attempt at a forbidden write (a writing tool call that an "
        "environment rule refused, listed in `verification.policy_violations`) takes off the "
        "reward, down to 0; 0 keeps it evidence only (docs/verification.md).",
    )
    step_reward_max_rows: int = Field(
        200_000,
        ge=0,
        description="Step rewards are left out of a verify (`verification.step_rewards_skipped` "
        "says why; the reward stays exact) when scoring every intermediate state from the step "
        "log would compare more rows than this (logged or referencing rows x writing steps).",
    )
    step_reward_max_states: int = Field(
        200,
        ge=0,
        description="Likewise when the intermediate states must be rebuilt by undoing the log "
        "(tasks with expected-state checks, migrated sessions) and there are more than this.",
    )
    step_reward_budget_ms: float | None = Field(
        500.0,
        ge=0,
        description="Likewise when step rewards take longer than this (a backstop for a loaded "
        "machine; the two limits above are decided from the log alone). Unset: no time limit.",
    )
    verify_threads: int | None = Field(
        None,
        ge=1,
        description="Threads that run verifies, apart from those of seeds, closes and tool "
        "calls, so a costly verify never delays another rollout's seed. Unset: half the worker "
        "threads, at least one.",
    )
    session_idle_ttl_seconds: int | None = Field(
        3600,
        ge=0,
        description=(
            "A live session no tool call or verify touched for this long is closed by the "
            "reaper, as a close would: a client that never closes (verifiers) leaks nothing. "
            "0 or unset: sessions stay open until closed."
        ),
    )
    metrics: bool = Field(
        True,
        description=(
            "Serve Prometheus metrics at GET /metrics (per worker: request time by operation, "
            "live sessions, RSS, open files, data-dir bytes). Turn off if a tool is named metrics."
        ),
    )
    opentelemetry: bool = Field(
        False,
        description=(
            "Let FastAPI's native OpenTelemetry spans and metrics run when a provider is "
            "configured. Off: FastAPI skips the check of the global providers it otherwise makes "
            "on every request (~20 us); /metrics and the stats line do not depend on it."
        ),
    )
    stats_log_seconds: int = Field(
        60,
        ge=0,
        description=(
            "Log one line per interval while requests arrive: rollouts, p50/p99 per operation, "
            "live sessions, RSS, open files, data-dir size (0: never)."
        ),
    )
    reaper_interval_seconds: int = Field(
        60, ge=1, description="How often each worker looks for idle sessions to close."
    )
    max_live_sessions: int | None = Field(
        None,
        ge=1,
        description=(
            "Most sessions of this environment open at once; a seed beyond it answers 503 with "
            "Retry-After instead of degrading. Unset: no limit."
        ),
    )
    tool_time_limit_ms: int = Field(
        5000,
        ge=10,
        description=(
            "SQL work of one tool call is interrupted after this long (a tool error): the "
            "calling thread's CPU time on SQLite, wall-clock time on PostgreSQL."
        ),
    )
    user_model_url: str | None = Field(
        None,
        description="An OpenAI-compatible endpoint (base URL ending in /v1) whose model plays "
        "the user of conversational tasks in its own words (docs/conversations.md); unset: the "
        "deterministic scripted user. Its reply counts against tool_time_limit_ms (raise it).",
    )
    user_model: str = Field(
        "gpt-4o-mini",
        description="The model name sent to user_model_url; recorded with every turn.",
    )
    user_model_key: str | None = Field(
        None, description="The API key for user_model_url (sent as a Bearer token)."
    )
    user_model_timeout_s: float = Field(
        20.0,
        gt=0,
        description="Longest wait for the LLM user's reply (at most 80 % of tool_time_limit_ms "
        "is used); a timeout masks the sample (`failure_kind: user_simulator`).",
    )
    session_max_db_mb: int = Field(
        64,
        ge=1,
        description="Largest a SQLite session database may grow (MiB, `PRAGMA max_page_count`); "
        "a write past it is refused with a `size_limit` tool error and nothing changes.",
    )
    fork_max_mb: int = Field(
        256,
        ge=1,
        description="Most one /fork_session request may write (MiB): n children times the "
        "parent's size; a fork asking for more is refused whole (413), nothing written.",
    )
    data_max_mb: int | None = Field(
        16 * 1024,
        ge=1,
        description="Most session state this server keeps (MiB): the data dir's files, and on "
        "PostgreSQL its session schemas too. A fork or restore that would pass it is refused "
        "whole (507), as is one the data dir's disk has no room for. Unset: the disk's free "
        "space is the only bound.",
    )
    export_ttl_seconds: int = Field(
        24 * 3600,
        ge=60,
        description="An /export_session blob restores for this long (its expiry is inside its "
        "signature); an older or altered blob is refused.",
    )
    replay_cache_files: int = Field(
        64,
        ge=1,
        description="Snapshot and gold files a verify without a session (stateless reverify) "
        "keeps for tasks no session was seeded with; the least recently used are deleted.",
    )
    replay_cache_mb: int = Field(
        256,
        ge=1,
        description="Most bytes (MiB) of those files kept; past it the least recently used are "
        "deleted.",
    )
    # --- lanes and budgets of every verify path (app/runtime/lanes.py, docs/nemo_gym.md) -----
    replay_threads: int = Field(
        2,
        ge=1,
        description="Threads that replay rollouts (a verify without a session, or of a closed "
        "one), apart from session verifies, gold builds and tool calls.",
    )
    replay_per_client: int = Field(
        1,
        ge=1,
        description="Replays one client (peer address) may run at once; its further replays "
        "wait in its own queue.",
    )
    replay_queue_per_client: int = Field(
        32,
        ge=0,
        description="Replays of one client that may wait for a turn; past it a verify without "
        "a session answers 429 with Retry-After.",
    )
    replay_max_calls: int = Field(
        2000,
        ge=1,
        description="A response with more function calls than this is not replayed: the verify "
        "answers mask_sample with failure_kind `replay_refused`.",
    )
    replay_budget_ms: int = Field(
        10000,
        ge=10,
        description="Wall-clock budget of one replay (each replayed call is cut at what is left "
        "of it); past it the verify answers mask_sample with failure_kind `replay_budget`.",
    )
    replay_cpu_ms: int = Field(
        5000,
        ge=10,
        description="CPU budget of one replay (its thread's CPU time); past it, as above.",
    )
    gold_threads: int = Field(
        3,
        ge=1,
        description="Threads that build tasks' gold states, apart from verifies and replays. "
        "One client (peer address) builds one at a time for its verifies and one ahead of "
        "them at seed, so three leave one to the others.",
    )
    gold_budget_ms: int = Field(
        10000,
        ge=10,
        description="Wall-clock budget of one gold build (the task's ground truth replayed); "
        "past it verifies of the task answer mask_sample with failure_kind `gold_budget`.",
    )
    gold_cpu_ms: int = Field(
        5000, ge=10, description="CPU budget of one gold build; past it, as above."
    )
    ground_truth_max_calls: int = Field(
        200,
        ge=1,
        description="Most calls a task row's ground_truth may hold; a longer one is refused "
        "(422) at seed and at verify.",
    )
    tool_calls_per_client: int | None = Field(
        None,
        ge=1,
        description="Tool calls in threads one client (peer address) may run at once; the tool "
        "pool keeps one thread more than this for others. Unset: tool_threads.",
    )
    verify_per_client: int | None = Field(
        None,
        ge=1,
        description="Session verifies one client may run at once; the verify pool keeps one "
        "thread more than this for others. Unset: verify_threads.",
    )
    tombstone_ttl_seconds: int = Field(
        3600,
        ge=1,
        description="A close of a never-seeded id by no episode (legacy close by id) keeps it "
        "from being seeded this long; one made by an episode binds that episode only.",
    )
    close_on_verify: bool = Field(False, description="Close the session as soon as it is verified.")
    retention: Literal["keep", "keep_days", "delete_on_close", "keep_failed"] = Field(
        "keep",
        description=(
            "What happens to session databases: `keep` all; `keep_days` (`stategym sessions gc` "
            "removes those older than `retention_days`); `delete_on_close`; `keep_failed` "
            "(a session closed with a perfect reward is deleted, the rest kept)."
        ),
    )
    pack_closed_sessions: bool = Field(
        True,
        description="SQLite: store each closed session that retention keeps as the pages that "
        "differ from its environment's template, compressed (~40 KB for a retail rollout "
        "instead of ~800 KB); inspection, export, reverify and the explorer unpack it, exactly. "
        "Packing runs on the closer thread, off the request path.",
    )
    retention_days: int = Field(
        7, ge=0, description="Age in days beyond which `keep_days` retention removes a session."
    )
    session_records_max: int = Field(
        100_000,
        ge=0,
        description="Records of closed sessions whose database retention already deleted that "
        "the control database keeps, per environment; older ones are pruned (oldest closed "
        "first) in the background, with their closed resources ids and lineage. Records of "
        "sessions whose database still exists are never pruned. 0: keep every record.",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description=(
            "Host names `/admin` and `stategym browse` answer to, besides 127.0.0.1, localhost, "
            "[::1] and `host` (a DNS-rebinding guard: other Host headers get 400). "
            'JSON list in the environment, e.g. `["gym.internal"]`.'
        ),
    )
    admin_token: str | None = Field(
        None,
        description=(
            "Bearer token of the read-only `/admin/...` API (>= 16 characters). "
            "Unset: the admin API is off (404)."
        ),
        min_length=16,
    )
    database_url: str | None = Field(
        None,
        description=(
            "Where session state lives. Unset or `sqlite:///...`: SQLite files under `data_dir`. "
            "`postgresql+psycopg://user@host:port/db` (or `postgresql+asyncpg://`, mapped to "
            "psycopg): one PostgreSQL schema per session, shared by replicas "
            "(`docs/postgres.md`)."
        ),
    )
    pg_schema_prefix: str = Field(
        "sg",
        pattern=r"^[a-z][a-z0-9]{0,11}$",
        description=(
            "Prefix of every PostgreSQL schema StateGym creates (`<prefix>_s_<session id>`, "
            "`<prefix>_t_...`, `<prefix>_control`); lets several deployments share a database."
        ),
    )
    pg_pool_size: int | None = Field(
        None,
        ge=1,
        le=64,
        description="PostgreSQL connections kept per worker process; unset: one per worker "
        "thread of all pools (2 x tool_threads + verify_threads) plus one, so no thread waits "
        "for a connection "
        "and none is opened and closed under load.",
    )
    pg_connection_max_age_seconds: int = Field(
        15,
        ge=1,
        description="A pooled PostgreSQL connection is replaced by a new one at its first use "
        "after this many seconds: a backend's caches grow with every session schema it "
        "touches and each schema rename walks them all (docs/postgres.md).",
    )
    maintenance_interval_seconds: int = Field(
        60,
        ge=0,
        description=(
            "Housekeeping every this many seconds on a background thread: on PostgreSQL whose "
            "autovacuum is off, vacuuming the tables sessions churn (docs/postgres.md); "
            "0: never."
        ),
    )
    pg_schema_pool: int = Field(
        4,
        ge=0,
        le=64,
        description=(
            "PostgreSQL: clones of the environment's base template made ahead of time (after "
            "the first seed), so a seed renames one and writes its task's rows instead of "
            "cloning; 0 turns the pool off (docs/postgres.md)."
        ),
    )
    pg_archive_closed: bool = Field(
        True,
        description=(
            "PostgreSQL, retention that keeps sessions: a closed session is archived as its "
            "step log and its schema reset into the schema pool (no clone per seed); reading "
            "it rebuilds it in the reader's transaction (docs/postgres.md). False: every kept "
            "session keeps its schema."
        ),
    )
    expose_tools_over_mcp: bool = Field(
        False,
        description=(
            "Serve the environment's tools over MCP at `/mcp` (streamable HTTP) and add NeMo Gym's "
            "`resources_tools` block, with a signed per-session token, to every `/seed_session` "
            "answer (`docs/mcp.md`)."
        ),
    )
    mcp_server_name: str | None = Field(
        None,
        # Gym's MCPToolAccess.name pattern, narrowed to what MCP clients accept in tool names.
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$",
        description=(
            "`server_name` of the `resources_tools` block (MCP clients name tools "
            "`mcp__<server_name>__<tool>`). Unset: the environment's name."
        ),
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="Log level of the server."
    )

    @field_validator("secret_key")
    @classmethod
    def _refuse_weak_secret(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if len(value) < MIN_SECRET_LENGTH or value.lower() in WEAK_SECRETS or len(set(value)) < 8:
            raise ValueError(
                f"STATEGYM_SECRET_KEY is too weak: use at least {MIN_SECRET_LENGTH} random "
                "characters (e.g. `python -c 'import secrets; print(secrets.token_urlsafe(48))'`)"
                " or leave it unset to have one generated in the data dir"
            )
        return value


@lru_cache
def get_settings() -> Settings:
    return Settings()
