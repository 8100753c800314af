# ruff: noqa: E501  (HTML templates: a line is markup, wrapping it would change the output)
"""The explorer's Jinja2 templates and its one stylesheet (served at /-/static/explorer.css).

Kept as Python strings so the package ships them without package-data rules. Autoescaped;
colours meet WCAG AA contrast on white, and every state a colour shows is also written out.
"""

from __future__ import annotations

CSS = """
:root { --fg:#1b1f24; --muted:#57606a; --line:#d0d7de; --bg2:#f6f8fa; --accent:#0a58ca;
  --bad:#a40e26; --badbg:#ffebe9; --good:#116329; --goodbg:#dafbe1; --chg:#fff1b8; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
  margin: 0; background: #fff; }
a { color: var(--accent); } a:focus, button:focus, input:focus, select:focus, summary:focus {
  outline: 3px solid #8ab4f8; outline-offset: 1px; }
.skip { position: absolute; left: -999px; } .skip:focus { left: 8px; top: 8px; background: #fff; }
header { background: #24292f; color: #fff; padding: 8px 20px; display: flex; gap: 18px;
  align-items: baseline; flex-wrap: wrap; }
header a { color: #fff; font-weight: 600; text-decoration: none; } header a:hover {
  text-decoration: underline; }
header .where { color: #d0d7de; font-size: 13px; margin-left: auto; }
main { padding: 12px 20px 40px; max-width: 1500px; }
h1 { font-size: 22px; margin: 8px 0 4px; } h2 { font-size: 18px; margin: 24px 0 8px;
  border-bottom: 1px solid var(--line); padding-bottom: 4px; } h3 { font-size: 15px; margin: 0; }
.muted { color: var(--muted); } code, pre, .mono { font-family: ui-monospace, Menlo, Consolas,
  monospace; font-size: 13px; }
pre { background: var(--bg2); border: 1px solid var(--line); padding: 8px; overflow: auto;
  max-height: 420px; margin: 4px 0; white-space: pre-wrap; word-break: break-word; }
table { border-collapse: collapse; margin: 6px 0; }
th, td { border: 1px solid var(--line); padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: var(--bg2); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.wide { overflow-x: auto; max-width: 100%; }
.badge { display: inline-block; padding: 0 6px; border-radius: 10px; font-size: 12px;
  border: 1px solid var(--line); background: var(--bg2); }
.badge.error, .error { color: var(--bad); } .badge.error { background: var(--badbg);
  border-color: #ff8182; font-weight: 600; }
.badge.ok { color: var(--good); background: var(--goodbg); border-color: #4ac26b; }
.pass { color: var(--good); font-weight: 600; } .fail { color: var(--bad); font-weight: 600; }
tr.changed td, td.changed { background: var(--chg); } td.changed::before { content: "● ";
  color: #7d4e00; }
tr.mark-insert td { background: var(--goodbg); } tr.mark-update td { background: var(--chg); }
tr.differs td.differs, td.differs { background: var(--badbg); }
form.filters { display: flex; flex-wrap: wrap; gap: 8px 14px; align-items: end;
  background: var(--bg2); border: 1px solid var(--line); padding: 10px; border-radius: 6px; }
form.filters label { display: flex; flex-direction: column; font-size: 12px;
  color: var(--muted); font-weight: 600; }
input, select, button { font: inherit; padding: 3px 6px; border: 1px solid #8c959f;
  border-radius: 4px; } button { background: var(--accent); color: #fff; border-color:
  var(--accent); cursor: pointer; } input[type=number] { width: 7em; }
.panels { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
.panel { min-width: 260px; } dl.facts { display: grid; grid-template-columns: max-content auto;
  gap: 2px 14px; margin: 6px 0; } dl.facts dt { color: var(--muted); font-weight: 600; }
dl.facts dd { margin: 0; }
.chart text { font-size: 10px; fill: var(--muted); } .chart .bar { fill: #4c8dd6; }
.chart .axis { stroke: #8c959f; } .chart .gain { fill: #2da44e; } .chart .loss { fill: #cf222e; }
.chart .zero { fill: #8c959f; } .chart .running { fill: none; stroke: #0a58ca; stroke-width: 2; }
.rate { display: inline-block; width: 60px; height: 8px; background: #eaeef2;
  vertical-align: middle; } .rate-bar { display: block; height: 8px; background: #2da44e; }
ol.steps { list-style: none; padding: 0; } li.step { border: 1px solid var(--line);
  border-radius: 6px; margin: 10px 0; padding: 8px 10px; }
li.step.failed { border-left: 5px solid var(--bad); }
.step-head { display: flex; gap: 12px; align-items: baseline; flex-wrap: wrap; }
details > summary { cursor: pointer; color: var(--accent); }
.pager { display: flex; gap: 16px; margin: 8px 0; } .cli code { user-select: all; }
.msg { border-left: 3px solid var(--line); padding-left: 8px; margin: 6px 0; }
.msg .role { font-weight: 600; color: var(--muted); text-transform: uppercase; font-size: 11px; }
.change-head { margin: 10px 0 2px; } caption { text-align: left; font-weight: 600; }
.notice { background: var(--bg2); border: 1px solid var(--line); padding: 8px; }
"""

_BASE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }} · StateGym runs</title>
<link rel="stylesheet" href="/-/static/explorer.css"></head>
<body><a class="skip" href="#main">Skip to content</a>
<header><nav aria-label="Main" style="display:flex;gap:18px">
<a href="/">Runs</a>{% if datasette %}<a href="/-/datasette/">SQL (Datasette)</a>{% endif %}
</nav><span class="where">{{ backend }} backend · read-only</span></header>
<main id="main">{% block main %}{% endblock %}
{% if json_url or cli %}<h2 id="reproduce">Same data elsewhere</h2>
<ul class="cli">{% if json_url %}<li><a href="{{ json_url }}">This page as JSON</a></li>{% endif %}
{% if cli is string %}<li>CLI: <code>{{ cli }}</code></li>
{% elif cli %}{% for name, cmd in cli.items() %}<li>{{ name }}: <code>{{ cmd }}</code></li>
{% endfor %}{% endif %}</ul>{% endif %}
</main></body></html>"""

_RUNS = """{% extends "base" %}{% block main %}
<h1>Runs</h1>
<p>{{ total }} run(s){% if f_active %} matching the filters{% endif %} ·
{{ summary.verified }} verified · pass rate {{ summary.pass_rate|pct }}
(reward ≥ {{ pass_threshold }}) · mean reward {{ summary.mean_reward|reward }}
· {{ summary.unverified }} not verified <span class="muted">(counts and charts as of {{ summary_as_of|when }} UTC)</span></p>
<form class="filters" method="get" action="/" aria-label="Filter runs">
<label>Environment<input name="env" value="{{ filter.env or '' }}" list="envs" size="9"></label>
<label>Task<input name="task" value="{{ filter.task or '' }}" size="12"></label>
<label>Status<select name="status"><option value="">any</option>
{% for s in ["open", "verified", "closed"] %}<option{% if filter.status == s %} selected{% endif %}>{{ s }}</option>{% endfor %}</select></label>
<label>Reward from<input type="number" step="any" name="reward_min" value="{{ filter.reward_min if filter.reward_min is not none else '' }}"></label>
<label>Reward to<input type="number" step="any" name="reward_max" value="{{ filter.reward_max if filter.reward_max is not none else '' }}"></label>
<label>Failure reason starts with<input name="failure" value="{{ filter.failure or '' }}" size="22"></label>
<label>Family<input name="family" value="{{ filter.family or '' }}" size="9"></label>
<label>Difficulty<input name="difficulty" value="{{ filter.difficulty or '' }}" size="4"></label>
<label>Since (7d or date)<input name="since" value="{{ filter.since or '' }}" size="16"></label>
<label>Until<input name="until" value="{{ filter.until or '' }}" size="16"></label>
<label>Sort<select name="sort">{% for s in ["created", "reward", "task", "env", "status"] %}<option{% if filter.sort == s %} selected{% endif %}>{{ s }}</option>{% endfor %}</select></label>
<label>Order<select name="order">{% for s in ["desc", "asc"] %}<option{% if filter.order == s %} selected{% endif %}>{{ s }}</option>{% endfor %}</select></label>
<label>Per page<input type="number" name="limit" min="1" max="500" value="{{ filter.limit }}"></label>
<button type="submit">Apply</button> <a href="/">Clear</a>
<datalist id="envs">{% for e in envs %}<option value="{{ e }}">{% endfor %}</datalist>
</form>
<div class="panels">
<section class="panel" aria-labelledby="h-hist"><h2 id="h-hist">Reward histogram</h2>
{{ histogram_svg(histogram.bins) }}</section>
<section class="panel" aria-labelledby="h-diff"><h2 id="h-diff">Pass rate by difficulty</h2>
<table><thead><tr><th scope="col">difficulty</th><th scope="col" class="num">runs</th><th scope="col">pass rate</th></tr></thead><tbody>
{% for g in by_difficulty %}<tr><td><a href="/?{{ link(difficulty=g.label) }}">{{ g.label }}</a></td><td class="num">{{ g.runs }}</td><td>{{ g.pass_rate|rate_bar }}</td></tr>{% endfor %}
</tbody></table></section>
<section class="panel" aria-labelledby="h-fam"><h2 id="h-fam">Pass rate by family</h2>
<table><thead><tr><th scope="col">family</th><th scope="col" class="num">runs</th><th scope="col">pass rate</th></tr></thead><tbody>
{% for g in by_family %}<tr><td><a href="/?{{ link(family=g.label) }}">{{ g.label }}</a></td><td class="num">{{ g.runs }}</td><td>{{ g.pass_rate|rate_bar }}</td></tr>{% endfor %}
</tbody></table></section>
<section class="panel" aria-labelledby="h-fail"><h2 id="h-fail">Why runs fail</h2>
{% if failures %}<table><thead><tr><th scope="col">failure reason</th><th scope="col" class="num">runs</th></tr></thead><tbody>
{% for x in failures %}<tr><td><a href="/?{{ link(failure=x.headline) }}">{{ x.headline }}</a></td><td class="num">{{ x.runs }}</td></tr>{% endfor %}
</tbody></table><p class="muted">Among the newest 2,000 failed runs.</p>{% else %}<p class="muted">No failed runs.</p>{% endif %}</section>
</div>
<h2 id="h-runs">Runs, {{ sort_label }}</h2>
<div class="wide"><table class="runs" aria-labelledby="h-runs"><thead><tr>
{% for key, label in columns %}<th scope="col"{% if key == filter.sort %} aria-sort="{{ 'descending' if filter.order == 'desc' else 'ascending' }}"{% endif %}>{% if key %}<a href="/?{{ link(sort=key, order='asc' if key == filter.sort and filter.order == 'desc' else 'desc', offset=0, after=None) }}">{{ label }}</a>{% else %}{{ label }}{% endif %}</th>{% endfor %}
</tr></thead><tbody>
{% for r in runs %}<tr class="run">
<td class="mono"><a href="/rollouts/{{ r.id }}" title="{{ r.id }}">{{ r.id[:12] }}</a></td>
<td>{{ r.env }}</td><td>{% if r.task_id %}<a href="/tasks/{{ r.env }}/{{ r.task_id|urlencode }}">{{ r.task_id }}</a>{% else %}–{% endif %}</td>
<td>{{ r.difficulty or '–' }}</td><td>{{ r.family or '–' }}</td><td>{{ r.status }}</td>
<td class="num {{ 'pass' if r.reward is not none and r.reward >= pass_threshold else 'fail' if r.reward is not none else '' }}">{{ r.reward|reward }}</td>
<td title="{{ r.failure or '' }}">{% if r.failure_headline %}<a href="/?{{ link(failure=r.failure_headline) }}">{{ r.failure_headline }}</a>{% endif %}</td>
<td class="num">{{ r.calls if r.calls is not none else '–' }}</td>
<td>{{ r.created_at|when }}</td><td>{{ r.ended_at|when }}</td></tr>
{% else %}<tr><td colspan="11">No runs match.</td></tr>{% endfor %}
</tbody></table></div>
<nav class="pager" aria-label="Pages">
{% if filter.offset or after %}<a href="/?{{ link(offset=0, after=None) }}">« First page</a>{% endif %}
{% if prev_offset is not none %}<a href="/?{{ link(offset=prev_offset) }}">‹ Previous</a>{% endif %}
{% if next %}<a href="/?{{ next }}" rel="next">Next page ›</a>{% endif %}
</nav>
<h2 id="h-tasks">Tasks, lowest pass rate first</h2>
<div class="wide"><table aria-labelledby="h-tasks"><thead><tr><th scope="col">task</th><th scope="col">env</th><th scope="col">difficulty</th><th scope="col">family</th>
<th scope="col" class="num">runs</th><th scope="col" class="num">verified</th><th scope="col" class="num">passed</th><th scope="col">pass rate</th><th scope="col" class="num">mean reward</th></tr></thead><tbody>
{% for s in by_task[:100] %}<tr><td>{% if s.task_id %}<a href="/tasks/{{ s.env }}/{{ s.task_id|urlencode }}">{{ s.task_id }}</a>{% else %}–{% endif %}</td><td>{{ s.env }}</td>
<td>{{ s.difficulty or '–' }}</td><td>{{ s.family or '–' }}</td><td class="num">{{ s.runs }}</td><td class="num">{{ s.verified }}</td><td class="num">{{ s.passed }}</td>
<td>{{ s.pass_rate|rate_bar }}</td><td class="num">{{ s.mean_reward|reward }}</td></tr>{% endfor %}
</tbody></table></div>{% if by_task|length > 100 %}<p class="muted">{{ by_task|length - 100 }} more task(s) in the JSON.</p>{% endif %}
{% endblock %}"""

_PROMPT = """{% if prompt %}{% for m in prompt %}<div class="msg"><div class="role">{{ m.role }}</div>
{% if m.role == 'system' %}<details><summary>System prompt ({{ m.content|length }} characters)</summary><pre>{{ m.content }}</pre></details>
{% else %}<pre>{{ m.content }}</pre>{% endif %}</div>{% endfor %}
{% else %}<p class="muted">The prompt is not in this environment's task file (the control database keeps a task's verify fields, not its prompt).</p>{% endif %}"""

_ROLLOUT = (
    """{% extends "base" %}{% block main %}{% set s = session %}
<h1>Rollout <span class="mono">{{ s.id }}</span></h1>
<dl class="facts"><dt>Environment</dt><dd>{{ s.env }}</dd>
<dt>Task</dt><dd>{% if s.task_id %}<a href="/tasks/{{ s.env }}/{{ s.task_id|urlencode }}">{{ s.task_id }}</a>{% else %}–{% endif %}
{% if s.difficulty is not none %} · difficulty {{ s.difficulty }}{% endif %}{% if s.family %} · family {{ s.family }}{% endif %}</dd>
<dt>Status</dt><dd>{{ s.status }}</dd>
<dt>Origin</dt><dd>{% if lineage.parent %}{{ lineage.parent.kind }} of <a class="mono" href="/rollouts/{{ lineage.parent.session_id }}">{{ lineage.parent.session_id[:12] }}</a> at step {{ lineage.parent.step }}{% else %}seeded{% endif %}{% if lineage.children %} · {{ lineage.children|length }} fork(s) made from it (<a href="#lineage">lineage</a>){% endif %}</dd>
<dt>Reward</dt><dd class="{{ 'pass' if s.reward is not none and s.reward >= 1 else 'fail' if s.reward is not none else '' }}">{{ s.reward|reward }}</dd>
<dt>Started</dt><dd>{{ s.created_at|when }}</dd><dt>Verified</dt><dd>{{ s.verified_at|when }}</dd><dt>Closed</dt><dd>{{ s.closed_at|when }}</dd></dl>
<nav aria-label="Sections"><a href="#prompt">Prompt</a> · <a href="#steps">Steps</a> · <a href="#verify">Verify</a> · <a href="#lineage">Lineage</a> · <a href="#tables">Tables</a> · <a href="#reproduce">JSON and CLI</a></nav>
<h2 id="prompt">Prompt</h2>"""
    + _PROMPT
    + """
{% if conversation %}<h2 id="conversation">Conversation with the user</h2>
{% for t in conversation %}<div class="msg"><div class="role">agent, turn {{ t.turn }}</div><pre>{{ t.message }}</pre></div>
<div class="msg"><div class="role">user ({{ t.simulator }}; {{ t.act }}{% if t.confirms != '[]' %}, confirms {{ t.confirms }}{% endif %}{% if t.failure %}, <span class="error">failed: {{ t.failure }}</span>{% endif %})</div><pre>{{ t.reply }}</pre></div>{% endfor %}{% endif %}
<h2 id="steps">Steps</h2>
{% if not s.present %}<p class="notice">This session's database is gone (retention); its record and verify result remain.</p>
{% elif not step_log %}<p class="notice">This session keeps no step log (seeded before step logging).</p>
{% else %}
{% if steps %}<figure>{{ steps_svg(steps|map(attribute='step_reward')|list) }}<figcaption class="muted">Step rewards (bars) and their running sum (line), {{ 'as verify paid them' if step_rewards_from == 'verify' else 'computed again from the step log (not verified after its last step)' }}.</figcaption></figure>{% endif %}
<ol class="steps">{% for st in steps %}
<li class="step{% if st.outcome != 'ok' %} failed{% endif %}" id="step-{{ st.step }}"><div class="step-head">
<h3>Step {{ st.step }}: <span class="mono">{{ st.tool }}</span></h3>
<span class="badge {{ 'ok' if st.outcome == 'ok' else 'error' }}">{{ 'ok' if st.outcome == 'ok' else 'error: ' ~ st.outcome }}</span>
<span class="muted">{{ '%.1f'|format(st.duration_ms) }} ms</span>
<span>step reward <strong class="reward">{{ st.step_reward|signed }}</strong></span></div>
<pre aria-label="arguments">{{ st.arguments|pretty }}</pre>
<details><summary>Output ({{ st.output_bytes }} bytes)</summary>{% if st.output is not none %}<pre>{{ st.output|pretty }}</pre>{% else %}<p>Over the size cap: sha256 <code>{{ st.output_digest }}</code></p>{% endif %}</details>
{% for c in st.changes %}<div class="wide"><p class="change-head"><strong>{{ c.table }}</strong>: row {{ {'insert': 'inserted', 'update': 'updated', 'delete': 'deleted'}.get(c.op, c.op) }}{% if c.changed %} · changed: {{ c.changed|join(', ') }}{% endif %} · <a href="/rollouts/{{ s.id }}/tables/{{ c.table }}?step={{ st.step }}">{{ c.table }} as of step {{ st.step }}</a></p><table class="change" aria-label="{{ c.table }} row {{ c.op }}">
<thead><tr><th scope="col">column</th><th scope="col">before</th><th scope="col">after</th></tr></thead><tbody>
{% for col in c.columns %}{% if col.changed or c.columns|length <= 8 %}<tr{% if col.changed and c.op == 'update' %} class="changed"{% endif %}><th scope="row">{{ col.name }}</th><td>{{ col.before|compact if c.op != 'insert' else '' }}</td><td>{{ col.after|compact if c.op != 'delete' else '' }}</td></tr>{% endif %}{% endfor %}
</tbody></table>{% if c.columns|length > 8 and c.op == 'update' %}<details><summary>{{ c.columns|rejectattr('changed')|list|length }} unchanged column(s)</summary><table><tbody>{% for col in c.columns if not col.changed %}<tr><th scope="row">{{ col.name }}</th><td>{{ col.before|compact }}</td></tr>{% endfor %}</tbody></table></details>{% endif %}</div>
{% endfor %}</li>{% else %}<li>No calls were made.</li>{% endfor %}</ol>{% endif %}
<h2 id="verify">Final verify</h2>
{% if not verify %}<p class="notice">Not verified yet.</p>{% else %}
<p>Reward <strong class="{{ 'pass' if verify.reward is not none and verify.reward >= 1 else 'fail' }}">{{ verify.reward|reward }}</strong>{% if verify.failure_reason %} · <span class="error">{{ verify.failure_reason }}</span>{% endif %}</p>
<table><caption>Reward components</caption><tbody>{% for k, v in verify.components.items() %}<tr><th scope="row">{{ k }}</th><td class="num">{{ v|reward }}</td></tr>{% endfor %}</tbody></table>
{% if verify.submitted %}<h3>Answer or decline submitted</h3><dl class="facts">{% for k, v in verify.submitted.items() %}<dt>{{ k }}</dt><dd>{{ v|compact if v is not none else '–' }}</dd>{% endfor %}</dl>{% endif %}
{% if verify.answer %}<h3>Answer check</h3><pre>{{ verify.answer|pretty }}</pre>{% endif %}
<h3>Final state against gold</h3>
{% if not verify.state_diff %}<p class="pass">Matches the gold state.</p>{% else %}
<p class="muted">Expected is the gold state (the reference solution replayed); found is this rollout's final state.</p>
{% for table, d in verify.state_diff.items() %}<h4>{{ table }}: {{ d.added }} only here · {{ d.removed }} missing · {{ d.changed }} differ</h4>
{% for row in d.changed_rows or [] %}<div class="wide"><table><caption>key {{ row.key|compact }}</caption><thead><tr><th scope="col">column</th><th scope="col">expected (gold)</th><th scope="col">found</th></tr></thead><tbody>
{% for col, pair in row.changes.items() %}<tr class="changed"><th scope="row">{{ col }}</th><td>{{ pair[0]|compact }}</td><td>{{ pair[1]|compact }}</td></tr>{% endfor %}</tbody></table></div>{% endfor %}
{% for row in d.removed_rows or [] %}<p>Missing (gold has it): <code>{{ row|compact }}</code></p>{% endfor %}
{% for row in d.added_rows or [] %}<p>Only in this rollout: <code>{{ row|compact }}</code></p>{% endfor %}
{% endfor %}{% endif %}
<details><summary>Other evidence</summary><pre>{{ verify.evidence|pretty }}</pre></details>{% endif %}
<h2 id="lineage">Lineage</h2>
{% if lineage.parent %}<p>{{ lineage.parent.kind|capitalize }} of <a class="mono" href="/rollouts/{{ lineage.parent.session_id }}">{{ lineage.parent.session_id }}</a> at step {{ lineage.parent.step }} (<a href="/rollouts/{{ lineage.parent.session_id }}#step-{{ lineage.parent.step }}">that step</a>).</p>{% else %}<p>Seeded (no parent).</p>{% endif %}
{% if lineage.children %}<table><caption>Sessions made from this one</caption><thead><tr><th scope="col">session</th><th scope="col">how</th><th scope="col" class="num">at step</th><th scope="col">status</th><th scope="col" class="num">reward</th></tr></thead><tbody>
{% for k in lineage.children %}<tr><td class="mono"><a href="/rollouts/{{ k.session_id }}">{{ k.session_id }}</a></td><td>{{ k.kind }}</td><td class="num">{{ k.step }}</td><td>{{ k.status }}</td><td class="num">{{ k.reward|reward }}</td></tr>{% endfor %}
</tbody></table>{% else %}<p class="muted">No forks or restores of this session.</p>{% endif %}
<h2 id="tables">Tables</h2>
{% if tables %}<ul>{% for name, n in tables.items() %}<li><a href="/rollouts/{{ s.id }}/tables/{{ name }}">{{ name }}</a> ({{ n }} rows)</li>{% endfor %}</ul>
{% if datasette %}<p><a href="/-/datasette/{{ s.id }}">Raw SQL on this session in Datasette</a></p>{% endif %}{% else %}<p class="muted">No tables to show.</p>{% endif %}
{% if gold_calls %}<details><summary>Gold calls ({{ gold_calls|length }})</summary><ol>{% for g in gold_calls %}<li><code>{{ g.name }}({{ g.arguments|compact }})</code></li>{% endfor %}</ol></details>{% endif %}
{% endblock %}"""
)

_TASK = (
    """{% extends "base" %}{% block main %}
<h1>Task {{ task_id }} <span class="muted">({{ env }})</span></h1>
<p>{% if difficulty is not none %}Difficulty {{ difficulty }} · {% endif %}{% if family %}family {{ family }} · {% endif %}
{{ total }} run(s){% if shown < total %}, the first {{ shown }} shown{% endif %} · {{ stats.verified }} verified · {{ stats.passed }} passed ·
mean reward {{ stats.mean_reward|reward }} · spread (std) {{ stats.std_reward|reward }}</p>
<h2 id="prompt">Prompt</h2>"""
    + _PROMPT
    + """
<h2 id="gold">Gold calls</h2>
{% if gold_calls %}<ol>{% for g in gold_calls %}<li><code>{{ g.tool }}({{ g.args }})</code></li>{% endfor %}</ol>{% else %}<p class="muted">No reference solution.</p>{% endif %}
<h2 id="group">Runs side by side</h2>
<p class="muted">Each column is one run, oldest first; a highlighted cell is a call that differs from the gold call at that step (tool or arguments). Advantage is the reward minus the group's mean.</p>
<div class="wide"><table class="group"><thead><tr><th scope="col">step</th><th scope="col">gold</th>
{% for r in runs %}<th scope="col"><a class="mono" href="/rollouts/{{ r.id }}">{{ r.id[:8] }}</a><br>reward {{ r.reward|reward }}<br>adv. {{ r.advantage|signed }}</th>{% endfor %}</tr></thead><tbody>
{% for i in range(depth) %}<tr><th scope="row" class="num">{{ i + 1 }}</th><td>{% if i < gold_calls|length %}<span title="{{ gold_calls[i].args }}">{{ gold_calls[i].tool }}</span>{% endif %}</td>
{% for r in runs %}{% set c = r.calls[i] if r.calls and i < r.calls|length else none %}{% set g = gold_calls[i] if i < gold_calls|length else none %}
<td class="{{ 'differs' if c and (not g or g.tool != c.tool or g.args != c.args) else '' }}">{% if c %}<a href="/rollouts/{{ r.id }}#step-{{ c.step }}" title="{{ c.args }}">{{ c.tool }}</a>{% if c.outcome != 'ok' %} <span class="error">({{ c.outcome }})</span>{% endif %}{% if g and (g.tool != c.tool or g.args != c.args) %} <span class="muted">≠ gold</span>{% endif %}{% endif %}</td>{% endfor %}</tr>{% endfor %}
<tr><th scope="row">first divergence from gold</th><td></td>{% for r in runs %}<td class="num">{{ r.diverges_from_gold if r.diverges_from_gold is not none else ('none' if r.calls is not none else 'no log') }}</td>{% endfor %}</tr>
</tbody></table></div>
{% if matrix %}<h2 id="pairs">First divergence between runs</h2>
<p class="muted">The first step at which two runs made different calls (none: the same calls throughout).</p>
<div class="wide"><table><thead><tr><th scope="col">run</th>{% for r in runs %}<th scope="col" class="mono">{{ r.id[:8] }}</th>{% endfor %}</tr></thead><tbody>
{% for row in matrix %}{% set i = loop.index0 %}<tr><th scope="row" class="mono">{{ runs[i].id[:8] }}</th>{% for v in row %}<td class="num">{{ '·' if loop.index0 == i else (v if v is not none else 'none') }}</td>{% endfor %}</tr>{% endfor %}
</tbody></table></div>{% endif %}
{% endblock %}"""
)

_TABLE = """{% extends "base" %}{% block main %}
<h1>{{ table }} <span class="muted">as of step {{ step }} of {{ steps }}</span></h1>
<p>Rollout <a class="mono" href="/rollouts/{{ session.id }}">{{ session.id }}</a> · {{ session.env }} · task {{ session.task_id or '–' }} · reward {{ session.reward|reward }}</p>
<nav class="pager" aria-label="Steps">{% if step > 0 %}<a href="?step={{ step - 1 }}">‹ step {{ step - 1 }}</a>{% endif %}
<a href="?step=0">seed (step 0)</a><a href="?step={{ steps }}">now (step {{ steps }})</a>
{% if step < steps %}<a href="?step={{ step + 1 }}">step {{ step + 1 }} ›</a>{% endif %}</nav>
<form method="get" aria-label="Pick a step"><label>Step <input type="number" name="step" min="0" max="{{ steps }}" value="{{ step }}"></label> <button type="submit">Show</button></form>
<p>{% if step > 0 %}<span class="badge ok">green: inserted at step {{ step }}</span> <span class="badge">yellow: updated at step {{ step }}</span>{% if deleted_here %} · {{ deleted_here }} row(s) deleted at step {{ step }}{% endif %}{% else %}The seed state, before any call.{% endif %}</p>
{% if written %}<h2 id="written">Rows step {{ step }} wrote</h2><div class="wide"><table class="written"><thead><tr>{% for c in columns %}<th scope="col">{{ c }}</th>{% endfor %}</tr></thead><tbody>
{% for row in written %}<tr class="mark-update">{% for v in row %}<td>{{ '' if v is none else v|compact }}</td>{% endfor %}</tr>{% endfor %}</tbody></table></div>{% endif %}
<h2 id="all-rows">All rows</h2>
<div class="wide"><table class="rows"><thead><tr><th scope="col">written</th>{% for c in columns %}<th scope="col">{{ c }}</th>{% endfor %}</tr></thead><tbody>
{% for row in rows %}{% set m = marks[loop.index0] %}<tr{% if m %} class="mark-{{ m }}"{% endif %}><td>{{ m + 'd here' if m else '' }}</td>{% for v in row %}<td>{{ '' if v is none else v|compact }}</td>{% endfor %}</tr>
{% else %}<tr><td colspan="{{ columns|length + 1 }}">No rows.</td></tr>{% endfor %}</tbody></table></div>
<nav class="pager" aria-label="Pages">{% if offset > 0 %}<a href="?step={{ step }}&amp;offset={{ [offset - limit, 0]|max }}&amp;limit={{ limit }}">‹ Previous</a>{% endif %}
<span>rows {{ offset + 1 if rows else 0 }}–{{ offset + rows|length }} of {{ total }}</span>
{% if offset + rows|length < total %}<a href="?step={{ step }}&amp;offset={{ offset + limit }}&amp;limit={{ limit }}">Next ›</a>{% endif %}</nav>
<p>Other tables: {% for t in tables %}<a href="/rollouts/{{ session.id }}/tables/{{ t }}?step={{ step }}">{{ t }}</a>{{ ', ' if not loop.last }}{% endfor %}</p>
{% if datasette %}<p><a href="/-/datasette/{{ session.id }}/{{ table }}">This table now, with SQL, in Datasette</a></p>{% endif %}
{% endblock %}"""

_ERROR = """{% extends "base" %}{% block main %}
<h1>{{ status }} · {{ reason }}</h1><p role="alert">{{ message }}</p>
<p><a href="/">Back to the runs</a></p>{% endblock %}"""

_LOGIN = """{% extends "base" %}{% block main %}
<h1>Sign in</h1><p>This explorer needs the admin token (<code>STATEGYM_ADMIN_TOKEN</code>).</p>
{% if failed %}<p class="error" role="alert">That token is not the admin token.</p>{% endif %}
<form method="post" action="/-/login"><label>Admin token <input type="password" name="token" autocomplete="current-password" required></label>
<input type="hidden" name="next" value="{{ next }}"> <button type="submit">Sign in</button></form>{% endblock %}"""

# `stategym report --out report.html` (app/cli/rollout_report.py): one file that opens anywhere,
# so the stylesheet is inlined and nothing links back to a running explorer.
_REPORT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Rollout report · StateGym</title><style>{{ css }}</style></head>
<body><main id="main">
<h1>Rollout report</h1>
<p>{{ s.rollouts }} rollouts, mean reward {{ '%.3f'|format(s.mean_reward) }}, success rate {{ '%.1f'|format(100 * s.success_rate) }}%.</p>
<figure>{{ histogram_svg(bins) }}<figcaption class="muted">Rollouts per reward bin (a reward outside [0, 1] is counted in the nearest end bin).</figcaption></figure>
{% for t in sections %}<h2>{{ t.title }}</h2>
<div class="wide"><table><thead><tr>{% for h in t.headers %}<th scope="col"{% if loop.index0 in t.numeric %} class="num"{% endif %}>{{ h }}</th>{% endfor %}</tr></thead><tbody>
{% for row in t.rows %}<tr>{% for c in row %}<td{% if loop.index0 in t.numeric %} class="num"{% endif %}>{% if loop.index0 in t.code and c != '-' %}<code>{{ c }}</code>{% else %}{{ c }}{% endif %}</td>{% endfor %}</tr>
{% else %}<tr><td colspan="{{ t.headers|length }}" class="muted">None.</td></tr>{% endfor %}</tbody></table></div>
{% endfor %}</main></body></html>"""

TEMPLATES = {
    "base": _BASE,
    "runs": _RUNS,
    "rollout": _ROLLOUT,
    "task": _TASK,
    "table": _TABLE,
    "error": _ERROR,
    "login": _LOGIN,
    "report": _REPORT,
}
