"""The experiment report on a scripted experiment: everything present, every run reachable, nothing fetched."""

from __future__ import annotations

import gzip
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, unquote, urldefrag

import pytest

from descriptor.report import write_report
from descriptor.report.run_data import read_task_js
from descriptor.report.svg import overlapping, place_labels
from main import main
from tests.descriptor_fixtures import ev, write_run

SYSTEMS = ("sas", "supervisor", "debate", "orchestrator")


def run_url(report: Path, run: str) -> str:
    """The viewer's URL of run ``<benchmark>/<system>/<task>/run_<r>[.rollback_<k>]`` (each part percent-encoded)."""
    return f"{(report / 'run.html').as_uri()}#{'/'.join(quote(p, safe='') for p in run.split('/'))}"


def task_data(report: Path, bench: str, system: str, task: str) -> dict:
    """The decoded data file of a task directory (``{"dir", "runs"}``), checked to name that task."""
    names, data = read_task_js((report / "data" / bench / system / f"{task}.js").read_text(encoding="utf-8"))
    assert names == [bench, system, task]
    return data


def run_view(report: Path, run: str) -> dict:
    """What the viewer shows of run ``<benchmark>/<system>/<task>/run_<r>[.rollback_<k>]`` (from its data file)."""
    bench, system, task, name = run.split("/")
    return task_data(report, bench, system, task)["runs"][name]


def shown(view: dict) -> str:
    """Every text of a view, as one string to search."""
    return json.dumps(view, ensure_ascii=False)


def runs_index(report: Path) -> dict:
    """``data/runs.js``'s tree: benchmark -> task -> {page, runs: {system: [[r, class]]}}."""
    text = (report / "data" / "runs.js").read_text(encoding="utf-8")
    assert text.startswith("masRuns(") and text.endswith(");\n")
    return json.loads(text[len("masRuns("):-3])


def _run(*argv: str) -> None:
    assert main(list(argv)) == 0, argv


@pytest.fixture(scope="module")
def experiment(tmp_path_factory) -> Path:
    """A scripted 4-system experiment with injected errors, attribution results and a rollback, reported."""
    out = tmp_path_factory.mktemp("rep")
    _run("run", "--benchmark", "arith", "--systems", ",".join(SYSTEMS), "--model", "scripted", "--task-limit", "4",
         "--runs-per-task", "3", "--output-root", str(out), "--experiment-id", "e1", "--inject-errors", "0.3",
         "--progress", "none")
    root = out / "e1"
    att = root / "attribution"
    _run("score-steps", "--runs-dir", str(root), "--scorer", "learned", "--out", str(att / "scores.jsonl"))
    _run("calibrate", "--scores", str(att / "scores.jsonl"), "--method", "rf", "--alpha", "0.5", "--out", str(att / "cal.json"))
    _run("predict-set", "--calibration", str(att / "cal.json"), "--scores", str(att / "scores.jsonl"),
         "--out", str(att / "sets.jsonl"))
    _run("attribute", "--runs-dir", str(root), "--method", "random", "--out", str(out / "elsewhere" / "random"))
    failed = sorted(p for p in root.rglob("run_*.result.json") if not json.loads(p.read_text())["success"])
    assert len({p.parent.name for p in failed}) >= 2, "cross-fitting the learned scorer needs failures of 2 tasks"
    _run("rollback", "--run-dir", str(failed[0]).removesuffix(".result.json"), "--strategy", "restart")
    write_report(root, attribution=[out / "elsewhere" / "random"])
    return root


class Links(HTMLParser):
    """Every href/src of a page, and its element ids."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("href", "src") and v is not None:
                self.links.append((tag, v))
            if k == "id" and v:
                self.ids.add(v)


def parse(path: Path) -> Links:
    """Links and ids of a page."""
    p = Links()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def crawl(index: Path) -> tuple[dict[Path, Links], set[str]]:
    """Every report page reachable from ``index`` by links (pages outside the report are not followed), and
    every run the pages link to in the viewer (``run.html#<key>``), with the runs those runs' views link to
    (rollbacks, the task's other runs): the keys, percent-decoded."""
    report = index.parent.resolve()
    seen: dict[Path, Links] = {}
    runs: set[str] = set()
    todo = [index.resolve()]
    while todo:
        page = todo.pop()
        if page in seen:
            continue
        seen[page] = links = parse(page)
        for _, url in links.links:
            path, frag = urldefrag(url)
            target = (page.parent / unquote(path)).resolve()
            if target.suffix == ".html" and target.is_relative_to(report):
                assert target.is_file(), f"{page.name} links to a missing page {url}"
                todo.append(target)
                if target.name == "run.html":
                    runs.add("/".join(unquote(p) for p in frag.split("/")))
    index_tree = runs_index(report)
    todo_runs = list(runs)
    while todo_runs:  # what a view links to, as run.js builds its links
        bench, system, task, name = todo_runs.pop().split("/")[:4]
        view = task_data(report, bench, system, task)["runs"][name]
        more = [f"{bench}/{system}/{task}/{name}.rollback_{rb['index']}" for rb in view["rollbacks"] if rb["viewable"]]
        if ".rollback_" not in name:
            more += [f"{bench}/{s}/{task}/run_{r}" for s, rs in index_tree[bench][task]["runs"].items() for r, _ in rs]
        for key in more:
            if key not in runs:
                runs.add(key)
                todo_runs.append(key)
    return seen, runs


def test_every_system_task_and_run_is_present_and_reachable(experiment):
    index = experiment / "report" / "index.html"
    html = index.read_text(encoding="utf-8")
    for s in SYSTEMS:
        assert f">{s}<" in html
    tasks = sorted({p.parent.name for p in experiment.rglob("run_*.result.json")})
    assert len(tasks) == 4 and all(f">{t}<" in html for t in tasks)
    assert_every_run_reachable(experiment, experiment / "report")


def assert_every_run_reachable(experiment: Path, report: Path) -> None:
    """Every finished run and rollback is linked from the index (directly or through the views), listed in the
    runs index with its outcome, and has its view (with a transcript) in its data file; every link resolves."""
    pages, linked = crawl(report / "index.html")
    runs = sorted(experiment.glob("arith/*/*/run_*.result.json"))
    assert len(runs) == 4 * 4 * 3
    tree = runs_index(report)
    for result in runs:
        key = result.relative_to(experiment).as_posix().removesuffix(".result.json")
        assert key in linked, f"run {key} not reachable from the index"
        bench, system, task, name = key.split("/")
        assert [int(name.removeprefix("run_")), "ok" if json.loads(result.read_text())["success"] else "fail"] \
            in tree[bench][task]["runs"][system], f"run {key} missing from the runs index"
        view = run_view(report, key)
        assert view["n_events"] > 0 and len(view["rows"]) > 0, f"run {key}: no transcript in its data"
    rollbacks = sorted(p for p in experiment.glob("arith/*/*/run_*.rollback_*.json") if p.name.count(".") == 2)
    assert rollbacks and all(p.relative_to(experiment).as_posix().removesuffix(".json") in linked for p in rollbacks)
    # every link inside the report resolves: pages, assets, anchors, run files, and each view's run files
    for page, links in pages.items():
        for tag, url in links.links:
            path, frag = urldefrag(url)
            target = (page.parent / unquote(path)).resolve() if path else page
            assert target.exists(), f"{page.name}: {tag} {url} points nowhere"
            if frag and target.suffix == ".html" and target.name != "run.html":
                assert unquote(frag) in parse(target).ids, f"{page.name}: anchor {url} missing"
    for key in linked:
        bench, system, task, name = key.split("/")
        data = task_data(report, bench, system, task)
        for f in data["runs"][name]["files"]:
            assert (report / unquote(data["dir"]) / f).is_file(), f"{key}: links to a missing run file {f}"
        grid = "index.html" if tree[bench][task]["page"] == 1 else f"grid/{bench}-{tree[bench][task]['page']}.html"
        assert f"task-{bench}-{task}" in parse(report / grid).ids, f"{key}: its task's grid row is missing"


def test_a_run_without_its_data_is_noticed(experiment):
    """The reachability check fails when a run's data file or its entry in the runs index is missing."""
    import shutil

    report = experiment / "report-copy"  # beside the run files, as the report: its relative links hold
    try:
        shutil.copytree(experiment / "report", report)
        assert_every_run_reachable(experiment, report)  # the copy is whole
        (report / "data" / "arith" / "sas" / "arith_0_0000.js").unlink()
        with pytest.raises(FileNotFoundError):
            assert_every_run_reachable(experiment, report)
        shutil.rmtree(report)
        shutil.copytree(experiment / "report", report)
        tree = runs_index(report)
        tree["arith"]["arith_0_0001"]["runs"]["debate"].pop()
        (report / "data" / "runs.js").write_text(f"masRuns({json.dumps(tree)});\n")
        with pytest.raises(AssertionError, match="missing from the runs index"):
            assert_every_run_reachable(experiment, report)
    finally:
        shutil.rmtree(report, ignore_errors=True)


URL_ATTRS = {"src", "href", "action", "formaction", "poster", "data", "srcset", "xlink:href", "background", "manifest"}
REMOTE = re.compile(r"^\s*(?:[a-z][a-z0-9+.-]*:)?//", re.I)  # http://, https://, //host, ftp:// ...
CSS_REMOTE = re.compile(r"(?:url\(\s*[\"']?\s*(?:[a-z][a-z0-9+.-]*:)?//|@import)", re.I)


class Remote(HTMLParser):
    """Attributes of a page that would make a browser fetch something from another host."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if v is None:
                continue
            if k in URL_ATTRS and any(REMOTE.match(part) for part in v.split(",")):
                self.found.append(f"<{tag} {k}={v!r}>")
            if k == "style" and CSS_REMOTE.search(v):
                self.found.append(f"<{tag} style={v!r}>")
            if tag == "meta" and k == "http-equiv" and v.lower() == "refresh":
                self.found.append("<meta http-equiv=refresh>")


def remote_references(path: Path) -> list[str]:
    """What in ``path`` (HTML, CSS or JS) points off the machine; text inside elements is only text."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".html":
        parser = Remote()
        parser.feed(text)
        inline_css = re.findall(r"<style[^>]*>(.*?)</style>", text, re.S | re.I)
        return parser.found + [m.group(0) for css in inline_css for m in CSS_REMOTE.finditer(css)]
    if path.suffix == ".css":
        return [m.group(0) for m in CSS_REMOTE.finditer(text)]
    return re.findall(r"https?://|\bfetch\(|XMLHttpRequest|WebSocket|EventSource|sendBeacon|import\(", text)


def test_nothing_is_fetched_from_the_network(experiment):
    files = [p for p in (experiment / "report").rglob("*") if p.is_file() and p.suffix in (".html", ".css", ".js")]
    assert len(files) == 2 + 3 + 1 + 16  # index and viewer pages, assets, runs index, a data file per task directory
    for p in files:
        assert remote_references(p) == [], p
    for p in (experiment / "report" / "data" / "arith").rglob("*.js"):  # and what the data files hold
        assert not re.search(r"https?://", json.dumps(read_task_js(p.read_text(encoding="utf-8")))), p
    # none of the scripted experiment's pages even mentions an absolute URL, but SVG's namespace name (never fetched)
    for p in files:
        assert set(re.findall(r"https?://[^\s\"'<>)]+", p.read_text(encoding="utf-8"))) <= {"http://www.w3.org/2000/svg"}, p
    assert "Content-Security-Policy" in (experiment / "report" / "index.html").read_text()


def test_the_network_check_can_fail(tmp_path):
    page = tmp_path / "p.html"
    page.write_text('<p>see http://x.example</p><img src="https://x.example/a.png"><a href="//cdn.example/x">x</a>'
                    '<div style="background:url(http://x.example/b.png)"></div><style>@import "https://x";</style>')
    assert len(remote_references(page)) == 4


def test_the_answer_and_the_overview(experiment):
    html = (experiment / "report" / "index.html").read_text(encoding="utf-8")
    for s in ("supervisor", "debate", "orchestrator"):
        assert re.search(rf"On 4 arith tasks \(3 runs each\), (the difference in success between {s} and sas|{s} solves)", html)
    assert "sign test over tasks" in html and "95 % Wilson" in html and "Pareto frontier" in html
    assert html.count('<svg class="chart"') == 1 + 3 + 1  # quality/cost, three differences, PCA
    # topology pictures of the sweep are shown, linked where they are (the report is inside the experiment)
    assert 'src="../arith/debate/mas_graph.png"' in html and not (experiment / "report" / "graphs").exists()


def test_failed_run_view_shows_verdict_expected_answer_and_attribution(experiment):
    att = experiment / "attribution" / "scores.jsonl"
    rec = json.loads(att.read_text().splitlines()[0])
    view = run_view(experiment / "report", rec["id"])
    meta = json.loads((experiment / f"{rec['id']}.metadata.json").read_text())
    assert view["verdict"] == "not solved" and view["reference"] == str(meta["task"]["reference"])
    text = shown(view)
    assert "top-1 of learned" in text and "in conformal rf set" in text and "random blames" in text
    assert "injected error" in text
    assert view["rows"] and all(k in view for k in ("facts", "files", "attribution", "question", "answer"))


def test_rollback_is_marked_and_its_transcript_linked(experiment):
    (rb_json,) = experiment.rglob("run_*.rollback_0.json")
    rec = json.loads(rb_json.read_text())
    prefix = rb_json.relative_to(experiment).as_posix().removesuffix(".json")  # .../run_<r>.rollback_0
    original = run_view(experiment / "report", prefix.rsplit(".", 1)[0])
    assert "rollback 0 restarts here" in shown(original)
    (row,) = original["rollbacks"]
    assert row["viewable"] and row["outcome"] == ("solved" if rec["success"] else "not solved")
    rb_view = run_view(experiment / "report", prefix)
    assert rb_view["rollback_of"]["index"] == 0 and rb_view["rollback_of"]["summary"].startswith("Strategy")
    assert rb_view["rows"]


def test_report_is_deterministic(experiment, tmp_path):
    a = write_report(experiment, out=tmp_path / "a")
    b = write_report(experiment, out=tmp_path / "b")
    assert a.read_bytes().replace(b"/a/", b"/b/") == b.read_bytes().replace(b"/a/", b"/b/")


def test_compare_two_roots(experiment, tmp_path):
    index = write_report(experiment, out=tmp_path / "cmp", compare=[experiment])
    html = index.read_text(encoding="utf-8")
    assert 'id="compare"' in html
    section = html[html.index('id="compare"'):]
    assert all(f"<th>{s}</th>" in section for s in SYSTEMS)
    assert "+0.0 pts" in section  # a root against itself differs by nothing
    # a report outside the experiment carries copies of the pictures, so it shows them wherever it goes
    assert 'src="graphs/arith/debate/mas_graph.png"' in html and (tmp_path / "cmp" / "graphs" / "arith").is_dir()


def _tiny(root: Path, events_by_run: dict[tuple[str, str, int], list], *, success: bool = True) -> None:
    for (system, task, r), events in events_by_run.items():
        write_run(root / "arith" / system / task, r, events, success=success, system=system)


def test_prompts_are_rendered_and_model_output_is_escaped(tmp_path):
    hostile = "<script>alert(1)</script><img src=http://evil.example/x.png>"
    events = [ev("solver", "act", tin=10, tout=5, ms=3.0, content=hostile, step_index=0, role="solver",
                 input_messages=[{"role": "system", "content": "You are careful."},
                                 {"role": "user", "content": "What is 6*7? </pre><b>x</b>"}]),
              ev("solver", "finalize", content="42", step_index=1)]
    _tiny(tmp_path, {("sas", "t0", 0): events})
    write_report(tmp_path)
    rows = run_view(tmp_path / "report", "arith/sas/t0/run_0")["rows"]
    assert rows[0]["prompt"] == [{"role": "system", "content": "You are careful."},
                                 {"role": "user", "content": "What is 6*7? </pre><b>x</b>"}]
    assert rows[0]["content"] == hostile and (rows[0]["tin"], rows[0]["tout"]) == (10, 5)
    data_file = tmp_path / "report" / "data" / "arith" / "sas" / "t0.js"
    text = data_file.read_text(encoding="utf-8")
    assert "<" not in text and remote_references(data_file) == []  # model output is only inside the base64


def test_damaged_run_gets_a_page_and_is_listed(tmp_path):
    good = [ev("solver", "finalize", content="42", step_index=0)]
    _tiny(tmp_path, {("sas", "t0", 0): good, ("sas", "t0", 1): good})
    trace = tmp_path / "arith" / "sas" / "t0" / "run_1.trace.jsonl"
    lines = trace.read_text().splitlines()
    trace.write_text("{not json\n" + "\n".join(lines) + "\n")
    index = write_report(tmp_path)
    html = index.read_text(encoding="utf-8")
    assert "1 skipped" in html and "damaged_trace" in html
    view = run_view(tmp_path / "report", "arith/sas/t0/run_1")
    assert view["verdict"] == "skipped" and any("damaged" in i for i in view["issues"])


def test_bad_input_is_a_one_line_error_and_writes_nothing(tmp_path, capsys):
    assert main(["report", "--experiment-root", str(tmp_path / "missing")]) == 2
    assert "--experiment-root" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["report", "--experiment-root", str(tmp_path / "empty")]) == 2
    assert "no finished run" in capsys.readouterr().err
    assert not (tmp_path / "empty" / "report").exists()
    _tiny(tmp_path / "x", {("sas", "t0", 0): [ev("solver", "finalize", content="42", step_index=0)]})
    assert main(["report", "--experiment-root", str(tmp_path / "x"), "--attribution", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--attribution" in err
    assert not (tmp_path / "x" / "report").exists()


def test_summarize_experiment_refreshes_the_report(tmp_path, capsys):
    _tiny(tmp_path, {("sas", "t0", 0): [ev("solver", "finalize", content="42", step_index=0)]})
    assert main(["summarize-experiment", "--experiment-root", str(tmp_path), "--no-plots", "--no-report"]) == 0
    assert not (tmp_path / "report").exists()
    assert main(["summarize-experiment", "--experiment-root", str(tmp_path), "--no-plots"]) == 0
    assert f"report: {tmp_path / 'report' / 'index.html'}" in capsys.readouterr().out
    assert (tmp_path / "report" / "index.html").is_file()


def test_labels_never_overlap_even_for_coincident_points():
    pts = [(200.0, 150.0, name) for name in ("sas", "debate", "supervisor", "orchestrator", "a-long-system-name", "x")]
    placed = place_labels(pts, bounds=(50, 20, 500, 300), obstacles=[(200, 150, 6)])
    assert overlapping(placed) == 0
    for p in placed:
        x0, y0, x1, y1 = p.box
        assert 50 <= x0 and x1 <= 500 and 20 <= y0 and y1 <= 300
        assert not (x0 < 206 and 194 < x1 and y0 < 156 and 144 < y1)  # no label covers the marker


def test_forked_workers_write_the_same_report(experiment, tmp_path):
    """In a fresh single-threaded interpreter (this one may hold a progress bar's monitor thread), the forked
    pass writes byte-identical files."""
    import subprocess
    import sys

    code = (
        "import sys; from descriptor.report import runs_pass, write_report\n"
        "assert runs_pass.usable_workers() > 1, 'would not fork'\n"
        "write_report(sys.argv[1], out=sys.argv[2])\n"
        "runs_pass.PARALLEL_MIN_RUNS = 0\n"
        "write_report(sys.argv[1], out=sys.argv[3])\n")
    proc = subprocess.run([sys.executable, "-c", code, str(experiment), str(tmp_path / "one"), str(tmp_path / "many")],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    if "would not fork" in proc.stderr:
        pytest.skip("one usable core: the pass never forks here")
    assert proc.returncode == 0, proc.stderr
    one, many = tmp_path / "one", tmp_path / "many"
    files = sorted(p.relative_to(one) for p in one.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(many) for p in many.rglob("*") if p.is_file()) and len(files) > 20
    for f in files:
        assert (one / f).read_bytes() == (many / f).read_bytes(), f


def test_attribution_ids_match_by_path_suffix(tmp_path):
    from descriptor.report.attribution_inputs import load_attribution

    step = [ev("solver", "act", content="x", step_index=0, role="solver"),
            ev("solver", "finalize", content="42", step_index=1, role="solver")]
    _tiny(tmp_path, {("sas", "t0", 0): step, ("debate", "t0", 0): step}, success=False)
    att = tmp_path / "attribution" / "scores.jsonl"
    att.parent.mkdir()
    rows = [{"id": "arith/sas/t0/run_0", "n_steps": 2, "step_scores": [0.2, 0.9], "scorer": "learned"},
            {"id": "t0/run_0", "n_steps": 2, "step_scores": [0.5, 0.5]},           # two systems have it: ambiguous
            {"id": "debate/t0/run_0", "n_steps": 3, "step_scores": [0.1, 0.1, 0.8]},  # not this trace's step count
            {"id": "algorithm_generated/12", "n_steps": 1, "step_scores": [1.0]}]   # a Who&When record
    att.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    index = load_attribution([tmp_path / "attribution"], ["arith/sas/t0/run_0", "arith/debate/t0/run_0"])
    assert set(index.by_run) == {"arith/sas/t0/run_0", "arith/debate/t0/run_0"}
    assert any("more than one run" in n for n in index.notes) and any("not JSON" in n for n in index.notes)
    (src,) = index.sources
    assert (src.kind, src.label, src.n_records, src.n_matched) == ("scores", "learned", 4, 2)
    write_report(tmp_path)
    sas = shown(run_view(tmp_path / "report", "arith/sas/t0/run_0"))
    assert "top-1 of learned: step 1 (score 0.90)" in sas
    debate = shown(run_view(tmp_path / "report", "arith/debate/t0/run_0"))
    assert "different step count than this trace (2); not shown" in debate


def test_an_experiment_without_the_baseline_still_renders(tmp_path):
    _tiny(tmp_path, {("debate", "t0", 0): [ev("solver", "finalize", content="42", step_index=0)]})
    html = write_report(tmp_path).read_text(encoding="utf-8")
    assert "the baseline system sas was not run" in html
    assert "PCA not drawn" in html  # one task row: nothing to project


def test_report_refuses_inputs_given_by_name_that_would_show_nothing(tmp_path, capsys):
    _tiny(tmp_path / "x", {("sas", "t0", 0): [ev("solver", "finalize", content="42", step_index=0)]})
    (tmp_path / "empty").mkdir()
    (tmp_path / "garbage.jsonl").write_text("{not json\n")
    root = ["report", "--experiment-root", str(tmp_path / "x")]
    for extra, says in ((["--baseline", "nope"], "--baseline 'nope': no such system"),
                        (["--compare", str(tmp_path / "empty")], "no finished run found"),
                        (["--attribution", str(tmp_path / "garbage.jsonl")], "no score, predict-set or predictions "
                                                                              "records in it (")):
        capsys.readouterr()
        assert main([*root, *extra]) == 2, extra
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x" / "report").exists()  # nothing written
    assert main([*root, "--baseline", "sas"]) == 0


def test_out_never_replaces_a_directory_of_other_files(tmp_path, capsys):
    _tiny(tmp_path / "x", {("sas", "t0", 0): [ev("solver", "finalize", content="42", step_index=0)]})
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("keep me")
    assert main(["report", "--experiment-root", str(tmp_path / "x"), "--out", str(mine)]) == 2
    assert "not a report directory" in capsys.readouterr().err
    assert sorted(p.name for p in mine.iterdir()) == ["todo.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes", "x"]  # no staging directory left behind
    assert main(["report", "--experiment-root", str(tmp_path / "x"), "--out", str(tmp_path / "r")]) == 0
    assert main(["report", "--experiment-root", str(tmp_path / "x"), "--out", str(tmp_path / "r")]) == 0  # its own
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes", "r", "x"]


def _all_views(report: Path) -> dict[str, dict]:
    return {str(p.relative_to(report)): read_task_js(p.read_text(encoding="utf-8"))[1]
            for p in sorted((report / "data").glob("*/*/*.js"))}


def test_the_report_takes_each_runs_page_data_and_parses_a_trace_only_when_its_page_data_does_not_match(
        experiment, tmp_path, monkeypatch):
    """Every run of a sweep has its report data written at its end, so the report parses no run's trace (only
    rollbacks'); a page file that is missing or belongs to another trace is ignored, and the views are the ones
    the parsed traces give."""
    import shutil

    from descriptor import run_files

    root = tmp_path / "e1"
    shutil.copytree(experiment, root, ignore=shutil.ignore_patterns("report"))
    attribution = [experiment.parent / "elsewhere" / "random"]
    parsed: list[str] = []
    checked = run_files.read_trace_checked
    monkeypatch.setattr(run_files, "read_trace_checked", lambda path: (parsed.append(path.name), checked(path))[1])

    write_report(root, out=tmp_path / "pages", attribution=attribution)
    assert parsed and all(".rollback_" in name for name in parsed), parsed
    pages = _all_views(tmp_path / "pages")

    task = root / "arith" / "debate" / "arith_0_0001"
    shutil.copy(task / "run_1.page.json.gz", task / "run_0.page.json.gz")  # another trace's page data
    (task / "run_2.page.json.gz").unlink()
    # the right header over rows that are no JSON list: the rows are embedded as written, so they are checked
    other = root / "arith" / "sas" / "arith_0_0001" / "run_0.page.json.gz"
    head = gzip.decompress(other.read_bytes()).split(b"\n")[0]
    other.write_bytes(gzip.compress(head + b'\n[{"seq": 0}, {"actor": "a"\n'))
    parsed.clear()
    write_report(root, out=tmp_path / "stale", attribution=attribution)
    assert sorted(n for n in parsed if ".rollback_" not in n) == ["run_0.trace.jsonl", "run_0.trace.jsonl",
                                                                  "run_2.trace.jsonl"]
    assert _all_views(tmp_path / "stale") == pages

    for p in root.rglob("run_*.page.json.gz"):
        p.unlink()
    write_report(root, out=tmp_path / "traces", attribution=attribution)
    assert _all_views(tmp_path / "traces") == pages


def test_the_report_leaves_a_run_with_an_infrastructure_error_out_of_task_metrics_as_the_summaries_do(tmp_path):
    import json

    from descriptor.summaries import summarize_experiment

    assert main(["run", "--benchmark", "arith", "--systems", "sas,debate", "--model", "scripted", "--task-limit", "4",
                 "--output-root", str(tmp_path), "--experiment-id", "e", "--progress", "none"]) == 0
    root = tmp_path / "e"
    result = sorted((root / "arith" / "debate").rglob("run_0.result.json"))[0]
    data = json.loads(result.read_text())  # what an endpoint that failed for good leaves
    result.write_text(json.dumps({**data, "status": "error", "success": False, "completion": False, "score": 0.0,
                                  "error": "LLMCallError: default route: APIConnectionError"}))
    debate = next(r for r in summarize_experiment(root, plots=False).rollups if r["system"] == "debate")
    html = write_report(root).read_text(encoding="utf-8")
    assert "8 runs in all" not in html and "7 runs (8 in all, 1 with an infrastructure error: no task result)" in html
    assert debate["n_runs"] == 3 and "(3/3)" in html  # the overview counts what the summaries count
