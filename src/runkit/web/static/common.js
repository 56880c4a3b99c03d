// What both dashboards share: building elements (text is only ever set as text, never as HTML: names, commands
// and output are other people's data), requests, the change stream, the confirmation dialog, times.
"use strict";
const UI = (() => {
  // Control characters (an ESC of a colour sequence, a bell) shown as visible symbols: output is data, never
  // terminal control; newlines and tabs stay.
  const visible = (text) => String(text ?? "").replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g,
    (c) => c === "\u007f" ? "\u2421" : String.fromCharCode(0x2400 + c.charCodeAt(0)));

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
    for (const child of children.flat()) {
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
      throw error;
    }
    return data;
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
  // makes it run once more afterwards).
  // Also every `every` seconds without a change: what a page shows can age without any write (a running job's
  // time, a promise that passes while its agent is silent, an agent's last sight).
  function live(onChange, onStatus, every = 5) {
    let running = false, again = false;
    async function refresh() {
      if (running) { again = true; return; }
      running = true;
      try {
        do { again = false; await onChange(); } while (again);
      } finally { running = false; }
    }
    const source = new EventSource("/api/events");
    source.addEventListener("change", (e) => {
      const data = JSON.parse(e.data);
      onStatus(data.error ? `reading failed: ${data.error}` : "live", !data.error);
      refresh();
    });
    source.addEventListener("error", () => onStatus("disconnected: reconnecting…", false));
    setInterval(() => { if (!document.hidden) refresh(); }, every * 1000);
    return { refresh, source };
  }

  // Navigation by the address's hash. draw(route, first, current) draws what the route shows (first: just navigated
  // to); current() says whether that drawing is still the one asked for: an answer to a request made before a
  // later navigation is dropped, never drawn. leave(route) closes what the page left holds open. A failure is shown
  // in place of the page when navigating, as a notice on a refresh. Returns {refresh, route()}.
  // One drawing at a time: a refresh asked for while one runs (the change stream's first event comes while the
  // page's first answer is on its way) runs once after it, never beside it on the server.
  function pages(parse, leave, draw) {
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
          else notice(e.message, "error");
        }
      } finally {
        if (mine === nav) running = false;
      }
      if (again && !running) { again = false; await show(false); }
    }
    async function go() {
      nav += 1;
      again = false;
      route = parse();
      for (const a of document.querySelectorAll("#tabs a")) a.classList.toggle("active", a.dataset.tab === route.tab);
      leave();
      clear(document.getElementById("main"));
      await show(true);
    }
    window.addEventListener("hashchange", go);
    document.addEventListener("DOMContentLoaded", () => { live(() => show(false), setStatus); go(); });
    return { refresh: () => show(false), route: () => route };
  }

  // A confirmation in the page (not window.confirm: it names every job the action will touch).
  function confirm(title, lines, verb) {
    return new Promise((resolve) => {
      const shown = lines.slice(0, 12);
      const more = lines.length - shown.length;
      const dialog = el("dialog", { class: "confirm", "data-testid": "confirm" },
        el("h3", { text: title }),
        el("ul", {}, shown.map((line) => el("li", { text: line })), more > 0 ? el("li", { text: `and ${more} more` }) : null),
        el("div", { class: "buttons" },
          el("button", { class: "secondary", "data-testid": "confirm-no", onclick: () => done(false) }, "Keep"),
          el("button", { class: "danger", "data-testid": "confirm-yes", onclick: () => done(true) }, verb)));
      function done(answer) { dialog.close(); dialog.remove(); resolve(answer); }
      dialog.addEventListener("cancel", () => done(false));
      document.body.append(dialog);
      dialog.showModal();
    });
  }

  // A job's output as the server streams it (`output` {attempt, text} events, then `end`), appended to `out` as
  // text; a header before each attempt when header(attempt, first) says so. Returns the EventSource.
  function tail(url, out, header) {
    out.textContent = "";
    let attempt = null;
    const source = new EventSource(url);
    source.addEventListener("output", (e) => {
      const piece = JSON.parse(e.data);
      if (piece.attempt !== attempt) {
        if (header(piece.attempt, attempt === null)) out.append(el("span", { class: "attempt", text: `==> attempt ${piece.attempt} <==\n` }));
        attempt = piece.attempt;
      }
      const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
      out.append(document.createTextNode(visible(piece.text)));
      if (atEnd) out.scrollTop = out.scrollHeight;
    });
    source.addEventListener("end", () => {
      source.close();
      out.dataset.ended = "1";
      if (!out.textContent) out.append(el("span", { class: "muted", text: "(no output)" }));
    });
    return source;
  }

  function notice(text, kind) {
    const area = document.getElementById("notices");
    const item = el("div", { class: `notice ${kind || ""}`, "data-testid": "notice" }, el("span", { text }),
      el("button", { class: "close", title: "dismiss", onclick: () => item.remove() }, "×"));
    area.append(item);
    if (kind !== "error") setTimeout(() => item.remove(), 8000);
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

  return { el, clear, get, post, live, pages, confirm, tail, notice, when, duration, iso, visible, setStatus };
})();
