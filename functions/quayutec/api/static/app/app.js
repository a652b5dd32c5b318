/* The room page (design §9). Plain DOM code, no library, no build step.
 *
 * - Every URL is relative to the page (on AWS it lives under /{stage}/app/, the API under /{stage}/).
 * - The bearer token is kept in sessionStorage (this tab only), sent as the Authorization header,
 *   never put in a URL; signing out removes it.
 * - Untrusted text (messages, names, memory, tasks, errors) is only ever set with textContent.
 * - The room is read once when opened (each listing; the transcript with the API's page cursor),
 *   then polled with one request, GET /rooms/{room}/changes since a cursor (design §9): new
 *   messages are appended, a list whose items changed is read again. The poll backs off while
 *   nothing changes (2 s after a change, doubling to 30 s) and stops while the tab is hidden,
 *   resuming at once when it is shown.
 */
"use strict";

(function () {
  const TOKEN_KEY = "quayutec.token";
  const API = new URL("../", document.baseURI);
  const FAST_MS = 2000; // the poll's delay after a change...
  const QUIET_MS = 30000; // ...doubling while nothing changes, up to this
  const MORE_CALLS = 20; // changes answers read in one poll while the API says `more`
  const PAGE = 100;

  const $ = (id) => document.getElementById(id);
  const state = {
    token: null, rooms: [], room: null, info: null, seen: new Set(), cursor: null, changes: null,
    timer: null, delay: FAST_MS, busy: false, approvals: [], sig: {}, openRun: null, postKey: null,
    mine: new Map(), stoppedChains: new Set(), me: null, more: {}, texts: new Map(), notWoken: new Map(),
    mention: { open: false, items: [], active: 0, start: 0 },
  };

  // ------------------------------------------------------------------ DOM helpers (text only)
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = String(v);
      else if (k === "on") for (const [ev, fn] of Object.entries(v)) node.addEventListener(ev, fn);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }
  // Icons as inline SVG (every browser draws them; a glyph such as U+23F8 is an empty box in a
  // font without it): pause (held), cross (denied, expired), check (approved), square (stopped),
  // dots (being decided). Decorative: the words next to them say the same.
  const ICONS = {
    pause: [["rect", { x: 3, y: 2, width: 3, height: 12 }], ["rect", { x: 10, y: 2, width: 3, height: 12 }]],
    cross: [["path", { d: "M3 3 L13 13 M13 3 L3 13", fill: "none", stroke: "currentColor", "stroke-width": 2.5 }]],
    check: [["path", { d: "M2 8.5 L6 12.5 L14 3.5", fill: "none", stroke: "currentColor", "stroke-width": 2.5 }]],
    square: [["rect", { x: 3, y: 3, width: 10, height: 10 }]],
    dots: [["circle", { cx: 3, cy: 8, r: 1.6 }], ["circle", { cx: 8, cy: 8, r: 1.6 }], ["circle", { cx: 13, cy: 8, r: 1.6 }]],
  };
  function icon(name) {
    const NS = document.getElementById("svg-ns").namespaceURI;  // SVG's (index.html's empty <svg>)
    const svg = document.createElementNS(NS, "svg");
    for (const [k, v] of Object.entries({ viewBox: "0 0 16 16", width: "1em", height: "1em", class: "icon",
                                          fill: "currentColor", "aria-hidden": "true", focusable: "false" })) svg.setAttribute(k, v);
    for (const [tag, attrs] of ICONS[name]) {
      const part = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) part.setAttribute(k, String(v));
      svg.append(part);
    }
    return svg;
  }
  const clear = (node) => { while (node.firstChild) node.removeChild(node.firstChild); };
  const enc = encodeURIComponent;
  const badge = (word) => el("span", { class: "badge " + String(word).replace(/[^a-z_]/g, ""), text: word });
  // Who wrote or did something, always with their company: a person's id is unique only within
// its company (bolt's "ann" is not acme's "ann"; docs/design.md §5).
function whoLabel(a) {
  a = a || {};
  if (a.kind === "system") return "quayutec";
  const company = a.company ? " (" + a.company + ")" : "";
  return (a.kind === "agent" ? "agent " : "") + (a.id || "?") + company;
}

function when(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    return isNaN(d) ? String(iso) : d.toLocaleString([], { dateStyle: "short", timeStyle: "medium" });
  }
  function newKey() {
    if (window.crypto && crypto.randomUUID) return "page-" + crypto.randomUUID();
    const a = new Uint8Array(16); crypto.getRandomValues(a);
    return "page-" + Array.from(a, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  // ------------------------------------------------------------------ the API
  class ApiError extends Error {
    constructor(status, code, message) { super(message); this.status = status; this.code = code; }
  }

  function plainWords(status, body, retryAfter) {
    const said = body && typeof body.message === "string" ? body.message : "";
    const fields = body && Array.isArray(body.fields) ? body.fields : [];
    const detail = said ? " (" + said + ")" : "";
    if (status === 401) return "Your token was not accepted: it is unknown, revoked or mistyped. Sign in again.";
    if (status === 403) return "You are not allowed to do that" + detail + ".";
    if (status === 404) return "Not found: it does not exist, or you are not a member of that room" + detail + ".";
    if (status === 409) return "That changed meanwhile" + detail + ". The page shows the current state.";
    if (status === 413) return "That is too long" + detail + ".";
    if (status === 415) return "The page sent something the service does not take" + detail + ".";
    if (status === 422 && fields.length) {
      return "Please check: " + fields.map((f) => (f.field || "input") + ": " + (f.problem || "not valid")).join("; ") + ".";
    }
    if (status === 422 || status === 400) return "The service could not use that" + detail + ".";
    if (status === 429) return "Too many requests: wait a moment and try again.";
    if (status === 503) return "The service is busy; try again" + (retryAfter ? " in " + retryAfter + " s" : " in a moment") + ".";
    if (status >= 500) return "The service had a problem (" + status + "). Try again in a moment.";
    return "The request failed (" + status + ")" + detail + ".";
  }

  async function api(method, path, body, key) {
    const headers = { Accept: "application/json", Authorization: "Bearer " + state.token };
    const init = { method, headers, cache: "no-store", credentials: "omit", redirect: "error" };
    if (body !== undefined) { headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
    if (method === "POST") headers["Idempotency-Key"] = key || newKey();
    let resp;
    try {
      resp = await fetch(new URL(path, API), init);
    } catch (e) {
      throw new ApiError(0, "network", "The service could not be reached. Check the connection; the page keeps trying.");
    }
    let data = null;
    try { data = await resp.json(); } catch (e) { data = null; }
    if (!resp.ok) {
      throw new ApiError(resp.status, data && data.error, plainWords(resp.status, data, resp.headers.get("Retry-After")));
    }
    return data;
  }

  function showError(err) {
    const box = $("error");
    if (!err) { box.hidden = true; box.textContent = ""; return; }
    box.textContent = err instanceof ApiError ? err.message : "Something went wrong on this page: " + String(err && err.message || err);
    box.hidden = false;
    box.dataset.poll = ""; // a poll's own error is marked by refresh(); a later good poll clears only that
    if (err instanceof ApiError && err.status === 401 && state.token) signOut(true);
  }
  const status = (text) => { $("status").textContent = text; };

  async function guarded(fn) {
    try { await fn(); showError(null); return true; } catch (e) { showError(e); return false; }
  }

  // ------------------------------------------------------------------ sign in / out
  async function signIn(token) {
    state.token = token;
    try {
      const data = await api("GET", "rooms");
      state.me = await api("GET", "me");  // who the token is: the actions offered are its person's
      sessionStorage.setItem(TOKEN_KEY, token);
      showError(null);
      $("sign-in").hidden = true;
      $("workspace").hidden = false;
      $("sign-out").hidden = false;
      $("who").hidden = false;
      $("who").textContent = "Signed in as " + state.me.member + (state.me.company ? " of " + state.me.company : " (operator)")
        + " (the token stays in this tab).";
      await showRooms(data.rooms || [], data.next_cursor);
      await loadInvitations();
      $("room-list").querySelector("button") ? $("room-list").querySelector("button").focus() : $("main").focus();
    } catch (e) {
      state.token = null;
      sessionStorage.removeItem(TOKEN_KEY);
      showError(e);
      $("token").focus();
    }
  }

  function signOut(expired) {
    stopPolling();
    state.me = null;
    sessionStorage.removeItem(TOKEN_KEY);
    Object.assign(state, { token: null, rooms: [], room: null, info: null, seen: new Set(), cursor: null, changes: null,
                           approvals: [], sig: {}, openRun: null, postKey: null, mine: new Map(),
                           stoppedChains: new Set(), more: {}, texts: new Map(), notWoken: new Map() });
    clear($("room-list")); clear($("transcript")); clear($("invitation-list"));
    $("invitations").hidden = true;
    $("workspace").hidden = true; $("room").hidden = true;
    $("sign-out").hidden = true; $("who").hidden = true;
    $("sign-in").hidden = false;
    $("token").value = "";
    status(expired ? "" : "Signed out: the token is removed from this tab.");
    $("token").focus();
  }

  // ------------------------------------------------------------------ rooms
  async function showRooms(ids, cursor) {
    state.rooms = ids;
    moreButton("room-list", cursor, async () => {
      const page = await api("GET", "rooms?cursor=" + enc(cursor));
      await showRooms(ids.concat(page.rooms || []), page.next_cursor);
    });
    const list = $("room-list");
    clear(list);
    $("rooms-empty").hidden = ids.length > 0;
    const names = await Promise.all(ids.map((id) =>
      api("GET", "rooms/" + enc(id)).then((r) => r.name || "", () => "")));
    ids.forEach((id, i) => {
      const label = names[i] ? names[i] + " (" + id + ")" : id;
      list.append(el("li", {}, el("button", { type: "button", "data-room": id, text: label,
                                                on: { click: () => openRoom(id) } })));
    });
  }

  // Rooms by consent (design §5): the caller's company's pending invitations (GET /invitations),
  // each with Accept (it becomes a member: the room opens) and Decline; Leave room in a room.
  async function loadInvitations() {
    const found = (await api("GET", "invitations")).invitations || [];
    const list = $("invitation-list");
    clear(list);
    $("invitations").hidden = found.length === 0;
    for (const inv of found) {
      const label = (inv.room_name ? "Room " + inv.room_name + " (" + inv.room_id + ")" : "Room " + inv.room_id)
        + " · invited by " + inv.invited_by;
      list.append(el("li", { "data-room": inv.room_id }, el("span", { text: label }), " ",
        el("button", { type: "button", text: "Accept", "aria-label": "Accept the invitation to room " + inv.room_id,
                       on: { click: (ev) => answerInvitation(ev.currentTarget, inv.room_id, "accept") } }), " ",
        el("button", { type: "button", class: "secondary", text: "Decline",
                       "aria-label": "Decline the invitation to room " + inv.room_id,
                       on: { click: (ev) => answerInvitation(ev.currentTarget, inv.room_id, "decline") } })));
    }
  }

  async function reloadRooms() {
    const data = await api("GET", "rooms");
    await showRooms(data.rooms || [], data.next_cursor);
    await loadInvitations();
  }

  async function answerInvitation(button, room, verb) {
    button.disabled = true;
    const ok = await guarded(async () => {
      await api("POST", "rooms/" + enc(room) + "/invitations/" + verb);
      await reloadRooms();
    });
    if (!ok) { button.disabled = false; return; }
    status(verb === "accept" ? "Invitation accepted: your company is a member of room " + room + "."
                             : "Invitation declined: room " + room + " stays unseen.");
    if (verb === "accept") await openRoom(room);
  }

  async function leaveRoom() {
    const room = state.room;
    if (!room) return;
    const button = $("leave-room");
    button.disabled = true;
    const ok = await guarded(async () => {
      await api("POST", "rooms/" + enc(room) + "/leave");
      stopPolling();
      Object.assign(state, { room: null, info: null });
      $("room").hidden = true;
      await reloadRooms();
    });
    button.disabled = false;
    if (ok) { status("Your company left room " + room + "."); $("main").focus(); }
  }

  async function openRoom(id) {
    stopPolling();
    Object.assign(state, { room: id, info: null, seen: new Set(), cursor: null, changes: null, approvals: [], sig: {}, openRun: null,
                           mine: new Map(), stoppedChains: new Set(), more: {}, texts: new Map(), notWoken: new Map() });
    showBusy([]);
    for (const b of $("room-list").querySelectorAll("button")) b.setAttribute("aria-current", String(b.dataset.room === id));
    clear($("transcript")); $("run-detail").hidden = true;
    $("room").hidden = false;
    const ok = await guarded(async () => {
      const info = await api("GET", "rooms/" + enc(id));
      if (state.room !== id) return;
      state.info = info;
      $("room-title").textContent = info.name ? info.name : "Room " + info.id;
      const agents = (info.agents || []).map((a) => a.id + " (" + a.company + ")").join(", ") || "none yet";
      const invited = (info.invited || []).length ? " · invited: " + info.invited.join(", ") : "";
      $("room-meta").textContent = "Room " + info.id + " · companies: " + (info.members || []).join(", ") + invited
        + " · agents: " + agents;
      const to = $("task-to");
      clear(to);
      for (const a of info.agents || []) to.append(el("option", { value: a.id, text: a.id + " (" + a.company + ")" }));
      showBusy(info.busy_agents || []);
      await startChanges(id); // before the listings: what changes while they are read comes in the first poll
    });
    if (!ok) return;
    await refresh(true);
    startPolling();
  }

  // ------------------------------------------------------------------ polling
  // One timer at most. A poll is one GET /rooms/{room}/changes (more only while the API says
  // `more`, and a list's reload when its items changed); its delay doubles while nothing changes.
  function startPolling() { state.delay = FAST_MS; schedule(); }
  function stopPolling() { if (state.timer) clearTimeout(state.timer); state.timer = null; }
  function schedule() {
    stopPolling();
    if (state.room && state.token && !document.hidden) state.timer = setTimeout(tick, state.delay);
  }
  async function tick() {
    state.timer = null;
    if (!state.room || !state.token || document.hidden) return;
    const active = await refresh(false);
    state.delay = active ? FAST_MS : Math.min(state.delay * 2, QUIET_MS);
    schedule();
  }
  // The tab hidden: no polling; shown again: a poll at once, then fast until it is quiet again.
  function visibility() {
    if (document.hidden) { stopPolling(); return; }
    if (state.room && state.token) { stopPolling(); state.delay = FAST_MS; tick(); }
  }
  // After the person's own action: poll soon again (a reply may follow)
  function nudge() { state.delay = FAST_MS; schedule(); }
  // After a click that makes the server post a notice: a whole refresh, once a poll under way is done
  async function refreshNow() {
    for (let i = 0; state.busy && i < 100; i++) await new Promise((r) => setTimeout(r, 100));
    await refresh(true);
    nudge();
  }

  async function startChanges(room) {
    const c = await api("GET", "rooms/" + enc(room) + "/changes");
    if (state.room === room) { state.changes = c.cursor; showBusy(c.busy_agents || []); }
  }

  // all: read every listing (opening a room, after an action); else poll the changes. Returns
  // whether anything changed.
  async function refresh(all) {
    if (state.busy) return false;
    state.busy = true;
    const room = state.room;
    let active = false;
    try {
      if (!state.changes) { await startChanges(room); all = true; } // the first cursor failed: read everything after it
      if (all) {
        await pollMessages(room);
        await loadApprovals(room);
        await loadMemory(room);
        await loadFiles(room);
        await loadRuns(room);
        await loadTasks(room);
        await loadAgents(room);
      } else {
        active = await pollChanges(room);
      }
      if (state.room === room) {
        const every = (active || all ? FAST_MS : Math.min(state.delay * 2, QUIET_MS)) / 1000;
        status("Up to date at " + new Date().toLocaleTimeString() + " (checks again in " + every + " s).");
        if (!$("error").hidden && $("error").dataset.poll === "1") showError(null);
      }
    } catch (e) {
      showError(e);
      $("error").dataset.poll = "1";
    } finally {
      state.busy = false;
    }
    return active;
  }

  // Apply what changed: new messages appended; a list with changed items read again (runs also
  // move the agents' spend and may have written memory).
  async function pollChanges(room) {
    const touched = new Set();
    let any = false;
    for (let calls = 0; calls < MORE_CALLS; calls++) {
      const c = await api("GET", "rooms/" + enc(room) + "/changes?since=" + encodeURIComponent(state.changes));
      if (state.room !== room) return false;
      state.changes = c.cursor;
      if ((c.messages || []).length) { addMessages(c.messages); any = true; }
      // a refused wake is also a line of the runs view's "did not wake" list: read it again
      if ((c.not_woken || []).length) { for (const n of c.not_woken) noteNotWoken(n.message_id, [n]); touched.add("runs"); any = true; }
      if ((c.messages || []).some((m) => (m.not_woken || []).length)) touched.add("runs");
      if (!c.more) showBusy(c.busy_agents || []);
      for (const kind of ["approvals", "tasks", "runs", "files"]) if ((c[kind] || []).length) { touched.add(kind); any = true; }
      if ((c.deleted_files || []).length) { touched.add("files"); any = true; } // a file deleted since
      if (!c.more) break;
    }
    if (touched.has("approvals")) await loadApprovals(room);
    if (touched.has("tasks")) await loadTasks(room);
    if (touched.has("runs")) { await loadRuns(room); await loadMemory(room); await loadAgents(room); }
    if (touched.has("files")) await loadFiles(room);
    return any;
  }

  // ------------------------------------------------------------------ transcript
  async function pollMessages(room) {
    for (let pages = 0; pages < 20; pages++) {
      const q = new URLSearchParams({ limit: String(PAGE) });
      if (state.cursor) q.set("cursor", state.cursor);
      const page = await api("GET", "rooms/" + enc(room) + "/messages?" + q.toString());
      if (state.room !== room) return;
      addMessages(page.messages || []);
      if (!page.next_cursor) return; // keep the cursor of this (last) page: the next poll reads on from it
      state.cursor = page.next_cursor;
    }
  }

  // Append messages not shown yet (the listing and the changes poll may both bring one)
  function addMessages(messages) {
    const list = $("transcript");
    const atEnd = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
    let added = false;
    for (const m of messages) {
      if (state.seen.has(m.id)) continue;
      state.seen.add(m.id);
      state.texts.set(m.id, String(m.text || ""));
      if (m.kind === "notice" && m.chain_id && String(m.id).startsWith("notice-chain-stop-")) state.stoppedChains.add(m.chain_id);
      list.append(messageItem(m));
      if ((m.not_woken || []).length || state.notWoken.has(m.id)) noteNotWoken(m.id, m.not_woken);
      added = true;
    }
    if (added) { paintOutcomes(); if (atEnd) list.scrollTop = list.scrollHeight; }
  }

  function messageItem(m) {
    const who = whoLabel(m.author);
    const body = el("div", { class: "body" });
    const plain = [];
    const flush = () => { if (plain.length) { body.append(el("p", { class: "text", text: plain.join("\n") })); plain.length = 0; } };
    // The service's notes close a reply: its last lines after a blank one. Only those are shown as
    // notes; the same words anywhere else (a person's message, mid-reply) stay plain text.
    const lines = String(m.text || "").split("\n");
    // (The service writes U+23F8 before a held action's note and U+2717 before a denied one.)
    const isNote = (line) => /^(\u23f8 held for approval|\u2717 denied|\(reply truncated)/.test(line);
    let first = lines.length;
    if (m.kind === "reply") {
      while (first > 0 && isNote(lines[first - 1])) first--;
      if (first === lines.length || first === 0 || lines[first - 1] !== "") first = lines.length;
    }
    lines.forEach((line, i) => {
      if (i < first) plain.push(line);
      else {
        flush();
        const held = /^\u23f8 /.test(line), denied = /^\u2717 /.test(line);
        const mark = held ? icon("pause") : denied ? icon("cross") : null;
        body.append(el("p", { class: "note" + (held ? " held" : denied ? " denied" : "") },
          mark, mark ? " " : null, mark ? line.slice(2) : line));
      }
    });
    flush();
    const item = el("li", { class: "msg " + (m.kind || "message"), "data-id": m.id },
      el("div", { class: "meta" }, el("span", { class: "author", text: who }), " · ", when(m.created_at),
         m.to && m.to.length ? " · to " + m.to.join(", ") : "",
         // A company-only notice (design §12.5): the API shows it only to that company's people
         m.visible_to ? " · only " + m.visible_to + " sees this" : "",
         runLink(m)),
      body);
    if (m.run_id) {
      const outcomes = el("div", { class: "outcomes", "data-run": m.run_id });
      item.append(outcomes);
    }
    item.append(el("div", { class: "not-woken-notes" }));
    const ask = askAgainButton(m);
    if (ask) item.append(el("div", { class: "actions-row" }, ask));
    return item;
  }

  // The company whose run a reply or notice names, when the page can tell (design §9): a reply's
  // agent's, a company-only notice's, a failed run's notice's agent's.
  function runCompany(m) {
    if (m.kind === "reply" && m.author && m.author.company) return m.author.company;
    if (m.visible_to) return m.visible_to;
    const agent = m.ask_again && m.ask_again.agent;
    const found = agent && ((state.info && state.info.agents) || []).find((a) => a.id === agent);
    return found ? found.company : null;
  }

  // A reply or notice links to its run (the run view, as the runs list's Timeline opens it) for
  // people whose company may see that run: its agent's company (other companies' runs are not
  // theirs to open, design §14).
  function runLink(m) {
    const mine = state.me && state.me.company;
    if (!m.run_id || !mine || runCompany(m) !== mine) return null;
    return el("button", { type: "button", class: "run-link", text: "run " + m.run_id, "data-run": m.run_id,
                          "aria-label": "Open run " + m.run_id, on: { click: () => showRun(m.run_id, true) } });
  }

  // Why an agent a message addressed did not wake (design §9), in a member's words.
  const NOT_WOKEN_WORDS = {
    paused: "paused",
    deleted: "deleted",
    wake_from: "its wake_from setting does not admit the writer",
    chain_full: "past the chain's bound",
    chain_stopped: "its chain was stopped",
  };
  const agentName = (id) => String(id).includes(".") ? String(id).slice(String(id).indexOf(".") + 1) : String(id);

  // Add refused wakes of a message (from the listing or the changes poll, each once) under it.
  function noteNotWoken(messageId, list) {
    const known = state.notWoken.get(messageId) || [];
    for (const n of list || []) if (!known.some((k) => k.agent === n.agent)) known.push({ agent: n.agent, why: n.why });
    state.notWoken.set(messageId, known);
    const item = $("transcript").querySelector("li[data-id='" + CSS.escape(messageId) + "']");
    const box = item && item.querySelector(".not-woken-notes");
    if (!box) return;
    clear(box);
    for (const n of known) {
      box.append(el("p", { class: "note not-woken", "data-agent": n.agent, "data-why": n.why,
                           text: "@" + agentName(n.agent) + " did not wake: " + (NOT_WOKEN_WORDS[n.why] || n.why) }));
    }
  }

  // "Ask again" on a failed run's notice (design §9), for people who may post in the room: a new
  // message as the signed-in person, re-mentioning the agent and quoting what it was asked.
  function askAgainButton(m) {
    const again = m.ask_again;
    const mine = state.me && state.me.company;
    if (!again || !again.agent || !mine || !state.info || !(state.info.members || []).includes(mine)) return null;
    return el("button", { type: "button", class: "secondary ask-again", text: "Ask again",
                          "aria-label": "Ask " + again.agent + " again", on: { click: (e) => askAgain(e.currentTarget, again) } });
  }

  async function askAgain(button, again) {
    const room = state.room;
    const asked = again.message_id ? state.texts.get(again.message_id) : null;
    // the quote mentions no one: only the agent asked again wakes
    const quote = asked ? "\n" + asked.split("\n").map((l) => "> " + l.replace(/@(?=[A-Za-z0-9])/g, "")).join("\n") : "";
    const text = "@" + agentName(again.agent) + " asking again:" + quote;
    button.disabled = true;
    const ok = await guarded(async () => {
      await api("POST", "rooms/" + enc(room) + "/messages", { text }, newKey()); // a key per click
    });
    button.disabled = false;
    if (ok && state.room === room) {
      status("Asked " + again.agent + " again.");
      await refresh(false);
      nudge();
    }
  }

  // The agents with a run in flight (design §9): a line under the transcript, for every member.
  function showBusy(agents) {
    const line = $("busy-agents");
    const text = (agents || []).map((a) => a + " is working\u2026").join(" · ");
    if (line.textContent !== text) line.textContent = text;
    line.hidden = !text;
  }

  function paintOutcomes() {
    const byRun = new Map();
    for (const a of state.approvals) {
      if (!byRun.has(a.run_id)) byRun.set(a.run_id, []);
      byRun.get(a.run_id).push(a);
    }
    for (const box of $("transcript").querySelectorAll(".outcomes")) {
      const list = byRun.get(box.dataset.run) || [];
      const lines = list.filter((a) => a.status !== "pending").map((a) => {
        const [mark, verb] = { approved: ["check", "approved"], rejected: ["cross", "denied"],
                               expired: ["cross", "expired (no answer in time)"], deciding: ["dots", "being decided"],
                               stopped: ["square", "stopped, not written"] }[a.status] || [null, a.status];
        return [mark, verb + (a.decided_by ? " by " + a.decided_by : "") + ": " + a.summary];
      });
      const text = lines.map(([, line]) => line).join("\n");
      if (box.dataset.text === text) continue;
      box.dataset.text = text;
      clear(box);
      for (const [mark, line] of lines) box.append(el("p", { class: "note outcome" }, mark ? icon(mark) : null, mark ? " " : null, line));
    }
  }

  // ------------------------------------------------------------------ posting, @mentions
  async function post(ev) {
    ev.preventDefault();
    const box = $("post-text");
    const text = box.value;
    if (!text.trim() || !state.room) return;
    state.postKey = state.postKey || newKey(); // the same key if this very message is sent again
    const button = $("post-form").querySelector("button[type=submit]");
    button.disabled = true;
    const ok = await guarded(async () => {
      await api("POST", "rooms/" + enc(state.room) + "/messages", { text }, state.postKey);
    });
    button.disabled = false;
    if (ok) {
      state.postKey = null;
      box.value = "";
      closeMentions();
      status("Posted.");
      await refresh(false);
      nudge();
    }
    box.focus();
  }


  function updateMentions() {
    const box = $("post-text");
    const before = box.value.slice(0, box.selectionStart);
    const m = /(^|\s)@([A-Za-z0-9_.:-]*)$/.exec(before);
    if (!m) return closeMentions();
    const part = m[2].toLowerCase();
    const agents = (state.info && state.info.agents) || [];
    const items = agents.filter((a) => (a.name || a.id).toLowerCase().startsWith(part) || a.id.toLowerCase().startsWith(part))
      .map((a) => a.name || a.id);
    if (!items.length) return closeMentions();
    Object.assign(state.mention, { open: true, items, active: Math.min(state.mention.active, items.length - 1),
                                   start: before.length - m[2].length - 1 });
    drawMentions();
  }

  function drawMentions() {
    const list = $("mention-list");
    clear(list);
    state.mention.items.forEach((id, i) => {
      list.append(el("li", { id: "mention-" + i, role: "option", "aria-selected": String(i === state.mention.active),
                             text: "@" + id, on: { mousedown: (e) => { e.preventDefault(); pickMention(i); } } }));
    });
    list.hidden = false;
    const box = $("post-text");
    box.setAttribute("aria-expanded", "true");
    box.setAttribute("aria-activedescendant", "mention-" + state.mention.active);
  }

  function closeMentions() {
    state.mention.open = false; state.mention.active = 0;
    $("mention-list").hidden = true;
    const box = $("post-text");
    box.setAttribute("aria-expanded", "false");
    box.removeAttribute("aria-activedescendant");
  }

  function pickMention(i) {
    const box = $("post-text");
    const id = state.mention.items[i];
    const caret = box.selectionStart;
    const insert = "@" + id + " ";
    box.value = box.value.slice(0, state.mention.start) + insert + box.value.slice(caret);
    const at = state.mention.start + insert.length;
    box.setSelectionRange(at, at);
    closeMentions();
    box.focus();
  }

  function mentionKeys(ev) {
    if ((ev.ctrlKey || ev.metaKey) && ev.key === "Enter") { ev.preventDefault(); $("post-form").requestSubmit(); return; }
    if (!state.mention.open) return;
    const n = state.mention.items.length;
    if (ev.key === "ArrowDown") { ev.preventDefault(); state.mention.active = (state.mention.active + 1) % n; drawMentions(); }
    else if (ev.key === "ArrowUp") { ev.preventDefault(); state.mention.active = (state.mention.active + n - 1) % n; drawMentions(); }
    else if (ev.key === "Enter" || ev.key === "Tab") { ev.preventDefault(); pickMention(state.mention.active); }
    else if (ev.key === "Escape") { ev.preventDefault(); closeMentions(); }
  }

  // ------------------------------------------------------------------ approvals
  // ------------------------------------------------------------------ pages ("More")
  // Every listing answers a page and a next_cursor (docs/api.md, paging). Each refresh reads the
  // first page; "More" reads the next one and keeps it (state.more[name]) until the room or the
  // listing's filter changes. paged() returns the first page joined with the pages kept (each
  // item once, by id) and shows the list's More button while a next page exists.
  function paged(name, path, data, fields, idOf, reload) {
    let more = state.more[name];
    if (!more || more.path !== path) more = state.more[name] = { path, kept: {}, cursor: undefined };
    const out = {};
    for (const field of fields) {
      const first = data[field] || [];
      const ids = new Set(first.map(idOf));
      out[field] = first.concat((more.kept[field] || []).filter((x) => !ids.has(idOf(x))));
    }
    const cursor = more.cursor === undefined ? data.next_cursor : more.cursor;
    moreButton(name, cursor, async () => {
      const sep = path.includes("?") ? "&" : "?";
      const page = await api("GET", path + sep + "cursor=" + enc(cursor));
      if (state.more[name] !== more) return;
      for (const field of fields) more.kept[field] = (more.kept[field] || []).concat(page[field] || []);
      more.cursor = page.next_cursor || null;
      state.sig[name] = null;  // draw again with the page kept
      await reload();
    });
    return out;
  }
  function moreButton(name, cursor, load) {
    const list = $(name);
    let button = $(name + "-more");
    if (!button) {
      button = el("button", { type: "button", class: "secondary more", id: name + "-more", text: "More",
                              "aria-label": "More: the next page of " + name });
      list.after(button);
    }
    button.hidden = !cursor;
    button.onclick = cursor ? async () => {
      button.disabled = true;
      try { await guarded(load); } finally { button.disabled = false; }
    } : null;
  }

  function changed(name, data) {
    const sig = JSON.stringify(data);
    if (state.sig[name] === sig) return false;
    state.sig[name] = sig;
    return true;
  }
  // Counted words, the rule of quayutec/words.py: "1 passage", "2 passages", "0 replies".
  function plural(n, word) {
    const IRREGULAR = { reply: "replies", company: "companies", entry: "entries", summary: "summaries" };
    const cut = word.lastIndexOf(" ") + 1, last = word.slice(cut);
    return Number(n).toLocaleString("en-US") + " " + (n === 1 ? word : word.slice(0, cut) + (IRREGULAR[last] || last + "s"));
  }

  async function loadApprovals(room) {
    const path = "rooms/" + enc(room) + "/approvals?status=all";
    const data = await api("GET", path);
    if (state.room !== room) return;
    state.approvals = paged("approvals", path, data, ["approvals"], (a) => a.id, () => loadApprovals(room)).approvals;
    paintOutcomes();
    if (!changed("approvals", state.approvals)) return;
    const list = $("approvals");
    clear(list);
    $("approvals-empty").hidden = state.approvals.length > 0;
    const order = { pending: 0, deciding: 1 };
    const sorted = [...state.approvals].sort((a, b) =>
      (order[a.status] ?? 2) - (order[b.status] ?? 2) || String(b.created_at).localeCompare(String(a.created_at)));
    for (const a of sorted) {
      const item = el("li", { "data-approval": a.id },
        el("p", { class: "line" }, badge(a.status), a.summary),
        ...Object.entries(a.fields || {}).map(([k, v]) =>  // what a yes writes: text, never markup
          el("p", { class: "detail", text: k + ": " + (typeof v === "string" ? v : JSON.stringify(v)) })),
        el("p", { class: "meta", text: "agent " + a.agent_id + " · run " + a.run_id + " · " + when(a.created_at) +
                                          (a.decided_by ? " · decided by " + a.decided_by : "") }));
      if (a.status === "pending") {
        item.append(el("div", { class: "actions-row" },
          el("button", { type: "button", "aria-label": "Approve: " + a.summary, text: "Approve",
                         on: { click: (e) => decide(e.currentTarget, a, "approve") } }),
          el("button", { type: "button", class: "danger", "aria-label": "Deny: " + a.summary, text: "Deny",
                         on: { click: (e) => decide(e.currentTarget, a, "deny") } })));
      }
      list.append(item);
    }
  }

  async function decide(button, a, verb) {
    const room = state.room;
    for (const b of button.parentNode.querySelectorAll("button")) b.disabled = true;
    const ok = await guarded(() => api("POST", "rooms/" + enc(room) + "/approvals/" + enc(a.id) + "/" + verb));
    if (ok) status(verb === "approve" ? "Approved: the run resumes." : "Denied: the action will not be taken.");
    state.sig.approvals = null;
    await loadApprovals(room).catch(showError);
    const first = $("approvals").querySelector("button") || $("approvals-title");
    if (first === $("approvals-title")) $("approvals-title").setAttribute("tabindex", "-1");
    first.focus();
  }

  // ------------------------------------------------------------------ agents: pause / resume
  // The room's agents (GET /rooms/{room}); the caller's company's own ones (GET /agents, which
  // says whether each is paused) get Pause or Resume (design §12.2). Another company's agent gets no
  // button: its company alone may pause it.
  async function loadAgents(room) {
    const [info, own] = await Promise.all([api("GET", "rooms/" + enc(room)), api("GET", "agents")]);
    if (state.room !== room) return;
    state.info = info;
    state.mine = new Map((own.agents || []).map((a) => [a.id, a]));
    drawAgents();
    await loadSpend(room, (own.agents || [])[0]);
  }

  // The caller's company's spend against its budget (GET /companies/{c}/spend, design §12.4): only
  // its own people may read it, and another company in the room never sees it. A company with no
  // agent has spent nothing, so the company is taken from its first agent.
  async function loadSpend(room, agent) {
    const list = $("spend");
    if (!agent) { clear(list); list.append(el("li", { text: "No agents of your company yet: nothing spent." })); return; }
    const path = "companies/" + enc(agent.company) + "/spend?period=";
    const [day, month] = await Promise.all([api("GET", path + "day"), api("GET", path + "month")]);
    if (state.room !== room || !changed("spend", [day, month])) return;
    clear(list);
    for (const [label, s] of [["Today (" + day.key + ")", day], ["This month (" + month.key + ")", month]]) {
      list.append(el("li", { "data-period": s.period, text: label + ": " + spendText(s) }));
    }
  }

  function spendText(s) {
    const parts = [];
    const usd = (n) => "$" + Number(n).toFixed(2);
    if (s.spent_usd || s.reserved_usd || s.budget_usd !== null) {
      parts.push(usd(s.spent_usd) + (s.budget_usd !== null ? " of " + usd(s.budget_usd) + " budget" : " (no budget set)")
        + (s.reserved_usd ? ", " + usd(s.reserved_usd) + " reserved for requests under way" : ""));
    }
    if (s.spent_tokens || s.reserved_tokens || s.budget_tokens !== null) {
      parts.push(plural(s.spent_tokens, "token") + (s.budget_tokens !== null ? " of " + Number(s.budget_tokens).toLocaleString("en-US") + " budget" : "")
        + (s.reserved_tokens ? ", " + plural(s.reserved_tokens, "token") + " reserved" : ""));
    }
    return parts.length ? parts.join(" · ") : "nothing spent, no budget set";
  }

  function drawAgents() {
    const agents = (state.info && state.info.agents) || [];
    const mine = agents.map((a) => state.mine.get(a.id) || null);
    if (!changed("agents", [agents, mine.map((m) => m && [m.paused_at, m.paused_by])])) return;
    const list = $("agents");
    clear(list);
    $("agents-empty").hidden = agents.length > 0;
    agents.forEach((a, i) => {
      const own = mine[i];
      const paused = Boolean(own && own.paused_at);
      const item = el("li", { "data-agent": a.id },
        el("p", { class: "line" }, paused ? badge("paused") : null, "@" + (a.name || a.id) + " · " + a.id),
        el("p", { class: "meta", text: own
          ? (paused ? "your company's agent · paused by " + (own.paused_by || "?") + " · " + when(own.paused_at)
                    : "your company's agent")
          : "agent of " + a.company }));
      if (own) {
        const verb = paused ? "resume" : "pause";
        item.append(el("div", { class: "actions-row" },
          el("button", { type: "button", class: paused ? "secondary" : "danger", text: paused ? "Resume" : "Pause",
                         "data-agent": a.id, "aria-label": (paused ? "Resume " : "Pause ") + a.id,
                         on: { click: (e) => setPaused(e.currentTarget, a.id, verb) } })));
      }
      list.append(item);
    });
  }

  async function setPaused(button, agentId, verb) {
    const room = state.room;
    button.disabled = true;
    const ok = await guarded(async () => {
      const out = await api("POST", "agents/" + enc(agentId) + "/" + verb);
      state.mine.set(out.id, out);
    });
    if (state.room !== room) return;
    if (ok) {
      status(verb === "pause" ? agentId + " is paused: no run of it starts until it is resumed." : agentId + " is resumed.");
      state.sig.agents = null;
      drawAgents();
      await refreshNow();
    } else {
      button.disabled = false;
      state.sig.agents = null; // the error stays shown; the list shows the agent as it stands now
      await loadAgents(room).catch(() => null);
    }
    const next = $("agents").querySelector("button[data-agent='" + CSS.escape(agentId) + "']");
    (next || $("agents-title")).focus();
  }

  // ------------------------------------------------------------------ tasks
  async function loadTasks(room, force) {
    const filter = $("task-filter").value;
    const path = "rooms/" + enc(room) + "/tasks?status=" + enc(filter);
    const data = await api("GET", path);
    if (state.room !== room) return;
    const tasks = paged("tasks", path, data, ["tasks"], (t) => t.id, () => loadTasks(room, true)).tasks;
    if (!changed("tasks", [filter, tasks]) && !force) return;
    const list = $("tasks");
    clear(list);
    $("tasks-empty").hidden = tasks.length > 0;
    tasks.forEach((t, i) => {
      const item = el("li", { "data-task": t.id },
        el("p", { class: "line" }, badge(t.status), t.title),
        el("p", { class: "meta", text: "for " + t.to + " · by " + whoLabel(t.created_by) + " · " + when(t.updated_at) }),
        t.body ? el("p", { class: "line", text: t.body }) : null,
        t.result ? el("p", { class: "line", text: "Result: " + t.result }) : null);
      // A task is updated or closed only by its creator's or its assignee's company (design §5):
      // only their people get the forms (the API would refuse anyone else's, 403).
      const company = state.me && state.me.company;
      const assigneeCompany = String(t.to || "").split(".")[0];  // an agent id is COMPANY.NAME
      const mayAct = !!company && (company === (t.created_by || {}).company || company === assigneeCompany);
      if (t.status === "open" && mayAct) {
        const noteId = "task-note-" + i, resultId = "task-result-" + i;
        item.append(
          el("form", { class: "actions-row", on: { submit: (e) => taskAction(e, t, "updates", noteId, "note") } },
            el("label", { for: noteId, text: "Progress note" }),
            el("input", { id: noteId, required: true, maxlength: "8192" }),
            el("button", { type: "submit", class: "secondary", text: "Add update" })),
          el("form", { class: "actions-row", on: { submit: (e) => taskAction(e, t, "close", resultId, "result") } },
            el("label", { for: resultId, text: "Result" }),
            el("input", { id: resultId, maxlength: "8192" }),
            el("button", { type: "submit", class: "danger", text: "Close task" })));
      }
      item.append(el("button", { type: "button", class: "secondary", text: "History",
                                 "aria-label": "History of " + t.title, on: { click: (e) => taskHistory(e.currentTarget, t) } }));
      list.append(item);
    });
  }

  async function taskAction(ev, t, what, inputId, field) {
    ev.preventDefault();
    const room = state.room;
    const value = $(inputId).value;
    const ok = await guarded(() => api("POST", "rooms/" + enc(room) + "/tasks/" + enc(t.id) + "/" + what, { [field]: value }));
    if (ok) status(what === "close" ? "Task closed." : "Update added.");
    await loadTasks(room, true).catch(showError);
  }

  async function taskHistory(button, t) {
    await guarded(async () => {
      const data = await api("GET", "rooms/" + enc(state.room) + "/tasks/" + enc(t.id));
      const list = el("ol", { class: "timeline" });
      for (const e of data.events || []) {
        list.append(el("li", { text: when(e.created_at) + " · " + e.kind + " by " + whoLabel(e.by) + (e.text ? ": " + e.text : "") }));
      }
      button.replaceWith(list);
    });
  }

  // ------------------------------------------------------------------ memory
  async function loadMemory(room) {
    const path = "rooms/" + enc(room) + "/memory";
    const data = await api("GET", path);
    if (state.room !== room) return;
    const lines = paged("memory", path, data, ["lines"], (m) => m.id, () => loadMemory(room)).lines;
    if (!changed("memory", lines)) return;
    const list = $("memory");
    clear(list);
    $("memory-empty").hidden = lines.length > 0;
    for (const m of lines) {
      list.append(el("li", { "data-memory": m.id },
        el("p", { class: "line", text: m.text }),
        el("p", { class: "meta" }, badge(m.visibility === "company" ? "company" : "room"),
           "by " + whoLabel(m.author) + " · " + when(m.created_at))));
    }
  }

  // ------------------------------------------------------------------ files
  // The kinds a room takes, by extension (as the service's quayutec.logic.extract), and its limit.
  const FILE_TYPES = {
    txt: "text/plain", text: "text/plain", log: "text/plain", md: "text/markdown", markdown: "text/markdown",
    csv: "text/csv", json: "application/json", html: "text/html", htm: "text/html", pdf: "application/pdf",
  };
  const MAX_FILE_BYTES = 25 * 1024 * 1024;
  function size(n) {
    if (n >= 1024 * 1024) return (n / 1024 / 1024).toFixed(1) + " MB";
    if (n >= 1024) return (n / 1024).toFixed(1) + " kB";
    return n + " B";
  }

  async function loadFiles(room) {
    const path = "rooms/" + enc(room) + "/files";
    const data = await api("GET", path);
    if (state.room !== room) return;
    const files = paged("files", path, data, ["files"], (f) => f.id, () => loadFiles(room)).files;
    if (!changed("files", files)) return;
    const list = $("files");
    clear(list);
    $("files-empty").hidden = files.length > 0;
    for (const f of files) {
      const who = (f.uploader || {}).id || "?";
      const company = (f.uploader || {}).company;
      list.append(el("li", { "data-file": f.id },
        el("p", { class: "line" }, badge(f.status), f.name),
        el("p", { class: "meta", text: [size(f.size), f.kind, "by " + who + (company ? " (" + company + ")" : ""),
                                        when(f.created_at)].join(" · ") }),
        f.status === "failed" && f.reason ? el("p", { class: "meta", text: "Not read: " + f.reason }) : null,
        f.status === "ready" ? el("p", { class: "meta", text: plural(f.chunks, "passage") }) : null));
    }
  }

  async function uploadFile(e) {
    e.preventDefault();
    const room = state.room;
    const input = $("file-input");
    const file = input.files && input.files[0];
    if (!room || !file) return;
    const ext = file.name.includes(".") ? file.name.split(".").pop().toLowerCase() : "";
    const type = FILE_TYPES[ext];
    if (!type) {
      showError(new ApiError(0, "kind", "The room takes text, Markdown, CSV, JSON, HTML and PDF files; " + file.name + " is none of them."));
      return;
    }
    if (file.size > MAX_FILE_BYTES) {
      showError(new ApiError(413, "too_large", file.name + " is " + size(file.size) + ", over the 25 MB limit for a room file. Nothing was uploaded."));
      return;
    }
    const ok = await guarded(async () => {
      status("Uploading " + file.name + "…");
      const out = await api("POST", "rooms/" + enc(room) + "/files", { name: file.name, content_type: type, size: file.size });
      // The presigned POST: the signed fields first, the file last; straight to the storage service.
      const form = new FormData();
      for (const [k, v] of Object.entries(out.upload.fields || {})) form.append(k, v);
      form.append("file", file);
      let resp;
      try {
        resp = await fetch(out.upload.url, { method: "POST", body: form, mode: "cors", credentials: "omit",
                                             cache: "no-store", redirect: "error" });
      } catch (err) {
        throw new ApiError(0, "upload", "The file could not be sent to the storage service. Check the connection and try again.");
      }
      if (!resp.ok) throw new ApiError(resp.status, "upload", "The storage service refused the file (" + resp.status + "). Try again.");
    });
    if (ok) { input.value = ""; status(file.name + " uploaded; it is being read."); }
    await loadFiles(room).catch(showError);
  }

  // ------------------------------------------------------------------ runs
  // A runs-table row's facts: when it started, how long it took, its cost (when the caller's
  // company may see it), what woke it (design §3: a message or a task event, by a person or an agent).
  function runFacts(r) {
    const bits = ["started " + when(r.started_at)];
    if (r.ended_at) bits.push("took " + durationText(Math.max(0, Date.parse(r.ended_at) - Date.parse(r.started_at))));
    if (r.cost && typeof r.cost.usd === "number") bits.push("$" + r.cost.usd.toFixed(6).replace(/0+$/, "").replace(/\.$/, ""));
    const w = r.wake;
    if (w) {
      const what = w.cause_kind === "task_event" ? "a task event" : "a message";
      bits.push("woken by " + what + " of " + (w.by_kind === "agent" ? "an agent" : "a person") + (w.by_company ? " (" + w.by_company + ")" : ""));
    }
    return bits.join(" · ");
  }

  async function loadRuns(room) {
    const path = "rooms/" + enc(room) + "/runs";
    const page = await api("GET", path);
    if (state.room !== room) return;
    const data = paged("runs", path, page, ["runs", "not_started"], (r) => r.run_id || r.wake_id + "/" + r.agent_id,
                       () => { state.sig["not-woken"] = null; return loadRuns(room); });
    const runs = data.runs;
    if (changed("runs", [runs, [...state.stoppedChains]])) {
      const list = $("runs");
      clear(list);
      $("runs-empty").hidden = runs.length > 0;
      const offered = new Set(); // one Stop chain per chain: on its newest run in the list
      for (const r of runs) {
        const chain = r.chain_id;
        let stop = null;
        if (chain && !offered.has(chain)) {
          offered.add(chain);
          stop = state.stoppedChains.has(chain)
            ? el("span", { class: "meta", text: "chain stopped" })
            : el("button", { type: "button", class: "danger", text: "Stop chain", "data-chain": chain,
                             "aria-label": "Stop chain " + chain, on: { click: (e) => stopChain(e.currentTarget, chain) } });
        }
        list.append(el("li", { "data-run": r.run_id, "data-chain": chain || null },
          el("p", { class: "line" }, badge(r.status), "agent " + r.agent_id + " · hop " + r.hop + " · chain " + (chain || "-")),
          el("p", { class: "meta", text: runFacts(r) }),
          el("div", { class: "actions-row" },
            el("button", { type: "button", class: "secondary", text: "Timeline", "aria-label": "Timeline of run " + r.run_id,
                           on: { click: () => showRun(r.run_id, true) } }),
            stop)));
      }
    }
    const refused = data.not_started || [];
    if (changed("not-woken", refused)) {
      const list = $("not-woken");
      clear(list);
      $("not-woken-empty").hidden = refused.length > 0;
      for (const n of refused) {
        list.append(el("li", { "data-agent": n.agent_id, "data-reason": n.reason },
          el("p", { class: "line", text: "agent " + n.agent_id + " did not wake: " + (WHY_NOT_WOKEN[n.reason] || n.reason) }),
          el("p", { class: "meta", text: when(n.at) + " · chain " + n.chain_id + " · by " + (n.by_kind || "?") +
                                         (n.by_company ? " of " + n.by_company : "") })));
      }
    }
    if (state.openRun) await showRun(state.openRun, false);
  }

  // Why the claim refused a wake (design §12.1), in the words a person reads.
  const WHY_NOT_WOKEN = {
    paused: "it is paused",
    chain_full: "its chain of wakes reached the room's bound",
    chain_stopped: "its chain of wakes was stopped",
    wake_from: "its wake_from setting does not admit the writer",
  };

  // Any person in the room may stop a chain (design §12.2): no further run of it starts; the server
  // posts a notice naming who stopped it, which the refresh after the click shows.
  async function stopChain(button, chain) {
    const room = state.room;
    button.disabled = true;
    let out = null;
    const ok = await guarded(async () => {
      out = await api("POST", "rooms/" + enc(room) + "/chains/" + enc(chain) + "/stop");
    });
    if (state.room !== room) return;
    if (ok) {
      state.stoppedChains.add(chain);
      status(out && out.stopped ? "Chain " + chain + " stopped: no further run of it starts."
        : "Chain " + chain + " was stopped already.");
      await refreshNow();
    } else {
      button.disabled = false;
    }
    const next = $("runs").querySelector("li[data-chain='" + CSS.escape(chain) + "'] button[data-chain]");
    (next || $("runs-title")).focus();
  }

  function costLine(run) {
    const cost = run.cost || run.costs || null;
    if (cost && typeof cost === "object") {
      const usd = cost.estimated_usd ?? cost.usd ?? cost.total_usd;
      const parts = Object.entries(cost).filter(([, v]) => typeof v === "number" || typeof v === "string")
        .map(([k, v]) => k.replace(/_/g, " ") + " " + v);
      return "Cost: " + (usd !== undefined ? "about $" + usd + " · " : "") + parts.join(" · ");
    }
    return null;
  }

  function durationText(ms) {
    if (ms === null || ms === undefined) return "-";
    return ms < 10000 ? ms + " ms" : (ms / 1000).toFixed(1) + " s";
  }

  // The run's phases as bars scaled to the longest, each retry's Wait after the CallModel that
  // chose it (its reason), the time parked on approvals (GET /runs/{run}'s timeline, design §2.8).
  function renderPhases(tl, costText) {
    const list = $("run-phases");
    clear(list);
    const phases = (tl && tl.phases) || [];
    const waits = ((tl && tl.requests) || []).filter((q) => q.wait_s !== null && q.wait_s !== undefined);
    const longest = Math.max(1, ...phases.map((p) => p.duration_ms || 0), ...waits.map((q) => q.wait_s * 1000));
    const row = (cls, name, ms, note) => {
      // a bar as a <meter>: its length from its value (the page writes no style)
      const bar = el("meter", { class: "phase-bar", min: 0, max: longest, value: ms || 0, "aria-hidden": "true" });
      return el("li", { class: cls }, el("span", { class: "phase-name", text: name }), bar,
        el("span", { text: durationText(ms) + (note ? " · " + note : "") }));
    };
    let calls = 0;
    for (const p of phases) {
      list.append(row("phase", p.phase, p.duration_ms, "from " + when(p.start)));
      if (p.phase === "CallModel" && calls < waits.length) {
        const q = waits[calls];
        list.append(row("wait", "Wait", q.wait_s * 1000, "retry of request " + q.n + (q.decision ? ": " + q.decision : "")));
      }
      if (p.phase === "CallModel") calls += 1;
    }
    if (tl && tl.parked_s) list.append(row("wait", "Parked on approvals", Math.round(tl.parked_s * 1000), null));
    if (!list.firstChild) list.append(el("li", { text: "No phase spans recorded." }));
    $("run-cost-text").textContent = costText ? "Cost " + costText : "";
  }

  async function showRun(runId, focus) {
    const ok = await guarded(async () => {
      const data = await api("GET", "runs/" + enc(runId));
      const r = data.run;
      state.openRun = runId;
      const box = $("run-detail");
      $("run-detail-title").textContent = "Run " + r.run_id;
      const bits = ["agent " + r.agent_id, "status " + r.status, "hop " + r.hop, "chain " + (r.chain_id || "-"), "started " + when(r.started_at)];
      if (r.ended_at) bits.push("ended " + when(r.ended_at));
      if (r.status === "stopped") bits.push("stopped by a person (its agent paused or taken out of the room, or its chain stopped)");
      if (r.parked_s) bits.push("waited for approval " + Number(r.parked_s).toFixed(1) + " s");
      if (r.error_class) bits.push("error " + r.error_class + (r.error_message ? ": " + r.error_message : ""));
      if (r.not_done && r.not_done.length) bits.push("not done: " + r.not_done.join(", "));
      const cost = costLine(r);
      $("run-summary").textContent = bits.join(" · ") + (cost ? "\n" + cost : "");
      renderPhases(data.timeline, data.cost_text);
      // from the run to its reply in the transcript (when the reply is among the messages shown)
      const replyId = (data.timeline && data.timeline.reply_message_id) || r.reply_message_id;
      const goReply = $("run-reply");
      goReply.hidden = !replyId;
      goReply.onclick = () => {
        const target = replyId && $("transcript").querySelector("li[data-id='" + CSS.escape(replyId) + "']");
        if (!target) { status("Its reply is further back in the transcript: use More to load older messages."); return; }
        target.setAttribute("tabindex", "-1");
        target.scrollIntoView({ block: "center" });
        target.focus();
      };
      const reqs = $("run-requests");
      clear(reqs);
      for (const q of data.requests || []) {
        const parts = ["#" + q.n + " " + q.provider + "/" + q.model, "sent " + when(q.sent_at)];
        if (q.status) parts.push("HTTP " + q.status);
        if (q.wait_s !== null && q.wait_s !== undefined) parts.push("wait " + q.wait_s + " s");
        if (q.decision) parts.push(q.decision);
        if (q.category) parts.push(q.category);
        if (q.message) parts.push(q.message);
        reqs.append(el("li", {}, badge(q.outcome), parts.join(" · ")));
      }
      if (!reqs.firstChild) reqs.append(el("li", { text: "No model request yet." }));
      const acts = $("run-actions");
      clear(acts);
      for (const a of data.actions || []) {
        const parts = ["#" + a.index + " " + a.kind + (a.target ? " → " + a.target : ""), "decision " + a.decision + (a.reason ? " (" + a.reason + ")" : "")];
        if (a.approval) parts.push("approval " + a.approval);
        parts.push("outcome " + a.outcome + (a.outcome_note ? " (" + a.outcome_note + ")" : ""));
        acts.append(el("li", {}, badge(a.outcome), parts.join(" · ")));
      }
      if (!acts.firstChild) acts.append(el("li", { text: "No action declared." }));
      box.hidden = false;
      if (focus) box.focus();
    });
    if (!ok && focus) state.openRun = null;
  }

  // ------------------------------------------------------------------ wiring
  function start() {
    $("sign-in-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const token = $("token").value.trim();
      if (token) signIn(token);
    });
    $("sign-out").addEventListener("click", () => signOut(false));
    $("leave-room").addEventListener("click", leaveRoom);
    $("post-form").addEventListener("submit", post);
    const box = $("post-text");
    box.addEventListener("input", () => { state.postKey = null; updateMentions(); });
    box.addEventListener("click", updateMentions);
    box.addEventListener("keydown", mentionKeys);
    box.addEventListener("blur", () => setTimeout(closeMentions, 150));
    $("task-filter").addEventListener("change", () => state.room && loadTasks(state.room, true).catch(showError));
    $("task-form").addEventListener("submit", async (e) => {
      e.preventDefault();
      const room = state.room;
      const ok = await guarded(() => api("POST", "rooms/" + enc(room) + "/tasks",
        { to: $("task-to").value, title: $("task-title").value, body: $("task-body").value }));
      if (ok) { $("task-title").value = ""; $("task-body").value = ""; status("Task created."); }
      await loadTasks(room, true).catch(showError);
    });
    $("memory-form").addEventListener("submit", async (e) => {
      e.preventDefault();
      const room = state.room;
      const ok = await guarded(() => api("POST", "rooms/" + enc(room) + "/memory",
        { text: $("memory-text").value, visibility: $("memory-visibility").value }));
      if (ok) { $("memory-text").value = ""; status("Memory line added."); }
      await loadMemory(room).catch(showError);
    });
    $("file-form").addEventListener("submit", uploadFile);
    $("run-close").addEventListener("click", () => { state.openRun = null; $("run-detail").hidden = true; $("runs-title").focus(); });
    $("runs-title").setAttribute("tabindex", "-1");
    $("agents-title").setAttribute("tabindex", "-1");
    document.addEventListener("visibilitychange", visibility);

    const saved = sessionStorage.getItem(TOKEN_KEY);
    if (saved) signIn(saved);
    else $("token").focus();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
