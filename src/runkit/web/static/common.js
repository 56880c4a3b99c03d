// What both dashboards share: building elements (text is only ever set as text, never as HTML: names, commands
// and output are other people's data), requests, the change stream, the confirmation dialog, times.
"use strict";
const UI = (() => {
  // Control characters (an ESC of a colour sequence, a bell) shown as visible symbols: output is data, never
  // terminal control; newlines and tabs stay.
  const visible = (text) => String(text ?? "").replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g,
    (c) => c === "\u007f" ? "\u2421" : String.fromCharCode(0x2400 + c.charCodeAt(0)));

  // Names, groups and commands as the CLI prints them (runkit.core.printable): a character that is not printable
  // (a control, a bidi override or isolate, another format character, a separator other than the space) is
  // written as an escape, so a name cannot reorder or hide what the page shows around it.
  const NAMED = { "\n": "\\n", "\r": "\\r", "\t": "\\t", "\u001b": "\\e" };
  const UNPRINTABLE = /[\p{C}\p{Zl}\p{Zp}]|(?! )\p{Zs}/u;
  function plain(text) {
    text = String(text ?? "");
    if (!UNPRINTABLE.test(text)) return text;
    return [...text].map((ch) => {
      if (NAMED[ch]) return NAMED[ch];
      if (ch === "\\") return "\\\\";
      if (!UNPRINTABLE.test(ch)) return ch;
      const code = ch.codePointAt(0);
      return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : code < 0x10000
        ? `\\u${code.toString(16).padStart(4, "0")}` : `\\U${code.toString(16).padStart(8, "0")}`;
    }).join("");
  }

  function el(tag, attrs, ...children) {
    const node = tag.startsWith("svg:") ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
      : document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.setAttribute("class", value);
      else if (key === "text") node.textContent = visible(value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (key === "dataset") Object.assign(node.dataset, value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(visible(child)));
    }
    return node;
  }

  function clear(node, ...children) {
    node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
    return node;
  }

  async function request(method, path, body) {
    const options = { method, credentials: "same-origin", headers: {} };
    if (body !== undefined) {
      options.headers["content-type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    const response = await fetch(path, options);
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) {
      const error = new Error((data && data.error) || `${response.status} ${response.statusText}`);
      error.status = response.status;
      if (response.status === 403 && data && data.token) restarted();
      throw error;
    }
    return data;
  }

  // The server no longer knows this page's token (it was restarted and made a new one): said once, in one line,
  // and the page stops asking.
  let stale = false;
  function restarted() {
    if (stale) return;
    stale = true;
    setStatus("restarted: new URL", false);
    document.body.prepend(el("div", { class: "banner paused restarted", "data-testid": "restarted",
      text: "The dashboard server was restarted with a new token: open the URL it printed when it started again " +
        "(or start it with a token file to keep one URL)." }));
  }

  const get = (path, params) => {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) {
      if (Array.isArray(v)) v.forEach((x) => query.append(k, x));
      else if (v !== undefined && v !== null && v !== "") query.set(k, v);
    }
    const text = query.toString();
    return request("GET", text ? `${path}?${text}` : path);
  };
  const post = (path, body) => request("POST", path, body);

  // The change stream: `onChange` runs once per change, never twice at once (a change that comes while it runs
  // makes it run once more afterwards). The server says when something changed; without that the page asks again
  // only every `every` seconds (what a page shows ages without any write: a running job's time, an agent's last
  // sight), and not at all while hidden or disconnected. A lost stream is opened again; if the server answers
  // that the token is unknown, the page says so once (restarted()) and stops.
  function live(onChange, onStatus, every = 30) {
    let running = false, again = false, connected = false, source = null;
    let refresh = async function () {
      if (stale) return;
      if (running) { again = true; return; }
      running = true;
      try {
        do { again = false; await onChange(); } while (again);
      } finally { running = false; }
    };
    function connect() {
      source = new EventSource("/api/events");
      source.addEventListener("change", (e) => {
        const data = JSON.parse(e.data);
        connected = true;
        onStatus(data.error ? `reading failed: ${data.error}` : "live", !data.error);
        refresh();
      });
      source.addEventListener("error", () => {
        connected = false;
        onStatus("disconnected: reconnecting…", false);
        if (source.readyState === EventSource.CLOSED) setTimeout(check, 1000);
      });
    }
    async function check() {  // the stream was refused: a new token (restarted), or a server still starting
      try {
        const answer = await fetch("/api/ping", { credentials: "same-origin" });
        if (answer.status === 403) { restarted(); return; }
        if (answer.ok) { connect(); return; }
      } catch (e) { /* not listening yet */ }
      setTimeout(check, 2000);
    }
    // The slow timer: `every` seconds after the last refresh, or 400 times what that refresh took when it was
    // dear (a board of 10,000 jobs), so that asking again never costs the server more than a quarter percent.
    let last = performance.now(), took = 0;
    const timed = refresh;
    refresh = async () => {
      const began = performance.now();
      try { await timed(); } finally { last = performance.now(); took = last - began; }
    };
    setInterval(() => {
      if (document.hidden || !connected || stale) return;
      if (performance.now() - last >= Math.max(every * 1000, took * 400)) refresh();
    }, 1000);
    connect();
    return { refresh, source: () => source };
  }

  // Patching: `node`'s children are built again only when `key` (a string of what they show) differs from the
  // one drawn last, so a refresh that changes nothing touches nothing (focus, a selection, an open section stay).
  function patch(node, key, build) {
    if (node.drawnKey === key) return node;
    node.drawnKey = key;
    const focus = focusIn(node);
    clear(node, build());
    focus(node);
    return node;
  }

  // A part drawn again must not take the keyboard focus away: the control that had it (by its place among the
  // part's controls) gets it back in the new drawing.
  const CONTROLS = "a[href], button, input, select, textarea, [tabindex]";
  function focusIn(node) {
    const active = document.activeElement;
    if (!active || active === document.body || !node.contains(active)) return () => {};
    const index = [...node.querySelectorAll(CONTROLS)].indexOf(active);
    return (fresh) => {
      const again = fresh.querySelectorAll(CONTROLS)[index];
      if (again && document.activeElement !== again) again.focus({ preventScroll: true });
    };
  }

  // The rows of a table body keyed by id: a row whose signature is unchanged is the same element as before; a
  // changed one is built again; rows move only when the order changed.
  function rows(tbody, items, keyOf, sigOf, build, empty) {
    const old = new Map();
    for (const tr of tbody.children) if (tr.rowKey !== undefined) old.set(tr.rowKey, tr);
    const refocus = [];
    const wanted = items.map((item) => {
      const key = keyOf(item), sig = sigOf(item);
      let tr = old.get(key);
      if (!tr || tr.rowSig !== sig) {
        const focus = tr ? focusIn(tr) : null;
        tr = build(item); tr.rowKey = key; tr.rowSig = sig;
        if (focus) refocus.push([focus, tr]);
      }
      return tr;
    });
    try { place(tbody, wanted, empty); } finally { for (const [focus, tr] of refocus) focus(tr); }
  }
  function place(tbody, wanted, empty) {
    if (!wanted.length && empty) {
      const first = tbody.firstElementChild;
      if (!first || first.rowKey !== undefined || first.textContent !== empty.textContent) clear(tbody, empty);
      return;
    }
    let at = tbody.firstChild;
    for (const tr of wanted) {
      if (tr === at) at = at.nextSibling;
      else tbody.insertBefore(tr, at);
    }
    while (at) { const next = at.nextSibling; at.remove(); at = next; }
  }

  // Short forms of ids that tell them apart: the shortest tail (at least `least` characters) that differs between
  // every id given, as git shows a prefix long enough to be unique (time-ordered ids share their heads).
  function shortIds(ids, least = 6) {
    const plain = [...new Set(ids.filter(Boolean))].map((id) => [id, id.replace(/-/g, "")]);
    let n = least;
    const longest = Math.max(0, ...plain.map(([, p]) => p.length));
    while (n < longest && new Set(plain.map(([, p]) => p.slice(-n))).size < plain.length) n += 1;
    return new Map(plain.map(([id, p]) => [id, p.slice(-n)]));
  }

  // Navigation by the address's hash (its path the view, its query the view's filters). draw(route, first, current) draws what the route shows (first: just navigated
  // to); current() says whether that drawing is still the one asked for: an answer to a request made before a
  // later navigation is dropped, never drawn. leave(route) closes what the page left holds open. A failure is shown
  // in place of the page when navigating, as a notice on a refresh. Returns {refresh, route()}.
  // One drawing at a time: a refresh asked for while one runs (the change stream's first event comes while the
  // page's first answer is on its way) runs once after it, never beside it on the server.
  function pages(parse, leave, draw, every = 30) {
    let nav = 0, route = parse(), running = false, again = false;
    async function show(first) {
      if (running && !first) { again = true; return; }
      running = true;
      const mine = nav, current = () => mine === nav;
      try {
        await draw(route, first, current);
      } catch (e) {
        if (current()) {
          if (first) clear(document.getElementById("main"), el("div", { class: "banner", "data-testid": "error", text: e.message }));
          else if (!stale) notice(e.message, "error");
        }
      } finally {
        if (mine === nav) running = false;
      }
      if (again && !running) { again = false; await show(false); }
    }
    let shown = null;
    async function go() {
      if (location.href === shown) return;  // popstate and hashchange both come for one move back
      shown = location.href;
      nav += 1;
      again = false;
      route = parse();
      for (const a of document.querySelectorAll("#tabs a")) a.classList.toggle("active", a.dataset.tab === route.tab);
      leave();
      clear(document.getElementById("main"));
      await show(true);
    }
    window.addEventListener("hashchange", go);
    window.addEventListener("popstate", go);
    document.addEventListener("DOMContentLoaded", () => { live(() => show(false), setStatus, every); go(); });
    // A view's filters, search or page changed: the address says so (a reload or a shared link restores it, Back
    // returns to the view before), and the view is drawn again in place.
    function push(hash) {
      if (hash === location.hash) return show(false);
      history.pushState(null, "", hash);
      shown = location.href;
      return show(false);
    }
    return { refresh: () => show(false), route: () => route, push };
  }

  // A confirmation in the page (not window.confirm: it names every job the action will touch).
  function confirm(title, lines, verb, keep = "Keep") {
    return new Promise((resolve) => {
      const shown = lines.slice(0, 12);
      const more = lines.length - shown.length;
      const dialog = el("dialog", { class: "confirm", "data-testid": "confirm" },
        el("h3", { text: title }),
        el("ul", {}, shown.map((line) => el("li", { text: line })), more > 0 ? el("li", { text: `and ${more} more` }) : null),
        el("div", { class: "buttons" },
          el("button", { class: "secondary", "data-testid": "confirm-no", onclick: () => done(false) }, keep),
          el("button", { class: "danger", "data-testid": "confirm-yes", onclick: () => done(true) }, verb)));
      function done(answer) { dialog.close(); dialog.remove(); resolve(answer); }
      dialog.addEventListener("cancel", () => done(false));
      document.body.append(dialog);
      dialog.showModal();
    });
  }

  // Notices: one per distinct message (the same one again counts up instead of stacking), each dismissable, each
  // going away by itself (an error after longer).
  function notice(text, kind) {
    const area = document.getElementById("notices");
    const key = `${kind || ""}\u0000${text}`;
    let item = [...area.children].find((n) => n.noticeKey === key);
    if (item) {
      item.times += 1;
      item.querySelector(".times").textContent = ` ×${item.times}`;
      clearTimeout(item.timer);
    } else {
      item = el("div", { class: `notice ${kind || ""}`, "data-testid": "notice", role: kind === "error" ? "alert" : "status" },
        el("span", { text }), el("span", { class: "times muted" }),
        el("button", { class: "close", title: "dismiss", "aria-label": "dismiss", onclick: () => item.remove() }, "×"));
      item.noticeKey = key;
      item.times = 1;
      area.append(item);
      while (area.children.length > 5) area.firstElementChild.remove();
    }
    item.timer = setTimeout(() => item.remove(), kind === "error" ? 15000 : 6000);
  }

  const pad = (n) => String(n).padStart(2, "0");
  function when(ts) {
    if (ts === null || ts === undefined) return "-";
    const d = new Date(ts * 1000), now = new Date();
    const time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
    return d.toDateString() === now.toDateString() ? time : `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}`;
  }
  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "-";
    if (seconds < 1) return `${Math.round(seconds * 1000)}ms`;
    if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)}s`;
    const m = Math.floor(seconds / 60), s = Math.round(seconds % 60);
    if (m < 60) return `${m}m${s ? pad(s) + "s" : ""}`;
    const h = Math.floor(m / 60);
    return `${h}h${pad(m % 60)}m`;
  }
  const iso = (text) => (text ? Date.parse(text) / 1000 : null);

  function setStatus(text, ok) {
    const node = document.getElementById("live");
    node.textContent = text;
    node.className = ok ? "live ok" : "live bad";
  }

  return { el, clear, get, post, live, pages, confirm, notice, when, duration, iso, visible, setStatus, patch,
    rows, shortIds, restarted, plain };
})();
