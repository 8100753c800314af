"""The sql tools and the database's own rules, on a real in-memory SQLite through the runner."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.sdk.compare_spec import FRAMEWORK_TABLES
from envs.sql import ENVIRONMENT
from envs.sql.models import TRIGGERS
from envs.sql.replay import TaskDb, open_task_db

READS = {"list_tables", "describe_table"}


@pytest.fixture()
def db() -> Iterator[TaskDb]:
    task_db = open_task_db()
    yield task_db
    task_db.close()


def one(db: TaskDb, statement: str) -> list:
    out = db.sql(statement)
    assert "output" in out, out
    return out["output"].get("rows", [])


def refused(db: TaskDb, statement: str, needle: str, code: str = "constraint_violation") -> None:
    """The statement fails with `code` (a company rule's own code, or a plain constraint's),
    says `needle`, and changes nothing."""
    before = db.dump()
    out = db.sql(statement)
    assert "error" in out, statement
    assert out["error"]["code"] == code, out
    assert needle in out["error"]["message"], out
    assert db.dump() == before, "a refused statement must change nothing"


# ---- declarations -------------------------------------------------------------------------------


def test_every_tool_and_argument_is_described() -> None:
    # The console's three tools, then the framework's answer tools every environment gets.
    assert [t.name for t in ENVIRONMENT.tools] == [
        "list_tables",
        "describe_table",
        "run_sql",
        "message_user",
        "submit_answer",
        "decline_request",
    ]
    assert {t.name for t in ENVIRONMENT.tools if t.read_only} == READS
    for t in ENVIRONMENT.tools:
        assert len(t.description) > 40, t.name
        for name, field in t.args_model.model_fields.items():
            assert field.description, f"{t.name}.{name}"
    for s in ENVIRONMENT.tool_schemas():
        assert s["strict"] and s["parameters"]["additionalProperties"] is False


def test_compare_spec_names_real_tables_and_columns() -> None:
    tables = ENVIRONMENT.metadata.tables
    for name, spec in ENVIRONMENT.compare.tables.items():
        cols = set(tables[name].c.keys())
        for col in (*spec.key, *spec.ignore, *spec.text, *spec.money, *spec.references):
            assert col in cols, f"{name}.{col}"
        for target in spec.references.values():
            assert ENVIRONMENT.compare.for_table(target).key, target
    assert set(ENVIRONMENT.compare.tables) == set(tables) - FRAMEWORK_TABLES


# ---- read tools -----------------------------------------------------------------------------


def test_read_tools_describe_and_write_nothing(db: TaskDb) -> None:
    before = db.dump()
    listed = db.call("list_tables")["output"]["tables"]
    # The framework's answer table is not the company's: not listed (the console cannot reach it).
    assert {t["table"] for t in listed} == set(ENVIRONMENT.metadata.tables) - FRAMEWORK_TABLES
    assert next(t for t in listed if t["table"] == "employees")["rows"] == 240
    desc = db.call("describe_table", table="Timesheets")["output"]
    cols = {c["name"]: c for c in desc["columns"]}
    assert cols["invoice_id"]["references"] == "invoices.id" and cols["invoice_id"]["nullable"]
    assert any("hours" in c for c in desc["checks"])
    assert any("paid invoice" in r for r in desc["rules"])
    missing = db.call("describe_table", table="payroll")["error"]
    assert missing["code"] == "not_found" and "employees" in missing["hint"]
    assert db.sql("SELECT count(*) FROM employees")["output"]["rows"] == [[240]]
    assert db.dump() == before


def test_write_returns_rows_affected_and_commits(db: TaskDb) -> None:
    out = db.sql("UPDATE employees SET title = 'Principal Engineer' WHERE employee_no = 'E1001'")
    assert out["output"] == {"statement": "UPDATE", "rows_affected": 1}
    assert one(db, "SELECT title FROM employees WHERE employee_no = 'E1001'") == [
        ["Principal Engineer"]
    ]
    ret = db.sql("UPDATE employees SET title = 'CTO' WHERE id = 1 RETURNING employee_no, title")
    assert ret["output"]["rows"] == [["E1001", "CTO"]]
    cte = db.sql(
        "WITH leads AS (SELECT id FROM employees WHERE manager_id IS NULL) "
        "UPDATE employees SET title = title || ' (Head)' WHERE id IN (SELECT id FROM leads)"
    )
    assert cte["output"] == {"statement": "UPDATE", "rows_affected": 8}
    params = db.sql("SELECT * FROM employees WHERE id = ?")["error"]
    assert "parameters" in params["message"] and "literals" in params["hint"]


# ---- the database's rules (triggers, checks, foreign keys) --------------------------------------


def test_salary_history_is_append_only(db: TaskDb) -> None:
    rewrite = "salary_rewrite_forbidden"
    refused(
        db, "UPDATE salaries SET amount = amount * 2 WHERE employee_id = 10", "append-only", rewrite
    )
    refused(db, "DELETE FROM salaries WHERE employee_id = 10", "append-only", rewrite)
    out = db.sql(
        "INSERT INTO salaries (employee_id, effective_date, amount, reason) "
        "VALUES (10, '2026-04-01', 90000, 'merit')"
    )
    assert out["output"]["rows_affected"] == 1
    refused(
        db,
        "INSERT INTO salaries (employee_id, effective_date, amount, reason) "
        "VALUES (10, '2026-05-01', 90000, 'bonus')",
        "ck_salaries_reason",
    )
    refused(
        db,
        "INSERT INTO salaries (employee_id, effective_date, amount, reason) "
        "VALUES (10, '2026-04-01', 91000, 'merit')",
        "UNIQUE",
    )


def test_employees_are_never_deleted_and_termination_is_consistent(db: TaskDb) -> None:
    refused(
        db,
        "DELETE FROM employees WHERE employee_no = 'E1100'",
        "never deleted",
        "cannot_delete_employee",
    )
    refused(
        db,
        "UPDATE employees SET status = 'terminated' WHERE employee_no = 'E1100'",
        "ck_employees_termination_date",
    )
    refused(
        db,
        "UPDATE employees SET status = 'terminated', termination_date = '1990-01-01' "
        "WHERE employee_no = 'E1100'",
        "ck_employees_dates_ordered",
    )
    refused(
        db, "UPDATE employees SET manager_id = id WHERE employee_no = 'E1100'", "not_own_manager"
    )
    refused(db, "UPDATE employees SET department_id = 99 WHERE employee_no = 'E1100'", "FOREIGN")


def test_invoices_are_never_deleted_and_paid_ones_are_locked(db: TaskDb) -> None:
    paid, pid = one(
        db, "SELECT number, id FROM invoices WHERE status = 'paid' ORDER BY id LIMIT 1"
    )[0]
    locked = "invoice_already_paid"
    refused(
        db,
        f"DELETE FROM invoices WHERE number = '{paid}'",
        "never deleted",
        "cannot_delete_invoice",
    )
    refused(
        db,
        f"UPDATE invoices SET status = 'void', paid_date = NULL WHERE id = {pid}",
        "locked",
        locked,
    )
    refused(db, f"UPDATE timesheets SET hours = 1 WHERE invoice_id = {pid}", "locked", locked)
    refused(
        db,
        f"DELETE FROM timesheets WHERE invoice_id = {pid}",
        "cannot be deleted",
        "cannot_archive_invoiced",
    )
    refused(
        db, "UPDATE invoices SET status = 'paid' WHERE status = 'sent'", "ck_invoices_paid_date"
    )
    sent = one(db, "SELECT id FROM invoices WHERE status = 'sent' ORDER BY id LIMIT 1")[0][0]
    # A sent invoice can still be voided once its timesheets are released.
    refused(
        db,
        f"UPDATE timesheets SET status = 'approved' WHERE invoice_id = {sent}",
        "ck_timesheets_invoice_link",
    )
    one(
        db,
        f"UPDATE timesheets SET status = 'approved', invoice_id = NULL WHERE invoice_id = {sent}",
    )
    one(db, f"UPDATE invoices SET status = 'void' WHERE id = {sent}")
    assert one(db, f"SELECT status FROM invoices WHERE id = {sent}") == [["void"]]


def test_rule_exceptions_the_data_decides(db: TaskDb) -> None:
    """The rules' exceptions hold in the database too: a hire who has not started (no
    timesheets) may be deleted with their salary rows, a salary row not yet in effect may be
    corrected, an empty draft invoice may be deleted; the same statements on rows in effect
    (a started employee, a row in effect, a sent invoice or a draft that bills timesheets)
    fail with the rule's code."""
    one(
        db,
        "INSERT INTO employees (employee_no, first_name, last_name, email, department_id, "
        "title, hire_date, status) VALUES ('E777777', 'Zeno', 'Zeller', 'z.z@acme-consulting.eu', "
        "1, 'Analyst', '2026-04-01', 'active')",
    )
    new = one(db, "SELECT id FROM employees WHERE employee_no = 'E777777'")[0][0]
    one(
        db,
        "INSERT INTO salaries (employee_id, effective_date, amount, reason) "
        f"VALUES ({new}, '2026-04-01', 60000, 'hire')",
    )
    one(db, f"UPDATE salaries SET amount = 61000 WHERE employee_id = {new}")
    refused(
        db,
        "UPDATE salaries SET amount = 1 WHERE employee_id = 10 AND effective_date <= '2026-03-16'",
        "append-only",
        "salary_rewrite_forbidden",
    )
    one(db, f"DELETE FROM salaries WHERE employee_id = {new}")
    one(db, "DELETE FROM employees WHERE employee_no = 'E777777'")
    assert one(db, "SELECT COUNT(*) FROM employees WHERE employee_no = 'E777777'") == [[0]]
    one(
        db,
        "INSERT INTO invoices (number, customer_id, project_id, issue_date, due_date, amount, "
        "status) VALUES ('INV-2026-77777', 1, 1, '2026-03-16', '2026-04-15', 10, 'draft')",
    )
    one(db, "DELETE FROM invoices WHERE number = 'INV-2026-77777'")
    sent = one(db, "SELECT number FROM invoices WHERE status = 'sent' ORDER BY id LIMIT 1")[0][0]
    refused(
        db,
        f"DELETE FROM invoices WHERE number = '{sent}'",
        "never deleted",
        "cannot_delete_invoice",
    )
    billed = one(
        db,
        "SELECT i.number FROM invoices i JOIN timesheets t ON t.invoice_id = i.id "
        "WHERE i.status <> 'paid' ORDER BY i.id LIMIT 1",
    )[0][0]
    one(db, f"UPDATE invoices SET status = 'draft' WHERE number = '{billed}'")
    refused(
        db,
        f"DELETE FROM invoices WHERE number = '{billed}'",
        "never deleted",
        "cannot_delete_invoice",
    )


def test_timesheet_hours_and_uniqueness(db: TaskDb) -> None:
    row = one(db, "SELECT employee_id, project_id, week_start FROM timesheets ORDER BY id LIMIT 1")
    e, p, w = row[0]
    refused(
        db,
        f"INSERT INTO timesheets (employee_id, project_id, week_start, hours, billable, "
        f"status) VALUES ({e}, {p}, '{w}', 8, 1, 'submitted')",
        "UNIQUE",
    )
    free = one(db, "SELECT min(id) FROM timesheets WHERE status = 'submitted'")[0][0]
    refused(db, f"UPDATE timesheets SET hours = 61 WHERE id = {free}", "ck_timesheets_hours_range")
    refused(db, f"UPDATE timesheets SET project_id = 9999 WHERE id = {free}", "FOREIGN")


def test_every_trigger_is_installed(db: TaskDb) -> None:
    with db.engine.connect() as conn:
        names = {
            r[0]
            for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        }
    assert names == set(TRIGGERS)


def test_a_failed_call_keeps_earlier_committed_calls(db: TaskDb) -> None:
    one(db, "UPDATE projects SET status = 'on_hold' WHERE code = 'PRJ-201'")
    refused(
        db, "UPDATE projects SET status = 'paused' WHERE code = 'PRJ-202'", "ck_projects_status"
    )
    assert one(db, "SELECT status FROM projects WHERE code = 'PRJ-201'") == [["on_hold"]]
