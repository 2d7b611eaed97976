"""The dashboard page's stylesheet and script (kept apart from the Python that fills them)."""

from __future__ import annotations

PAGE_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 1.5rem 2rem; color: #222; }
header { display: flex; align-items: baseline; gap: 1.5rem; border-bottom: 1px solid #ddd; }
header h1 { font-size: 1.4rem; margin: .6rem 0; }
#status { color: #666; }
h2 { font-size: 1.1rem; margin: 1.4rem 0 .4rem; }
#filters label { margin-right: 1rem; }
table { border-collapse: collapse; margin-top: .5rem; font-size: 12.5px; }
th, td { padding: 3px 8px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { cursor: pointer; user-select: none; background: #f6f6f6; position: sticky; top: 0; }
th.sorted-1::after { content: " \\25B2"; } th.sorted--1::after { content: " \\25BC"; }
td.text { text-align: left; }
.pair { display: grid; grid-template-columns: 3fr 2fr; gap: 1rem; }
.note { color: #666; padding: 2rem 0; }
#study { max-width: 100%; }
.scroll { overflow-x: auto; max-height: 70vh; }
"""

PAGE_SCRIPT = """
(function () {
  "use strict";
  const settings = JSON.parse(document.getElementById("xe2t-settings").textContent);
  let data = JSON.parse(document.getElementById("xe2t-data").textContent);
  const view = {sortKey: null, sortDir: 1, filters: {}, study: null};
  const plotConfig = {displaylogo: false, responsive: true};
  const fixedColumns = [
    ["device", "device"], ["family", "family"], ["mode", "mode"], ["head_dim", "D"],
    ["dtype", "dtype"], ["q_len", "q"], ["kv_len", "kv"], ["heads_q", "Hq"],
    ["heads_kv", "Hkv"], ["batch", "B"], ["causal", "causal"], ["config", "config"],
    ["time_ms", "time (ms)"], ["tflops", "TFLOP/s"], ["roofline_pct", "roofline %"],
    ["speedup", "speedup vs default"], ["confirmed_rounds", "confirmed (rounds)"]];
  const textColumns = new Set(["device", "family", "mode", "dtype", "config", "baseline"]);

  // Every seeded baseline gets its time and the best's speedup over it, after the fixed ones.
  function columns() {
    const labels = data.table.baselines;
    if (!labels.length) return fixedColumns;
    return fixedColumns.concat([["baseline", "best is baseline"]], labels.flatMap(label => [
      ["baseline_ms:" + label, label + " (ms)"],
      ["baseline_speedup:" + label, "speedup vs " + label]]));
  }

  function show(value) {
    if (value === null || value === undefined) return "\\u2013";
    if (typeof value === "number" && !Number.isInteger(value)) return value.toPrecision(4);
    return String(value);
  }

  function compare(a, b) {
    if (a === b) return 0;
    if (a === null || a === undefined) return 1;
    if (b === null || b === undefined) return -1;
    return a < b ? -1 : 1;
  }

  function drawRooflines() {
    const box = document.getElementById("rooflines");
    const charts = data.rooflines.map(function (roofline, i) {
      let div = box.children[i];
      if (!div || !div.classList.contains("roofline")) {
        div = document.createElement("div");
        div.className = "roofline";
        box.appendChild(div);
      }
      div.dataset.device = roofline.device;
      div.dataset.points = String(roofline.n_points);
      return Plotly.react(div, roofline.figure.data, roofline.figure.layout, plotConfig);
    });
    while (box.children.length > data.rooflines.length) {
      Plotly.purge(box.lastChild);
      box.lastChild.remove();
    }
    document.getElementById("empty").hidden = data.rooflines.length > 0;
    return Promise.all(charts);
  }

  function drawFilters() {
    const box = document.getElementById("filters");
    box.replaceChildren();
    for (const [key, values] of Object.entries(data.table.filters)) {
      const label = document.createElement("label");
      label.textContent = key + " ";
      const select = document.createElement("select");
      select.name = key;
      select.add(new Option("all", ""));
      for (const value of values) select.add(new Option(String(value), String(value)));
      select.value = view.filters[key] || "";
      select.addEventListener("change", function () {
        view.filters[key] = select.value;
        drawRows();
      });
      label.appendChild(select);
      box.appendChild(label);
    }
  }

  function drawHead() {
    const row = document.createElement("tr");
    for (const [key, title] of columns()) {
      const th = document.createElement("th");
      th.textContent = title;
      th.dataset.key = key;
      if (view.sortKey === key) th.className = "sorted-" + view.sortDir;
      th.addEventListener("click", function () {
        view.sortDir = view.sortKey === key ? -view.sortDir : 1;
        view.sortKey = key;
        drawHead();
        drawRows();
      });
      row.appendChild(th);
    }
    document.querySelector("#best thead").replaceChildren(row);
  }

  function drawRows() {
    let rows = data.table.rows.filter(function (row) {
      return Object.entries(view.filters)
        .every(([key, want]) => !want || String(row[key]) === want);
    });
    if (view.sortKey) {
      const key = view.sortKey;
      rows = rows.slice().sort((a, b) => compare(a[key], b[key]) * view.sortDir);
    }
    const shown = columns();
    const body = rows.map(function (row) {
      const tr = document.createElement("tr");
      for (const [key] of shown) {
        const td = document.createElement("td");
        td.textContent = show(row[key]);
        if (textColumns.has(key)) td.className = "text";
        tr.appendChild(td);
      }
      return tr;
    });
    document.querySelector("#best tbody").replaceChildren(...body);
  }

  async function drawStudy() {
    const convergence = document.getElementById("convergence");
    const importance = document.getElementById("importance");
    const study = data.studies.find(s => String(s.id) === view.study);
    if (!study) {
      Plotly.purge(convergence);
      Plotly.purge(importance);
      return;
    }
    await Plotly.react(convergence, study.convergence.data, study.convergence.layout, plotConfig);
    if (!study.importance && settings.live) {
      const response = await fetch("dashboard/importance/" + study.id, {cache: "no-store"});
      study.importance = await response.json();
    }
    const view_ = study.importance;
    if (view_ && view_.figure) {
      importance.querySelector(".note")?.remove();
      await Plotly.react(importance, view_.figure.data, view_.figure.layout, plotConfig);
    } else {
      Plotly.purge(importance);
      const note = document.createElement("p");
      note.className = "note";
      note.textContent = "Parameter importance: " + (view_ ? view_.note : "not computed");
      importance.replaceChildren(note);
    }
  }

  function drawStudies() {
    const select = document.getElementById("study");
    const previous = view.study;
    select.replaceChildren(...data.studies.map(s => new Option(s.title, String(s.id))));
    if (previous && data.studies.some(s => String(s.id) === previous)) select.value = previous;
    view.study = select.value || null;
    return drawStudy();
  }

  function setStatus(extra) {
    const when = new Date().toLocaleTimeString();
    const mode = settings.live ? "live, checks every " + settings.pollMs / 1000 + " s"
                               : "report generated " + settings.generated;
    document.getElementById("status").textContent =
      mode + " \\u00b7 data version " + data.version + " \\u00b7 " + data.n_points +
      " measured configs \\u00b7 drawn " + when + (extra ? " \\u00b7 " + extra : "");
  }

  async function drawAll() {
    drawFilters();
    drawHead();
    drawRows();
    await drawRooflines();
    await drawStudies();
    setStatus();
  }

  async function poll() {
    try {
      const response = await fetch("dashboard/version", {cache: "no-store"});
      const version = (await response.json()).version;
      if (version !== data.version) {
        data = await (await fetch("dashboard/data", {cache: "no-store"})).json();
        await drawAll();
      }
    } catch (error) {
      setStatus("server unreachable, retrying");
    } finally {
      window.setTimeout(poll, settings.pollMs);
    }
  }

  document.getElementById("study").addEventListener("change", function (event) {
    view.study = event.target.value;
    drawStudy();
  });
  drawAll().then(function () {
    window.xe2tReady = true;
    if (settings.live) window.setTimeout(poll, settings.pollMs);
  });
})();
"""
