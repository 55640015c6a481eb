// mas-econ report: the run viewer, run.html#<benchmark>/<system>/<task>/run_<r>[.rollback_<k>][/step-<n>]
// (each part percent-encoded). It finds the run in the runs index (data/runs.js: masRuns), loads its task's data
// file by adding a <script> (from a file:// page the one way to read a local file; the CSP allows local scripts
// and no fetch), inflates it (DecompressionStream, zlib "deflate") and draws it. Model output only ever goes into
// textContent; links are built from the report's own relative paths. Nothing leaves the machine.
(function () {
  "use strict";

  var runs = null;        // the runs index: benchmark -> task -> {page, runs: {system: [[run index, class]]}}
  var tasks = {};         // task key -> promise of its data {dir, runs: {run name: view}}
  var waiting = {};       // task key -> {resolve, reject} of a data file being loaded
  var shown = null;       // "<task key>/<run name>" drawn now

  window.masRuns = function (tree) { runs = tree; };
  window.masRunData = function (names, packed) {
    var w = waiting[names.join("/")];
    if (w) { delete waiting[names.join("/")]; w.resolve(packed); }
  };

  function enc(parts) { return parts.map(encodeURIComponent).join("/"); }

  function inflate(packed) {
    var bin = atob(packed);
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) { bytes[i] = bin.charCodeAt(i); }
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Response(stream).text().then(JSON.parse);
  }

  function loadTask(names) {
    var key = names.join("/");
    if (!tasks[key]) {
      tasks[key] = new Promise(function (resolve, reject) {
        var s = document.createElement("script");
        s.src = "data/" + enc(names) + ".js";
        waiting[key] = {resolve: resolve, reject: reject};
        s.onerror = function () { reject(new Error("its data file " + s.getAttribute("src") + " is missing")); };
        s.onload = function () {  // ran without calling masRunData for this task
          if (waiting[key]) { reject(new Error("its data file " + s.getAttribute("src") + " holds another task")); }
        };
        document.body.appendChild(s);
      }).then(inflate);
      tasks[key].catch(function () { delete tasks[key]; });
    }
    return tasks[key];
  }

  function parseHash() {
    var parts = window.location.hash.slice(1).split("/").map(function (p) {
      try { return decodeURIComponent(p); } catch (e) { return p; }
    });
    var m = parts.length >= 4 && /^run_(\d+)(?:\.rollback_(\d+))?$/.exec(parts[3]);
    if (!m) { return null; }
    return {bench: parts[0], system: parts[1], task: parts[2], name: parts[3], run: Number(m[1]),
            rollback: m[2] === undefined ? null : Number(m[2]), step: parts[4] || null};
  }

  function runHref(h, system, name) { return "#" + enc([h.bench, system, h.task]) + "/" + name; }

  function clear(node) { while (node.firstChild) { node.removeChild(node.firstChild); } return node; }

  function link(text, href, cls) { var a = el("a", cls, text); a.setAttribute("href", href); return a; }

  // ---- one transcript row (descriptor/report/run_view.py: event_row) ----

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }

  function pairs(cls, items) {
    var dl = el("dl", cls);
    items.forEach(function (kv) { dl.appendChild(el("dt", null, kv[0])); dl.appendChild(el("dd", null, kv[1])); });
    return dl;
  }

  function eventHead(r) {
    var head = el("div", "head");
    head.appendChild(el("span", "seq", "#" + r.seq));
    if (r.step !== undefined) { head.appendChild(el("span", "step", "step " + r.step)); }
    head.appendChild(el("span", "actor", r.actor));
    if (r.role && r.role !== r.actor) { head.appendChild(el("span", "role", r.role)); }
    head.appendChild(el("span", "type", r.type));
    if (r.to) { head.appendChild(el("span", "to", "\u2192 " + r.to.join(", "))); }
    if (r.redo) { head.appendChild(el("span", "mark redo", "redo")); }
    var tokens = (r.tin || r.tout) ? (r.tin || 0) + "+" + (r.tout || 0) + " tok \u00b7 " : "";
    var usd = r.usd ? " \u00b7 $" + r.usd.toFixed(6) : "";
    head.appendChild(el("span", "cost", tokens + (r.ms || 0).toFixed(1) + " ms" + usd));
    (r.marks || []).forEach(function (m) { head.appendChild(el("span", "mark " + m[0], m[1])); });
    return head;
  }

  function toolBlock(r) {
    var box = el("div", "toolcall");
    box.appendChild(el("code", null, r.tool.name + "(" + (r.tool.args || "") + ")"));
    var res = r.tool.result;
    if (res) {
      var line = el("div", "result " + (res.ok ? "ok" : "fail"), res.ok ? "\u2192 " : "\u2717 ");
      line.appendChild(el("pre", null, res.output));
      box.appendChild(line);
    } else if (r.type === "tool_call") {
      box.appendChild(el("div", "result none", "no result recorded"));
    }
    return box;
  }

  function details(cls, summary, fill) {
    var d = el("details", cls);
    d.appendChild(el("summary", null, summary));
    fill(d);
    return d;
  }

  function eventItem(r) {
    if (r.header) {
      var round = el("li", "round");
      round.appendChild(el("h3", null, r.header));
      return round;
    }
    var marks = (r.marks || []).map(function (m) { return m[0]; });
    var li = el("li", "ev t-" + r.type + (r.system ? " sys" : "") + (marks.length ? " marked " + marks.join(" ") : ""));
    if (r.step !== undefined) { li.id = "step-" + r.step; }
    li.setAttribute("data-seq", r.seq);
    li.appendChild(eventHead(r));
    if (r.tool) { li.appendChild(toolBlock(r)); }
    if (r.content) { li.appendChild(el("pre", "content", r.content)); }
    if (r.answer !== undefined) {
      var a = el("div", "answer", "answer ");
      a.appendChild(el("code", null, r.answer));
      if (r.confidence !== undefined) { a.appendChild(document.createTextNode(" \u00b7 confidence " + r.confidence)); }
      li.appendChild(a);
    }
    if (r.decision) { li.appendChild(pairs("decision", r.decision)); }
    if (r.vote) { li.appendChild(pairs("decision vote", r.vote)); }
    if (r.prompt) {
      li.appendChild(details("prompt", "prompt (" + r.prompt.length + " message" + (r.prompt.length === 1 ? ")" : "s)"),
        function (d) {
          r.prompt.forEach(function (m) {
            var msg = el("div", "msg");
            msg.appendChild(el("span", "mrole", m.role));
            msg.appendChild(el("pre", null, m.content));
            d.appendChild(msg);
          });
        }));
    }
    if (r.other) {
      li.appendChild(details("other", "other fields", function (d) {
        var dl = el("dl");
        r.other.forEach(function (kv) { dl.appendChild(el("dt", null, kv[0])); var dd = el("dd"); dd.appendChild(el("pre", null, kv[1])); dl.appendChild(dd); });
        d.appendChild(dl);
      }));
    }
    return li;
  }

  function transcriptToggles() {
    document.querySelectorAll("[data-toggle]").forEach(function (box) {
      box.addEventListener("change", function () {
        var what = box.getAttribute("data-toggle");
        if (what === "open-prompts") {
          document.querySelectorAll("details.prompt").forEach(function (d) { d.open = box.checked; });
        } else {
          document.body.classList.toggle(what, box.checked);
        }
      });
    });
  }


  // ---- the run's header, summary, attribution and rollbacks ----

  function header(h, entry) {
    var title = h.system + " \u00b7 " + h.task + " \u00b7 run " + h.run + (h.rollback !== null ? " \u00b7 rollback " + h.rollback : "");
    document.title = title;
    document.getElementById("run-title").textContent = title;
    var grid = (entry.page === 1 ? "index.html" : "grid/" + encodeURIComponent(h.bench) + "-" + entry.page + ".html") +
      "#" + encodeURIComponent("task-" + h.bench + "-" + h.task);
    var crumbs = clear(document.getElementById("crumbs"));
    crumbs.appendChild(document.createTextNode(h.bench + " \u203a "));
    crumbs.appendChild(link(h.task, grid));
    crumbs.appendChild(document.createTextNode(" \u203a " + h.system + " \u203a run " + h.run +
      (h.rollback !== null ? " \u203a rollback " + h.rollback : "")));
    var sib = clear(document.getElementById("siblings"));
    sib.hidden = h.rollback !== null;
    if (h.rollback === null) {
      sib.appendChild(document.createTextNode("This task's runs: "));
      Object.keys(entry.runs).forEach(function (system) {
        var span = el("span", "sib", system + " ");
        entry.runs[system].forEach(function (r) {
          var current = system === h.system && r[0] === h.run;
          span.appendChild(link(r[0], runHref(h, system, "run_" + r[0]), "run " + r[1] + (current ? " current" : "")));
        });
        sib.appendChild(span);
        sib.appendChild(document.createTextNode(" "));
      });
    }
  }

  function kvRow(table, key, value, pre, cls) {
    if (value === null || value === undefined || value === "") { return; }
    var tr = el("tr");
    tr.appendChild(el("th", null, key));
    var td = el("td");
    td.appendChild(pre ? el("pre", cls, value) : document.createTextNode(value));
    tr.appendChild(td);
    table.appendChild(tr);
  }

  function summary(v, dir) {
    var box = clear(document.getElementById("summary"));
    var kv = el("table", "kv");
    kvRow(kv, "answer", v.answer, true);
    kvRow(kv, "expected", v.reference, true);
    kvRow(kv, "verdict", v.verdict_text, false);
    kvRow(kv, "error", v.error, true);
    kvRow(kv, "evaluation", v.eval_details, true, "small");
    kvRow(kv, "task", v.question, true);
    box.appendChild(kv);
    if (v.issues.length) {
      var issues = el("div", "issues");
      issues.appendChild(el("strong", null, "The summaries skip or flag this run:"));
      var ul = el("ul");
      v.issues.forEach(function (i) { ul.appendChild(el("li", null, i)); });
      issues.appendChild(ul);
      box.appendChild(issues);
    }
    var facts = el("p", "facts small");
    v.facts.forEach(function (kv2) {
      var span = el("span");
      span.appendChild(el("b", null, kv2[0]));
      span.appendChild(document.createTextNode(" " + kv2[1]));
      facts.appendChild(span);
      facts.appendChild(document.createTextNode(" "));
    });
    box.appendChild(facts);
    if (v.files.length) {
      var files = el("p", "files small", "files: ");
      v.files.forEach(function (name) {
        files.appendChild(link(name, dir + "/" + encodeURIComponent(name)));
        files.appendChild(document.createTextNode(" "));
      });
      box.appendChild(files);
    }
  }

  function rollbackOf(h, v) {
    var box = clear(document.getElementById("rollback-of"));
    box.hidden = !v.rollback_of;
    if (!v.rollback_of) { return; }
    var h2 = el("h2", null, "Rollback " + v.rollback_of.index + " of ");
    h2.appendChild(link("run " + h.run, runHref(h, h.system, "run_" + h.run)));
    box.appendChild(h2);
    box.appendChild(el("p", null, v.rollback_of.summary));
    box.appendChild(el("p", "small", "The resumed run starts at step " + v.rollback_of.restart_step + ": the steps " +
      "before it are the original run's (see its page); the transcript below is what the fork produced."));
  }

  function table(cls, heads) {
    var t = el("table", cls);
    var tr = el("tr");
    heads.forEach(function (x) { tr.appendChild(el("th", null, x)); });
    var thead = el("thead");
    thead.appendChild(tr);
    t.appendChild(thead);
    t.appendChild(el("tbody"));
    return t;
  }

  function cell(tr, content) {
    var td = el("td");
    if (content instanceof Node) { td.appendChild(content); } else if (content !== null && content !== undefined) {
      td.textContent = String(content);
    }
    tr.appendChild(td);
    return td;
  }

  function attribution(h, v) {
    var box = clear(document.getElementById("attribution"));
    var a = v.attribution;
    box.hidden = !a;
    if (!a) { return; }
    box.appendChild(el("h2", null, "Attribution"));
    var ul = el("ul", "small");
    a.summary.forEach(function (line) { ul.appendChild(el("li", null, line)); });
    box.appendChild(ul);
    if (a.rows.length) {
      var t = table("num steps", ["step", "agent", "event"].concat(a.score_labels, ["marks"]));
      a.rows.forEach(function (s) {
        var tr = el("tr", s.cls);
        cell(tr, link(s.step, runHref(h, h.system, h.name) + "/step-" + s.step));
        cell(tr, s.agent);
        cell(tr, s.type);
        s.scores.forEach(function (x) {
          var td = cell(tr, null);
          if (x === null) { return; }
          var bar = el("span", "bar");
          bar.setAttribute("data-v", x.toFixed(3));
          bar.appendChild(el("span", "fill w" + Math.round(x * 20)));
          td.appendChild(bar);
          td.appendChild(document.createTextNode(" " + x.toFixed(2)));
        });
        var marks = cell(tr, null);
        s.marks.forEach(function (m) { marks.appendChild(el("span", "mark " + m[0], m[1])); marks.appendChild(document.createTextNode(" ")); });
        t.tBodies[0].appendChild(tr);
      });
      box.appendChild(t);
    }
    a.notes.forEach(function (n) { box.appendChild(el("p", "small warn", n)); });
  }

  function rollbacks(h, v) {
    var box = clear(document.getElementById("rollbacks"));
    box.hidden = !v.rollbacks.length;
    if (!v.rollbacks.length) { return; }
    box.appendChild(el("h2", null, "Rollbacks"));
    var t = table("num", ["rollback", "strategy", "flagged steps", "restart step", "outcome", "answer", "share redone", "tokens"]);
    v.rollbacks.forEach(function (rb) {
      var tr = el("tr");
      var name = "rollback " + rb.index;
      cell(tr, rb.viewable ? link(name, runHref(h, h.system, "run_" + h.run + ".rollback_" + rb.index)) : name);
      cell(tr, rb.strategy);
      cell(tr, rb.set);
      cell(tr, rb.restart_step);
      cell(tr, el("span", "verdict " + rb.cls, rb.outcome));
      cell(tr, el("code", null, rb.answer));
      cell(tr, rb.cost);
      cell(tr, rb.tokens);
      t.tBodies[0].appendChild(tr);
      if (rb.problem) {
        var p = el("tr");
        var td = cell(p, rb.problem);
        td.colSpan = 8;
        td.className = "warn small";
        t.tBodies[0].appendChild(p);
      }
    });
    box.appendChild(t);
  }

  function transcript(v) {
    document.getElementById("counts").textContent = "(" + v.n_events + " events" +
      (v.n_steps ? ", " + v.n_steps + " trajectory steps" : "") + ")";
    document.getElementById("no-trace").hidden = v.n_events > 0;
    var list = clear(document.getElementById("events"));
    var frag = document.createDocumentFragment();
    var marks = v.marks || {};  // step position -> marks: the rows come as each run's page data file holds them
    v.rows.forEach(function (r) {
      if (r.step !== undefined && marks[r.step]) { r.marks = marks[r.step]; }
      frag.appendChild(eventItem(r));
    });
    list.appendChild(frag);
  }

  // ---- navigation ----

  function status(text) {
    var p = document.getElementById("status");
    p.hidden = !text;
    p.textContent = text || "";
  }

  function toStep(h) {
    document.querySelectorAll(".target").forEach(function (e) { e.classList.remove("target"); });
    var target = h.step && document.getElementById(h.step);
    if (target) {
      target.classList.add("target");
      target.scrollIntoView();  // drawn after load: the browser could not scroll to it by itself
    }
  }

  function failed(text) {
    document.getElementById("view").hidden = true;
    status(text);
    document.body.setAttribute("data-ready", "error");
  }

  function show() {
    var h = parseHash();
    if (!runs) { return failed("The runs index (data/runs.js) is missing: write the report again."); }
    if (!h) { return failed("No run chosen: open a run from the report's task \u00d7 system grid."); }
    var entry = runs[h.bench] && runs[h.bench][h.task];
    var listed = entry && entry.runs[h.system] && entry.runs[h.system].some(function (r) { return r[0] === h.run; });
    if (!listed) { return failed("This report has no run " + h.bench + "/" + h.system + "/" + h.task + "/" + h.name + "."); }
    var id = enc([h.bench, h.system, h.task]) + "/" + h.name;
    if (id === shown) { toStep(h); return; }
    document.body.removeAttribute("data-ready");
    status("Loading the run \u2026");
    loadTask([h.bench, h.system, h.task]).then(function (data) {
      var v = data.runs[h.name];
      if (!v) { throw new Error("its data file has no " + h.name); }
      header(h, entry);
      var badge = document.getElementById("verdict");
      badge.className = "verdict " + v.verdict_cls;
      badge.textContent = v.verdict;
      badge.hidden = false;
      summary(v, data.dir);
      rollbackOf(h, v);
      attribution(h, v);
      rollbacks(h, v);
      transcript(v);
      shown = id;
      status("");
      document.getElementById("view").hidden = false;
      toStep(h);
      document.body.setAttribute("data-ready", "1");
    }).catch(function (e) {
      failed("Run " + h.name + " of " + h.bench + "/" + h.system + "/" + h.task + " cannot be shown: " + e.message + ".");
    });
  }

  document.addEventListener("DOMContentLoaded", function () {  // after data/runs.js, which follows this script
    transcriptToggles();
    show();
  });
  window.addEventListener("hashchange", show);
})();
