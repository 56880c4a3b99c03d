// jobman's dashboard: the job list (one page, filtered on the server), the dependency graph and the timeline of
// the jobs in that page, the groups, and a job's page with its log tailing live. Every name, command and line of
// output is set as text (UI.el), never as HTML.
"use strict";
(() => {
  const { el, clear, get, post } = UI;
  const STATE_WORDS = ["submitting", "starting", "waiting", "running", "held", "succeeded", "failed", "timed_out",
    "cancelled", "dependency_failed", "submission_failed", "lost"];
  const CONDITIONS = { success: "after success", failure: "after failure", end: "after end" };
  const COLOURS = { succeeded: "#1f9d55", failed: "#d64545", timed_out: "#d64545", submission_failed: "#d64545",
    running: "#1c8ad6", waiting: "#a0a7b4", starting: "#a0a7b4", submitting: "#a0a7b4", cancelled: "#c98a12",
    dependency_failed: "#c98a12", lost: "#9b45c9", held: "#c98a12" };
  const filter = { states: [], group: "", name: "", q: "", offset: 0, limit: 100 };
  const selected = new Set();
  let data = null, groups = [], route = { tab: "jobs" }, jobView = null, logPane = null, jobParts = null, bar = null;
  const main = () => document.getElementById("main");

  const stateWord = (job) => (job.held && job.state !== "finished" && !job.outcome ? "held" : job.state);
  const stateCell = (job) => el("span", { class: `state s-${stateWord(job)}`, "data-testid": "state",
    text: stateWord(job) + (job.outcome === "failed" && job.exit_code !== null && job.exit_code !== undefined
      ? ` (${job.exit_code})` : job.outcome === "failed" && job.signal ? ` (${job.signal})` : "") });
  const label = (job) => UI.plain(`${job.handle ?? "?"} ${job.name || ""}`.trim());
  const command = (argv) => UI.plain(Array.isArray(argv) ? argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`)).join(" ") : "?");

  // --- routing: the view in the hash's path, its filters and page in its query (#/graph?state=failed&q=x) -------
  function parseRoute() {
    const [path, query] = location.hash.replace(/^#\/?/, "").split("?", 2);
    if (path.startsWith("job/")) return { tab: "job", job: decodeURIComponent(path.slice(4)) };
    const p = new URLSearchParams(query || "");
    filter.states = (p.get("state") || "").split(",").filter((w) => STATE_WORDS.includes(w));
    filter.q = p.get("q") || "";
    filter.group = p.get("group") || "";
    filter.name = p.get("name") || "";
    filter.offset = Math.max(0, Number(p.get("offset")) || 0);
    filter.limit = [50, 100, 200, 500].includes(Number(p.get("limit"))) ? Number(p.get("limit")) : 100;
    if (bar) { bar.search.value = filter.q; bar.group.value = filter.group; bar.name.value = filter.name; }
    if (path === "graph" && (p.get("job") || p.get("of-group"))) return { tab: "graph", of: { job: p.get("job"), group: p.get("of-group") } };
    return { tab: ["graph", "timeline", "groups"].includes(path) ? path : "jobs" };
  }
  function hashOf(tab) {
    const p = new URLSearchParams();
    if (filter.states.length) p.set("state", filter.states.join(","));
    for (const key of ["q", "group", "name"]) if (filter[key]) p.set(key, filter[key]);
    if (filter.offset) p.set("offset", filter.offset);
    if (filter.limit !== 100) p.set("limit", filter.limit);
    const query = p.toString();
    return `#/${tab === "jobs" ? "" : tab}${query ? `?${query}` : ""}`;
  }
  // The tabs of the job views carry the filters: Graph shows the jobs the list shows.
  function tabLinks() {
    for (const a of document.querySelectorAll("#tabs a")) {
      if (["jobs", "graph", "timeline"].includes(a.dataset.tab)) a.setAttribute("href", hashOf(a.dataset.tab));
    }
  }
  async function draw(to, first, current) {
    route = to;
    tabLinks();
    if (route.tab === "job") await showJob(first, current);
    else if (route.of) {
      const got = await get("/api/graph", { job: route.of.job, group: route.of.group });
      if (current()) pipeline(got);
    } else if (route.tab === "groups") {
      const got = await get("/api/groups");
      if (current()) { groups = got; renderGroups(); }
    } else {
      const got = await get("/api/jobs", params());
      if (current()) { data = got; renderJobs(); }
    }
  }
  const leave = () => { if (logPane) { logPane.close(); logPane = null; } jobView = null; jobParts = null; };
  const nav = UI.pages(parseRoute, leave, draw, 30);
  const refresh = nav.refresh;
  const filtered = () => nav.push(hashOf(route.tab));
  const params = () => ({ state: filter.states.join(","), group: filter.group, name: filter.name, q: filter.q,
    offset: filter.offset, limit: filter.limit });

  // --- the filters, the actions and the pager (jobs, graph and timeline share them) -------------------------
  // The filters are built once and kept: a refresh (a change, or the periodic one) never takes the focus from the
  // search box or what is typed in it; only the counts on the state chips move.
  function filters() {
    if (bar) return bar;
    const chips = el("div", { class: "chips", "data-testid": "state-filter" }, STATE_WORDS.map((word) => el("button", {
      class: "chip", "data-state": word, onclick: () => { toggle(filter.states, word); filter.offset = 0; filtered(); },
    })));
    const search = el("input", { type: "search", placeholder: "search: name, command, id or #handle", size: 34,
      value: filter.q, "data-testid": "search" });
    search.addEventListener("change", () => { filter.q = search.value; filter.offset = 0; filtered(); });
    const group = el("input", { type: "text", placeholder: "group", size: 10, value: filter.group, "data-testid": "group" });
    group.addEventListener("change", () => { filter.group = group.value.trim(); filter.offset = 0; filtered(); });
    const name = el("input", { type: "text", placeholder: "name glob (a*)", size: 14, value: filter.name, "data-testid": "name-glob" });
    name.addEventListener("change", () => { filter.name = name.value.trim(); filter.offset = 0; filtered(); });
    bar = el("div", { class: "filters" }, chips, search, group, name);
    Object.assign(bar, { search, group, name });
    return bar;
  }
  function countChips() {
    const counts = data.counts || {};
    for (const chip of filters().querySelectorAll(".chip")) {
      const word = chip.dataset.state;
      chip.textContent = `${word} ${counts[word] || 0}`;
      chip.classList.toggle("on", filter.states.includes(word));
    }
  }
  function toggle(list, word) { const i = list.indexOf(word); if (i >= 0) list.splice(i, 1); else list.push(word); }

  function pager() {
    const from = data.total ? data.offset + 1 : 0, to = data.offset + data.jobs.length;
    const size = el("select", { "data-testid": "page-size" }, [50, 100, 200, 500].map((n) =>
      el("option", { value: n, selected: n === filter.limit }, `${n} a page`)));
    size.addEventListener("change", () => { filter.limit = Number(size.value); filter.offset = 0; filtered(); });
    return el("div", { class: "pager" },
      el("span", { "data-testid": "page-range", text: `${from}-${to} of ${data.total}` }),
      el("button", { disabled: data.offset === 0, onclick: () => { filter.offset = Math.max(0, filter.offset - filter.limit); filtered(); } }, "‹ newer"),
      el("button", { disabled: to >= data.total, onclick: () => { filter.offset += filter.limit; filtered(); } }, "older ›"),
      size);
  }

  // Which actions apply to a job as it is now (a button for one that cannot apply is not offered).
  const APPLIES = {
    cancel: (j) => j.phase !== "finished", restart: (j) => j.phase === "finished",
    hold: (j) => ["submitting", "waiting"].includes(j.phase) && !j.held, release: (j) => j.phase !== "finished" && Boolean(j.held),
  };
  // [the destructive button's words, the other one's]: the dialog's buttons say what each does.
  const VERBS = { cancel: ["Cancel job", "Keep running"], restart: ["Restart", "Don't restart"], hold: ["Hold", "Don't hold"],
    release: ["Release", "Keep held"] };

  // jobs: those selected, each as the page knows it (a job selected on another page: its id alone).
  function actionBar(ids, known, describe, counted = true) {
    const deps = el("input", { type: "checkbox", id: "with-deps" });
    const can = (action) => ids.some((id) => !known.has(id) || APPLIES[action](known.get(id)));
    const button = (action, verb) => (counted || can(action) ? el("button", { disabled: !can(action), "data-action": action,
      onclick: () => act(action, ids, describe, deps.checked) }, verb) : null);
    return el("div", { class: "actions" }, counted ? el("span", { class: "muted", text: `${ids.length} selected` }) : null,
      button("cancel", "Cancel"), button("restart", "Restart"),
      counted || can("restart") ? el("label", { class: "muted" }, deps, " with dependents") : null,
      button("hold", "Hold"), button("release", "Release"));
  }

  async function act(action, ids, describe, withDependents) {
    const [verb, keep] = VERBS[action];
    const extra = action === "restart" && withDependents ? " (and the jobs that ended dependency_failed because of them)" : "";
    const what = ids.length === 1 ? describe(ids[0]) : `${ids.length} jobs`;
    const ok = await UI.confirm(`${verb.replace(" job", "")} ${what}${extra}?`, ids.map(describe), ids.length === 1 ? verb : `${verb} (${ids.length})`, keep);
    if (!ok) return;
    try {
      const result = await post("/api/actions", { action, jobs: ids, with_dependents: withDependents });
      summarise(action, result.results, describe);
      if (action !== "restart") selected.clear();
    } catch (e) {
      UI.notice(e.message, "error");
    }
    refresh();
  }
  // One notice for a whole selection (a page of 100 cancelled is one line), and one for what was refused.
  function summarise(action, results, describe) {
    const good = results.filter((r) => !r.error), bad = results.filter((r) => r.error);
    if (good.length === 1) UI.notice(`${describe(good[0].id)}: ${good[0].message}`);
    else if (good.length) UI.notice(`${VERBS[action][0].replace(" job", "")}: ${good.length} jobs (${good[0].message}${good.length > 1 ? ", …" : ""})`);
    if (bad.length === 1) UI.notice(`${describe(bad[0].id)}: ${bad[0].error}`, "error");
    else if (bad.length) UI.notice(`${bad.length} jobs refused: ${describe(bad[0].id)}: ${bad[0].error} (and ${bad.length - 1} more)`, "error");
  }

  // --- jobs, graph, timeline ----------------------------------------------------------------------------------
  function describeFrom(jobs) {
    const byId = new Map(jobs.map((j) => [j.id, j]));
    return (id) => { const j = byId.get(id); return j ? `job ${label(j)} (${stateWord(j)})` : id; };
  }

  // Drawn once per visit and then patched: the filters, the action bar and the pager are drawn again only when
  // what they show changed, the table's rows only when their job changed, the graph and timeline only when their
  // data did. A refresh that changes nothing changes nothing on the page.
  let list = null;
  function renderJobs() {
    if (!list || !main().contains(list.node)) {
      list = { top: el("div", { class: "actions" }), bar: el("div"), pager: el("div", { class: "pager-box" }), body: el("div") };
      list.node = el("section", { class: "panel" }, filters(), el("div", { class: "actions" }, list.bar, list.pager), list.body);
      clear(main(), list.node);
    }
    countChips();
    const known = new Map(data.jobs.map((j) => [j.id, j]));
    const ids = [...selected];
    UI.patch(list.bar, JSON.stringify([ids, ids.map((id) => known.get(id) || null)]),
      () => actionBar(ids, known, describeFrom(data.jobs)));
    UI.patch(list.pager, JSON.stringify([data.offset, data.total, data.jobs.length, filter.limit]), pager);
    if (route.tab === "graph") UI.patch(list.body, "graph" + JSON.stringify(data.graph), graphPanel);
    else if (route.tab === "timeline") UI.patch(list.body, "timeline" + JSON.stringify(data.timeline) + Math.floor(Date.now() / 30000), timelinePanel);
    else jobTable();
  }

  function jobTable() {
    let table = list.body.querySelector("table[data-testid=jobs]");
    if (!table) {
      list.body.drawnKey = "table";
      const all = el("input", { type: "checkbox", title: "select every job of this page", "data-testid": "select-page" });
      all.addEventListener("change", () => { for (const j of data.jobs) all.checked ? selected.add(j.id) : selected.delete(j.id); renderJobs(); });
      table = el("table", { "data-testid": "jobs", class: "jobs" },
        el("thead", {}, el("tr", {}, el("th", {}, all), ["#", "name", "", "state", "group", "tries", "submitted", "time", "command", "why"].map((h) => el("th", { text: h })))),
        el("tbody", {}));
      clear(list.body, el("div", { class: "table-wrap" }, table));
    }
    table.querySelector("[data-testid=select-page]").checked = data.jobs.length > 0 && data.jobs.every((j) => selected.has(j.id));
    const took = (job) => UI.duration(job.started_at ? (job.finished_at || Date.now() / 1000) - job.started_at : null);
    UI.rows(table.tBodies[0], data.jobs, (job) => job.id, (job) => JSON.stringify([job, selected.has(job.id), took(job)]),
      (job) => jobRow(job, took(job)), el("tr", {}, el("td", { colspan: 11, class: "muted", text: "no jobs match" })));
  }
  function jobRow(job, took) {
    const box = el("input", { type: "checkbox", checked: selected.has(job.id), "aria-label": `select ${label(job)}` });
    box.addEventListener("change", () => { box.checked ? selected.add(job.id) : selected.delete(job.id); renderJobs(); });
    const why = job.corrupt || (job.phase === "finished" && !["succeeded", "failed"].includes(job.outcome) ? job.detail : job.wait_detail) || "";
    return el("tr", { class: "row", "data-job-id": job.id, "data-testid": "job-row" },
      el("td", {}, box),
      el("td", {}, el("a", { href: `#/job/${job.id}`, text: String(job.handle ?? "-") })),
      el("td", { class: "name-cell" }, el("a", { href: `#/job/${job.id}`, class: "name", title: UI.plain(job.name || ""), text: UI.plain(job.name || "-") })),
      el("td", {}, el("a", { href: `#/graph?job=${encodeURIComponent(job.id)}`, class: "graph-link", "data-testid": "graph-link", title: "the graph of its pipeline" }, "graph")),
      el("td", {}, stateCell(job)),
      el("td", { class: "clip", title: UI.plain(job.group), text: UI.plain(job.group) }),
      el("td", { text: String(job.attempts || 0) }),
      el("td", { text: UI.when(job.submitted_at) }),
      el("td", { text: took }),
      el("td", { class: "command", title: command(job.command), text: command(job.command) }),
      el("td", { class: "wrap why", text: why }));
  }

  // The Graph tab without a job: the page's jobs (and those at the other end of their edges), as the list shows.
  function graphPanel() {
    return el("div", {}, el("p", { class: "muted", text: "the jobs of this page; a job's own pipeline: its row's graph link" }), drawGraph(data.graph));
  }
  // The pipeline of one job (or of a group's newest jobs), walked on the server, sweeps folded.
  function pipeline(got) {
    const title = got.cut ? `the first ${got.total} jobs of a bigger pipeline` : `${got.total} jobs`;
    const key = JSON.stringify(got);
    if (main().drawnKey === key && main().childElementCount) return;
    main().drawnKey = key;
    const what = route.of.job ? "Pipeline" : `Group ${UI.plain(route.of.group)}`;
    clear(main(), el("section", { class: "panel" }, el("h2", { "data-testid": "pipeline-title", text: `${what}: ${title}` }), drawGraph(got, route.of.job)));
  }

  // A graph laid out left to right (dagre), in a frame with zoom (wheel, + and −), pan (drag) and fit.
  function drawGraph({ nodes, edges }, focus) {
    const wrap = el("div", { class: "graph-wrap", "data-testid": "graph" });
    if (!nodes.length) return clear(wrap, el("p", { class: "muted", text: "no jobs in view" }));
    const g = new dagre.graphlib.Graph({ multigraph: true });
    g.setGraph({ rankdir: "LR", nodesep: 18, ranksep: 60, marginx: 12, marginy: 12 });
    g.setDefaultEdgeLabel(() => ({}));
    const text = (n) => (n.sweep ? `${n.count} × ${UI.plain(n.name || "jobs")}` : label(n));
    const sub = (n) => (n.sweep ? Object.entries(n.states).map(([k, v]) => `${v} ${k}`).join(", ") : stateWord(n));
    for (const n of nodes) g.setNode(n.id, { width: Math.min(240, 24 + 7 * Math.max(text(n).length, sub(n).length)), height: n.sweep ? 46 : 38, node: n });
    edges.forEach((e, i) => g.setEdge(e.from, e.to, { label: CONDITIONS[e.condition] || e.condition, width: 80, height: 14, labelpos: "c", edge: e }, `e${i}`));
    dagre.layout(g);
    const size = g.graph();
    const view = el("svg:g", { class: "view" });
    const svg = el("svg:svg", { width: "100%", height: "100%", "data-width": size.width, "data-height": size.height }, el("svg:defs", {},
      el("svg:marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" },
        el("svg:path", { d: "M0,0 L10,5 L0,10 z", fill: "#7b8494" }))), view);
    for (const key of g.edges()) {
      const e = g.edge(key);
      const d = e.points.map((p, i) => `${i ? "L" : "M"}${p.x},${p.y}`).join(" ");
      view.append(el("svg:g", { class: "edge", "data-condition": e.edge.condition },
        el("svg:path", { d, fill: "none", stroke: "#7b8494", "stroke-width": 1.3, "marker-end": "url(#arrow)" }),
        el("svg:text", { x: e.x, y: e.y + 4, "text-anchor": "middle", fill: "#555d6b", class: "edge-label", text: e.label })));
    }
    for (const id of g.nodes()) {
      const { x, y, width, height, node } = g.node(id);
      const word = node.sweep ? Object.keys(node.states).sort((a, b) => node.states[b] - node.states[a])[0] : stateWord(node);
      const open = node.sweep ? `#/?q=${encodeURIComponent((node.name || "").replace(/\*$/, ""))}` : `#/job/${id}`;
      view.append(el("svg:g", { class: node.sweep ? "node sweep" : "node", "data-job-id": node.sweep ? null : id, "data-sweep": node.sweep ? node.count : null,
        "data-state": word, cursor: "pointer", onclick: () => { location.hash = open; } },
        el("svg:title", { text: node.sweep ? `${text(node)}: ${sub(node)}` : `${label(node)}: ${word}` }),
        el("svg:rect", { x: x - width / 2, y: y - height / 2, width, height, rx: 5, fill: COLOURS[word] || "#a0a7b4",
          "fill-opacity": node.in_view ? 0.95 : 0.35, stroke: id === focus ? "#f0c36d" : node.in_view ? "#1d2330" : "#8a94a6",
          "stroke-width": id === focus ? 3 : 1, "stroke-dasharray": node.in_view ? "" : "4 3" }),
        node.sweep ? el("svg:rect", { x: x - width / 2 + 4, y: y - height / 2 - 4, width, height, rx: 5, fill: "none", stroke: "#1d2330", "stroke-opacity": 0.4 }) : null,
        el("svg:text", { x, y: y - 2, "text-anchor": "middle", fill: "#fff", "font-weight": 600, text: clip(text(node), width) }),
        el("svg:text", { x, y: y + 12, "text-anchor": "middle", fill: "#fff", text: clip(sub(node), width) })));
    }
    return el("div", {}, zoomBar(svg, view, size), clear(wrap, svg));
  }

  function zoomBar(svg, view, size) {
    let k = 1, tx = 0, ty = 0;
    const apply = () => view.setAttribute("transform", `translate(${tx},${ty}) scale(${k})`);
    const fit = () => {
      const box = svg.getBoundingClientRect();
      if (!box.width) return;
      k = Math.min(box.width / size.width, box.height / size.height, 1.5);
      tx = (box.width - size.width * k) / 2; ty = (box.height - size.height * k) / 2;
      apply();
    };
    const zoom = (by, cx, cy) => { const nk = Math.min(4, Math.max(0.05, k * by)); tx = cx - (cx - tx) * (nk / k); ty = cy - (cy - ty) * (nk / k); k = nk; apply(); };
    svg.addEventListener("wheel", (e) => { e.preventDefault(); const b = svg.getBoundingClientRect(); zoom(e.deltaY < 0 ? 1.15 : 1 / 1.15, e.clientX - b.left, e.clientY - b.top); }, { passive: false });
    let drag = null;
    svg.addEventListener("pointerdown", (e) => { drag = { x: e.clientX - tx, y: e.clientY - ty, moved: false }; });
    svg.addEventListener("pointermove", (e) => { if (drag && e.buttons) { tx = e.clientX - drag.x; ty = e.clientY - drag.y; drag.moved = true; apply(); } });
    svg.addEventListener("pointerup", () => { drag = null; });
    requestAnimationFrame(fit);
    const centre = () => { const b = svg.getBoundingClientRect(); return [b.width / 2, b.height / 2]; };
    return el("div", { class: "actions zoom" },
      el("button", { "data-testid": "graph-fit", onclick: fit }, "fit"),
      el("button", { "data-testid": "graph-zoom-in", onclick: () => zoom(1.25, ...centre()) }, "+"),
      el("button", { "data-testid": "graph-zoom-out", onclick: () => zoom(0.8, ...centre()) }, "−"),
      el("span", { class: "muted", text: "wheel to zoom, drag to pan" }));
  }
  const clip = (text, width) => { const most = Math.floor((width - 10) / 7); return text.length > most ? text.slice(0, most - 1) + "…" : text; };

  function timelinePanel() {
    const rows = data.timeline;
    const wrap = el("div", { class: "timeline-wrap", "data-testid": "timeline" });
    if (!rows.length) return clear(wrap, el("p", { class: "muted", text: "no jobs in view" }));
    const now = Date.now() / 1000;
    const start = Math.min(...rows.map((r) => r.submitted_at));
    const end = rows.some((r) => !r.finished_at) ? now : Math.max(...rows.map((r) => r.finished_at));
    const left = 200, width = 900, rowH = 20, span = Math.max(end - start, 1);
    const x = (t) => left + ((t - start) / span) * width;
    const svg = el("svg:svg", { width: left + width + 70, height: rows.length * rowH + 30 });
    for (let i = 0; i <= 4; i++) {
      const t = start + (span * i) / 4;
      svg.append(el("svg:line", { x1: x(t), x2: x(t), y1: 0, y2: rows.length * rowH + 8, stroke: "#e3e5ea" }),
        el("svg:text", { x: x(t), y: rows.length * rowH + 22, "text-anchor": "middle", fill: "#6b7280", text: UI.when(t) }));
    }
    rows.forEach((r, i) => {
      const y = i * rowH + 4;
      const row = el("svg:g", { class: "trow", "data-job-id": r.id, cursor: "pointer", onclick: () => { location.hash = `#/job/${r.id}`; } },
        el("svg:text", { x: 4, y: y + 12, fill: "#1d2330", text: clip(label(r), left - 6) }));
      const firstStart = r.attempts.length ? r.attempts[0].started_at : (r.finished_at || now);
      row.append(el("svg:rect", { x: x(r.submitted_at), y: y + 6, width: Math.max(1, x(firstStart) - x(r.submitted_at)), height: 4, fill: "#c9cdd6" },
        el("svg:title", { text: `waited ${UI.duration(firstStart - r.submitted_at)} before its first attempt` })));
      for (const d of r.retry_delays) {
        const until = Math.min(d.until || now, now);
        row.append(el("svg:rect", { x: x(d.from), y: y + 5, width: Math.max(1, x(until) - x(d.from)), height: 6, fill: "#f0c36d" },
          el("svg:title", { text: `retry delay before attempt ${d.attempt}` })));
      }
      for (const a of r.attempts) {
        const stop = a.ended_at || now, outcome = a.outcome || "running";
        row.append(el("svg:rect", { class: "attempt", "data-outcome": outcome, x: x(a.started_at), y: y + 2, width: Math.max(2, x(stop) - x(a.started_at)), height: 14, rx: 2,
          fill: COLOURS[outcome === "exited" ? (a.exit_code === 0 ? "succeeded" : "failed") : outcome] || (a.exit_code === 0 ? "#1f9d55" : "#d64545"),
          stroke: outcome === "timed_out" ? "#7a1010" : "none", "stroke-width": 2 },
          el("svg:title", { text: `attempt ${a.number}: ${outcome}${a.exit_code !== null && a.exit_code !== undefined ? `, exit ${a.exit_code}` : ""}${a.signal ? `, signal ${a.signal}` : ""}, ${UI.duration(stop - a.started_at)}` })));
      }
      svg.append(row);
    });
    return clear(wrap, el("p", { class: "muted", text: "one row per job in view: grey line waiting, yellow a retry's delay, one bar per attempt (red outline: timed out)" }), svg);
  }

  // --- groups ---------------------------------------------------------------------------------------------------
  // Each group with its limit, set from the page as `jobman group set NAME --limit N` sets it (0 pauses it); the
  // slot holders as links to their jobs. Rows keyed by group: typing a limit survives a refresh.
  function renderGroups() {
    let table = main().querySelector("table[data-testid=groups]");
    if (!table) {
      table = el("table", { "data-testid": "groups" }, el("thead", {}, el("tr", {}, ["group", "limit", "holding a slot", "waiting for one", "holders", "set the limit", ""].map((h) => el("th", { text: h })))), el("tbody"));
      clear(main(), el("section", { class: "panel" }, el("h2", { text: "Groups" }), table));
    }
    UI.rows(table.tBodies[0], groups, (g) => g.name, (g) => JSON.stringify(g), groupRow);
  }
  function groupRow(g) {
    const input = el("input", { type: "number", min: 0, value: g.limit, size: 5, "aria-label": `limit of ${UI.plain(g.name)}`, "data-testid": "group-limit" });
    const set = async (limit) => {
      try {
        const got = await post("/api/groups/limit", { group: g.name, limit });
        UI.notice(`group ${UI.plain(g.name)}: limit ${got.limit}${got.limit === 0 ? " (paused)" : ""}`);
      } catch (e) { UI.notice(e.message, "error"); }
      refresh();
    };
    input.addEventListener("keydown", (e) => { if (e.key === "Enter") set(Number(input.value)); });
    return el("tr", { class: "row", "data-group": g.name },
      el("td", { class: "clip", title: UI.plain(g.name), text: UI.plain(g.name) }), el("td", { text: g.paused ? `${g.limit} (paused)` : g.limit === 0 ? "0 (paused)" : String(g.limit) }),
      el("td", { text: String(g.running) }), el("td", { text: String(g.waiting) }),
      el("td", { class: "wrap" }, g.holders.length ? g.holders.map((h, i) => [i ? ", " : "",
        el("a", { href: `#/job/${h.id}`, "data-testid": "holder", text: UI.plain(`${h.handle} ${h.name || ""}`.trim()) }), ` (${h.state})`]) : el("span", { class: "muted", text: "none" })),
      el("td", {}, input, " ", el("button", { "data-action": "set-limit", onclick: () => set(Number(input.value)) }, "Set")),
      el("td", {}, el("a", { href: `#/graph?of-group=${encodeURIComponent(g.name)}`, "data-testid": "group-graph", title: "the pipelines of its newest jobs" }, "graph")));
  }

  // --- one job: drawn once when opened, then patched part by part (the log pane is never drawn again) -----------
  async function showJob(first, current) {
    const job = await get(`/api/job/${encodeURIComponent(route.job)}`);
    if (!current()) return;
    jobView = job;
    if (!jobParts || jobParts.id !== job.id || !main().contains(jobParts.node)) buildJob(job);
    const p = jobParts, describe = () => `job ${label(job)} (${stateWord(job)})`;
    UI.patch(p.title, label(job), () => el("h2", { "data-testid": "job-title", text: `job ${label(job)}` }));
    UI.patch(p.actions, JSON.stringify([job.phase, job.held, job.outcome]),
      () => actionBar([job.id], new Map([[job.id, job]]), describe, false));
    UI.patch(p.facts, JSON.stringify(factsOf(job)), () => facts(job));
    UI.patch(p.relations, JSON.stringify([job.dependencies, job.dependents, job.restart_of, job.restarted_as, job.id]), () => relations(job));
    UI.patch(p.attempts, JSON.stringify(job.attempts_detail), () => attemptsTable(job));
    UI.patch(p.processes, JSON.stringify(job.target_processes || []), () => processes(job));
    UI.patch(p.events, JSON.stringify(job.events), () => eventsTable(job));
  }

  const separate = (job) => Boolean(job.spec.log && job.spec.log.separate_stderr);
  function buildJob(job) {
    if (logPane) logPane.close();
    const part = () => el("div");
    const p = jobParts = { id: job.id, title: part(), actions: part(), facts: part(), relations: part(), attempts: part(),
      processes: part(), events: part() };
    const id = encodeURIComponent(job.id);
    const streams = [{ key: "stdout", label: separate(job) ? "stdout" : "output", url: `/api/job/${id}/log`, download: `/api/job/${id}/log.txt` }];
    if (separate(job)) streams.push({ key: "stderr", label: "stderr", url: `/api/job/${id}/log?stderr=1`, download: `/api/job/${id}/log.txt?stderr=1` });
    // A header before each attempt once the job has, or may have, more than one.
    const several = () => jobView && (jobView.attempts > 1 || (jobView.spec.retry && jobView.spec.retry.retries));
    logPane = LOG.pane(streams, (attempt) => several() || attempt > 1);
    p.node = el("div", { class: "job-page" },
      el("section", { class: "panel" }, el("div", { class: "job-head" }, p.title, p.actions,
        el("a", { href: `#/graph?job=${id}`, class: "button", "data-testid": "job-graph" }, "graph of its pipeline")), p.facts),
      p.processes,
      el("div", { class: "grid2" },
        el("section", { class: "panel" }, el("h2", { text: "Dependencies" }), p.relations),
        el("section", { class: "panel" }, el("h2", { text: "Attempts" }), p.attempts)),
      el("section", { class: "panel" }, el("h2", { text: "Log" }), logPane.node),
      el("section", { class: "panel" }, el("details", { "data-testid": "spec-section" }, el("summary", { text: "Spec" }), specView(job)),
        el("details", {}, el("summary", { text: "Events" }), p.events)));
    clear(main(), p.node);
  }

  // What the facts show, as data (the patch key) and as a list.
  function factsOf(job) {
    return [["id", job.id], ["state", null],
      job.phase !== "finished" && job.wait_detail ? ["why it waits", `${job.waiting_for ? `${job.waiting_for}: ` : ""}${job.wait_detail}`] : null,
      job.detail ? ["detail", job.detail] : null, job.lost_note ? ["lost", job.lost_note] : null,
      job.phase === "finished" ? ["exit status", String(job.exit_status)] : null,
      ["group", UI.plain(`${job.group} (priority ${job.priority})`)], ["command", command(job.command)],
      ["submitted", UI.when(job.submitted_at)], ["started", UI.when(job.attempts_detail.length ? job.attempts_detail[0].started_at : null)],
      ["finished", UI.when(job.finished_at)], ["attempts", String(job.attempts || 0)],
      job.supervisor ? ["supervisor", `pid ${job.supervisor.pid} ${job.supervisor.alive ? "alive" : "gone"}`] : null,
      [stateWord(job), job.exit_code, job.signal]].filter(Boolean);
  }
  function facts(job) {
    const rows = factsOf(job).slice(0, -1);
    return el("dl", { class: "facts" }, rows.map(([k, v]) => [el("dt", { text: k }),
      el("dd", { class: k === "why it waits" ? "why-big" : k === "command" ? "mono" : "" }, k === "state" ? stateCell(job) : v)]));
  }
  const jobLink = (d) => el("a", { href: `#/job/${d.job}`, text: UI.plain(`${d.handle} ${d.name || ""}`.trim()) });
  function relations(job) {
    const table = (items, testid, empty) => items.length ? el("table", { "data-testid": testid }, el("tbody", {}, items.map((d) => el("tr", {},
      el("td", { text: CONDITIONS[d.condition] || d.condition }), el("td", {}, jobLink(d)),
      el("td", { class: `state s-${d.state}`, text: d.state }))))) : el("p", { class: "muted", text: empty });
    return el("div", {},
      el("h3", { text: "it waits for" }), table(job.dependencies, "dependencies", "no dependencies"),
      el("h3", { text: "waiting for it" }), table(job.dependents, "dependents", "no job depends on it"),
      job.restart_of ? el("p", {}, "a restart of ", el("a", { href: `#/job/${job.restart_of.id}`, "data-testid": "restart-of",
        text: `job ${job.restart_of.handle || job.restart_of.id}` })) : null,
      (job.restarted_as || []).length ? el("p", { "data-testid": "restarted-as" }, "restarted as ", job.restarted_as.map((r, i) => [i ? ", " : "",
        el("a", { href: `#/job/${r.id}`, text: `job ${r.handle}` })])) : null);
  }
  function attemptsTable(job) {
    return el("table", { "data-testid": "attempts" }, el("thead", {}, el("tr", {}, ["#", "started", "ended", "took", "outcome", "exit", "signal", "pid", "error"].map((h) => el("th", { text: h })))),
      el("tbody", {}, job.attempts_detail.map((a) => el("tr", {}, el("td", { text: String(a.number) }), el("td", { text: UI.when(a.started_at) }),
        el("td", { text: UI.when(a.ended_at) }), el("td", { text: UI.duration(a.duration) }), el("td", { class: `state s-${a.outcome}`, text: a.outcome || "-" }),
        el("td", { text: a.exit_code ?? "-" }), el("td", { text: a.signal || "-" }), el("td", { text: a.pid ?? "-" }), el("td", { class: "wrap", text: a.error || "" })))));
  }
  function processes(job) {
    if (!(job.target_processes || []).length) return null;
    return el("section", { class: "panel", "data-testid": "lost-processes" }, el("h2", { text: "Processes it left (still alive)" }),
      el("table", {}, el("tbody", {}, job.target_processes.map((p) => el("tr", {}, el("td", { text: `pid ${p.pid}` }), el("td", { class: "mono wrap", text: UI.plain(p.command) }))))));
  }
  function eventsTable(job) {
    return el("table", { "data-testid": "events" }, el("tbody", {}, job.events.map((e) => {
      const { at, kind, ...rest } = e;
      return el("tr", {}, el("td", { text: UI.when(at) }), el("td", { text: kind }), el("td", { class: "mono wrap", text: Object.keys(rest).length ? JSON.stringify(rest) : "" }));
    })));
  }

  // The spec as `jobman show --json` gives it (secret-looking values already masked), its environment folded away.
  function specView(job) {
    const { env, ...rest } = job.spec;
    const names = Object.keys(env || {}).sort();
    return el("div", {}, el("pre", { class: "json", "data-testid": "spec", text: JSON.stringify(rest, null, 2) }),
      el("details", {}, el("summary", { text: `environment: ${names.length} variables` }),
        el("table", {}, el("tbody", {}, names.map((k) => el("tr", {}, el("td", { class: "mono", text: k }), el("td", { class: "mono wrap", text: env[k] })))))));
  }

})();
