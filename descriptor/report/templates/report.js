// mas-econ report: small progressive enhancements; every page reads fine without them.
// No network: this file only touches the DOM of the page it is loaded in.
(function () {
  "use strict";

  function gridFilters(block) {
    var rows = block.querySelectorAll("table.grid tbody tr");
    var count = block.querySelector("[data-count]");
    function apply(kind) {
      var shown = 0;
      rows.forEach(function (tr) {
        var keep = kind === "all" || tr.classList.contains(kind);
        tr.classList.toggle("hidden", !keep);
        if (keep) { shown += 1; }
      });
      if (count) { count.textContent = shown + " of " + rows.length + " tasks on this page"; }
      block.querySelectorAll("[data-filter]").forEach(function (b) {
        b.classList.toggle("on", b.getAttribute("data-filter") === kind);
      });
    }
    block.querySelectorAll("[data-filter]").forEach(function (b) {
      b.addEventListener("click", function () { apply(b.getAttribute("data-filter")); });
    });
    apply("all");
  }

  // ---- the transcript of a run page, from its JSON block; model output only ever goes into textContent ----

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

  function drawTranscript() {
    var list = document.getElementById("events");
    var data = document.getElementById("transcript");
    if (!list || !data) { return; }
    var rows = JSON.parse(data.textContent);
    var frag = document.createDocumentFragment();
    rows.forEach(function (r) { frag.appendChild(eventItem(r)); });
    list.appendChild(frag);
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

  function highlightTarget() {
    // A link to a grid row or a step (#...) marks it, so it is easy to spot after the jump.
    var id = decodeURIComponent(window.location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (target) {
      target.classList.add("target");
      target.scrollIntoView();  // a step drawn after load: the browser could not scroll to it by itself
    }
  }

  drawTranscript();
  document.querySelectorAll(".grid-block").forEach(gridFilters);
  transcriptToggles();
  highlightTarget();
  window.addEventListener("hashchange", highlightTarget);
  document.body.setAttribute("data-ready", "1");
})();
