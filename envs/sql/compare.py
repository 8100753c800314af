"""How two states of the company database are compared: natural keys, money, references."""

from app.sdk.compare_spec import CompareSpec, TableSpec

COMPARE = CompareSpec(
    tables={
        # No task changes departments or customers: any change is collateral damage.
        "departments": TableSpec(key=("code",), money=("budget",), text=("name",), frozen=True),
        "customers": TableSpec(key=("code",), text=("name",), frozen=True),
        "employees": TableSpec(
            key=("employee_no",),
            text=("first_name", "last_name", "title"),
            references={"department_id": "departments", "manager_id": "employees"},
        ),
        "salaries": TableSpec(
            key=("employee_id", "effective_date"),
            money=("amount",),
            references={"employee_id": "employees"},
        ),
        "projects": TableSpec(
            key=("code",),
            money=("budget", "hourly_rate"),
            text=("name",),
            references={"customer_id": "customers", "department_id": "departments"},
        ),
        # Invoices created during a rollout match the gold ones by number, whatever their id.
        "invoices": TableSpec(
            key=("number",),
            money=("amount",),
            references={"customer_id": "customers", "project_id": "projects"},
        ),
        "timesheets": TableSpec(
            key=("employee_id", "project_id", "week_start"),
            references={
                "employee_id": "employees",
                "project_id": "projects",
                "invoice_id": "invoices",
            },
        ),
        # Archived rows have no key of their own: matched by content.
        "timesheet_archive": TableSpec(
            references={"employee_id": "employees", "project_id": "projects"}
        ),
    }
)
