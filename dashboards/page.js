
(function () {
  "use strict";
  performance.mark("xe2t-start");
  const settings = JSON.parse(document.getElementById("xe2t-settings").textContent);
  const embeddedNode = document.getElementById("xe2t-embedded");
  const embedded = embeddedNode ? JSON.parse(embeddedNode.textContent) : null;
  let summary = JSON.parse(document.getElementById("xe2t-data").textContent);
  const view = {sort: null, order: "asc", filters: {}, offset: 0, limit: 50, study: null,
                device: null, open: new Set()};
  // WebGL charts at the screen's pixel ratio: plotly's default of 2 gives a 1x screen four
  // times the pixels to draw and composite (with 4x antialiasing, without a GPU: seconds).
  const plotConfig = {displaylogo: false, responsive: true,
                      plotGlPixelRatio: Math.min(Math.max(window.devicePixelRatio || 1, 1), 4),
                      modeBarButtonsToRemove: ["lasso2d", "select2d"]};
  // [key, header, class, tooltip]: the numbers an engineer compares first, then the problem.
  const columns = [
    ["time_ms", "time (ms)", "lead", "median of the best config"],
    ["tflops", "TFLOP/s", "lead", "achieved"],
    ["roofline_pct", "roofline %", "lead", "achieved / attainable at this intensity"],
    ["speedup", "\u00d7 default", "lead", "default config's time / best's time"],
    ["baseline_speedup", "\u00d7 baseline", "lead",
     "fastest seeded baseline's time / best's time"],
    ["device", "device", "text"], ["mode", "mode", "text"], ["head_dim", "D"],
    ["head_dim_v", "Dv", "", "V/O head dim (differs from D in latent attention)"],
    ["dtype", "dtype", "text"], ["kv_dtype", "K/V", "text", "the type K and V are stored in"],
    ["q_len", "q"], ["kv_len", "kv"], ["heads_q", "Hq/Hkv"],
    ["batch", "B"], ["causal", "causal", "text"], ["family", "family", "text"],
    ["config", "config (seed vocabulary)", "config"],
    ["confirmed_rounds", "rounds", "", "confirmation rounds the numbers come from"]];

  async function getJSON(url) {
    const response = await fetch(url, {cache: "no-store"});
    if (!response.ok) throw new Error(url + ": " + response.status);
    return response.json();
  }

  function compare(a, b) { return a === b ? 0 : (a < b ? -1 : 1); }

  // The report's table: its embedded rows, filtered and sorted as the server would.
  function localPage(query) {
    const keys = ["device", "dtype", "head_dim", "head_dim_v", "kv_dtype", "mode"];
    let rows = embedded.rows.filter(row => keys.every(
      key => query[key] === undefined || String(row[key]) === String(query[key])));
    if (query.sort) {
      const key = query.sort, sign = query.order === "desc" ? -1 : 1;
      const present = rows.filter(r => r[key] !== null && r[key] !== undefined);
      present.sort((a, b) => compare(a[key], b[key]) * sign);
      rows = present.concat(rows.filter(r => r[key] === null || r[key] === undefined));
    }
    return {total: rows.length, rows: rows.slice(query.offset, query.offset + query.limit)};
  }

  // "?max_points=N" on the page's URL sets each roofline's point budget (the server's default
  // otherwise): fewer for a slow machine, more to see more of the cloud.
  const asked = Object.fromEntries(new URLSearchParams(window.location.search));
  const budget = asked.max_points;
  const source = embedded === null ? {
    summary: () => getJSON("dashboard/summary"),
    roofline: id => getJSON("dashboard/roofline/" + id +
                            (budget ? "?max_points=" + encodeURIComponent(budget) : "")),
    page: query => getJSON("dashboard/best?" + new URLSearchParams(query)),
    study: id => getJSON("dashboard/study/" + id),
    importance: id => getJSON("dashboard/importance/" + id),
  } : {
    summary: async () => summary,
    roofline: async id => embedded.rooflines[String(id)],
    page: async query => localPage(query),
    study: async id => embedded.studies[String(id)].study,
    importance: async id => embedded.studies[String(id)].importance,
  };

  function number(value) {
    if (value === null || value === undefined) return "\u2013";
    if (typeof value === "number" && !Number.isInteger(value)) return value.toPrecision(4);
    return String(value);
  }

  function cell(row, key) {
    if (key === "speedup" || key === "baseline_speedup") {
      return row[key] === null ? "\u2013" : row[key].toFixed(2) + "\u00d7";
    }
    if (key === "heads_q") return row.heads_q + "/" + row.heads_kv;
    if (key === "roofline_pct" && row[key] !== null) return row[key].toFixed(1);
    return number(row[key]);
  }

  function drawFilters() {
    const box = document.getElementById("filters");
    box.replaceChildren();
    for (const [key, values] of Object.entries(summary.filters)) {
      const label = document.createElement("label");
      label.textContent = key + " ";
      const select = document.createElement("select");
      select.name = key;
      select.add(new Option("all", ""));
      for (const value of values) select.add(new Option(String(value), String(value)));
      select.value = view.filters[key] || "";
      select.addEventListener("change", function () {
        view.filters[key] = select.value;
        view.offset = 0;
        drawTable();
      });
      label.appendChild(select);
      box.appendChild(label);
    }
  }

  function drawHead() {
    const row = document.createElement("tr");
    for (const [key, title, cls, tip] of columns) {
      const th = document.createElement("th");
      th.textContent = title;
      th.dataset.key = key;
      if (tip) th.title = tip;
      th.className = (cls === "lead" ? "lead " : "") +
                     (view.sort === key ? "sorted-" + view.order : "");
      th.addEventListener("click", function () {
        view.order = view.sort === key && view.order === "asc" ? "desc" : "asc";
        view.sort = key;
        view.offset = 0;
        drawTable();
      });
      row.appendChild(th);
    }
    document.querySelector("#best thead").replaceChildren(row);
  }

  function detailRow(row) {
    const tr = document.createElement("tr");
    tr.className = "detail";
    const td = document.createElement("td");
    td.colSpan = columns.length;
    const lines = [["trial", row.trial_id], ["study", row.study_id],
                   ["best is baseline", row.baseline || "no"]];
    const head = document.createElement("div");
    head.textContent = lines.map(([k, v]) => k + " " + v).join(" \u00b7 ");
    td.appendChild(head);
    if (row.baselines.length) {
      const table = document.createElement("table");
      table.innerHTML = "<tr><th>baseline</th><th>family</th><th>config</th>" +
                        "<th>time (ms)</th><th>best's speedup</th></tr>";
      for (const b of row.baselines) {
        const line = table.insertRow();
        for (const value of [b.label, b.family, b.config,
                             b.time_ms === null ? b.status : number(b.time_ms),
                             b.speedup === null ? "\u2013" : b.speedup.toFixed(2) + "\u00d7"]) {
          line.insertCell().textContent = value;
        }
      }
      td.appendChild(table);
    }
    tr.appendChild(td);
    return tr;
  }

  // A table row's study as the study list names studies (for one the list does not offer).
  function studyTitle(row) {
    return "study " + row.study_id + ": " + row.mode + " d" + row.head_dim +
      (row.head_dim_v !== row.head_dim ? " dv" + row.head_dim_v : "") + " " + row.dtype +
      (row.kv_dtype !== row.dtype ? " KV:" + row.kv_dtype : "") +
      " q" + row.q_len + " kv" + row.kv_len + " h" + row.heads_q + "/" + row.heads_kv + " b" +
      row.batch + " on " + row.device + " (" + row.family + ")";
  }

  function drawRows(page) {
    const body = [];
    for (const row of page.rows) {
      const tr = document.createElement("tr");
      tr.className = "row";
      tr.title = "click for the baselines and the study";
      for (const [key, , cls] of columns) {
        const td = document.createElement("td");
        td.textContent = cell(row, key);
        if (key === "baseline_speedup" && row.fastest_baseline) {
          td.title = "vs " + row.fastest_baseline;
        }
        if (cls) td.className = cls;
        tr.appendChild(td);
      }
      const id = row.trial_id;
      tr.addEventListener("click", function () {
        if (view.open.has(id)) view.open.delete(id); else view.open.add(id);
        drawRows(page);
        const select = document.getElementById("study");
        const listed = [...select.options].some(o => o.value === String(row.study_id));
        if (!listed && embedded === null) {  // live: any study opens; a report has its own
          select.add(new Option(studyTitle(row), String(row.study_id)));
        }
        if (listed || embedded === null) {
          view.study = String(row.study_id);
          select.value = view.study;
          drawStudy();
        }
      });
      body.push(tr);
      if (view.open.has(id)) body.push(detailRow(row));
    }
    document.querySelector("#best tbody").replaceChildren(...body);
    const pager = document.getElementById("pager");
    const last = Math.min(view.offset + page.rows.length, page.total);
    pager.replaceChildren();
    pager.append(page.total ? "rows " + (view.offset + 1) + "\u2013" + last + " of " +
                 page.total : "no tuned problem matches");
    for (const [text, offset] of [["previous", view.offset - view.limit],
                                  ["next", view.offset + view.limit]]) {
      const button = document.createElement("button");
      button.textContent = text;
      button.disabled = offset < 0 || offset >= page.total;
      button.addEventListener("click", function () { view.offset = offset; drawTable(); });
      pager.appendChild(button);
    }
  }

  // Pages come from the server: only the newest query's page is drawn (an older one arriving
  // late would show rows that contradict the headers), and the table is aria-busy until then.
  let tableQueries = 0;
  async function drawTable() {
    drawHead();
    const query = {offset: view.offset, limit: view.limit};
    for (const [key, value] of Object.entries(view.filters)) if (value) query[key] = value;
    if (view.sort) { query.sort = view.sort; query.order = view.order; }
    const table = document.getElementById("best"), asked = ++tableQueries;
    table.setAttribute("aria-busy", "true");
    const page = await source.page(query);
    if (asked !== tableQueries) return;
    drawRows(page);
    table.setAttribute("aria-busy", "false");
  }

  // The server sends each hover's problem and config lines once (hover_lines) and per point
  // their indexes: put the full hover texts back together.
  function withHovers(roofline) {
    const lines = roofline.hover_lines || [];
    return roofline.figure.data.map(function (trace) {
      if (!trace.hover_line_ids) return trace;
      const [problems, configs] = trace.hover_line_ids;
      const text = Array.from(trace.text, (rest, i) =>
        lines[problems[i]] + "<br>" + lines[configs[i]] + "<br>" + rest);
      const joined = Object.assign({}, trace, {text: text});
      delete joined.hover_line_ids;
      return joined;
    });
  }

  // One device's roofline at a time, chosen by its button ("?device=ID" on the page's URL
  // chooses the first; the choice is kept in the URL). Each WebGL chart costs the page two
  // contexts (browsers keep 16 alive) and, without a GPU, about half a second to draw: a chart
  // per device would not scale with a lab's devices. Redrawing into the same chart keeps its
  // contexts.
  function chooseDevice() {
    const ids = summary.devices.map(d => String(d.id));
    if (!ids.includes(view.device)) view.device = ids.includes(asked.device) ? asked.device
                                                                              : ids[0] || null;
    const buttons = summary.devices.map(function (device) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = device.name;
      button.dataset.deviceId = String(device.id);
      button.setAttribute("aria-pressed", String(String(device.id) === view.device));
      button.addEventListener("click", function () {
        view.device = String(device.id);
        if (embedded === null) {
          const url = new URL(window.location.href);
          url.searchParams.set("device", view.device);
          window.history.replaceState(null, "", url);
        }
        drawRoofline();
      });
      return button;
    });
    document.getElementById("devices").replaceChildren(...buttons);
  }

  async function drawRoofline() {
    chooseDevice();
    document.getElementById("empty").hidden = summary.counts.ok > 0;
    const div = document.querySelector("#rooflines .roofline");
    const caption = document.querySelector("#rooflines .caption");
    const id = view.device;
    if (id === null) {
      Plotly.purge(div);
      caption.textContent = "";
      return;
    }
    const roofline = await source.roofline(id);
    if (id !== view.device) return;  // another device was chosen meanwhile
    caption.textContent = roofline.caption;
    await Plotly.react(div, withHovers(roofline), roofline.figure.layout, plotConfig);
    // what the chart shows, once it is drawn
    Object.assign(div.dataset, {device: roofline.device, points: String(roofline.n_points),
                                measurements: String(roofline.n_measurements)});
  }

  async function drawStudy() {
    const convergence = document.getElementById("convergence");
    const importance = document.getElementById("importance");
    if (!view.study) {
      Plotly.purge(convergence);
      Plotly.purge(importance);
      return;
    }
    const id = view.study;
    const pending = source.importance(id);  // asked at once: the server may take a while
    const study = await source.study(id);
    if (id !== view.study) return;  // another study was opened meanwhile
    await Plotly.react(convergence, study.figure.data, study.figure.layout, plotConfig);
    const ranked = await pending;
    if (id !== view.study) return;
    if (ranked.figure) {
      importance.querySelector(".note")?.remove();
      await Plotly.react(importance, ranked.figure.data, ranked.figure.layout, plotConfig);
    } else {
      Plotly.purge(importance);
      const note = document.createElement("p");
      note.className = "note";
      note.textContent = "Parameter importance: " + ranked.note;
      importance.replaceChildren(note);
    }
  }

  function drawStudies() {
    const select = document.getElementById("study");
    const previous = view.study;
    select.replaceChildren(...summary.studies.map(([id, title]) => new Option(title, String(id))));
    if (previous && summary.studies.some(([id]) => String(id) === previous)) {
      select.value = previous;
    }
    view.study = select.value || null;
    return drawStudy();
  }

  function setStatus(extra) {
    const c = summary.counts;
    const mode = settings.live ? "live, checks every " + settings.pollMs / 1000 + " s"
                               : "report generated " + settings.generated;
    const shown = embedded === null ? (summary.studies.length < c.studies ? " \u00b7 the " +
      summary.studies.length + " latest of " + c.studies + " studies listed (any opens from " +
      "its table row)" : "") : " \u00b7 " + embedded.rows.length + " of " + c.tuned +
      " table rows and " + summary.studies.length + " of " + c.studies + " studies in this file";
    document.getElementById("status").textContent =
      mode + " \u00b7 data version " + summary.version + " \u00b7 " +
      c.measurements.toLocaleString("en") + " measurements (" + c.ok.toLocaleString("en") +
      " OK) \u00b7 " + c.tuned + " tuned problems on " + c.devices + " devices" + shown +
      (extra ? " \u00b7 " + extra : "");
  }

  function timed(name, promise) {
    return promise.then(function (value) { performance.mark(name); return value; });
  }

  async function drawAll() {
    drawFilters();
    setStatus();
    await Promise.all([timed("xe2t-table", drawTable()),
                       timed("xe2t-roofline", drawRoofline()),
                       timed("xe2t-study", drawStudies())]);
  }

  async function poll() {
    try {
      const version = (await getJSON("dashboard/version")).version;
      if (version !== summary.version) {
        summary = await source.summary();
        await drawAll();
      }
      setStatus();
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
  // Ready once the browser has produced the frame that shows every chart: a WebGL chart
  // reaches the screen only when that frame is composited.
  function nextFrame() {
    return new Promise(resolve => window.requestAnimationFrame(() => setTimeout(resolve, 0)));
  }
  drawAll().then(nextFrame).then(function () {
    performance.mark("xe2t-ready");
    window.xe2tTimings = Object.fromEntries(performance.getEntriesByType("mark")
      .filter(m => m.name.startsWith("xe2t-")).map(m => [m.name, m.startTime]));
    window.xe2tReady = true;
    if (settings.live) window.setTimeout(poll, settings.pollMs);
  }, function (error) {
    setStatus("could not draw: " + error.message);
    console.error(error);
  });
})();
