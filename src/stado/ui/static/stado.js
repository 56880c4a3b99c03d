// stado's dashboard: the queue in claim order (one page, unschedulable jobs and why), running jobs with their
// agent, promise and pulse, agents, schedules, the pause, recent terminal jobs, costs; a job's page with its spec,
// attempts, output (as stored: redacted by its agent) and artifacts. Every text is set as text (UI.el).
"use strict";
(() => {
  const { el, clear, get, post } = UI;
  const view = { offset: 0, limit: 100, q: "" };
  const selected = new Set();
  let route = { tab: "main" }, outputPane = null, jobParts = null, top = null;
  const main = () => document.getElementById("main");
  // Ids are time-ordered: a batch shares its head, so a job is shown by its name, or else by the shortest tail of
  // its id that differs from every other id the page shows (shorts is made again from each answer).
  let shorts = new Map();
  const short = (id) => (id ? shorts.get(id) || id.replace(/-/g, "").slice(-8) : "-");
  const named = (row) => (row && row.name ? UI.plain(row.name) : short(row && row.id));
  const jobLink = (row) => el("a", { href: `#/job/${row.id}`, class: "mono", title: row.id, "data-testid": "job-link", text: short(row.id) });
  const stateCell = (row) => el("span", { class: `state s-${row.outcome && row.state !== "completed" ? row.outcome : row.state}`,
    "data-testid": "state", text: row.state + (row.phase && row.phase !== "running" ? `/${row.phase}` : "") + (row.held ? "/held" : "") });
  const size = (n) => (n === null || n === undefined ? "-" : n >= 1 << 30 ? `${(n / (1 << 30)).toFixed(1)}G` : n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)}M` : n >= 1024 ? `${(n / 1024).toFixed(1)}K` : `${n} B`);
  const whenIso = (text) => UI.when(UI.iso(text));

  // The view in the hash: #/job/ID, or the board with its search and page in the query (#/?q=sweep&offset=100).
  function parseRoute() {
    const [path, query] = location.hash.replace(/^#\/?/, "").split("?", 2);
    if (path.startsWith("job/")) return { tab: "job", job: decodeURIComponent(path.slice(4)) };
    const p = new URLSearchParams(query || "");
    view.q = p.get("q") || "";
    view.offset = Math.max(0, Number(p.get("offset")) || 0);
    if (top) top.search.value = view.q;
    return { tab: "main" };
  }
  function hashOf() {
    const p = new URLSearchParams();
    if (view.q) p.set("q", view.q);
    if (view.offset) p.set("offset", view.offset);
    const query = p.toString();
    return `#/${query ? `?${query}` : ""}`;
  }
  async function draw(to, first, current) {
    route = to;
    if (route.tab === "job") await showJob(first, current);
    else {
      const got = await get("/api/board", { offset: view.offset, limit: view.limit, q: view.q });
      if (current()) renderMain(got);
    }
  }
  const leave = () => { if (outputPane) { outputPane.close(); outputPane = null; } jobParts = null; };
  const nav = UI.pages(parseRoute, leave, draw, 10);
  const refresh = nav.refresh, moved = () => nav.push(hashOf());

  // --- actions ---------------------------------------------------------------------------------------------------
  const KEEP = { cancel: "Keep it", rerun: "Don't rerun" };
  // Which actions apply to a job in its state (a button that cannot apply is not offered).
  const APPLIES = { cancel: (r) => ["queued", "running"].includes(r.state), rerun: (r) => ["completed", "failed", "cancelled"].includes(r.state) };
  async function act(action, verb, ids, describe) {
    if (!ids.length) return;
    const what = ids.length === 1 ? describe(ids[0]) : `${ids.length} jobs`;
    if (!(await UI.confirm(`${verb} ${what}?`, ids.map(describe), ids.length === 1 ? `${verb} job` : `${verb} ${ids.length} jobs`, KEEP[action]))) return;
    try {
      const result = await post("/api/actions", { action, jobs: ids });
      summarise(verb, result.results, describe);
      selected.clear();
    } catch (e) { UI.notice(e.message, "error"); }
    refresh();
  }
  // One notice for the whole selection, one for what was refused.
  function summarise(verb, results, describe) {
    const good = results.filter((r) => !r.error), bad = results.filter((r) => r.error);
    if (good.length === 1) UI.notice(`${describe(good[0].id)}: ${good[0].message}`);
    else if (good.length) UI.notice(`${verb}: ${good.length} jobs`);
    if (bad.length === 1) UI.notice(`${describe(bad[0].id)}: ${bad[0].error}`, "error");
    else if (bad.length) UI.notice(`${bad.length} jobs refused: ${describe(bad[0].id)}: ${bad[0].error} (and ${bad.length - 1} more)`, "error");
  }
  async function queueAction(action, reason) {
    const verb = action === "pause" ? "Pause" : "Resume";
    const lines = action === "pause" ? ["agents stop claiming; running jobs go on; submissions are still accepted"]
      : ["agents claim again"];
    if (!(await UI.confirm(`${verb} the queue?`, lines, verb))) return;
    try {
      const result = await post("/api/queue", { action, reason });
      UI.notice(result.message);
    } catch (e) { UI.notice(e.message, "error"); }
    refresh();
  }

  // --- the main page -----------------------------------------------------------------------------------------------
  // The inputs (search, a pause's reason) are built once and kept: a refresh never takes the focus or the text
  // being typed; what is around them is drawn again.
  function controls() {
    if (top) return top;
    const reason = el("input", { type: "text", placeholder: "why (optional)", size: 28, "data-testid": "pause-reason" });
    const search = el("input", { type: "search", placeholder: "search: name or id prefix", size: 30, value: view.q, "data-testid": "search" });
    search.addEventListener("change", () => { view.q = search.value; view.offset = 0; moved(); });
    top = {
      reason, search, pause: el("button", { "data-action": "pause", onclick: () => queueAction("pause", reason.value) }, "Pause queue"),
      state: el("div"), counts: el("span", { "data-testid": "counts" }), actions: el("div", { class: "actions" }), rest: el("div"),
    };
    top.node = el("div", {}, top.state, el("div", { class: "actions" }, top.reason, top.pause),
      el("div", { class: "filters" }, top.counts, search, top.actions), top.rest);
    return top;
  }

  // Each part of the board is drawn again only when what it shows changed (its rows only when their job did): an
  // answer that changes nothing changes nothing on the page.
  let board = null;
  function renderMain(b) {
    board = b;
    const all = [...b.queue.jobs, ...b.running, ...b.recent];
    const byId = new Map(all.map((r) => [r.id, r]));
    shorts = UI.shortIds(all.map((r) => r.id));
    const describe = (id) => { const r = byId.get(id); return r ? `${named(r)} (${r.state})` : short(id); };
    const ids = [...selected];
    const c = controls();
    if (!main().contains(c.node)) clear(main(), c.node);
    UI.patch(c.state, JSON.stringify(b.paused), () => b.paused
      ? el("div", { class: "banner paused", "data-testid": "paused" },
        el("strong", { text: "Queue paused" }), ` by ${b.paused.by || "?"} at ${b.paused.at || "?"}${b.paused.reason ? `: ${b.paused.reason}` : ""} (agents do not claim; submissions are accepted) `,
        el("button", { "data-action": "resume", onclick: () => queueAction("resume") }, "Resume"))
      : el("div", { class: "muted", "data-testid": "not-paused", text: "Queue is claiming." }));
    c.pause.disabled = Boolean(b.paused);
    const counts = ["queued", "running", "completed", "failed", "cancelled"].map((s) => `${b.counts[s] || 0} ${s}`).join(", ");
    if (c.counts.textContent !== counts) c.counts.textContent = counts;
    const can = (action) => ids.some((id) => !byId.has(id) || APPLIES[action](byId.get(id)));
    UI.patch(c.actions, JSON.stringify([ids, ids.map((id) => (byId.get(id) || {}).state)]), () => [el("span", { class: "muted", text: `${ids.length} selected` }),
      el("button", { disabled: !can("cancel"), "data-action": "cancel", onclick: () => act("cancel", "Cancel", ids, describe) }, "Cancel"),
      el("button", { disabled: !can("rerun"), "data-action": "rerun", onclick: () => act("rerun", "Rerun", ids, describe) }, "Rerun")]);
    if (!c.slots) {
      c.slots = { queue: el("div"), running: el("div"), agents: el("div"), schedules: el("div"), recent: el("div"), costs: el("div"), problems: el("div") };
      clear(c.rest, c.slots.queue, c.slots.running, el("div", { class: "grid2" }, c.slots.agents, c.slots.schedules), c.slots.recent, c.slots.costs, c.slots.problems);
    }
    const mine = (rows) => JSON.stringify([rows, rows.map((r) => [selected.has(r.id), short(r.id)])]);
    UI.patch(c.slots.queue, mine(b.queue.jobs) + JSON.stringify([b.queue.total, b.queue.offset]), () => queuePanel(b));
    UI.patch(c.slots.running, mine(b.running), () => runningPanel(b));
    UI.patch(c.slots.agents, JSON.stringify([b.agents, b.stale_agents]), () => agentsPanel(b));
    UI.patch(c.slots.schedules, JSON.stringify(b.schedules), () => schedulesPanel(b));
    UI.patch(c.slots.recent, mine(b.recent), () => recentPanel(b));
    UI.patch(c.slots.costs, JSON.stringify(b.costs), () => costPanel(b));
    UI.patch(c.slots.problems, JSON.stringify(b.problems), () => problemsPanel(b));
  }

  function box(row) {
    const input = el("input", { type: "checkbox", checked: selected.has(row.id), "aria-label": `select ${named(row)}` });
    input.addEventListener("change", () => { input.checked ? selected.add(row.id) : selected.delete(row.id); if (board) renderMain(board); });
    return el("td", {}, input);
  }
  // A table of jobs kept from one answer to the next: its rows keyed by job id, one built again only when its job
  // (or whether it is selected, or its short id) changed.
  const tables = new Map();
  function keyed(testid, headers, items, build, empty) {
    let t = tables.get(testid);
    if (!t) {
      t = el("table", { "data-testid": testid }, el("thead", {}, el("tr", {}, headers.map((h) => el("th", { text: h })))), el("tbody"));
      tables.set(testid, t);
    }
    UI.rows(t.tBodies[0], items, (r) => r.id, (r) => JSON.stringify([r, selected.has(r.id), short(r.id)]), build,
      el("tr", {}, el("td", { colspan: headers.length, class: "muted", text: empty })));
    return t;
  }
  const resources = (r) => [`${r.cores || 1} cores`, r.memory ? size(r.memory) : null, r.accelerators ? `${r.accelerators} acc.` : null,
    r.capabilities.length ? `caps ${r.capabilities.join(",")}` : null].filter(Boolean).join(", ");
  const table = (testid, headers, rows, empty) => el("table", { "data-testid": testid },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { text: h })))),
    el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: headers.length, class: "muted", text: empty }))));

  function queuePanel(b) {
    const q = b.queue;
    const from = q.total ? q.offset + 1 : 0, to = q.offset + q.jobs.length;
    const pager = el("div", { class: "pager" }, el("span", { "data-testid": "page-range", text: `${from}-${to} of ${q.total}` }),
      el("button", { disabled: q.offset === 0, onclick: () => { view.offset = Math.max(0, view.offset - view.limit); moved(); } }, "‹ earlier"),
      el("button", { disabled: to >= q.total, onclick: () => { view.offset += view.limit; moved(); } }, "later ›"));
    const row = (r) => el("tr", { class: "row", "data-job-id": r.id, "data-testid": "queue-row" },
      box(r), el("td", { text: String(r.place + 1) }), el("td", {}, jobLink(r)), el("td", { text: r.name || "-" }),
      el("td", { text: String(r.priority) }), el("td", { text: resources(r) }), el("td", { text: whenIso(r.submitted_at) }),
      el("td", { class: "command", title: r.command, text: r.command }),
      el("td", { class: "wrap" + (r.unschedulable ? " bad" : ""), "data-testid": "unschedulable",
        text: r.unschedulable ? `unschedulable: ${r.unschedulable}` : r.state !== "queued" ? `now ${r.state}` : "" }));
    return el("section", { class: "panel" }, el("div", { class: "actions" }, el("h2", { text: "Queue, in claim order (priority, then submission)" }), pager),
      keyed("queue", ["", "#", "id", "name", "priority", "needs", "submitted", "command", "why it waits"], q.jobs, row, "nothing queued"));
  }

  function runningPanel(b) {
    const row = (r) => el("tr", { class: "row" + (r.promise_passed_seconds ? " late" : ""), "data-job-id": r.id, "data-testid": "running-row" },
      box(r), el("td", {}, jobLink(r)), el("td", { text: r.name || "-" }), el("td", {}, stateCell(r)),
      el("td", { text: r.instance_ref || "-", title: r.owner || "" }), el("td", { text: whenIso(r.started_at) }),
      el("td", { class: r.promise_passed_seconds ? "bad" : "", "data-testid": "promise",
        text: r.promise_passed_seconds ? `${whenIso(r.lease_expires_at)} — passed ${Math.round(r.promise_passed_seconds)} s ago` : whenIso(r.lease_expires_at) }),
      el("td", { text: whenIso(r.pulse_at) }), el("td", { class: "command", title: r.command, text: r.command }));
    return el("section", { class: "panel" }, el("h2", { text: `Running (${b.running.length})` }),
      keyed("running", ["", "id", "name", "state", "agent", "started", "promise", "last pulse", "command"], b.running, row, "nothing running"));
  }

  function agentsPanel(b) {
    const offer = (a) => [`${a.cores} cores`, a.memory ? size(a.memory) : null, a.accelerators ? `${a.accelerators} accelerators` : null,
      (a.capabilities || []).length ? `capabilities ${a.capabilities.join(",")}` : null, `provider ${a.provider}${a.spot ? " (spot)" : ""}`,
      a.price_per_hour !== null && a.price_per_hour !== undefined ? `$${a.price_per_hour}/hour` : null].filter(Boolean).join(", ");
    const rows = b.agents.map((a) => el("tr", { "data-testid": "agent-row" }, el("td", { text: a.instance_ref }),
      el("td", { text: `${(a.running || []).length}/${a.slots}` }), el("td", { class: "wrap", text: offer(a) }),
      el("td", { text: whenIso(a.last_seen) + (a.stopping ? " (stopping)" : "") })));
    const stale = b.stale_agents.map((a) => el("tr", { class: "muted" }, el("td", { text: a.instance_ref }), el("td", { text: "-" }),
      el("td", { text: `silent for ${a.silent_for} s: not counted as live` }), el("td", { text: whenIso(a.last_seen) })));
    return el("section", { class: "panel" }, el("h2", { text: `Agents (${b.agents.length} live)` }),
      table("agents", ["instance", "slots used", "offers", "last seen"], [...rows, ...stale], "no agent has written a record"));
  }

  function schedulesPanel(b) {
    const rows = b.schedules.map((s) => el("tr", {}, el("td", { text: s.name }), el("td", { class: "mono", text: `${s.cron} (${s.tz || "UTC"})` }),
      el("td", { text: s.paused ? "paused" : whenIso(s.next_fire) }), el("td", { text: `${s.fired || 0} fired, ${s.skipped || 0} skipped` }),
      el("td", { class: "command", text: (s.spec || {}).command || "" })));
    return el("section", { class: "panel" }, el("h2", { text: "Schedules" }),
      table("schedules", ["name", "cron", "next fire", "so far", "command"], rows, "no schedules"));
  }

  function recentPanel(b) {
    const row = (r) => el("tr", { class: "row", "data-job-id": r.id, "data-testid": "recent-row" },
      box(r), el("td", {}, jobLink(r)), el("td", { text: r.name || "-" }), el("td", {}, stateCell(r)),
      el("td", { text: (r.outcome || "-") + (r.cancel_reason ? `: ${r.cancel_reason}` : ""), title: r.cancel_reason || "" }),
      el("td", { class: r.error ? "bad" : "", text: r.error ? r.error.class : "-", title: r.error ? r.error.message : "" }),
      el("td", { text: r.exit_code ?? (r.signal ? `signal ${r.signal}` : "-") }), el("td", { text: whenIso(r.finished_at) }),
      el("td", { class: "command", title: r.command, text: r.command }));
    return el("section", { class: "panel" }, el("h2", { text: "Recent terminal jobs" }),
      keyed("recent", ["", "id", "name", "state", "outcome", "error class", "exit", "finished", "command"], b.recent, row, "none yet"));
  }

  function costPanel(b) {
    if (!b.costs.length) return null;
    const rows = b.costs.map((c) => el("tr", {}, el("td", {}, jobLink(c)), el("td", { text: c.name || "-" }), el("td", { text: c.state }),
      el("td", { text: `$${c.cost_cap}` }), el("td", { text: c.cost_usd === null || c.cost_usd === undefined ? "-" : `$${c.cost_usd.toFixed(4)}` }),
      el("td", { class: c.share_of_cap > 1 ? "bad" : "", text: c.share_of_cap === null || c.share_of_cap === undefined ? "-" : `${Math.round(c.share_of_cap * 100)}%` }),
      el("td", { text: c.price_per_hour === null || c.price_per_hour === undefined ? "-" : `$${c.price_per_hour}/hour` }),
      el("td", { text: c.instance_ref || "-" })));
    return el("section", { class: "panel", "data-testid": "costs" }, el("h2", { text: "Cost (jobs with a cost cap)" }),
      table("cost", ["id", "name", "state", "cap", "spent", "of cap", "agent's price", "agent"], rows, ""));
  }

  function problemsPanel(b) {
    if (!b.problems.length) return null;
    return el("section", { class: "panel" }, el("h2", { text: "Problems" }), el("ul", {}, b.problems.map((p) => el("li", { class: "mono", text: p }))));
  }

  // --- one job: drawn once when opened, then patched part by part (the output pane is never drawn again) -------
  async function showJob(first, current) {
    const job = await get(`/api/job/${encodeURIComponent(route.job)}`);
    if (!current()) return;
    if (!jobParts || jobParts.id !== job.id || !main().contains(jobParts.node)) buildJob(job);
    const p = jobParts, describe = () => `${named(job)} (${job.state})`;
    UI.patch(p.title, named(job), () => el("h2", { "data-testid": "job-title", text: `job ${named(job)}` }));
    UI.patch(p.actions, job.state, () => el("div", { class: "actions" }, ["cancel", "rerun"].filter((a) => APPLIES[a](job)).map((a) =>
      el("button", { "data-action": a, onclick: () => act(a, a === "cancel" ? "Cancel" : "Rerun", [job.id], describe) }, a === "cancel" ? "Cancel" : "Rerun"))));
    const { pulse_at, lease_expires_at, ...steady } = job;
    UI.patch(p.facts, JSON.stringify([steady, pulse_at, lease_expires_at]), () => facts(job));
    UI.patch(p.attempts, JSON.stringify(job.attempts), () => attemptsTable(job));
    UI.patch(p.artifacts, JSON.stringify([job.manifest, job.manifest_problem]), () => artifacts(job));
  }

  function buildJob(job) {
    if (outputPane) outputPane.close();
    const part = () => el("div");
    const p = jobParts = { id: job.id, title: part(), actions: part(), facts: part(), attempts: part(), artifacts: part() };
    const id = encodeURIComponent(job.id);
    outputPane = LOG.pane([{ key: "output", label: "output", url: `/api/job/${id}/output`, download: `/api/job/${id}/output.txt` }],
      (attempt, first) => !first || attempt > 1, "output");
    p.node = el("div", { class: "job-page" },
      el("section", { class: "panel" }, el("div", { class: "job-head" }, p.title, p.actions), p.facts),
      el("div", { class: "grid2" },
        el("section", { class: "panel" }, el("h2", { text: "Attempts" }), p.attempts),
        el("section", { class: "panel" }, el("h2", { text: "Artifacts" }), p.artifacts)),
      el("section", { class: "panel" }, el("h2", { text: "Output (as stored: redacted by its agent)" }), outputPane.node),
      el("section", { class: "panel" }, el("details", { "data-testid": "spec-section" }, el("summary", { text: "Spec" }),
        el("pre", { class: "json", "data-testid": "spec", text: JSON.stringify(job.spec, null, 2) }))));
    clear(main(), p.node);
  }

  function facts(job) {
    return el("dl", { class: "facts" }, [
      ["id", el("span", { class: "mono", text: job.id })], ["name", UI.plain(job.name || "-")], ["state", stateCell(job)], ["outcome", job.outcome || "-"],
      ["error", job.error ? `${job.error.class}: ${job.error.message}` : null], ["exit code", job.exit_code ?? null],
      ["signal", job.signal || null], ["command", el("span", { class: "mono", text: UI.plain(job.command) })],
      ["submitted", whenIso(job.submitted_at)], ["claimed", whenIso(job.claimed_at)], ["started", whenIso(job.started_at)],
      ["finished", whenIso(job.finished_at)], ["agent", job.instance_ref || null], ["promise", job.lease_expires_at ? whenIso(job.lease_expires_at) : null],
      ["last pulse", job.pulse_at ? whenIso(job.pulse_at) : null], ["counters", `requeues ${job.requeues}, failed attempts ${job.failures}, hand-backs ${job.handbacks}`],
      ["cost", job.cost_usd !== null && job.cost_usd !== undefined ? `$${job.cost_usd}` : null],
      ["rerun of", job.rerun_of ? el("a", { href: `#/job/${job.rerun_of}`, class: "mono", "data-testid": "rerun-of", text: job.rerun_of }) : null],
      ["cancelled by", job.cancelled_by || null], ["cancel reason", job.cancel_reason || null]].filter(([, v]) => v !== null).map(([k, v]) => [el("dt", { text: k }), el("dd", {}, v)]));
  }
  function attemptsTable(job) {
    const a = job.attempts;
    const attempt = (title, x, result) => x ? el("tr", {}, el("td", { text: title }), el("td", { text: x.instance_ref || "-" }),
      el("td", { text: whenIso(x.started_at) }), el("td", { text: x.finished_at ? whenIso(x.finished_at) : "-" }),
      el("td", { class: "wrap", text: result ? `${result.outcome || ""}${result.error ? ` (${result.error.class}: ${result.error.message})` : ""}${result.exit_code !== null && result.exit_code !== undefined ? `, exit ${result.exit_code}` : ""}` : "-" })) : null;
    return el("table", { "data-testid": "attempts" }, el("thead", {}, el("tr", {}, ["attempt", "agent", "started", "ended", "result"].map((h) => el("th", { text: h })))),
      el("tbody", {}, attempt(`${a.current.attempt} (this one)`, a.current, a.current.result), attempt(`${a.current.attempt - 1} (before)`, a.previous, a.previous_result)));
  }
  function artifacts(job) {
    if (!job.manifest) return el("p", { class: "muted", text: job.manifest_problem || "no result manifest (yet): artifacts are listed once the job has ended" });
    const id = encodeURIComponent(job.id);
    return el("div", {}, el("table", { "data-testid": "artifacts" }, el("thead", {}, el("tr", {}, ["artifact", "size", "sha256"].map((h) => el("th", { text: h })))),
      el("tbody", {}, job.manifest.artifacts.map((x) => el("tr", {},
        el("td", {}, el("a", { href: `/api/job/${id}/artifact/${encodeURIComponent(x.name)}`, download: "", "data-testid": "artifact-link", text: UI.plain(x.name) })),
        el("td", { text: size(x.size) }), el("td", { class: "mono", text: x.sha256 }))))),
      (job.manifest.refused || []).map((x) => el("p", { class: "bad", text: `not uploaded: ${UI.plain(x.name)}: ${x.reason}` })));
  }

})();
