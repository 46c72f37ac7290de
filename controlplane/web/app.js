// The controller's live web view: fills index.html from the server-sent events of GET /events
// (controlplane/live_feed.py): "snapshot" (controller, NFs, drops), "slots" (the slot map) and
// "timeline" (new events). Plain DOM, no library; every value is set as text, never as HTML.
// For tests and the curious: each NF row has data-nf, data-role, data-alive, data-protection and
// data-role-since (the page's time when it first showed that role);
// each timeline item data-id, data-kind, data-at (the controller's time) and data-shown-at (the
// page's time when it appeared), both in seconds since the epoch.
"use strict";

const MAX_EVENTS = 300;
const GRID_COLUMNS = 128;
const CELL = 4;
const state = { nfs: new Map(), stages: [], slots: null, roles: new Map(), snapshots: 0 };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "class") node.className = v;
    else if (k === "bg") node.style.backgroundColor = v;  // (CSSOM: allowed by the page's CSP)
    else if (k.startsWith("data-")) node.setAttribute(k, String(v));
    else node[k] = v;
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

// distinct hues for the first NFs (Tableau 10 and two more), then spread by the golden angle
const HUES = [207, 28, 359, 175, 115, 48, 320, 15, 265, 90, 190, 0];

function nfColor(id, alive) {
  if (id < 0) return "#ddd";
  const hue = id <= HUES.length ? HUES[id - 1] : (id * 137.508) % 360;
  const sat = id === HUES.length ? 0 : 60;  // (the twelfth: grey)
  return alive === false ? `hsl(${hue}, ${sat / 4}%, 78%)` : `hsl(${hue}, ${sat}%, 50%)`;
}

function fmt(n, digits) {
  if (n === null || n === undefined) return "–";
  if (typeof n !== "number") return String(n);
  if (digits !== undefined) return n.toFixed(digits);
  return n >= 1e6 ? (n / 1e6).toFixed(1) + "M" : n >= 1e4 ? (n / 1e3).toFixed(1) + "k" : String(n);
}

function clock(at) {
  const d = new Date(at * 1000);
  return d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}

// -- the summary line ----------------------------------------------------------------------------
function renderSummary(c) {
  const sw = c.switch || {};
  const lead = c.leadership || {};
  const items = [
    ["switch", `${sw.target || "?"} ${sw.address || ""}${sw.primary ? " (primary)" : " (not primary)"}`],
    ["leader", lead.elected ? `${lead.leader || lead.name} term ${lead.term}` : "no election"],
    ["NFs alive", `${c.nfs.alive ?? "?"} / ${c.nfs.total ?? "?"}`],
    ["flows", fmt(c.flows.known)],
    ["packets", fmt(c.packets)],
    ["moves", `${c.moves.ok ?? 0} ok / ${c.moves.total ?? 0}`],
    ["fail-overs", c.failovers],
    ["orphans", (c.orphans || []).length ? c.orphans.join(", ") : "none"],
    ["up", `${fmt(c.uptime_s, 0)} s`],
  ];
  const dl = document.getElementById("summary");
  dl.replaceChildren(...items.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

// -- clusters and NFs ----------------------------------------------------------------------------
function protectionCell(nf) {
  if (nf.primary) {
    const p = nf.protection;
    const label = p === "armed" ? `backup NF ${nf.backup} (armed)` :
      p === "protected" ? `backup NF ${nf.backup}` :
      p === "orphan" ? "orphan: no live backup" :
      nf.backup !== null ? `backup NF ${nf.backup} is down` : "no backup";
    return el("td", { class: `prot prot-${p}` }, label);
  }
  if (nf.backup_of !== undefined) return el("td", { class: "prot" }, `backs up NF ${nf.backup_of}`);
  return el("td", { class: "prot muted" }, "–");
}

function renderNfs(nfs, lb) {
  const byCluster = new Map();
  for (const nf of nfs) {
    if (!byCluster.has(nf.cluster)) byCluster.set(nf.cluster, []);
    byCluster.get(nf.cluster).push(nf);
  }
  const cards = [];
  for (const [cluster, members] of byCluster) {
    const rows = members.map((nf) => {
      const before = state.roles.get(nf.id);
      const role = nf.role;  // (the role it holds now: controlplane/live_feed.py, display_role)
      const changed = before !== undefined && before.role !== role;
      const now = Date.now() / 1000;
      if (before === undefined || changed) state.roles.set(nf.id, { role, since: now, first: before === undefined });
      const fresh = !state.roles.get(nf.id).first && now - state.roles.get(nf.id).since < 5;
      const alive = nf.alive === false ? "down" : nf.alive === null ? "unknown" : "alive";
      return el("tr", {
        class: `nf nf-${alive}${fresh ? " changed" : ""}`, "data-nf": nf.id, "data-role": role,
        "data-alive": alive, "data-protection": nf.protection || "",
        "data-role-since": state.roles.get(nf.id).since,
      },
      el("td", {}, el("span", { class: "swatch", bg: nfColor(nf.id, nf.alive) }),
        `${nf.id} ${nf.name}`),
      el("td", {}, nf.node),
      el("td", {}, el("span", { class: `role role-${role}` }, role)),
      el("td", {}, el("span", { class: `dot dot-${alive}`, title: `misses ${nf.misses}` }), alive,
        nf.rtt_ms !== null && nf.alive ? el("span", { class: "muted" }, ` ${fmt(nf.rtt_ms, 1)} ms`) : null),
      el("td", { class: "num", "data-rate": nf.packet_rate }, fmt(nf.packet_rate, 0)),
      el("td", { class: "num" }, fmt(nf.cpu_percent, 0)),
      el("td", { class: "num" }, fmt(nf.queue_depth)),
      el("td", { class: "num" }, fmt(nf.slots_owned)),
      protectionCell(nf),
      el("td", { class: "num" + (nf.drops ? " bad" : "") }, fmt(nf.drops)));
    });
    const head = el("tr", {}, ...["NF", "node", "role", "liveness", "pkt/s", "CPU %", "queue",
      "slots", "protection", "drops"].map((h) => el("th", {}, h)));
    cards.push(el("div", { class: "cluster", "data-cluster": cluster },
      el("h3", {}, `cluster ${cluster}`,
        lb && lb.draining && lb.draining.length ? el("span", { class: "muted" }, ` draining ${lb.draining.join(", ")}`) : null),
      el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows))));
  }
  document.getElementById("clusters").replaceChildren(...cards);
}

// -- drops by place ------------------------------------------------------------------------------
function renderDrops(drops) {
  const rows = [];
  const add = (place, what, n) => rows.push(el("tr", {}, el("td", {}, place), el("td", {}, what),
    el("td", { class: "num bad" }, fmt(n))));
  for (const [k, v] of Object.entries(drops.switch || {})) add("switch pipeline", k, v);
  for (const [k, v] of Object.entries(drops.switch_ports || {})) add("switch port", k, v);
  for (const [nf, losses] of Object.entries(drops.nfs || {})) {
    for (const [k, v] of Object.entries(losses)) add(`NF ${nf}`, k, v);
  }
  const box = document.getElementById("drops");
  const parts = [];
  if (drops.switch_stats_error) parts.push(el("p", { class: "bad" }, `switch counters not read: ${drops.switch_stats_error}`));
  parts.push(rows.length ? el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "place"),
    el("th", {}, "counter"), el("th", {}, "packets"))), el("tbody", {}, ...rows))
    : el("p", { class: "muted" }, "none counted"));
  box.replaceChildren(...parts);
}

// -- the slot map --------------------------------------------------------------------------------
function renderSlots() {
  const box = document.getElementById("slotmap");
  if (!state.slots) return;
  const names = new Map(state.stages.map((s) => [s.id, s.name]));
  const counts = new Map();
  const canvases = state.slots.stages.map((stage) => {
    const n = stage.owners.length;
    const cols = Math.min(GRID_COLUMNS, n);
    const rows = Math.ceil(n / cols);
    const canvas = el("canvas", { width: cols * CELL, height: rows * CELL, class: "slots" });
    const ctx = canvas.getContext("2d");
    stage.owners.forEach((owner, i) => {
      counts.set(owner, (counts.get(owner) || 0) + 1);
      const nf = state.nfs.get(owner);
      ctx.fillStyle = nfColor(owner, nf ? nf.alive : undefined);
      ctx.fillRect((i % cols) * CELL, Math.floor(i / cols) * CELL, CELL - 1, CELL - 1);
    });
    const title = state.slots.stages.length > 1 ? `stage ${names.get(stage.id) || stage.id}` : "";
    return el("figure", {}, canvas, title ? el("figcaption", {}, title) : null);
  });
  box.replaceChildren(...canvases);
  const total = state.slots.stages.reduce((a, s) => a + s.owners.length, 0);
  document.getElementById("slot-note").textContent = `${total} slots, one square each, coloured by owner`;
  const legend = [...counts.entries()].sort((a, b) => a[0] - b[0]).map(([owner, count]) =>
    el("li", { "data-owner": owner }, el("span", { class: "swatch", bg: nfColor(owner, (state.nfs.get(owner) || {}).alive) }),
      owner < 0 ? `unowned: ${count}` : `NF ${owner}: ${count}`));
  document.getElementById("slot-legend").replaceChildren(...legend);
}

// -- the timeline --------------------------------------------------------------------------------
function addEvents(events) {
  const list = document.getElementById("timeline");
  const shown = Date.now() / 1000;
  for (const e of events) {
    if (list.querySelector(`li[data-id="${e.id}"]`)) continue;
    const item = el("li", {
      class: `ev ev-${e.kind}${e.ok ? "" : " ev-bad"}`, "data-id": e.id, "data-kind": e.kind,
      "data-at": e.at, "data-shown-at": shown, title: JSON.stringify(e.data, null, 1),
    }, el("time", {}, clock(e.at)), el("span", { class: "kind" }, e.kind.replace("_", " ")), e.text);
    list.prepend(item);
  }
  while (list.children.length > MAX_EVENTS) list.lastElementChild.remove();
}

// -- the feed ------------------------------------------------------------------------------------
function setConn(text, cls) {
  const c = document.getElementById("conn");
  c.textContent = text;
  c.className = `conn ${cls}`;
}

function onSnapshot(msg) {
  const snap = JSON.parse(msg.data);
  if (snap.error) { setConn(`controller: ${snap.error}`, "conn-bad"); return; }
  state.snapshots += 1;
  document.body.dataset.snapshots = state.snapshots;
  document.body.dataset.snapshotAt = Date.now() / 1000;
  const liveness = snap.nfs.map((nf) => `${nf.id}:${nf.alive}`).join();
  state.nfs = new Map(snap.nfs.map((nf) => [nf.id, nf]));
  state.stages = snap.controller.stages || [];
  renderSummary(snap.controller);
  renderNfs(snap.nfs, snap.lb);
  renderDrops(snap.drops);
  if (liveness !== state.liveness) renderSlots();  // (a dead owner's slots are drawn pale)
  state.liveness = liveness;
  setConn("live", "conn-live");
}

function connect() {
  const source = new EventSource("/events");
  source.addEventListener("open", () => setConn("live", "conn-live"));
  source.addEventListener("error", () => setConn(source.readyState === EventSource.CLOSED ?
    "disconnected: reload the page" : "reconnecting", "conn-bad"));
  source.addEventListener("snapshot", onSnapshot);
  source.addEventListener("slots", (msg) => { state.slots = JSON.parse(msg.data); renderSlots(); });
  source.addEventListener("timeline", (msg) => addEvents(JSON.parse(msg.data)));
}

connect();
