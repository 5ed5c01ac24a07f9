// ykbus's web UI: reads only the JSON API (YuniKorn's /ws/v1 and the events stream); no build step.
const $ = (sel) => document.querySelector(sel);
const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
const PAGES = ["overview", "queues", "applications", "nodes", "events", "timeline"];
const TYPES = {0: "UNKNOWN", 1: "REQUEST", 2: "APP", 3: "NODE", 4: "QUEUE", 5: "USERGROUP"};
const CHANGES = {0: "", 1: "SET", 2: "ADD", 3: "REMOVE"};
let partition = "";
let live = null;

async function get(path) {
  const r = await fetch(path, {headers: {Accept: "application/json"}});
  if (!r.ok) throw new Error(`${path}: ${r.status}`);
  return r.json();
}

function fmt(name, v) {
  if (v === undefined || v === null) return "";
  if (name === "memory" || name === "ephemeral-storage") {
    const units = ["B", "KB", "MB", "GB", "TB", "PB"];
    let i = 0, x = v;
    while (x >= 1000 && i < units.length - 1) { x /= 1000; i++; }
    return `${x.toFixed(x < 10 && i ? 1 : 0)} ${units[i]}`;
  }
  if (name === "vcore") return `${(v / 1000).toFixed(v % 1000 ? 1 : 0)} cores`;
  return Number(v).toLocaleString();
}

function res(r) {
  return Object.entries(r || {}).map(([k, v]) => `${k}: ${fmt(k, v)}`).join(", ");
}

function bar(name, allocated, pending, guaranteed, max, scale) {
  const of = max || scale || Math.max(allocated + pending, guaranteed, 1);
  const pct = (x) => Math.min(100, (100 * x) / of);
  const g = guaranteed ? `<div class="mark guaranteed" style="left:calc(${pct(guaranteed)}% - 1px)" title="guaranteed ${fmt(name, guaranteed)}"></div>` : "";
  return `<div class="bar" title="${esc(name)}: allocated ${fmt(name, allocated)}, pending ${fmt(name, pending)}${max ? ", max " + fmt(name, max) : ""}">
    <div class="fill allocated" style="width:${pct(allocated)}%"></div>
    <div class="fill pending" style="left:${pct(allocated)}%;width:${pct(pending)}%"></div>${g}
    <span class="text">${esc(name)} ${fmt(name, allocated)}${max ? " / " + fmt(name, max) : ""}${pending ? " (+" + fmt(name, pending) + " pending)" : ""}</span></div>`;
}

async function overview() {
  const [parts, clusters] = await Promise.all([get("/ws/v1/partitions"), get("/ws/v1/clusters")]);
  if (!parts.length) return `<p class="empty">No RM has registered yet.</p>`;
  return parts.map((p) => {
    const rm = clusters.find((c) => c.partition === p.name);
    const apps = Object.entries(p.applications).filter(([k]) => k !== "total")
      .map(([k, v]) => `<div class="card"><div class="label">${esc(k)}</div><div class="value">${v}</div></div>`).join("");
    const cap = p.capacity.capacity || {}, used = p.capacity.usedCapacity || {};
    const bars = Object.keys(cap).map((k) => bar(k, used[k] || 0, 0, 0, cap[k])).join("");
    return `<h2>RM ${esc(p.clusterId)} · partition ${esc(p.name)}</h2>
      <div class="cards">
        <div class="card"><div class="label">nodes</div><div class="value">${p.totalNodes}</div></div>
        <div class="card"><div class="label">allocations</div><div class="value">${p.totalContainers}</div></div>
        <div class="card"><div class="label">applications</div><div class="value">${p.applications.total}</div></div>
        ${apps}
      </div>
      <div class="bars" style="max-width:700px">${bars}</div>
      <p class="meta">node sorting: ${esc(p.nodeSortingPolicy.type)} · preemption: ${p.preemptionEnabled ? "on" : "off"}
      ${rm ? " · RM version " + esc(rm.rmBuildInformation[0].buildVersion) : ""}</p>`;
  }).join("");
}

function queueRows(q, depth, scale, out) {
  const names = new Set([...Object.keys(q.maxResource || {}), ...Object.keys(q.guaranteedResource || {}),
    ...Object.keys(q.allocatedResource || {}), ...Object.keys(q.pendingResource || {})]);
  const shown = ["vcore", "memory", ...[...names].filter((n) => n !== "vcore" && n !== "memory")].filter((n) => names.has(n));
  const bars = shown.map((n) => bar(n, (q.allocatedResource || {})[n] || 0, (q.pendingResource || {})[n] || 0,
    (q.guaranteedResource || {})[n] || 0, (q.maxResource || {})[n] || 0, scale[n])).join("");
  out.push(`<div class="queue" style="padding-left:${depth * 18}px" data-queue="${esc(q.queuename)}">
    <div><div class="name">${esc(q.queuename)}</div>
    <div class="meta">${q.isLeaf ? "leaf" : "parent"} · ${esc(q.status)} · ${q.runningApps || 0} running${q.isLeaf ? " · " + esc(q.sortingPolicy) : ""}</div></div>
    <div class="bars">${bars || '<span class="empty">nothing asked or configured</span>'}</div></div>`);
  for (const c of q.children || []) queueRows(c, depth + 1, scale, out);
}

async function queues() {
  const root = await get(`/ws/v1/partition/${encodeURIComponent(partition)}/queues`);
  const out = [];
  queueRows(root, 0, root.maxResource || {}, out);
  return `<h2>Queues</h2><p class="legend"><span><i style="background:var(--allocated)"></i>allocated</span>
    <span><i style="background:var(--pending)"></i>pending</span><span><i style="background:var(--guaranteed)"></i>guaranteed</span>
    <span>bar length: the queue's max (else the partition's)</span></p><div class="tree">${out.join("")}</div>`;
}

function whyOf(app) {
  if (app.rejectedMessage) return app.rejectedMessage;
  if (app.whyPending) return `${app.whyPending.code}: ${app.whyPending.message}`;
  const r = (app.requests || []).find((x) => x.whyPending);
  return r ? `${r.allocationKey}: ${r.whyPending.code}: ${r.whyPending.message}` : "";
}

async function applications() {
  const base = `/ws/v1/partition/${encodeURIComponent(partition)}/applications`;
  const [active, completed, rejected] = await Promise.all(["active", "completed", "rejected"].map((s) => get(`${base}/${s}`)));
  const rows = [...active, ...completed, ...rejected].map((a) => `<tr data-app="${esc(a.applicationID)}">
    <td>${esc(a.applicationID)}</td><td>${esc(a.queueName)}</td><td class="state-${esc(a.applicationState)}">${esc(a.applicationState)}</td>
    <td>${esc(a.user)}</td><td>${esc(res(a.usedResource))}</td><td>${esc(res(a.pendingResource))}</td>
    <td class="why">${esc(whyOf(a))}</td></tr>`).join("");
  return `<h2>Applications</h2><table><thead><tr><th>application</th><th>queue</th><th>state</th><th>user</th>
    <th>used</th><th>pending</th><th>why pending</th></tr></thead><tbody>${rows || '<tr><td colspan="7" class="empty">none</td></tr>'}</tbody></table>`;
}

function heatColor(pct) {  // 0 %: pale; 100 %: deep
  const t = Math.max(0, Math.min(1, pct / 100));
  const c = (a, b) => Math.round(a + (b - a) * t);
  return `rgb(${c(226, 197)},${c(236, 48)},${c(245, 48)})`;
}

async function nodes() {
  const list = await get(`/ws/v1/partition/${encodeURIComponent(partition)}/nodes?allocations=0`);
  const kinds = ["vcore", "memory"].filter((k) => list.some((n) => (n.capacity || {})[k]));
  const maps = kinds.map((k) => `<h2>${esc(k)} utilisation, ${list.length} nodes</h2>
    <p class="legend"><span><i style="background:${heatColor(0)}"></i>0 %</span><span><i style="background:${heatColor(50)}"></i>50 %</span>
    <span><i style="background:${heatColor(100)}"></i>100 %</span><span><i style="outline:2px solid var(--bad)"></i>not schedulable</span></p>
    <div class="heat" data-resource="${k}">${
    list.map((n) => { const u = (n.utilized || {})[k] || 0;
      return `<div title="${esc(n.nodeID)}: ${u}%${n.schedulable ? "" : " (not schedulable)"}" style="background:${heatColor(u)}${n.schedulable ? "" : ";outline:2px solid var(--bad)"}"></div>`; }).join("")}</div>`).join("");
  const rows = list.slice(0, 200).map((n) => `<tr><td>${esc(n.nodeID)}</td><td>${n.schedulable ? "yes" : "no"}${n.isReserved ? ", reserved" : ""}</td>
    <td>${esc(res(n.capacity))}</td><td>${esc(res(n.allocated))}</td><td>${esc(Object.entries(n.utilized || {}).map(([k, v]) => `${k}: ${v}%`).join(", "))}</td></tr>`).join("");
  return `${maps}<table><thead><tr><th>node</th><th>schedulable</th><th>capacity</th><th>allocated</th><th>utilised</th></tr></thead>
    <tbody>${rows}</tbody></table>${list.length > 200 ? `<p class="meta">the first 200 of ${list.length}</p>` : ""}`;
}

function eventLine(e) {
  const t = new Date(e.timestampNano / 1e6).toISOString().slice(11, 23);
  return `<div>${t} ${TYPES[e.type] || e.type} ${CHANGES[e.eventChangeType || 0]} ${e.eventChangeDetail || ""}
    <b>${esc(e.objectID)}</b> ${esc(e.referenceID || "")} ${esc(e.message || "")}</div>`;
}

async function startFeed() {
  if (live) return;
  const feed = $("#feed");
  live = new AbortController();
  try {
    const r = await fetch("/ws/v1/events/stream?count=100", {signal: live.signal});
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += dec.decode(value, {stream: true});
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i); buf = buf.slice(i + 1);
        if (!line) continue;
        const e = JSON.parse(line);
        if (e.InstanceUUID) continue;
        feed.insertAdjacentHTML("afterbegin", eventLine(e));
        while (feed.childElementCount > 500) feed.lastElementChild.remove();
      }
    }
  } catch (err) { /* aborted or the core went away: the next visit reconnects */ }
  live = null;
}

async function events() {
  return `<h2>Live events</h2><div id="feed" class="feed"></div>`;
}

const ROWS = [
  ["allocations", (e) => e.type === 2 && e.eventChangeType === 2 && e.eventChangeDetail === 200, "var(--allocated)"],
  ["releases", (e) => e.type === 2 && e.eventChangeType === 3, "var(--max)"],
  ["application states", (e) => e.type === 2 && e.eventChangeType === 1 && e.eventChangeDetail !== 202, "var(--guaranteed)"],
  ["rejections", (e) => (e.type === 2 && e.eventChangeDetail === 202) || (e.type === 1 && !e.eventChangeType && /reject/i.test(e.message || "")), "var(--bad)"],
  ["why asks wait", (e) => e.type === 1, "var(--pending)"],
  ["nodes", (e) => e.type === 3 && e.eventChangeDetail !== 303, "#805ad5"],
];

async function timeline() {
  const batch = await get("/ws/v1/events/batch?count=5000");
  const evs = batch.EventRecords;
  if (!evs.length) return `<h2>Timeline</h2><p class="empty">no decisions yet</p>`;
  const t0 = Math.min(...evs.map((e) => e.timestampNano)), t1 = Math.max(...evs.map((e) => e.timestampNano));
  const W = 1100, left = 140, rowH = 34, H = ROWS.length * rowH + 30;
  const x = (t) => left + ((t - t0) / Math.max(1, t1 - t0)) * (W - left - 20);
  let svg = "";
  ROWS.forEach(([name, test, color], i) => {
    const y = 20 + i * rowH;
    const mine = evs.filter(test);
    svg += `<text x="4" y="${y + 4}">${name} (${mine.length})</text><line x1="${left}" x2="${W - 20}" y1="${y}" y2="${y}" stroke="#dde1e7"/>`;
    svg += mine.map((e) => `<circle cx="${x(e.timestampNano).toFixed(1)}" cy="${y}" r="4" fill="${color}" fill-opacity=".7"><title>${esc(e.objectID)} ${esc(e.referenceID || "")} ${esc(e.message || "")}</title></circle>`).join("");
  });
  const span = (t1 - t0) / 1e9;
  svg += `<text x="${left}" y="${H - 4}">${new Date(t0 / 1e6).toISOString().slice(11, 19)}</text>
    <text x="${W - 120}" y="${H - 4}">+${span.toFixed(1)} s</text>`;
  return `<h2>Timeline of decisions (the last ${evs.length} events of the log)</h2>
    <svg id="timeline-svg" width="${W}" height="${H}" style="background:#fff;border:1px solid var(--line)">${svg}</svg>`;
}

const RENDER = {overview, queues, applications, nodes, events, timeline};

async function partitions() {
  const parts = await get("/ws/v1/partitions");
  const sel = $("#partition");
  const names = parts.map((p) => p.name);
  if (sel.dataset.names !== names.join("|")) {
    sel.innerHTML = names.map((n) => `<option>${esc(n)}</option>`).join("");
    sel.dataset.names = names.join("|");
  }
  if (!names.includes(partition)) partition = names[0] || "";
  sel.value = partition;
}

async function show() {
  const page = PAGES.includes(location.hash.slice(1)) ? location.hash.slice(1) : "overview";
  document.querySelectorAll(".page").forEach((s) => s.classList.toggle("active", s.id === page));
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === page));
  if (page !== "events" && live) { live.abort(); live = null; }
  try {
    await partitions();
    const el = $("#" + page);
    if (page === "events") {
      if (!$("#feed")) el.innerHTML = await events();
      startFeed();
    } else if (partition || page === "overview" || page === "timeline") {
      el.innerHTML = await RENDER[page]();
    } else {
      el.innerHTML = `<p class="empty">No partition yet.</p>`;
    }
    $("#status").textContent = `updated ${new Date().toLocaleTimeString()}`;
    document.body.dataset.ready = page;
  } catch (err) {
    $("#status").textContent = `error: ${err.message}`;
  }
}

$("#partition").addEventListener("change", (e) => { partition = e.target.value; show(); });
window.addEventListener("hashchange", show);
show();
// Pages refresh every 3 s; the timeline every 15 s (it reads thousands of events from the output stream).
let ticks = 0;
setInterval(() => {
  const page = location.hash.slice(1);
  ticks++;
  if (page === "events" || (page === "timeline" && ticks % 5)) return;
  show();
}, 3000);
