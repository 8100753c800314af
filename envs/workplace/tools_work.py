"""People and project tools: who the user is, the employee directory, project tasks."""

from __future__ import annotations

from datetime import date
from functools import cache
from typing import Any, Literal

from pydantic import Field
from sqlalchemy import Select, bindparam, func, or_, select
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, ToolError, tool
from app.sdk.rows import AnyRow
from envs.workplace.models import Employee, Project, WorkTask
from envs.workplace.ops import (
    EMPLOYEES,
    employee_by_email,
    full_name,
    get_task,
    me,
    me_row,
    require_active,
)

Status = Literal["todo", "in_progress", "done"]
Priority = Literal["low", "medium", "high", "urgent"]


def _person(e: Employee | AnyRow) -> dict[str, Any]:
    return {
        "name": full_name(e),
        "email": e.email,
        "department": e.department,
        "title": e.title,
        "active": e.active,
    }


class NoArgs(ToolArgs):
    pass


@tool(read_only=True)
def get_current_user(db: Session, args: NoArgs, ctx: ToolContext) -> dict[str, Any]:
    """Who the user is (the employee this assistant acts for) and the current date and time."""
    return {**_person(me_row(db)), "now": ctx.now.isoformat()}


class SearchEmployeesArgs(ToolArgs):
    query: str | None = Field(None, description="Part of a first name, last name or email.")
    department: str | None = Field(None, description="Only this department, e.g. 'Sales'.")


@cache
def _employee_search(by_text: bool, by_department: bool) -> Select[Any]:
    """Core, not ORM: a hot read; see docs/performance.md. Built once per filter combination."""
    e = EMPLOYEES.c
    q = select(e.first_name, e.last_name, e.email, e.department, e.title, e.active)
    if by_text:
        name = func.lower(e.first_name + " " + e.last_name)
        q = q.where(or_(name.like(bindparam("like")), func.lower(e.email).like(bindparam("like"))))
    if by_department:
        q = q.where(func.lower(e.department) == bindparam("department"))
    return q.order_by(e.last_name, e.first_name, e.id).limit(25)


@tool(read_only=True)
def search_employees(db: Session, args: SearchEmployeesArgs, ctx: ToolContext) -> dict[str, Any]:
    """Search the employee directory by name/email and/or department (at most 25 results).

    Results say whether each person is still active; former employees get no new work.
    """
    params = {}
    if args.query:
        params["like"] = f"%{args.query.lower()}%"
    if args.department:
        params["department"] = args.department.lower()
    q = _employee_search(bool(args.query), bool(args.department))
    return {"employees": [_person(e) for e in db.execute(q, params)]}


def _task(db: Session, t: WorkTask) -> dict[str, Any]:
    project = db.get(Project, t.project_id)
    assignee = db.get(Employee, t.assignee_id) if t.assignee_id else None
    return {
        "code": t.code,
        "project": project.key if project else None,
        "title": t.title,
        "assignee": assignee.email if assignee else None,
        "status": t.status,
        "priority": t.priority,
        "due_date": t.due_date.isoformat() if t.due_date else None,
    }


class ListTasksArgs(ToolArgs):
    project_key: str | None = Field(None, description="Only tasks of this project, e.g. ATLAS.")
    assignee_email: str | None = Field(None, description="Only tasks assigned to this employee.")
    status: Status | None = Field(None, description="Only tasks in this status.")


@tool(read_only=True)
def list_tasks(db: Session, args: ListTasksArgs, ctx: ToolContext) -> dict[str, Any]:
    """List project tasks filtered by project, assignee and/or status (at most 50)."""
    q = select(WorkTask).order_by(WorkTask.id)
    if args.project_key:
        q = q.where(WorkTask.project_id == _project(db, args.project_key).id)
    if args.assignee_email:
        q = q.where(WorkTask.assignee_id == employee_by_email(db, args.assignee_email).id)
    if args.status:
        q = q.where(WorkTask.status == args.status)
    return {"tasks": [_task(db, t) for t in db.scalars(q.limit(50))]}


def _project(db: Session, key: str) -> Project:
    project = db.scalar(select(Project).where(Project.key == key.strip().upper()))
    if project is None:
        raise ToolError(f"No project has key {key!r}.", code="not_found")
    return project


def _writable(project: Project) -> None:
    if project.status != "active":
        raise ToolError(
            f"Project {project.key} is {project.status}; its tasks cannot be changed.",
            code="project_inactive",
        )


class CreateTaskArgs(ToolArgs):
    project_key: str = Field(description="The project's key, e.g. ATLAS.")
    title: str = Field(min_length=1, max_length=160, description="What needs doing.")
    assignee_email: str | None = Field(None, description="Who does it (an active employee).")
    priority: Priority | None = Field(None, description="Priority (default medium).")
    due_date: date | None = Field(None, description="Due date, YYYY-MM-DD, not in the past.")


@tool
def create_task(db: Session, args: CreateTaskArgs, ctx: ToolContext) -> dict[str, Any]:
    """Create a task in an active project; its code is the project key and the next number.

    Rules: tasks cannot be assigned to inactive employees; the due date cannot be in the past;
    closed or on-hold projects take no new tasks.
    """
    project = _project(db, args.project_key)
    _writable(project)
    assignee = None
    if args.assignee_email:
        assignee = employee_by_email(db, args.assignee_email)
        require_active(assignee, "be assigned tasks")
    if args.due_date and args.due_date < ctx.now.date():
        raise ToolError(f"Due date {args.due_date} is in the past.", code="in_the_past")
    prefix = f"{project.key}-"
    codes = db.scalars(select(WorkTask.code).where(WorkTask.project_id == project.id))
    number = max((int(c[len(prefix) :]) for c in codes if c[len(prefix) :].isdigit()), default=0)
    task = WorkTask(
        code=f"{prefix}{number + 1}",
        project_id=project.id,
        title=args.title,
        assignee_id=assignee.id if assignee else None,
        status="todo",
        priority=args.priority or "medium",
        due_date=args.due_date,
        created_by=me(db).id,
    )
    db.add(task)
    db.flush()
    return _task(db, task)


class TaskRef(ToolArgs):
    code: str = Field(description="The task's code, e.g. ATLAS-12.")


class TaskStatusArgs(TaskRef):
    status: Status = Field(description="The new status.")


@tool
def update_task_status(db: Session, args: TaskStatusArgs, ctx: ToolContext) -> dict[str, Any]:
    """Change a task's status (todo, in_progress, done).

    Rule: done tasks are closed and cannot be reopened; tasks of inactive projects are frozen.
    """
    task = get_task(db, args.code)
    project = db.get(Project, task.project_id)
    assert project is not None
    _writable(project)
    if task.status == "done":
        raise ToolError(
            f"Task {task.code} is done; done tasks cannot be reopened.",
            hint="Create a new task instead.",
            code="task_closed",
        )
    if task.status == args.status:
        raise ToolError(f"Task {task.code} is already {args.status}.", code="no_change")
    task.status = args.status
    return _task(db, task)


class ReassignTaskArgs(TaskRef):
    assignee_email: str = Field(description="Email of the new assignee (an active employee).")


@tool
def reassign_task(db: Session, args: ReassignTaskArgs, ctx: ToolContext) -> dict[str, Any]:
    """Assign a task to another colleague.

    Rules: tasks cannot be assigned to inactive employees; done tasks keep their assignee.
    """
    task = get_task(db, args.code)
    project = db.get(Project, task.project_id)
    assert project is not None
    _writable(project)
    if task.status == "done":
        raise ToolError(f"Task {task.code} is done; it cannot be reassigned.", code="task_closed")
    assignee = employee_by_email(db, args.assignee_email)
    require_active(assignee, "be assigned tasks")
    if task.assignee_id == assignee.id:
        raise ToolError(
            f"Task {task.code} is already assigned to {assignee.email}.", code="no_change"
        )
    task.assignee_id = assignee.id
    db.flush()
    return _task(db, task)
