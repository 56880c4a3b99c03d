// A job's log in both dashboards: a pane that tails live without losing its place (new pieces are appended, the
// pane is never rebuilt), one tab per stream (stdout, stderr), ANSI colours rendered as spans with classes (only
// SGR colours and bold/dim/italic/underline; every other escape sequence is dropped; the text is always inserted
// as text), search within the log, a download link to the raw log, and a follow toggle that pauses when the user
// scrolls up and comes back when they scroll to the end.
"use strict";
const LOG = (() => {
  const { el } = UI;

  // --- ANSI: a stateful reader per stream (a sequence cut between two pieces is whole in the next) -------------
  const SGR_NAMES = { 1: "bold", 2: "dim", 3: "italic", 4: "underline" };
  const SEQUENCE = /\x1b(?:\[([0-?]*)[ -/]*([@-~])|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])/g;
  // What may still become a sequence at the end of a piece: kept for the next one.
  const UNFINISHED = /\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?)?$/;

  function ansi() {
    let carry = "", style = { fg: null, bg: null, flags: new Set() };
    function apply(params) {
      const codes = params === "" ? [0] : params.split(";").map((p) => (p === "" ? 0 : Number(p)));
      for (let i = 0; i < codes.length; i++) {
        const c = codes[i];
        if (c === 0) style = { fg: null, bg: null, flags: new Set() };
        else if (SGR_NAMES[c]) style.flags.add(SGR_NAMES[c]);
        else if (c === 22) { style.flags.delete("bold"); style.flags.delete("dim"); }
        else if (c === 23) style.flags.delete("italic");
        else if (c === 24) style.flags.delete("underline");
        else if (c >= 30 && c <= 37) style.fg = c - 30;
        else if (c >= 90 && c <= 97) style.fg = c - 90 + 8;
        else if (c === 39) style.fg = null;
        else if (c >= 40 && c <= 47) style.bg = c - 40;
        else if (c >= 100 && c <= 107) style.bg = c - 100 + 8;
        else if (c === 49) style.bg = null;
        else if (c === 38 || c === 48) i += codes[i + 1] === 5 ? 2 : codes[i + 1] === 2 ? 4 : 1;  // 256/RGB: not shown
      }
    }
    const classes = () => [style.fg !== null ? `ansi-fg-${style.fg}` : null, style.bg !== null ? `ansi-bg-${style.bg}` : null,
      ...[...style.flags].map((f) => `ansi-${f}`)].filter(Boolean).join(" ");
    // The nodes of one piece: text nodes, or spans with classes around text nodes.
    return function read(text) {
      text = carry + text;
      const cut = text.match(UNFINISHED);
      carry = cut ? cut[0] : "";
      if (carry) text = text.slice(0, text.length - carry.length);
      const nodes = [];
      const push = (part) => {
        if (!part) return;
        const shown = UI.visible(part), names = classes();
        nodes.push(names ? el("span", { class: names }, document.createTextNode(shown)) : document.createTextNode(shown));
      };
      let last = 0;
      for (const m of text.matchAll(SEQUENCE)) {
        push(text.slice(last, m.index));
        if (m[2] === "m") apply(m[1]);
        last = m.index + m[0].length;
      }
      push(text.slice(last));
      return nodes;
    };
  }

  // --- search: matches highlighted with the CSS Custom Highlight API (the log's nodes are never touched) -------
  function find(pre, needle) {
    const ranges = [];
    if (!needle) return ranges;
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    const nodes = [];
    let whole = "";
    for (let n = walker.nextNode(); n; n = walker.nextNode()) { nodes.push([n, whole.length]); whole += n.data; }
    const hay = whole.toLowerCase(), want = needle.toLowerCase();
    const at = (offset) => {  // the text node holding `offset` of the whole text, by bisection
      let lo = 0, hi = nodes.length - 1;
      while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (nodes[mid][1] <= offset) lo = mid; else hi = mid - 1; }
      return nodes[lo];
    };
    for (let i = hay.indexOf(want); i >= 0 && ranges.length < 10000; i = hay.indexOf(want, i + want.length)) {
      const [a, aStart] = at(i), [b, bStart] = at(i + want.length - 1);
      const range = document.createRange();
      range.setStart(a, i - aStart);
      range.setEnd(b, i + want.length - bStart);
      ranges.push(range);
    }
    return ranges;
  }

  // A pane of streams: [{key, label, url (the live tail: server-sent events), download (the raw log)}].
  // header(attempt, first): whether to write a line before an attempt's output.
  function pane(streams, header, testid = "log") {
    let active = null, follow = true, matches = [], current = -1;
    const tabs = el("div", { class: "log-tabs", role: "tablist" });
    const body = el("div", { class: "log-body" });
    const search = el("input", { type: "search", placeholder: "search the log", size: 22, "data-testid": `${testid}-search` });
    const found = el("span", { class: "muted", "data-testid": `${testid}-matches` });
    const followBox = el("input", { type: "checkbox", checked: true, "data-testid": `${testid}-follow` });
    const download = el("a", { class: "button", "data-testid": `${testid}-download`, download: "" }, "download");
    const state = new Map();
    for (const s of streams) {
      const pre = el("pre", { class: "log hidden", "data-testid": s.key === streams[0].key ? testid : `${testid}-${s.key}`, tabindex: 0 });
      pre.addEventListener("scroll", () => {
        const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
        if (pre === state.get(active).pre && follow !== atEnd) { follow = atEnd; followBox.checked = atEnd; }
      });
      body.append(pre);
      state.set(s.key, { ...s, pre, source: null, tab: el("button", { class: "log-tab", role: "tab", "data-stream": s.key,
        "data-testid": `${testid}-tab-${s.key}`, onclick: () => show(s.key) }, s.label) });
      tabs.append(state.get(s.key).tab);
    }
    followBox.addEventListener("change", () => { follow = followBox.checked; if (follow) toEnd(); });
    search.addEventListener("input", () => mark(true));
    search.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); step(e.shiftKey ? -1 : 1); } });
    const toEnd = () => { const pre = state.get(active).pre; pre.scrollTop = pre.scrollHeight; };

    function open(s) {
      let attempt = null;
      const read = ansi();
      s.source = new EventSource(s.url);
      s.source.addEventListener("output", (e) => {
        const piece = JSON.parse(e.data);
        if (piece.attempt !== attempt) {
          if (header(piece.attempt, attempt === null)) s.pre.append(el("span", { class: "attempt", text: `==> attempt ${piece.attempt} <==\n` }));
          attempt = piece.attempt;
        }
        s.pre.append(...read(piece.text));
        if (s.key === active) { if (follow) toEnd(); if (search.value) mark(false); }
      });
      s.source.addEventListener("end", () => {
        s.source.close();
        s.pre.dataset.ended = "1";
        if (!s.pre.textContent) s.pre.append(el("span", { class: "muted", text: "(no output)" }));
      });
    }
    function show(key) {
      active = key;
      for (const s of state.values()) {
        s.pre.classList.toggle("hidden", s.key !== key);
        s.tab.classList.toggle("on", s.key === key);
        s.tab.setAttribute("aria-selected", String(s.key === key));
      }
      const s = state.get(key);
      download.setAttribute("href", s.download);
      if (!s.source) open(s);
      if (follow) toEnd();
      mark(true);
    }
    function mark(restart) {
      matches = find(state.get(active).pre, search.value);
      if (typeof Highlight === "function" && CSS.highlights) {
        CSS.highlights.set("log-search", new Highlight(...matches));
        if (current >= 0 && matches[current]) CSS.highlights.set("log-current", new Highlight(matches[current]));
        else CSS.highlights.delete("log-current");
      }
      if (restart) { current = -1; if (matches.length) step(1); }
      found.textContent = search.value ? `${matches.length ? current + 1 : 0} of ${matches.length}` : "";
    }
    function step(by) {
      if (!matches.length) return;
      current = (current + by + matches.length) % matches.length;
      if (typeof Highlight === "function" && CSS.highlights) CSS.highlights.set("log-current", new Highlight(matches[current]));
      found.textContent = `${current + 1} of ${matches.length}`;
      const pre = state.get(active).pre, box = matches[current].getBoundingClientRect(), frame = pre.getBoundingClientRect();
      follow = false; followBox.checked = false;
      pre.scrollTop += box.top - frame.top - pre.clientHeight / 2;
    }
    const node = el("div", { class: "log-pane", "data-testid": `${testid}-pane` },
      el("div", { class: "log-bar" }, streams.length > 1 ? tabs : null, search,
        el("button", { title: "previous match (Shift+Enter)", onclick: () => step(-1) }, "‹"),
        el("button", { title: "next match (Enter)", onclick: () => step(1) }, "›"), found,
        el("label", { class: "muted follow" }, followBox, " follow"), download),
      body);
    show(streams[0].key);
    return { node, close: () => { for (const s of state.values()) if (s.source) s.source.close(); } };
  }

  return { ansi, pane, find };
})();
