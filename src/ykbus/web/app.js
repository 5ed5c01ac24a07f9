// ykbus's web UI: reads only the JSON API (YuniKorn's /ws/v1 and its events); plain JS, no build step.
//
// Pages are hash routes: #/overview, #/queues, #/applications?queue=&state=&user=&waiting=&sort=&page=,
// #/nodes, #/topology (topology.js), #/events, #/timeline?w=<seconds>|all or ?from=<ms>&to=<ms>; an object's own page:
// #/app/<partition>/<queue>/<application> (queue `-`: look it up in the partition),
// #/queue/<partition>/<queue>, #/node/<partition>/<node>.
// A page is built once when it is opened; a refresh (every 3 s, longer for a page slow to read) patches it in place (`morph`): what
// did not change is not touched, so scroll, selection and focus stay while the data moves.
// Quantities are written by one function, `quantity`: memory in binary units, vcore in cores.
import {topology} from "./topology.js";

const REFRESH_MS = 3000, REFRESH_COST = 10;  // a page refreshes every 3 s, or 10 times as long as its last read took

const $ = (sel, root = document) => root.querySelector(sel);
export const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
const enc = encodeURIComponent;
// events the UI loads from /ws/v1/events/batch: at most what it answers (rest/events.py MAX_COUNT);
// `?events=N` in the page's address loads fewer (a test lowers it to see the timeline go past them)
const BATCH = Math.max(1, Math.min(10000, Math.floor(Number(new URLSearchParams(location.search).get("events"))) || 10000));

// --- units ---------------------------------------------------------------------------------------

const BYTES = [["Pi", 2 ** 50], ["Ti", 2 ** 40], ["Gi", 2 ** 30], ["Mi", 2 ** 20], ["Ki", 2 ** 10]];
const trim = (x, digits) => String(Number(x.toFixed(digits)));
const isBytes = (name) => name === "memory" || name === "ephemeral-storage" || name.startsWith("hugepages-");

/** A quantity as a person reads it: memory (and ephemeral-storage) in binary units, up to two
 * decimals (`2 Gi`, `95.37 Mi`); vcore from millicores to cores (`1 core`, `2.5 cores`); any
 * other resource as a count. The JSON keeps the raw integers; only this writes them. */
export function quantity(name, v) {
  if (v === undefined || v === null || v === "") return "";
  const n = Number(v);
  if (name === "vcore") {
    const cores = n / 1000;
    return `${trim(cores, 3)} ${cores === 1 ? "core" : "cores"}`;
  }
  if (isBytes(name)) {
    const a = Math.abs(n), sign = n < 0 ? "-" : "";
    for (const [unit, size] of BYTES) if (a >= size) return `${sign}${trim(a / size, 2)} ${unit}`;
    return `${n} B`;
  }
  return n.toLocaleString("en-US");
}
window.ykbusQuantity = quantity;  // for tests and the console

const rank = (k) => (k === "vcore" ? 0 : k === "memory" ? 1 : 2);
const byResource = ([a], [b]) => rank(a) - rank(b) || a.localeCompare(b);

/** A resource map in words: `2 cores, 4 Gi memory, 110 pods` (a dash when empty). */
function resources(r) {
  const items = Object.entries(r || {}).sort(byResource);
  if (!items.length) return "—";
  return items.map(([k, v]) => (k === "vcore" ? quantity(k, v) : `${quantity(k, v)} ${k}`)).join(", ");
}

// --- times -------------------------------------------------------------------------------------------

const nowNs = () => Date.now() * 1e6;
function when(ns) {  // a log time (ns): the clock time, with the date when not today
  if (!ns || ns < 0) return "—";
  const d = new Date(ns / 1e6), today = new Date();
  const t = d.toLocaleTimeString("en-GB", {hour12: false});
  return d.toDateString() === today.toDateString() ? t : `${d.toISOString().slice(0, 10)} ${t}`;
}
function span(ns) {  // a duration (ns) in words
  const s = Math.max(0, ns / 1e9);
  if (s > 0 && s < 1) return `${trim(s * 1000, s < 0.01 ? 1 : 0)} ms`;
  if (s < 60) return `${trim(s, s < 10 ? 1 : 0)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.floor(s % 60)} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}
const since = (ns) => (ns > 0 ? `${when(ns)} <span class="meta">(${span(nowNs() - ns)} ago)</span>` : "—");

// --- reading the API -----------------------------------------------------------------------------------

export async function get(path) {
  const r = await fetch(path, {headers: {Accept: "application/json"}});
  if (!r.ok) { const err = new Error(`${path}: ${r.status}`); err.status = r.status; throw err; }
  return r.json();
}
const P = () => `/ws/v1/partition/${enc(partition)}`;

let eventCache = {at: 0, records: [], full: false, pending: null};
/** The last events of the log (at most BATCH), read at most every `maxAgeMs`. */
async function recentEvents(maxAgeMs = 10000) {
  if (Date.now() - eventCache.at < maxAgeMs) return eventCache;
  if (!eventCache.pending) {
    eventCache.pending = get(`/ws/v1/events/batch?count=${BATCH}`).then((b) => {
      eventCache = {at: Date.now(), records: b.EventRecords || [], full: (b.EventRecords || []).length >= BATCH, pending: null};
    }).finally(() => { eventCache.pending = null; });
  }
  await eventCache.pending;
  return eventCache;
}

// --- patching in place ---------------------------------------------------------------------------------

/** Make `el`'s content `html`, touching only what differs (children with `data-key` are matched
 * by key), so that an unchanged row keeps its selection and the page its scroll. */
export function morph(el, html) {
  const t = document.createElement("template");
  t.innerHTML = html;
  sync(el, t.content);
}
function sync(old, nu) {
  const want = [...nu.childNodes];
  const keyed = new Map();  // key -> the old children of that key not matched yet, in order (keys may repeat)
  for (const c of old.childNodes) {
    if (c.nodeType !== 1 || !c.dataset || !c.dataset.key) continue;
    const same = keyed.get(c.dataset.key);
    if (same) same.push(c); else keyed.set(c.dataset.key, [c]);
  }
  want.forEach((n, i) => {
    let o = old.childNodes[i];
    const key = n.nodeType === 1 && n.dataset ? n.dataset.key : undefined;
    const unmatched = key ? keyed.get(key) : undefined;
    if (unmatched && unmatched.length && (!o || o.nodeType !== 1 || o.dataset.key !== key || !unmatched.includes(o))) {
      const found = unmatched[0];
      old.insertBefore(found, o || null);
      o = found;
    }
    if (unmatched && unmatched.includes(o)) unmatched.splice(unmatched.indexOf(o), 1);  // each old child matched once
    if (!o) { old.appendChild(n); return; }
    if (o.nodeType !== n.nodeType || o.nodeName !== n.nodeName || (key !== undefined && o.dataset.key !== key)) {
      old.replaceChild(n, o); return;
    }
    if (o.nodeType !== 1) { if (o.nodeValue !== n.nodeValue) o.nodeValue = n.nodeValue; return; }
    for (const a of [...o.attributes]) if (!n.hasAttribute(a.name)) o.removeAttribute(a.name);
    for (const a of n.attributes) if (o.getAttribute(a.name) !== a.value) o.setAttribute(a.name, a.value);
    sync(o, n);
  });
  while (old.childNodes.length > want.length) old.lastChild.remove();
}

// --- links and shared pieces ---------------------------------------------------------------------------

// an ended application's link names its state: an id may be used again (a rejected one submitted again)
const ENDED = new Set(["Completed", "Rejected"]);  // (the lists `applications/completed` and `/rejected` read)
export const appHref = (app, queue, part = partition, state = "") =>
  `#/app/${enc(part)}/${enc(queue || "-")}/${enc(app)}${ENDED.has(state) ? `?state=${state}` : ""}`;
const queueHref = (queue, part = partition) => `#/queue/${enc(part)}/${enc(queue)}`;
const nodeHref = (node, part = partition) => `#/node/${enc(part)}/${enc(node)}`;
const appLink = (app, queue) => `<a href="${appHref(app, queue)}">${esc(app)}</a>`;
const queueLink = (queue) => `<a href="${queueHref(queue)}">${esc(queue)}</a>`;
const nodeLink = (node) => `<a href="${nodeHref(node)}">${esc(node)}</a>`;
const table = (head, rows, empty = "none") => `<table><thead><tr>${head.map((h) => `<th>${h}</th>`).join("")}</tr></thead>
  <tbody>${rows.join("") || `<tr><td colspan="${head.length}" class="empty">${empty}</td></tr>`}</tbody></table>`;
const card = (label, value) => `<div class="card"><div class="label">${esc(label)}</div><div class="value">${value}</div></div>`;

/** One resource as a bar: allocated and pending against the max (the partition's capacity when
 * the queue has none); what is asked beyond the max extends the bar past the max's mark, so
 * nothing is cut off. The words sit above the bar, never clipped by it. */
function bar(name, allocated, pending, guaranteed, max, scale) {
  const limit = max || scale || 0;
  const of = Math.max(limit, allocated + pending, guaranteed, 1);
  const pct = (x) => (100 * x) / of;
  const over = limit && allocated + pending > limit;
  const marks = (guaranteed ? `<div class="mark guaranteed" style="left:calc(${pct(guaranteed).toFixed(2)}% - 1px)" title="guaranteed ${esc(quantity(name, guaranteed))}"></div>` : "")
    + (over ? `<div class="mark max" style="left:calc(${pct(limit).toFixed(2)}% - 1px)" title="max ${esc(quantity(name, limit))}"></div>` : "");
  const words = `<b>${esc(name)}</b> ${esc(quantity(name, allocated))}${limit ? ` of ${esc(quantity(name, limit))}${max ? "" : " (partition)"}` : ""}`
    + (pending ? ` <span class="pending-text">+${esc(quantity(name, pending))} pending${
      over ? (max ? ", beyond the max" : ", beyond the partition's capacity") : ""}</span>` : "")
    + (guaranteed ? ` <span class="meta">guaranteed ${esc(quantity(name, guaranteed))}</span>` : "");
  return `<div class="bar-row" data-resource="${esc(name)}"><div class="bar-label">${words}</div><div class="bar">
    <div class="fill allocated" style="width:${pct(allocated).toFixed(2)}%"></div>
    <div class="fill pending" style="left:${pct(allocated).toFixed(2)}%;width:${pct(pending).toFixed(2)}%"></div>${marks}</div></div>`;
}

function queueBars(q, scale) {
  const names = new Set([...Object.keys(q.maxResource || {}), ...Object.keys(q.guaranteedResource || {}),
    ...Object.keys(q.allocatedResource || {}), ...Object.keys(q.pendingResource || {})]);
  return [...names].map((n) => [n]).sort(byResource).map(([n]) => bar(n, (q.allocatedResource || {})[n] || 0,
    (q.pendingResource || {})[n] || 0, (q.guaranteedResource || {})[n] || 0, (q.maxResource || {})[n] || 0, scale[n])).join("");
}

const waiting = (a) => (a.requests || []).length > 0 || Object.keys(a.pendingResource || {}).length > 0;
function whyOf(app) {
  if (app.rejectedMessage) return app.rejectedMessage;
  if (app.whyPending) return `${app.whyPending.code}: ${app.whyPending.message}`;
  const asks = (app.requests || []).filter((x) => x.whyPending);
  if (!asks.length) return "";
  const first = `${asks[0].allocationKey}: ${asks[0].whyPending.code}: ${asks[0].whyPending.message}`;
  return asks.length > 1 ? `${first} (+${asks.length - 1} more asks waiting)` : first;
}

function appRow(a) {
  const href = appHref(a.applicationID, a.queueName, partition, a.applicationState);
  return `<tr data-key="${esc(a.applicationID)}${ENDED.has(a.applicationState) ? `|${esc(a.applicationState)}` : ""}" data-app="${esc(a.applicationID)}" data-href="${href}">
    <td><a href="${href}">${esc(a.applicationID)}</a></td><td>${queueLink(a.queueName)}</td>
    <td class="state-${esc(a.applicationState)}">${esc(a.applicationState)}</td><td>${esc(a.user)}</td>
    <td>${esc(resources(a.usedResource))}</td><td>${esc(resources(a.pendingResource))}</td>
    <td>${when(a.submissionTime)}</td><td class="why">${esc(whyOf(a))}</td></tr>`;
}

// An ask of several allocations (maxAllocations) has them under one key: the second and later
// of an application's key are numbered, so that identical rows do not look like one listed twice
function allocationRows(list, withApp, withNode = true) {
  const seen = new Map();
  return list.map((a) => {
    const id = `${a.applicationId}/${a.allocationKey}`;
    const n = (seen.get(id) || 0) + 1;
    seen.set(id, n);
    return `<tr data-key="${esc(id)}"><td>${esc(a.allocationKey)}${n > 1 ? ` (${n})` : ""}${a.placeholder ? ' <span class="tag">placeholder</span>' : ""}</td>
    ${withApp ? `<td>${appLink(a.applicationId, withApp === true ? "-" : withApp)}</td>` : ""}
    ${withNode ? `<td>${nodeLink(a.nodeId)}</td>` : ""}<td>${esc(resources(a.resource))}</td><td>${since(a.allocationTime)}</td></tr>`;
  });
}


// Beside a NoNodeRoom reason: that no node would hold the ask even empty (it waits for a larger
// node, not for room), else when room for it frees, as the runtime limits say (docs/time.md)
function noRoomNote(d) {
  if (d.fitsNoNodeEmpty) {
    const empty = d.largestEmpty || {};
    const short = Object.entries(d.asked || {}).filter(([r, v]) => v > (empty[r] || 0)).map(([r]) => r);
    return `<br><span class="estimate">fits no schedulable node even empty${short.length ? ` (too little ${esc(short.join(", "))} on every node)` : ""}: it waits until a larger node joins</span>`;
  }
  return d.estimate ? `<br><span class="estimate">${esc(d.estimate)}</span>` : "";
}

function askRows(list, withApp) {
  return list.map((k) => `<tr data-key="${esc(k.applicationId)}/${esc(k.allocationKey)}" data-ask="${esc(k.allocationKey)}">
    <td>${esc(k.allocationKey)}${k.placeholder ? ' <span class="tag">placeholder</span>' : ""}</td>
    ${withApp ? `<td>${appLink(k.applicationId, withApp)}</td>` : ""}
    <td>${esc(resources(k.resource))}</td><td class="num">${k.pendingCount ?? 1}</td><td>${since(k.requestTime)}</td>
    <td class="why">${k.whyPending ? `<b>${esc(k.whyPending.code)}</b>: ${esc(k.whyPending.message)}` : esc((k.allocationLog || [])[0]?.message || "")}${k.whyPending?.code === "NoNodeRoom" ? noRoomNote(k.whyPending.details || {}) : ""}</td></tr>`);
}

// --- events in words --------------------------------------------------------------------------------------

const TYPES = {0: "event", 1: "ask", 2: "application", 3: "node", 4: "queue", 5: "user/group"};
const CHANGES = {0: "", 1: "set", 2: "added", 3: "removed"};
const APP_STATE = {203: "New", 204: "Accepted", 205: "Starting", 206: "Running", 207: "Completing", 208: "Completed",
  209: "Failing", 210: "Failed", 211: "Resuming", 212: "Expired"};
const DETAILS = {  // SI EventRecord.ChangeDetail, in words
  100: "ask cancelled by the RM", 101: "ask allocated", 102: "ask timed out",
  202: "application rejected", 203: "application added",
  300: "node removed", 301: "node ready state changed", 302: "node schedulable state changed",
  304: "node capacity changed", 305: "node occupied resources changed", 306: "node reservation changed",
  400: "queue configuration changed", 401: "dynamic queue changed", 402: "queue type changed",
  403: "queue max changed", 404: "queue guaranteed changed", 406: "queue allocation changed",
  500: "allocation released by the RM", 501: "allocation preempted", 502: "allocation timed out",
  503: "placeholder replaced", 504: "allocation released: node removed",
};

/** What an EventRecord says, in words: "application state set: Running", "allocation added". */
function eventWords(e) {
  const d = e.eventChangeDetail || 0, c = e.eventChangeType || 0;
  if (d >= 204 && d <= 212) return `application state set: ${APP_STATE[d]}`;
  if (d === 200) return c === 3 ? "allocation removed" : "allocation added";
  if (d === 201) return c === 3 ? "ask removed" : c === 2 ? "ask added" : "ask changed";
  if (d === 303) return c === 3 ? "allocation removed from the node" : "allocation placed on the node";
  if (d === 405) return c === 3 ? "application removed from the queue" : "application added to the queue";
  if (DETAILS[d]) return DETAILS[d];
  if (e.type === 1 && !c) return /reject/i.test(e.message || "") ? "ask rejected" : "ask waits";
  if (e.type === 3 && !c) return "node rejected";
  return `${TYPES[e.type] || "event"} ${CHANGES[c] || "event"}`.trim();
}

function eventSubject(e) {
  if (e.type === 2) return appLink(e.objectID, "-") + (e.referenceID ? ` <span class="ref">${esc(e.referenceID)}</span>` : "");
  if (e.type === 3) return nodeLink(e.objectID) + (e.referenceID ? ` <span class="ref">${esc(e.referenceID)}</span>` : "");
  if (e.type === 4) return queueLink(e.objectID);
  if (e.type === 1 && e.referenceID) return `${esc(e.objectID)} <span class="ref">of</span> ${appLink(e.referenceID, "-")}`;
  return esc(e.objectID);
}

function eventResource(e) {
  const r = (e.resource || {}).resources || {};
  const flat = Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v.value]));
  return Object.keys(flat).length ? resources(flat) : "";
}

function eventLine(e) {
  const t = new Date(e.timestampNano / 1e6).toLocaleTimeString("en-GB", {hour12: false, hour: "2-digit", minute: "2-digit",
    second: "2-digit", fractionalSecondDigits: 3});
  const r = eventResource(e);
  return `<div class="ev"><time>${t}</time><span class="what kind-${e.type}">${esc(eventWords(e))}</span>
    <span class="who">${eventSubject(e)}</span>${r ? `<span class="res">${esc(r)}</span>` : ""}${e.message ? `<span class="msg">${esc(e.message)}</span>` : ""}</div>`;
}

/** Whether an event belongs to the selected partition. Events carry no partition: with one
 * partition every event is its; with several, an event is the partition's when its object (an
 * application, a node, an ask's application) is (the ids are read with the partition's lists). */
let partitionIds = {partition: "", apps: new Set(), nodes: new Set(), at: 0, took: 0};
async function partitionFilter() {
  if (partitionNames.length <= 1) return () => true;
  // read again after 5 s, or REFRESH_COST times as long as the last read took (a large cluster's lists)
  if (partitionIds.partition !== partition || Date.now() - partitionIds.at > Math.max(5000, REFRESH_COST * partitionIds.took)) {
    const began = Date.now();
    const [active, completed, rejected, nodes] = await Promise.all([
      get(`${P()}/applications/active`), get(`${P()}/applications/completed`), get(`${P()}/applications/rejected`),
      get(`${P()}/nodes?allocations=0`)]);
    partitionIds = {partition, at: Date.now(), took: Date.now() - began,
      apps: new Set([...active, ...completed, ...rejected].map((a) => a.applicationID)), nodes: new Set(nodes.map((n) => n.nodeID))};
  }
  const {apps, nodes} = partitionIds;
  return (e) => (e.type === 3 ? nodes.has(e.objectID) : e.type === 2 ? apps.has(e.objectID)
    : e.type === 1 ? apps.has(e.referenceID) : true);
}

function eventsOf(records, test, limit = 100) {
  const mine = records.filter(test).slice(-limit).reverse();
  // what the list covers: the last events of the whole log (seconds of them, on a busy cluster)
  const covers = `the last ${records.length.toLocaleString("en-US")} events of the log${records.length ? `, since ${when(records[0].timestampNano)}` : ""}`;
  return mine.length ? `<p class="meta">of ${covers}</p><div class="feed">${mine.map(eventLine).join("")}</div>`
    : `<p class="empty">none in ${covers}</p>`;
}

// --- the pages --------------------------------------------------------------------------------------------

async function overview(el) {
  const [parts, clusters] = await Promise.all([get("/ws/v1/partitions"), get("/ws/v1/clusters")]);
  if (!parts.length) return morph(el, `<p class="empty">No RM has registered yet.</p>`);
  morph(el, parts.map((p) => {
    const rm = clusters.find((c) => c.partition === p.name);
    const n = (v) => Number(v || 0).toLocaleString("en-US");
    const apps = Object.entries(p.applications).filter(([k]) => k !== "total").map(([k, v]) => card(k, n(v))).join("");
    const cap = p.capacity.capacity || {}, used = p.capacity.usedCapacity || {};
    const bars = Object.keys(cap).map((k) => [k]).sort(byResource).map(([k]) => bar(k, used[k] || 0, 0, 0, cap[k])).join("");
    return `<h2>RM ${esc(p.clusterId)} · partition ${esc(p.name)}</h2>
      <div class="cards">${card("nodes", n(p.totalNodes))}${card("allocations", n(p.totalContainers))}${card("applications", n(p.applications.total))}${apps}</div>
      <div class="bars wide">${bars}</div>
      <p class="meta">node sorting: ${esc(p.nodeSortingPolicy.type)} · preemption: ${p.preemptionEnabled ? "on" : "off"}
      ${rm ? " · RM version " + esc(rm.rmBuildInformation[0].buildVersion) : ""}</p>`;
  }).join(""));
}

function queueRows(q, depth, scale, out) {
  out.push(`<div class="queue" data-key="${esc(q.queuename)}" data-queue="${esc(q.queuename)}">
    <div style="padding-left:${depth * 18}px"><div class="name">${queueLink(q.queuename)}</div>
    <div class="meta">${q.isLeaf ? "leaf" : "parent"} · ${esc(q.status)} · ${q.runningApps || 0} running${q.isLeaf ? " · " + esc(q.sortingPolicy) : ""}</div></div>
    <div class="bars">${queueBars(q, scale) || '<span class="empty">nothing asked or configured</span>'}</div></div>`);
  for (const c of q.children || []) queueRows(c, depth + 1, scale, out);
}

const LEGEND = `<p class="legend"><span><i style="background:var(--allocated)"></i>allocated</span>
  <span><i style="background:var(--pending)"></i>pending</span><span><i style="background:var(--guaranteed)"></i>guaranteed</span>
  <span><i style="background:#1d2330;width:3px"></i>max, when pending goes beyond it</span>
  <span>bar length: the queue's max (else the partition's capacity), longer when more is asked</span></p>`;

async function queues(el) {
  const root = await get(`${P()}/queues`);
  const out = [];
  queueRows(root, 0, root.maxResource || {}, out);
  morph(el, `<h2>Queues</h2>${LEGEND}<div class="tree">${out.join("")}</div>`);
}

// The applications list: filters, sort and page live in the hash (#/applications?...).
const STATES = ["New", "Accepted", "Starting", "Running", "Completing", "Failing", "Resuming", "Completed", "Rejected"];
const STATE_FILTERS = [["", "active (hide completed)"], ["all", "all, with completed and rejected"], ...STATES.map((s) => [s, s])];
const SORTS = {id: (a) => a.applicationID, queue: (a) => a.queueName, state: (a) => a.applicationState, user: (a) => a.user,
  used: (a) => [(a.usedResource || {}).vcore || 0, (a.usedResource || {}).memory || 0],
  pending: (a) => [(a.pendingResource || {}).vcore || 0, (a.pendingResource || {}).memory || 0],
  submitted: (a) => a.submissionTime || 0};
const COLUMNS = [["id", "application"], ["queue", "queue"], ["state", "state"], ["user", "user"], ["used", "used"],
  ["pending", "pending"], ["submitted", "submitted"], [null, "why pending"]];
const PAGE_SIZE = 50;

function cmp(x, y) {
  if (Array.isArray(x)) { for (let i = 0; i < x.length; i++) { const c = cmp(x[i], y[i]); if (c) return c; } return 0; }
  return typeof x === "number" ? x - y : String(x).localeCompare(String(y), "en", {numeric: true});
}

function appsHash(params, changes) {
  const p = new URLSearchParams(params);
  for (const [k, v] of Object.entries(changes)) { if (v === "" || v === null || v === undefined) p.delete(k); else p.set(k, v); }
  const qs = p.toString();
  return `#/applications${qs ? "?" + qs : ""}`;
}

function setOptions(select, options) {  // (value, label) pairs; redrawn only when they change
  const sig = options.map(([v, l]) => `${v}\u0000${l}`).join("\u0001");
  if (select.dataset.sig === sig) return;
  const value = select.value;
  select.innerHTML = options.map(([v, l]) => `<option value="${esc(v)}">${esc(l)}</option>`).join("");
  select.dataset.sig = sig;
  select.value = value;
}

function applicationsFrame(el) {
  el.innerHTML = `<h2>Applications</h2>
    <form class="filters">
      <label>queue <select name="queue"></select></label>
      <label>state <select name="state"></select></label>
      <label>user <select name="user"></select></label>
      <label>waiting <select name="waiting"><option value="">any</option><option value="yes">waiting</option><option value="no">not waiting</option></select></label>
    </form><div class="data"></div>`;
  const form = $("form", el);
  form.addEventListener("change", (e) => {
    const r = route();
    location.hash = appsHash(r.params, {[e.target.name]: e.target.value, page: ""});
  });
  el.addEventListener("click", (e) => {  // a click on a row opens the application, unless text is being selected
    const tr = e.target.closest("tr[data-href]");
    if (!tr || e.target.closest("a") || String(window.getSelection())) return;
    location.hash = tr.dataset.href;
  });
}

// The ended applications (completed, rejected: thousands, megabytes, on a busy cluster), read
// again by a refresh only every ENDED_EVERY_MS; the active ones at every refresh.
const ENDED_EVERY_MS = 15000;
let endedRead = {};
async function endedApps(kind, refreshing) {
  const key = `${partition}|${kind}`, kept = endedRead[key];
  if (refreshing && kept && Date.now() - kept.at < ENDED_EVERY_MS) return kept.list;
  const list = await get(`${P()}/applications/${kind}`);
  endedRead = {...endedRead, [key]: {at: Date.now(), list}};
  return list;
}

async function applications(el, r) {
  const prm = r.params, state = prm.get("state") || "";
  const base = `${P()}/applications`;
  const lists = [get(`${base}/active`)];
  if (state === "all" || state === "Completed") lists.push(endedApps("completed", r.refreshing));
  if (state === "all" || state === "Rejected") lists.push(endedApps("rejected", r.refreshing));
  const all = (await Promise.all(lists)).flat();
  const form = $("form", el);
  const queueNames = [...new Set(all.map((a) => a.queueName))].sort();
  const parents = new Set(queueNames.flatMap((q) => q.split(".").slice(1).map((_, i, parts) => q.split(".").slice(0, i + 1).join("."))));
  setOptions(form.queue, [["", "all"], ...[...new Set([...parents, ...queueNames])].sort().map((q) => [q, q])]);
  setOptions(form.state, STATE_FILTERS);
  setOptions(form.user, [["", "all"], ...[...new Set(all.map((a) => a.user))].sort().map((u) => [u, u])]);
  for (const name of ["queue", "state", "user", "waiting"]) {
    const v = prm.get(name) || "";
    if (form[name].value !== v) {
      if (v && ![...form[name].options].some((o) => o.value === v)) form[name].insertAdjacentHTML("beforeend", `<option value="${esc(v)}">${esc(v)}</option>`);
      form[name].value = v;
    }
  }
  const queue = prm.get("queue") || "", user = prm.get("user") || "", wait = prm.get("waiting") || "";
  const shown = all.filter((a) => (!queue || a.queueName === queue || a.queueName.startsWith(queue + "."))
    && (!state || state === "all" || a.applicationState === state)
    && (!user || a.user === user)
    && (!wait || (wait === "yes") === waiting(a)));
  const asked = prm.get("sort") || "", sort = SORTS[asked.replace(/^-/, "")] ? asked : "-submitted";  // (an unknown one: the default)
  const desc = sort.startsWith("-"), key = sort.replace(/^-/, "");
  shown.sort((a, b) => (desc ? -1 : 1) * cmp(SORTS[key](a), SORTS[key](b)) || cmp(a.applicationID, b.applicationID));
  const pages = Math.max(1, Math.ceil(shown.length / PAGE_SIZE));
  const page = Math.min(pages, Math.max(1, parseInt(prm.get("page") || "1", 10) || 1));
  const rows = shown.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE);
  const head = COLUMNS.map(([k, label]) => {
    if (!k) return label;
    const next = key === k && !desc ? `-${k}` : k;
    const arrow = key === k ? (desc ? " ▼" : " ▲") : "";
    return `<a class="sort" data-sort="${k}" href="${appsHash(prm, {sort: next, page: ""})}">${label}${arrow}</a>`;
  });
  const first = shown.length ? (page - 1) * PAGE_SIZE + 1 : 0, last = (page - 1) * PAGE_SIZE + rows.length;
  const pager = `<p class="pager"><span class="count">${first}–${last} of ${shown.length.toLocaleString("en-US")}</span>
    ${page > 1 ? `<a class="prev" href="${appsHash(prm, {page: page - 1})}">‹ previous</a>` : '<span class="meta">‹ previous</span>'}
    <span>page ${page} of ${pages}</span>
    ${page < pages ? `<a class="next" href="${appsHash(prm, {page: page + 1})}">next ›</a>` : '<span class="meta">next ›</span>'}
    ${state ? "" : `<span class="meta">completed and rejected applications hidden: choose state "all" to see them</span>`}
    ${["all", "Completed", "Rejected"].includes(state) ? `<span class="meta">ended ones read again every ${ENDED_EVERY_MS / 1000} s</span>` : ""}</p>`;
  morph($(".data", el), `${pager}${table(head, rows.map(appRow), "no application matches")}`);
}

async function nodes(el) {
  const list = await get(`${P()}/nodes?allocations=0`);
  // a map each for vcore, memory and the GPUs (`nvidia.com/gpu`, ...: where ML clusters run out)
  const names = [...new Set(list.flatMap((n) => Object.keys(n.capacity || {})))];
  const kinds = ["vcore", "memory", ...names.filter((k) => /gpu/i.test(k)).sort()]
    .filter((k) => list.some((n) => (n.capacity || {})[k]));
  const maps = kinds.map((k) => [k, list.filter((n) => (n.capacity || {})[k])]).map(([k, having]) => `<h2>${esc(k)} utilisation, ${having.length.toLocaleString("en-US")} nodes${having.length < list.length ? ` (of ${list.length.toLocaleString("en-US")}: the others have none)` : ""}</h2>
    <p class="legend"><span><i style="background:${heatColor(0)}"></i>0 %</span><span><i style="background:${heatColor(50)}"></i>50 %</span>
    <span><i style="background:${heatColor(100)}"></i>100 %</span><span><i style="outline:2px solid var(--bad)"></i>not schedulable</span></p>
    <div class="heat" data-resource="${esc(k)}">${
    having.map((n) => { const cap = (n.capacity || {})[k] || 0;
      const u = k in (n.utilized || {}) ? n.utilized[k] : cap ? Math.round(100 * ((n.allocated || {})[k] || 0) / cap) : 0;
      return `<a href="${nodeHref(n.nodeID)}" title="${esc(n.nodeID)}: ${u}%${n.schedulable ? "" : " (not schedulable)"}" style="background:${heatColor(u)}${n.schedulable ? "" : ";outline:2px solid var(--bad)"}"></a>`; }).join("")}</div>`).join("");
  const rows = list.slice(0, 200).map((n) => `<tr data-key="${esc(n.nodeID)}"><td>${nodeLink(n.nodeID)}</td><td>${n.schedulable ? "yes" : "no"}${n.isReserved ? ", reserved" : ""}${n.heldFor ? `, reserved by gang ${esc(n.heldFor)}` : ""}</td>
    <td>${esc(resources(n.capacity))}</td><td>${esc(resources(n.allocated))}</td><td>${esc(Object.entries(n.utilized || {}).sort(byResource).map(([k, v]) => `${k}: ${v}%`).join(", "))}</td></tr>`);
  morph(el, `${maps}${table(["node", "schedulable", "capacity", "allocated", "utilised"], rows)}${list.length > 200 ? `<p class="meta">the first 200 of ${list.length}</p>` : ""}`);
}

function heatColor(pct) {  // 0 %: pale; 100 %: deep
  const t = Math.max(0, Math.min(1, pct / 100));
  const c = (a, b) => Math.round(a + (b - a) * t);
  return `rgb(${c(226, 197)},${c(236, 48)},${c(245, 48)})`;
}

// The pages of one application, queue or node: lists longer than LISTED show their first LISTED.
const LISTED = 50;
const more = (list) => (list.length > LISTED ? `<p class="meta">the first ${LISTED} of ${list.length.toLocaleString("en-US")}</p>` : "");

/** null for an object the core answers 404 for (the page says it is not known); other errors as they are. */
function missing(err) {
  if (err.status === 404) return null;
  throw err;
}

// An application's own page.
// `state`: the state the link was made for (an ended application's: an id may be used again,
// a rejected one submitted again and completed); the ended lists are read at most every
// ENDED_EVERY_MS (megabytes once thousands have ended), an id with "/" (which YuniKorn's
// routes cannot carry) is found in the active list.
let shownLive = "";  // the application whose page last found it active: gone, it has just ended
async function findApp(part, queue, id, state, refreshing) {
  const key = `${part}|${id}`;
  if (state !== "Rejected" && state !== "Completed") {
    try {
      const live = await get(queue && queue !== "-" ? `${P()}/queue/${enc(queue)}/application/${enc(id)}` : `${P()}/application/${enc(id)}`);
      shownLive = key;
      return live;
    } catch (err) {
      if (err.status !== 404) throw err;
    }
    if (id.includes("/")) {
      const found = (await get(`${P()}/applications/active`)).find((a) => a.applicationID === id);
      if (found) { shownLive = key; return found; }
    }
  }
  const ended = shownLive === key;  // (it ended while shown: the ended lists read now, not as kept)
  if (ended) shownLive = "";
  const kinds = state === "Rejected" ? ["rejected"] : state === "Completed" ? ["completed"] : ["completed", "rejected"];
  const lists = (await Promise.all(kinds.map((k) => endedApps(k, refreshing && !ended)))).flat();
  return lists.find((a) => a.applicationID === id && (!state || a.applicationState === state)) || null;
}

async function appPage(el, r) {
  const [, queue, id] = r.args;
  const [a, evs] = await Promise.all([findApp(partition, queue, id, r.params.get("state") || "", r.refreshing), recentEvents()]);
  if (!a) return morph(el, `<h2>Application ${esc(id)}</h2><p class="empty">not known to partition ${esc(partition)}: it may have ended longer ago than the core remembers.</p>`);
  const asks = a.requests || [], allocs = a.allocations || [];
  const states = a.stateLog || [];
  const stateRows = states.map((s, i) => `<tr data-key="${i}"><td>${when(s.time)}</td><td class="state-${esc(s.applicationState)}">${esc(s.applicationState)}</td>
    <td>${states[i + 1] ? span(states[i + 1].time - s.time) : !a.finishedTime ? `${span(nowNs() - s.time)} so far`
      : a.finishedTime > s.time ? span(a.finishedTime - s.time) : "final"}</td></tr>`);
  morph(el, `<h2>Application ${esc(a.applicationID)} <span class="state-${esc(a.applicationState)}">${esc(a.applicationState)}</span></h2>
    <p class="facts">queue ${queueLink(a.queueName)} · user ${esc(a.user)}${(a.groups || []).length ? ` (${esc(a.groups.join(", "))})` : ""}
      · submitted ${since(a.submissionTime)}${a.finishedTime ? ` · ended ${since(a.finishedTime)}` : ""}</p>
    ${a.rejectedMessage ? `<p class="why">rejected: ${esc(a.rejectedMessage)}</p>` : ""}
    ${a.whyPending ? `<p class="why"><b>${esc(a.whyPending.code)}</b>: ${esc(a.whyPending.message)}</p>` : ""}
    <div class="cards">${card("used", esc(resources(a.usedResource)))}${card("pending", esc(resources(a.pendingResource)))}${card("most used", esc(resources(a.maxUsedResource)))}</div>
    <h3>Allocations (${allocs.length.toLocaleString("en-US")})</h3><div class="allocations">${table(["allocation", "node", "resources", "since"], allocationRows(allocs.slice(0, LISTED), false))}${more(allocs)}</div>
    <h3>Pending asks (${asks.length.toLocaleString("en-US")}), each with why it waits</h3><div class="asks">${table(["ask", "resources", "count", "asked", "why it waits"], askRows(asks.slice(0, LISTED), false))}${more(asks)}</div>
    <h3>State history</h3><div class="states">${table(["from", "state", "for"], stateRows)}</div>
    <h3>Events</h3><div class="events">${eventsOf(evs.records, (e) => (e.type === 2 && e.objectID === a.applicationID) || (e.type === 1 && e.referenceID === a.applicationID), 200)}</div>`);
}

async function queuePage(el, r) {
  const name = r.args[1];
  const [q, own, evs, parts] = await Promise.all([get(`${P()}/queue/${enc(name)}`).catch(missing), get(`${P()}/queue/${enc(name)}/applications`).catch(() => []),
    recentEvents(), get("/ws/v1/partitions")]);
  // a parent holds no application itself: those of its subtree (as the Applications list filters by it)
  const apps = q && !q.isLeaf ? (await get(`${P()}/applications/active`)).filter((a) => a.queueName.startsWith(name + ".")) : own;
  if (!q) return morph(el, `<h2>Queue ${esc(name)}</h2><p class="empty">not known to partition ${esc(partition)}: no such queue (removed by a reload, or never configured)</p>`);
  const scale = ((parts.find((p) => p.name === partition) || {}).capacity || {}).capacity || {};  // bars without a max: the partition's
  const allocs = apps.flatMap((a) => (a.allocations || []).map((x) => ({...x, queue: a.queueName})));
  const asks = apps.flatMap((a) => a.requests || []);
  const ids = new Set(apps.map((a) => a.applicationID));
  const fact = (label, v) => (v === undefined || v === "" ? "" : `<tr><th>${label}</th><td>${v}</td></tr>`);
  morph(el, `<h2>Queue ${esc(q.queuename)}</h2>
    <p class="facts">${q.parent ? `parent ${queueLink(q.parent)} · ` : ""}${q.isLeaf ? "leaf" : "parent"} · ${esc(q.status)}
      ${(q.childNames || []).length ? ` · children ${q.childNames.map(queueLink).join(", ")}` : ""}</p>
    ${LEGEND}<div class="bars wide">${queueBars(q, scale) || '<span class="empty">nothing asked or configured</span>'}</div>
    <table class="kv">${fact("running applications", `${q.runningApps || 0}${q.maxRunningApps ? ` of at most ${q.maxRunningApps}` : ""}`)}
      ${fact("sorting", esc(q.sortingPolicy))}${fact("headroom", esc(resources(q.headroom)))}
      ${fact("preemption", `${q.preemptionEnabled ? "on" : "off"}${q.isPreemptionFence ? ", fence" : ""} · delay ${esc(q.preemptionDelay)}`)}
      ${Object.keys(q.properties || {}).length ? fact("properties", esc(Object.entries(q.properties).map(([k, v]) => `${k}: ${v}`).join(", "))) : ""}</table>
    <h3>Applications (${apps.length.toLocaleString("en-US")})${q.isLeaf ? "" : `, in the queues below it`}</h3>${table(COLUMNS.map(([, l]) => l), apps.slice(0, LISTED).map(appRow))}${more(apps)}
    <h3>Pending asks (${asks.length})</h3>${table(["ask", "application", "resources", "count", "asked", "why it waits"], askRows(asks.slice(0, LISTED), "-"))}${more(asks)}
    <h3>Allocations (${allocs.length})</h3>${table(["allocation", "application", "node", "resources", "since"], allocationRows(allocs.slice(0, LISTED), true))}${more(allocs)}
    <h3>Events</h3>${eventsOf(evs.records, (e) => (e.type === 4 && e.objectID === q.queuename) || (e.type === 2 && ids.has(e.objectID))
      || (e.type === 1 && ids.has(e.referenceID)), 50)}`);
}

async function nodePage(el, r) {
  const id = r.args[1];
  const [n, evs] = await Promise.all([get(`${P()}/node/${enc(id)}`).catch(missing), recentEvents()]);
  if (!n) return morph(el, `<h2>Node ${esc(id)}</h2><p class="empty">not known to partition ${esc(partition)}: it is not registered (removed, or never added)</p>`);
  const cap = n.capacity || {}, used = n.allocated || {};
  const bars = Object.keys(cap).map((k) => [k]).sort(byResource).map(([k]) => bar(k, used[k] || 0, 0, 0, cap[k])).join("");
  const allocs = n.allocations || [];
  morph(el, `<h2>Node ${esc(n.nodeID)}</h2>
    <p class="facts">${n.hostName ? `host ${esc(n.hostName)} · ` : ""}${n.rackName ? `rack ${esc(n.rackName)} · ` : ""}${n.schedulable ? "schedulable" : '<span class="bad">not schedulable</span>'}
      ${n.isReserved ? ` · reserved for ${(n.reservations || []).map((x) => { const [app, key] = x.split("|"); return `ask ${esc(key)} of ${appLink(app)}`; }).join(", ")}` : ""}${n.heldFor ? ` · reserved by gang ${appLink(n.heldFor)} until it is placed` : ""}</p>
    <div class="bars wide">${bars}</div>
    <table class="kv"><tr><th>capacity</th><td>${esc(resources(n.capacity))}</td></tr><tr><th>allocated</th><td>${esc(resources(n.allocated))}</td></tr>
      <tr><th>available</th><td>${esc(resources(Object.fromEntries(Object.keys(n.capacity || {}).map((k) => [k, (n.available || {})[k] || 0]))))}</td></tr>${Object.keys(n.occupied || {}).length ? `<tr><th>occupied by others</th><td>${esc(resources(n.occupied))}</td></tr>` : ""}
      <tr><th>attributes</th><td>${esc(Object.entries(n.attributes || {}).map(([k, v]) => `${k}=${v}`).join(", "))}</td></tr></table>
    <h3>Allocations (${allocs.length})</h3>${table(["allocation", "application", "resources", "since"], allocationRows(allocs.slice(0, LISTED), true, false))}
    ${allocs.length > LISTED ? `<p class="meta">the first ${LISTED} of ${allocs.length}</p>` : ""}
    <h3>Events</h3>${eventsOf(evs.records, (e) => e.type === 3 && e.objectID === n.nodeID, 50)}`);
}

// The live event feed: the last FEED_LINES events, newest first. Paused, it keeps the lines it
// shows (to be read) and holds what comes, shown at the resume.
const FEED_LINES = 500;
let live = null, feedPaused = false, held = [], heldCount = 0;
function showPause() {
  const b = $("#events button.pause");
  if (b) b.textContent = feedPaused ? `resume (${heldCount.toLocaleString("en-US")} new)` : "pause";
}
function togglePause() {
  feedPaused = !feedPaused;
  const feed = $("#feed");
  if (!feedPaused && feed) {
    feedAdd(feed, held);
    held = []; heldCount = 0;
  }
  showPause();
}
function feedAdd(feed, events) {  // newest first, the last FEED_LINES kept
  for (const e of events) feed.insertAdjacentHTML("afterbegin", eventLine(e));
  while (feed.childElementCount > FEED_LINES) feed.lastElementChild.remove();
}
// The stream ends when the core stops (a restart, a takeover by a standby): the feed says so
// and connects again every FEED_RETRY_MS while its page is shown; the events it showed are not
// shown twice: the stream starts with the last ones again, in log order, so those before the
// newest time shown are passed over, and of that time as many as were shown (events carry no
// id, and two alike are two events: three allocations of one ask in one entry).
const FEED_RETRY_MS = 2000;
let feedLast = {ns: -1, count: 0};  // the newest time shown, and how many events of it
function feedState(text, bad) {
  const s = $("#events .feedstate");
  if (s) { s.textContent = text; s.classList.toggle("bad", !!bad); }
}
async function startFeed(feed) {
  if (live) return;
  const mine = live = new AbortController();
  // with several partitions, the core sends only their RM's events (`rm`, ykbus's own parameter);
  // an RM of several partitions: its events are sorted by the objects the partition had as the
  // feed opened
  const rm = partitionNames.length > 1 ? partitionRms[partition] || "" : "";
  const shared = rm && Object.values(partitionRms).filter((r) => r === rm).length > 1;
  const belongs = shared ? await partitionFilter().catch(() => () => true) : () => true;
  try {
    const r = await fetch(`/ws/v1/events/stream?count=100${rm ? `&rm=${encodeURIComponent(rm)}` : ""}`, {signal: mine.signal});
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    feedState("live");
    let skip = feedLast.count;  // (of the newest time shown: shown already)
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
        if (e.InstanceUUID || !belongs(e)) continue;
        const ns = e.timestampNano || 0;
        if (ns < feedLast.ns || (ns === feedLast.ns && skip > 0)) { if (ns === feedLast.ns) skip--; continue; }
        if (ns === feedLast.ns) feedLast.count++; else feedLast = {ns, count: 1};
        if (feedPaused) { held.push(e); held.splice(0, held.length - FEED_LINES); heldCount++; showPause(); continue; }
        feedAdd(feed, [e]);
      }
    }
  } catch (err) { /* aborted (the page left), or the core went away: below */ }
  if (live !== mine) return;
  live = null;
  if (mine.signal.aborted) return;
  feedState(`disconnected at ${new Date().toLocaleTimeString("en-GB", {hour12: false})} (the core stopped or restarted): connecting again…`, true);
  setTimeout(() => { if (!live && route().page === "events" && $("#feed") === feed) startFeed(feed); }, FEED_RETRY_MS);
}
function stopFeed() {
  if (live) { live.abort(); live = null; }
  feedPaused = false; held = []; heldCount = 0; feedLast = {ns: -1, count: 0}; showPause();
}

async function events(el) {
  if (!$("#feed", el)) {
    el.innerHTML = `<h2>Live events</h2><p class="meta">newest first; the events of partition <b class="part"></b>
      <button class="pause" type="button">pause</button> <span class="feedstate"></span></p><div id="feed" class="feed"
      data-empty="no event of this partition among the last of the log: new ones show as they come"></div>`;
    $("button.pause", el).addEventListener("click", togglePause);
  }
  $(".part", el).textContent = partition;
  startFeed($("#feed", el));
}

// The timeline: the decisions of a window of time, a row per kind; dots when they are few, counts
// per bin (a bar's height) when they are many. The window: the last minute, 10 minutes, hour, all
// of the history, or from-to; zoom with the buttons or the wheel. A window the loaded events cover
// (the last BATCH of the log) is drawn from them, a dot each; a longer or older one from the event
// feed's history (`/api/timeline`: counts per bin, per second at best, of every event the output
// stream holds), as count bars; zooming in asks it for finer bins, and a window the loaded events
// come to cover again shows their dots. ROWS' tests are rest/events.py `timeline_kind`'s: keep them one.
const ROWS = [
  ["allocations", (e) => e.type === 2 && e.eventChangeType === 2 && e.eventChangeDetail === 200, "var(--allocated)"],
  ["releases", (e) => e.type === 2 && e.eventChangeType === 3, "var(--max)"],
  ["application states", (e) => e.type === 2 && e.eventChangeType === 1 && e.eventChangeDetail !== 202, "var(--guaranteed)"],
  ["rejections", (e) => (e.type === 2 && e.eventChangeDetail === 202) || (e.type === 1 && !e.eventChangeType && /reject/i.test(e.message || "")), "var(--bad)"],
  ["why asks wait", (e) => e.type === 1 && !/reject/i.test(e.message || ""), "var(--pending)"],
  ["nodes", (e) => e.type === 3 && e.eventChangeDetail !== 303, "#805ad5"],
];
const WINDOWS = [["60", "last 1 min"], ["600", "last 10 min"], ["3600", "last 1 h"], ["all", "all"]];
const HALO = 'paint-order="stroke" stroke="#fff" stroke-width="3" stroke-linejoin="round"';  // a label legible over the bars
const STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400].map((s) => s * 1e9);

function timelineFrame(el) {
  el.innerHTML = `<h2>Timeline of decisions</h2>
    <form class="filters window">
      ${WINDOWS.map(([w, l]) => `<button type="button" data-window="${w}">${l}</button>`).join("")}
      <label>from <input type="datetime-local" step="1" name="from"></label>
      <label>to <input type="datetime-local" step="1" name="to"></label>
      <button type="button" data-apply>show</button>
      <button type="button" data-zoom="0.5" title="zoom in (or the wheel over the plot)">+ zoom in</button>
      <button type="button" data-zoom="2" title="zoom out (or the wheel over the plot)">- zoom out</button>
    </form><p class="window-text meta"></p><div class="plot"></div>`;
  const form = $("form", el);
  const localInput = (ms) => { const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000); return d.toISOString().slice(0, 19); };
  form.addEventListener("click", (e) => {
    const b = e.target.closest("button");
    if (!b) return;
    if (b.dataset.window) location.hash = `#/timeline?w=${b.dataset.window}`;
    if ("apply" in b.dataset && form.from.value && form.to.value) {
      location.hash = `#/timeline?from=${new Date(form.from.value).getTime()}&to=${new Date(form.to.value).getTime()}`;
    }
    if (b.dataset.zoom) zoomTo(Number(b.dataset.zoom), 0.5);
  });
  $(".plot", el).addEventListener("wheel", (e) => {
    const svg = $("svg", el);
    if (!svg) return;
    e.preventDefault();
    const box = svg.getBoundingClientRect(), left = Number(svg.dataset.left), right = Number(svg.dataset.right);
    const at = Math.max(0, Math.min(1, (e.clientX - box.left - left) / (right - left)));
    zoomTo(e.deltaY < 0 ? 0.8 : 1.25, at);
  }, {passive: false});
  el.fillWindow = (from, to) => {
    if (document.activeElement !== form.from) form.from.value = localInput(from / 1e6);
    if (document.activeElement !== form.to) form.to.value = localInput(to / 1e6);
  };
}

let shownWindow = null;  // [from, to] in ns, as drawn
function zoomTo(factor, at) {
  if (!shownWindow) return;
  const [from, to] = shownWindow, width = (to - from) * factor, pivot = from + (to - from) * at;
  const f = pivot - width * at, t = f + width;
  location.hash = `#/timeline?from=${Math.round(f / 1e6)}&to=${Math.max(Math.round(t / 1e6), Math.round(f / 1e6) + 1)}`;
}

/** The history's counts over [from, to) (ns) in at most `bins` bins (`/api/timeline`), null when
 * it cannot answer (a core without it, or not yet ready). */
async function history(from, to, bins) {
  try {
    return await get(`/api/timeline?from=${Math.max(0, Math.floor(from / 1e6))}&to=${Math.max(1, Math.ceil(to / 1e6))}&bins=${bins}`);
  } catch (err) { return null; }
}

async function timeline(el, r) {
  const batch = await recentEvents(r.refreshing ? 15000 : 3000);
  const belongs = await partitionFilter();
  const evs = batch.records.filter(belongs);
  const prm = r.params, now = nowNs();
  const loadedFrom = evs.length ? evs[0].timestampNano : now, loadedTo = evs.length ? evs[evs.length - 1].timestampNano : now;
  let from, to, title, note = "";
  const asked = [Number(prm.get("from")), Number(prm.get("to"))];
  if (prm.get("from") && prm.get("to") && asked.every(Number.isFinite) && asked[1] > asked[0]) {
    from = asked[0] * 1e6; to = asked[1] * 1e6;
    title = `${when(from)} – ${when(to)} (${span(to - from)})`;
  } else {
    if (prm.get("from") || prm.get("to")) note = " (the window asked for is not one: from must be a time before to)";
    let w = prm.get("w") || "all";
    if (w !== "all" && !(Number(w) > 0)) { note = ` (no window "${w}")`; w = "all"; }
    to = Math.max(now, loadedTo);
    if (w === "all") {  // from the oldest the history or the loaded events hold
      const whole = batch.full ? await history(0, to, 1) : null;
      from = Math.min(loadedFrom, whole && whole.covered ? whole.covered.from * 1e6 : loadedFrom, to - 1e9);
      from -= (to - from) * 0.03;
    } else from = to - Number(w) * 1e9;
    title = `${(WINDOWS.find(([k]) => k === w) || [w, `last ${w} s`])[1]}: ${when(from)} – ${when(to)} (${span(to - from)})${note}`;
  }
  if (!(to > from)) to = from + 1e9;
  shownWindow = [from, to];
  el.fillWindow(from, to);
  el.querySelectorAll("[data-window]").forEach((b) => b.classList.toggle("active", !prm.get("from") && b.dataset.window === (prm.get("w") || "all")));
  const W = Math.max(700, ($(".plot", el).clientWidth || 1100) - 2), left = 190, right = W - 20, rowH = 44, top = 16;
  const H = top + ROWS.length * rowH + 34, plotW = right - left;
  const x = (t) => left + ((t - from) / (to - from)) * plotW;
  const bins = Math.max(10, Math.floor(plotW / 6)), binNs = (to - from) / bins;
  // the loaded events cover the window when they are the whole log, or reach back before it
  const hist = batch.full && loadedFrom > from ? await history(from, to, bins) : null;
  const loaded = evs.length ? `${evs.length.toLocaleString("en-US")} events loaded, from ${when(loadedFrom)}` : "no events yet";
  const several = partitionNames.length > 1 ? ", of every partition" : "";
  $(".window-text", el).textContent = `window: ${title} · ` + (hist
    ? `counts per ${span(hist.binMs * 1e6)} from the history of the log${several}`
      + (hist.covered ? ` (it holds ${when(hist.covered.from * 1e6)} – ${when(hist.covered.to * 1e6)})` : " (nothing counted yet)")
      + `; the ${BATCH.toLocaleString("en-US")} events loaded (from ${when(loadedFrom)}) are dots in a window they cover`
    : `${loaded}${batch.full ? ` (the last ${BATCH.toLocaleString("en-US")} of the log; older ones are not loaded)` : ""}`);
  const inWindow = hist ? [] : evs.filter((e) => e.timestampNano >= from && e.timestampNano <= to);
  let svg = "";
  const unknownTo = hist ? (hist.covered ? hist.covered.from * 1e6 : to) : batch.full ? loadedFrom : from;
  if (unknownTo > from) {  // the part of the window older than what is known: the history's start, or the events loaded
    const x1 = Math.min(right, x(unknownTo));
    const why = hist ? "before the history: the log's first message, or older than the history keeps" : `not loaded: older than the last ${BATCH} events`;
    svg += `<rect x="${left}" y="${top - 10}" width="${(x1 - left).toFixed(1)}" height="${ROWS.length * rowH}" fill="url(#unloaded)"><title>${esc(why)}</title></rect>`;
  }
  ROWS.forEach(([name, test, color], i) => {
    const y = top + i * rowH, base = y + rowH - 16, hMax = rowH - 20;
    if (hist) {  // the history's counts per bin, each bar where its bin is (cut to the window)
      const counts = hist.counts[name] || [], binW = hist.binMs * 1e6;
      const total = counts.reduce((a, c) => a + c, 0), most = Math.max(1, ...counts);
      svg += `<text class="row-label" x="6" y="${base - 6}">${esc(name)} (${total.toLocaleString("en-US")})</text>
        <line x1="${left}" x2="${right}" y1="${base}" y2="${base}" stroke="#dde1e7"/>`;
      svg += counts.map((c, b) => {
        if (!c) return "";
        const t0 = hist.from * 1e6 + b * binW, x0 = Math.max(left, x(t0)), x1 = Math.min(right, x(t0 + binW));
        const h = Math.max(2, (hMax * c) / most);
        return `<rect class="bin" x="${x0.toFixed(1)}" width="${Math.max(1, x1 - x0 - (x1 - x0 > 3 ? 1 : 0)).toFixed(1)}" y="${(base - h).toFixed(1)}"
          height="${h.toFixed(1)}" fill="${color}"><title>${c.toLocaleString("en-US")} ${esc(name)}, ${esc(when(t0))} – ${esc(when(t0 + binW))}</title></rect>`;
      }).join("");
      if (total) svg += `<text class="scale" x="${right}" y="${y + 8}" text-anchor="end" ${HALO}>up to ${most.toLocaleString("en-US")} per ${esc(span(binW))}</text>`;
      return;
    }
    const mine = inWindow.filter(test);
    svg += `<text class="row-label" x="6" y="${base - 6}">${esc(name)} (${mine.length.toLocaleString("en-US")})</text>
      <line x1="${left}" x2="${right}" y1="${base}" y2="${base}" stroke="#dde1e7"/>`;
    // few: a dot each, linked to its object; those within a dot's width of each other, one dot with their count;
    // when even those would crowd the row, counts per bin instead
    const spots = new Map();
    for (const e of mine) { const k = Math.min(Math.floor(plotW / 22) - 1, Math.floor((x(e.timestampNano) - left) / 22)); spots.set(k, [...(spots.get(k) || []), e]); }
    if (spots.size <= plotW / 44) {
      svg += [...spots.entries()].map(([k, group]) => {  // at its slot's middle (the title says when)
        const e = group[0], cx = (left + (k + 0.5) * 22).toFixed(1);
        const href = e.type === 3 ? nodeHref(e.objectID) : e.type === 2 ? appHref(e.objectID, "-") : e.type === 1 && e.referenceID ? appHref(e.referenceID, "-") : "";
        const title = group.slice(0, 20).map((g) => `${when(g.timestampNano)} ${eventWords(g)}: ${g.objectID} ${g.referenceID || ""} ${g.message || ""}`).join("\n")
          + (group.length > 20 ? `\n... ${group.length - 20} more` : "");
        const dot = `<circle cx="${cx}" cy="${base - 10}" r="${group.length > 1 ? 6.5 : 4.5}" fill="${color}" fill-opacity=".85"><title>${esc(title)}</title></circle>`
          + (group.length > 1 ? `<text class="count" x="${cx}" y="${base - 19}" text-anchor="middle">${group.length}</text>` : "");
        return href && group.length === 1 ? `<a href="${href}">${dot}</a>` : dot;
      }).join("");
    } else {  // many: counts per bin, the bar's height against the row's fullest bin
      const counts = new Array(bins).fill(0);
      for (const e of mine) counts[Math.min(bins - 1, Math.floor((e.timestampNano - from) / binNs))]++;
      const most = Math.max(...counts);
      svg += counts.map((c, b) => (c ? `<rect class="bin" x="${(left + b * (plotW / bins)).toFixed(1)}" width="${Math.max(1, plotW / bins - 1).toFixed(1)}"
        y="${(base - Math.max(2, (hMax * c) / most)).toFixed(1)}" height="${Math.max(2, (hMax * c) / most).toFixed(1)}" fill="${color}">
        <title>${c} ${esc(name)}, ${esc(when(from + b * binNs))} – ${esc(when(from + (b + 1) * binNs))}</title></rect>` : "")).join("");
      svg += `<text class="scale" x="${right}" y="${y + 8}" text-anchor="end" ${HALO}>up to ${most.toLocaleString("en-US")} per ${esc(span(binNs))}</text>`;
    }
  });
  const step = STEPS.find((s) => (s / (to - from)) * plotW >= 110) || STEPS[STEPS.length - 1];
  const axisY = top + ROWS.length * rowH + 4;
  let grid = "";  // drawn first, under the dots
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) {
    const d = new Date(t / 1e6), label = d.toLocaleTimeString("en-GB", step < 60e9 ? {hour12: false} : {hour12: false, hour: "2-digit", minute: "2-digit"});
    const anchor = x(t) + 3.5 * label.length > W ? "end" : "middle";  // the last label ends at the plot's edge, whole
    grid += `<line x1="${x(t).toFixed(1)}" x2="${x(t).toFixed(1)}" y1="${top - 6}" y2="${axisY}" stroke="#eef1f5"/>
      <text class="tick" x="${x(t).toFixed(1)}" y="${axisY + 14}" text-anchor="${anchor}">${label}</text>`;
  }
  morph($(".plot", el), `<svg id="timeline-svg" width="${W}" height="${H}" data-left="${left}" data-right="${right}"
    data-source="${hist ? "history" : "loaded"}" data-bin-ms="${hist ? hist.binMs : ""}">
    <defs><pattern id="unloaded" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
    <rect width="8" height="8" fill="#f4f5f7"/><line x1="0" y1="0" x2="0" y2="8" stroke="#dde1e7" stroke-width="3"/></pattern></defs>${grid}${svg}</svg>`);
}

// --- routing ----------------------------------------------------------------------------------------------

const PAGES = {
  overview: {render: overview}, queues: {render: queues}, applications: {frame: applicationsFrame, render: applications},
  nodes: {render: nodes}, topology: {render: topology}, events: {render: events, live: true}, timeline: {frame: timelineFrame, render: timeline, slow: true},
  app: {render: appPage, detail: "applications"}, queue: {render: queuePage, detail: "queues"}, node: {render: nodePage, detail: "nodes"},
};

/** The route of the hash: `#/page/arg/arg?params` (`#page`, the older form, is understood). */
function route() {
  const h = location.hash.replace(/^#\/?/, "");
  const [path, qs] = h.split("?");
  const parts = path.split("/").map((s) => { try { return decodeURIComponent(s); } catch { return s; } });
  const page = PAGES[parts[0]] ? parts[0] : "overview";
  return {page, args: parts.slice(1), params: new URLSearchParams(qs || ""), key: page + "/" + parts.slice(1).join("/")};
}

// the partition picked, kept across reloads (this browser's, as long as the core has it)
let partition = localStorage.getItem("ykbus.partition") || "", partitionNames = [], partitionRms = {};
async function partitions() {
  const parts = await get("/ws/v1/partitions");
  const sel = $("#partition");
  partitionNames = parts.map((p) => p.name);
  partitionRms = Object.fromEntries(parts.map((p) => [p.name, p.clusterId]));  // YuniKorn's clusterId: the RM
  if (sel.dataset.names !== partitionNames.join("|")) {
    sel.innerHTML = partitionNames.map((n) => `<option>${esc(n)}</option>`).join("");
    sel.dataset.names = partitionNames.join("|");
  }
  if (!partitionNames.includes(partition)) partition = partitionNames[0] || "";
  sel.value = partition;
}

let built = "", busy = false, again = false, lastUpdate = "";
async function show(refreshing = false) {  // true once the page is shown, false if it was not (busy, or an error)
  if (busy) { again = !refreshing || again; return false; }
  busy = true;
  try {
    const r = route();
    r.refreshing = refreshing;
    const spec = PAGES[r.page];
    if (spec.detail && r.args[0] !== undefined) partition = r.args[0];
    const section = $("#" + r.page);
    if (!spec.live) stopFeed();
    if (!refreshing) delete document.body.dataset.ready;  // until this route's data is shown
    const asked = spec.detail ? r.args[0] : undefined;
    await partitions();
    if (asked !== undefined && !partitionNames.includes(asked)) {  // an old link: not silently another partition's
      partition = partitionNames[0] || "";
      document.querySelectorAll(".page").forEach((s) => s.classList.toggle("active", s === section));
      section.classList.add("shown");
      built = "";
      section.innerHTML = `<p class="empty">partition ${esc(asked)} does not exist: the core has ${partitionNames.map(esc).join(", ") || "none"}</p>`;
      document.body.dataset.ready = r.page;
      return;
    }
    document.querySelectorAll(".page").forEach((s) => s.classList.toggle("active", s === section));
    document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === (spec.detail || r.page)));
    if (built !== r.key || !section.classList.contains("shown")) {  // opened, or come back to: built anew
      document.querySelectorAll(".page.shown").forEach((s) => s.classList.remove("shown"));
      section.classList.add("shown");
      section.innerHTML = "";
      if (spec.frame) spec.frame(section);
      built = r.key;
      if (!refreshing) window.scrollTo(0, 0);
    }
    if (partition || r.page === "overview") await spec.render(section, r);
    else section.innerHTML = `<p class="empty">No partition yet.</p>`;
    lastUpdate = new Date().toLocaleTimeString("en-GB", {hour12: false});
    $("#status").textContent = `updated ${lastUpdate}`;
    $("#status").classList.remove("bad");
    document.body.dataset.ready = r.page;
    return true;
  } catch (err) {
    // fetch's TypeError: no answer at all (the core stopped, or is restarting)
    $("#status").textContent = err instanceof TypeError
      ? `the core does not answer: the figures shown are as of ${lastUpdate || "never"}` : `error: ${err.message}`;
    $("#status").classList.add("bad");
    return false;
  } finally {
    busy = false;
    if (again) { again = false; show(); }
  }
}

$("#partition").addEventListener("change", (e) => {
  partition = e.target.value;
  localStorage.setItem("ykbus.partition", partition);
  stopFeed();
  const feed = $("#feed");
  if (feed) feed.innerHTML = "";
  const spec = PAGES[route().page];
  if (spec.detail) location.hash = `#/${spec.detail}`; else show();
});
// a filter form is never sent (Enter in a field would reload the page); no inline handler: the
// page's Content-Security-Policy runs no script but these files
document.addEventListener("submit", (e) => { if (e.target.matches("form.filters")) e.preventDefault(); });
window.addEventListener("hashchange", () => { refreshEvery = REFRESH_MS; show(); });  // another page: its own pace
show();
// Pages refresh in place every 3 s; the timeline every 15 s while its window follows the present;
// the event feed is a stream of its own. A refresh that took long (a page of a large cluster:
// the core builds its answers while the scheduler waits, 2 s for 20,000 applications) waits
// REFRESH_COST times as long before the next, so an open tab takes at most a tenth of the
// core's time; a hidden tab does not refresh.
// (Only a read that was shown counts, and at most a minute: a core that stalled once, in a
// takeover, does not slow the page for long.)
const REFRESH_MAX_MS = 60000;
let ticks = 0, refreshEvery = REFRESH_MS;
async function refresh() {
  const r = route(), spec = PAGES[r.page];
  ticks++;
  if (!document.hidden && !(spec.live || (spec.slow && (ticks % 5 || r.params.get("from"))))) {
    const began = performance.now();
    if (await show(true) && route().key === r.key) {
      refreshEvery = Math.min(REFRESH_MAX_MS, Math.max(REFRESH_MS, REFRESH_COST * (performance.now() - began)));
      if (refreshEvery > REFRESH_MS) $("#status").textContent += ` (a large page: refreshed every ${Math.round(refreshEvery / 1000)} s)`;
    }
  }
  setTimeout(refresh, refreshEvery);
}
setTimeout(refresh, REFRESH_MS);
