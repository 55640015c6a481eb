"""The report in a real headless Chromium: the DOM after scripts ran, no console error, nothing fetched.

Needs Debian's ``chromium`` (``apt-get install -y chromium``); skipped when no Chromium is on PATH.
Also refreshes ``docs/report.png``, the README's screenshot.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scripts_loader import load_script
from tests.test_report import experiment, run_page  # noqa: F401  (experiment: the scripted experiment fixture)

pytestmark = [pytest.mark.browser, pytest.mark.slow]
cdp = load_script("chromium_cdp")
SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "report.png"

VISIBLE_ROWS = "[...document.querySelectorAll('table.grid tbody tr')].filter(tr => tr.offsetParent !== null).length"
LABEL_BOXES = """[...document.querySelectorAll('svg.chart')].map(s =>
    [...s.querySelectorAll('text.label')].map(t => { const r = t.getBBox(); return [r.x, r.y, r.width, r.height]; }))"""


@pytest.fixture()
def browser(tmp_path):
    if cdp.find_chromium() is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install -y chromium)")
    with cdp.Chromium(tmp_path / "profile", width=1280, height=1000) as b:
        yield b


def _overlaps(a, b) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def test_index_renders_and_scripts_run_without_errors(experiment, browser):  # noqa: F811
    browser.open((experiment / "report" / "index.html").as_uri())
    assert browser.evaluate("document.body.dataset.ready") == "1"  # report.js ran to its end
    n_runs = len(list(experiment.glob("arith/*/*/run_*.result.json")))
    assert browser.evaluate("document.querySelectorAll('table.grid a.run').length") == n_runs
    assert browser.evaluate("document.querySelectorAll('svg.chart').length") == 5
    findings = browser.evaluate("[...document.querySelectorAll('p.finding')].map(p => p.innerText)")
    assert len(findings) == 3 and all(f.startswith("On 4 arith tasks") for f in findings)
    # labels do not overlap with the real font metrics either
    for boxes in browser.evaluate(LABEL_BOXES):
        assert not any(_overlaps(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]), boxes
    # the grid filter works: only tasks with a failed run stay visible
    failed_tasks = {p.parent.name for p in experiment.glob("arith/*/*/run_*.result.json")
                    if not json.loads(p.read_text())["success"]}
    browser.evaluate("document.querySelector('[data-filter=failed]').click()")
    assert browser.evaluate(VISIBLE_ROWS) == len(failed_tasks)
    assert browser.evaluate("document.querySelector('[data-count]').textContent").startswith(f"{len(failed_tasks)} of 4")
    browser.evaluate("document.querySelector('[data-filter=all]').click()")
    assert browser.evaluate(VISIBLE_ROWS) == 4
    browser.screenshot(SCREENSHOT, height=1500)
    assert SCREENSHOT.stat().st_size > 50_000
    assert browser.problems() == []


def test_run_page_renders_attribution_and_toggles(experiment, browser):  # noqa: F811
    rec = json.loads((experiment / "attribution" / "scores.jsonl").read_text().splitlines()[0])
    page = run_page(experiment / "report", rec["id"])
    browser.open(page.as_uri())
    assert browser.evaluate("document.body.dataset.ready") == "1"
    assert browser.evaluate("document.querySelector('.verdict').textContent") == "not solved"
    marks = browser.evaluate("[...document.querySelectorAll('.mark')].map(m => m.textContent)")
    assert any(m.startswith("top-1 of learned") for m in marks) and any("conformal" in m for m in marks)
    tools = "[...document.querySelectorAll('li.ev.t-tool_call')].filter(e => e.offsetParent !== null).length"
    assert browser.evaluate(tools) > 0
    browser.evaluate("document.querySelector('[data-toggle=hide-tools]').click()")
    assert browser.evaluate(tools) == 0
    # following the rollback link opens its transcript, also cleanly
    link = browser.evaluate("document.querySelector('.rollbacks a') && document.querySelector('.rollbacks a').href")
    if link:
        browser.open(link)
        assert "Rollback" in browser.evaluate("document.querySelector('.rollback-of h2').textContent")
    assert browser.problems() == []


def test_hostile_model_output_stays_text(tmp_path, browser):
    from descriptor.report import write_report
    from tests.descriptor_fixtures import ev, write_run

    hostile = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
    events = [ev("solver", "act", tin=3, tout=2, content=hostile, step_index=0, role="solver",
                 input_messages=[{"role": "user", "content": hostile}]),
              ev("solver", "finalize", content="</script><b>42</b>", step_index=1)]
    write_run(tmp_path / "arith" / "sas" / "t0", 0, events, success=True)
    write_report(tmp_path)
    browser.open(run_page(tmp_path / "report", "arith/sas/t0/run_0").as_uri())
    assert browser.evaluate("document.body.dataset.ready") == "1"
    assert browser.evaluate("window.__pwned === undefined")
    shown = browser.evaluate("[...document.querySelectorAll('li.ev pre.content')].map(p => p.textContent)")
    assert shown == [hostile, "</script><b>42</b>"]
    assert browser.evaluate("document.querySelectorAll('li.ev img, li.ev script, li.ev b').length") == 0
    assert browser.problems() == []
