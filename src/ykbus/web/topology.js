// The Topology view (#/topology) of ykbus's web UI: each partition's topology domains as a tree
// (docs/topology.md), read from the read API's `topology` verb (GET /api/topology), and the gangs
// asking for a domain from its `applications` verb (each application's `topology`). Every
// partition is shown, as on the overview; one without levels says how to name them. A module of
// its own, imported by app.js (index.html preloads it), so that app.js stays under 800 lines.

import {appHref, esc, get, morph, quantity} from "./app.js";

// Resources in the order a topology reader looks for them: what a node has few of (gpu and the
// other extended resources) first, then cores, memory, storage, pods.
const BASIC = ["vcore", "memory", "ephemeral-storage", "hugepages-", "pods"];
const rankOf = (k) => { const i = BASIC.findIndex((b) => (b.endsWith("-") ? k.startsWith(b) : k === b)); return i < 0 ? -1 : i; };
const byRank = (a, b) => rankOf(a) - rankOf(b) || a.localeCompare(b);
const shortLevel = (level) => level.slice(level.lastIndexOf("/") + 1);  // ykbus.io/rack -> rack
const plural = (n, one, many = `${one}s`) => `${Number(n).toLocaleString("en-US")} ${n === 1 ? one : many}`;

/** One resource of a domain as words and a bar: "gpu 12 of 32 free · 20 used" (and what is
 * occupied by others, room the node has that is neither free nor ykbus's), the bar's blue the
 * used part, its grey the occupied part. */
function room(name, capacity, allocated, free) {
  const occupied = Math.max(0, capacity - allocated - free), pct = (x) => (capacity ? (100 * x) / capacity : 0).toFixed(2);
  const words = `<b>${esc(name)}</b> ${esc(quantity(name, free))} of ${esc(quantity(name, capacity))} free`
    + ` <span class="meta">· ${allocated ? `${esc(quantity(name, allocated))} used` : "none used"}${occupied ? ` · ${esc(quantity(name, occupied))} occupied by others` : ""}</span>`;
  return `<div class="bar-row" data-resource="${esc(name)}"><div class="bar-label">${words}</div><div class="bar">
    <div class="fill allocated" style="width:${pct(allocated)}%"></div>
    <div class="fill occupied" style="left:${pct(allocated)}%;width:${pct(occupied)}%"></div></div></div>`;
}

/** The tree's lines before each domain (the domains come in tree order), drawn by style.css: a
 * rail under each ancestor that has siblings still to come, then an elbow to the domain itself
 * (cut short at the last child). */
function rails(domains) {
  const last = domains.map((d, i) => {
    for (let j = i + 1; j < domains.length; j++) {
      if (domains[j].depth < d.depth) return true;
      if (domains[j].depth === d.depth) return false;
    }
    return true;
  });
  const more = [];  // per depth: whether the domain last seen there has siblings to come
  return domains.map((d, i) => {
    more[d.depth] = !last[i];
    if (!d.depth) return "";
    return more.slice(1, d.depth).map((on) => `<span class="rail${on ? " on" : ""}"></span>`).join("")
      + `<span class="rail elbow${last[i] ? " last" : ""}"></span>`;
  });
}

function domainRow(d, rail, gangLink) {
  const cap = d.capacity || {}, used = d.allocated || {}, free = d.free || {};
  const names = Object.keys(cap).sort(byRank);
  const value = d.name.slice(d.name.lastIndexOf("/") + 1);
  const gangs = d.gangs || [];
  return `<div class="domain depth-${d.depth}" data-key="${esc(d.name)}" data-domain="${esc(d.name)}" data-depth="${d.depth}">
    <div class="where">${rail}<div class="what"><div><span class="name" title="${esc(d.level)} ${esc(d.name)}">${esc(value)}</span>
      <span class="tag" title="${esc(d.level)}">${esc(shortLevel(d.level))}</span>${d.depth ? ` <span class="meta">${esc(d.name)}</span>` : ""}</div>
      <div class="meta">${plural(d.nodes, "node")} · ${plural(d.allocations, "allocation")}</div></div></div>
    <div class="bars">${names.map((n) => room(n, Number(cap[n]), Number(used[n] || 0), Number(free[n] || 0))).join("") || '<span class="empty">no capacity</span>'}</div>
    <div class="gangs">${gangs.length ? `gangs: ${gangs.map(gangLink).join(", ")}` : '<span class="meta">no gang here</span>'}</div></div>`;
}

/** What an application's topology asks for, in words: "required rack", with its task groups' own. */
function asked(t) {
  const one = (r) => `${r.mode} ${shortLevel(r.level)}`;
  const groups = Object.entries(t.taskGroups || {}).map(([g, r]) => `${g}: ${one(r)}`);
  return [t.request ? one(t.request) : "", ...groups].filter(Boolean).join("; ");
}

const LISTED = 100;
function gangTable(apps, link) {
  const gangs = Object.entries(apps).filter(([, a]) => a.topology && (a.topology.request || Object.keys(a.topology.taskGroups || {}).length))
    .sort(([x, a], [y, b]) => Number(!!a.topology.placedIn) - Number(!!b.topology.placedIn) || x.localeCompare(y, "en", {numeric: true}));
  if (!gangs.length) return `<p class="empty">no application asks for a domain</p>`;
  const rows = gangs.slice(0, LISTED).map(([id, a]) => {
    const t = a.topology, at = t.placedIn;
    return `<tr data-key="${esc(id)}" data-gang="${esc(id)}"><td>${link(id)}</td><td>${esc(asked(t))}</td>
      <td class="state-${esc(a.state)}">${esc(a.state)}</td><td>${at ? `${esc(shortLevel(at.level))} ${esc(at.domain)}` : "—"}</td>
      <td class="why">${a.why ? `<b>${esc(a.why.code)}</b>: ${esc(a.why.message)}` : ""}</td></tr>`;
  });
  return `<table><thead><tr><th>gang</th><th>asks for</th><th>state</th><th>sits in</th><th>why it waits</th></tr></thead>
    <tbody>${rows.join("")}</tbody></table>${gangs.length > LISTED ? `<p class="meta">the first ${LISTED} of ${gangs.length}</p>` : ""}`;
}

const LEGEND = `<p class="legend"><span><i style="background:var(--allocated)"></i>used (allocated)</span>
  <span><i style="background:var(--max)"></i>occupied by others</span> <span><i class="free"></i>free</span>
  <span>a gang is shown in the narrowest domain that holds all its allocations</span></p>`;

const NO_LEVELS = `has no topology levels. To place gangs whole in one domain (a block, a rack), name the levels,
  broadest first, under the partition's <code>topology.levels</code> key in the queue configuration, e.g.
  <code>topology: {levels: [ykbus.io/block, ykbus.io/rack]}</code>, and have the RM send each node's values as its
  attributes (docs/topology.md).`;

function partitionPart(rm, name, tree, wsName, total, apps) {
  const head = `<h2>RM ${esc(rm)} · partition ${esc(name)}</h2>`;
  const levels = tree.levels || [];
  if (!levels.length) return `<div class="topo-part" data-key="${esc(rm)}/${esc(name)}" data-partition="${esc(name)}">${head}
    <p class="empty no-levels">Partition ${esc(name)} ${NO_LEVELS}</p></div>`;
  const domains = tree.domains || [];
  const queues = Object.fromEntries(Object.entries(apps).map(([id, a]) => [id, a.queue]));
  const link = (id) => `<a href="${appHref(id, queues[id], wsName)}">${esc(id)}</a>`;
  const inDomains = domains.filter((d) => !d.depth).reduce((n, d) => n + d.nodes, 0);
  const outside = total - inDomains;
  const rail = rails(domains);
  return `<div class="topo-part" data-key="${esc(rm)}/${esc(name)}" data-partition="${esc(name)}">${head}
    <p class="facts">levels, broadest first: ${levels.map((l) => `<b>${esc(shortLevel(l))}</b> <span class="meta">(${esc(l)})</span>`).join(" › ")}
      · ${plural(domains.length, "domain")}${outside > 0 ? ` · ${plural(outside, "node")} of ${total.toLocaleString("en-US")} in no ${esc(shortLevel(levels[0]))} (without the ${esc(levels[0])} attribute, or not schedulable)` : ""}</p>
    ${domains.length ? `${LEGEND}<div class="topo">${domains.map((d, i) => domainRow(d, rail[i], link)).join("")}</div>`
      : `<p class="empty">no schedulable node has the ${esc(levels[0])} attribute yet</p>`}
    <h3>Gangs asking for a domain</h3>${gangTable(apps, link)}</div>`;
}

/** The page: every partition of every RM, each domain under its parent with its free and used
 * room, its nodes and the gangs that sit there; then the gangs that ask for a domain, placed or
 * waiting (and why). */
export async function topology(el) {
  const [answer, parts] = await Promise.all([get("/api/topology"), get("/ws/v1/partitions")]);
  const listed = Object.entries(answer.topology || {}).flatMap(([rm, ps]) => Object.entries(ps).map(([name, tree]) => [rm, name, tree]));
  if (!listed.length) return morph(el, `<h2>Topology</h2><p class="empty">No RM has registered yet.</p>`);
  // the gangs: the applications of each partition with levels (GET /api/applications), at once
  const apps = await Promise.all(listed.map(([rm, name, tree]) => ((tree.levels || []).length
    ? get(`/api/applications?rm=${encodeURIComponent(rm)}&partition=${encodeURIComponent(name)}`).then((a) => ((a.applications || {})[rm] || {})[name] || {})
    : Promise.resolve({}))));
  morph(el, `${listed.map(([rm, name, tree], i) => {
    // the partition as /ws/v1 names it (and the UI's links): plain while one RM has that name, else [rm]name
    const ws = parts.find((p) => p.clusterId === rm && (p.name === name || p.name === `[${rm}]${name}`));
    return partitionPart(rm, name, tree, ws ? ws.name : `[${rm}]${name}`, ws ? ws.totalNodes || 0 : 0, apps[i]);  // (left out at 0, as YuniKorn does)
  }).join("")}`);
}
