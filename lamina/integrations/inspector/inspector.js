// Lamina inspector: one dependency-free script over the public HTTP API (/v1/...).
// Every text from the server is put in the page with textContent, never parsed as HTML.
"use strict";

const KEY = "lamina-inspector-key";
const BANK = "lamina-inspector-bank";
const CHANNELS = ["lexical", "dense", "time", "entity"];
const main = document.getElementById("main");
const bankSelect = document.getElementById("bank-select");
const forgetKey = document.getElementById("forget-key");

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// -- small DOM helpers -------------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}
const short = (n) => (n >= 10000 ? `${Math.round(n / 1000)}k` : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n));
const num = (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en"));
function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return isNaN(d) ? String(iso) : d.toISOString().replace("T", " ").slice(0, 16) + " UTC";
}
function bytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}
function fill(target, ...nodes) {
  target.replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined && n !== false));
}
function show(...nodes) { fill(main, ...nodes); }
function errorBox(err) {
  return el("p", { class: "error", role: "alert", text: `Error: ${err.message || err}` });
}
function empty(text) { return el("p", { class: "empty", text }); }

// -- the API -----------------------------------------------------------------------------------
async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const key = sessionStorage.getItem(KEY);
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await response.json(); } catch (_) { data = null; }
  if (!response.ok) {
    const message = data && data.error ? data.error.message : `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, message);
  }
  return data;
}
const enc = encodeURIComponent;
const bankPath = (bank) => `/v1/banks/${enc(bank)}`;

// -- routing and state -------------------------------------------------------------------------
let banks = null; // [{bank, documents, memories}] this caller may use
// What the server rendered into the page (lamina.integrations.inspector_page): the caller's
// banks, shown at first paint; the script starts from them instead of asking again.
const initialNode = document.getElementById("lamina-initial");
const initial = initialNode ? JSON.parse(initialNode.textContent) : null;
let served = initial ? new Map(initial.details.map((d) => [d.bank, d])) : new Map();
const hookBudget = initial ? initial.hook_budget : null;

function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [page, query] = hash.split("?");
  return { page: page || "banks", params: new URLSearchParams(query || "") };
}
function go(page, params) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== "" && v !== null && v !== undefined) query.set(k, v);
  const text = query.toString();
  location.hash = `#/${page}${text ? "?" + text : ""}`;
}
function currentBank(params) {
  const wanted = params.get("bank") || sessionStorage.getItem(BANK);
  if (banks && banks.some((b) => b.bank === wanted)) return wanted;
  return banks && banks.length ? banks[0].bank : null;
}

async function loadBanks() {
  if (initial && initial.complete && !sessionStorage.getItem(KEY) && !loadBanks.done) {
    banks = initial.banks;  // as the server rendered them, a moment ago
  } else {
    banks = (await api("GET", "/v1/banks?limit=1000")).banks;
    served = new Map();
  }
  loadBanks.done = true;
  fill(bankSelect, ...banks.map((b) => el("option", { value: b.bank, text: b.bank })));
  forgetKey.hidden = !sessionStorage.getItem(KEY);
  document.getElementById("who").hidden = !banks.length && forgetKey.hidden;
  bankSelect.hidden = !banks.length;
  document.querySelector("label[for=bank-select]").hidden = !banks.length;
}

function keyForm(reason) {
  document.getElementById("who").hidden = true;
  const input = el("input", { type: "password", id: "api-key", autocomplete: "off", required: true, placeholder: "lam_…" });
  const form = el("form", { class: "stack keyform", onsubmit: (e) => {
    e.preventDefault();
    sessionStorage.setItem(KEY, input.value.trim());
    banks = null;
    render();
  } },
    el("h2", { text: "An API key is needed" }),
    el("p", { class: "muted", text: "This server asks for a key (lamina keys create) or, while it has none, its local token (the local-token file in Lamina's data directory; the address lamina inspect prints signs in without it). It is kept in this tab only (sessionStorage) and sent as Authorization: Bearer." }),
    reason ? el("p", { class: "error", role: "alert", text: reason }) : null,
    el("label", { for: "api-key" }, "API key", input),
    el("div", { class: "row" }, el("button", { type: "submit", class: "primary", text: "Use this key" })),
  );
  show(form);
  input.focus();
}

async function render() {
  const { page, params } = route();
  for (const link of document.querySelectorAll("nav a")) {
    if (link.dataset.page === page) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  try {
    if (banks === null) await loadBanks();
  } catch (err) {
    if (err.status === 401) {
      const had = sessionStorage.getItem(KEY);
      sessionStorage.removeItem(KEY);
      keyForm(had ? `That key was refused: ${err.message}` : null);
      return;
    }
    show(errorBox(err));
    return;
  }
  const bank = currentBank(params);
  if (bank) { bankSelect.value = bank; sessionStorage.setItem(BANK, bank); }
  const pages = { banks: pageBanks, memories: pageMemories, recall: pageRecall, logs: pageLogs, hooks: pageHooks };
  const draw = pages[page] || pageBanks;
  // The first render keeps what the server rendered (the banks) on screen until the page's
  // own data is there; later ones say they are loading.
  if (render.count++) show(el("p", { class: "muted", text: "Loading…" }));
  main.setAttribute("aria-busy", "true");
  try {
    await draw(bank, params);
  } catch (err) {
    if (err.status === 401) { sessionStorage.removeItem(KEY); banks = null; keyForm(err.message); return; }
    show(errorBox(err));
  }
  main.removeAttribute("aria-busy");
  document.title = `Lamina inspector · ${page}`;
}
render.count = 0;

function needBank(bank) {
  if (bank) return false;
  show(el("h2", { text: "No bank" }), empty("No bank to show yet. Retain a transcript first: lamina retain FILE --bank NAME"));
  return true;
}

// -- 1. banks ----------------------------------------------------------------------------------
async function pageBanks() {
  const head = el("h2", { text: "Banks" });
  if (!banks.length) {
    show(head, empty("No banks yet. Retain a transcript with: lamina retain FILE --bank NAME"));
    return;
  }
  const details = await Promise.all(banks.map((b) => served.get(b.bank) || api("GET", bankPath(b.bank))));
  served = new Map();  // once: later visits read them afresh
  const cards = details.map((d) => el("section", { class: "card", "aria-label": `Bank ${d.bank}` },
    el("h3", {}, el("a", { href: `#/memories?bank=${enc(d.bank)}`, text: d.bank })),
    el("dl", { class: "facts" },
      el("dt", { text: "documents" }), el("dd", { text: num(d.documents) }),
      el("dt", { text: "memories" }), el("dd", { text: num(d.memories) }),
      el("dt", { text: "records" }), el("dd", { text: num(d.records) }),
      el("dt", { text: "embedded" }), el("dd", { text: num(d.embedded) }),
      el("dt", { text: "embedder" }), el("dd", { text: Object.keys(d.embedders).join(", ") || "none" }),
      el("dt", { text: "last retain" }), el("dd", { class: "date", text: when(d.last_retain) }),
      el("dt", { text: "first" }), el("dd", { class: "date", text: d.first_time ? when(d.first_time) : "undated" }),
      el("dt", { text: "last" }), el("dd", { class: "date", text: d.first_time ? when(d.last_time) : "undated" }),
      el("dt", { text: "context logs" }), el("dd", {}, d.logs ? el("a", { href: `#/logs?bank=${enc(d.bank)}`, text: num(d.logs) }) : "0"),
      el("dt", { text: "size on disk" }), el("dd", { text: d.bank_bytes !== null ? bytes(d.bank_bytes) : `${bytes(d.database_bytes)} (whole database)` }),
    ),
    el("div", { class: "row", style: "margin-top:8px" },
      el("a", { href: `#/memories?bank=${enc(d.bank)}`, text: "Memories" }),
      el("a", { href: `#/recall?bank=${enc(d.bank)}`, text: "Recall" }),
    ),
  ));
  show(head, el("div", { class: "cards" }, cards));
}

// -- 2. memories -------------------------------------------------------------------------------
function confirmDialog(title, text, ok) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = ok;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
  });
}

const EXCERPT = 600;

function marked(text, words) {
  // The text with every searched word in <mark>, as text nodes (never parsed as HTML).
  if (!words.length) return [text];
  const lower = text.toLowerCase();
  const out = [];
  let at = 0;
  while (at < text.length) {
    let best = -1, size = 0;
    for (const w of words) {
      const i = lower.indexOf(w, at);
      if (i >= 0 && (best < 0 || i < best)) { best = i; size = w.length; }
    }
    if (best < 0) break;
    out.push(text.slice(at, best), el("mark", { text: text.slice(best, best + size) }));
    at = best + size;
  }
  out.push(text.slice(at));
  return out;
}

function excerpt(text, words) {
  // The first EXCERPT characters, or a window around the first searched word.
  if (text.length <= EXCERPT) return text;
  const lower = text.toLowerCase();
  const hits = words.map((w) => lower.indexOf(w)).filter((i) => i >= 0);
  const first = hits.length ? Math.min(...hits) : 0;
  const start = first > EXCERPT - 150 ? first - 150 : 0;
  return (start ? "…" : "") + text.slice(start, start + EXCERPT) + "…";
}

function memoryCard(m, bank, refresh, words) {
  const long = m.text.length > EXCERPT;
  const text = el("div", { class: "text" }, marked(excerpt(m.text, words), words));
  const more = long ? el("button", { type: "button", text: "Show all", onclick: () => { fill(text, marked(m.text, words)); more.remove(); } }) : null;
  const lines = m.source.first_line ? `lines ${m.source.first_line}–${m.source.last_line}` : `${m.source.records} records`;
  const said = m.said_at && m.said_at !== m.occurred_at ? `said ${when(m.said_at)}` : null;
  const forgetMemory = async () => {
    if (!(await confirmDialog("Forget this memory?", `Memory ${m.id} will be removed from bank ${bank}. This cannot be undone.`, "Forget memory"))) return;
    await api("DELETE", `${bankPath(bank)}/memories/${enc(m.id)}`);
    refresh(`Forgot memory ${m.id}.`);
  };
  const forgetDocument = async () => {
    if (!(await confirmDialog("Forget this whole document?", `Document ${m.document} and every memory retained from it will be removed from bank ${bank}. This cannot be undone.`, "Forget document"))) return;
    const done = await api("DELETE", `${bankPath(bank)}/documents/${enc(m.document)}`);
    refresh(`Forgot document ${m.document} (${done.memories_forgotten} memories).`);
  };
  const markWrong = async () => {
    await api("PUT", `${bankPath(bank)}/marks/${enc(m.id)}`, { state: "wrong" });
    refresh(`Marked memory ${m.id} wrong: recall leaves it out and the hook never injects it.`);
  };
  const supersede = async () => {
    const newer = window.prompt("The id of the newer memory that replaces this one:");
    if (!newer || !newer.trim()) return;
    await api("PUT", `${bankPath(bank)}/marks/${enc(m.id)}`, { state: "superseded", replacement: newer.trim() });
    refresh(`Memory ${m.id} is superseded by ${newer.trim()}.`);
  };
  const unmark = async () => {
    await api("DELETE", `${bankPath(bank)}/marks/${enc(m.id)}`);
    refresh(`Memory ${m.id} is no longer marked.`);
  };
  const mark = m.mark;
  const markText = mark ? (mark.state === "wrong" ? "marked wrong" : `superseded by ${mark.replacement}`) + (mark.note ? `: ${mark.note}` : "") : null;
  return el("article", { class: mark ? "memory marked" : "memory", "data-id": m.id },
    el("header", {},
      el("strong", { text: m.kind }),
      markText ? el("span", { class: "chip mark", text: markText }) : null,
      el("span", { text: m.occurred_at ? `happened ${when(m.occurred_at)}` : "undated" }),
      said ? el("span", { text: said }) : null,
      el("span", { class: "mono", title: m.source.file || "", text: `${m.document} · ${lines}` }),
      m.tokens !== null ? el("span", { text: `${m.tokens} tokens` }) : null,
    ),
    originLine(m.origin),
    text, more,
    (m.entities.length || m.tags.length) ? el("div", { class: "chips" },
      m.entities.map((e) => el("span", { class: "chip", text: e })),
      m.tags.map((t) => el("span", { class: "chip tag", text: `#${t}` })),
    ) : null,
    m.source.file ? el("p", { class: "muted mono", style: "margin:4px 0 0;font-size:0.8rem", text: `${m.source.file}${m.source.first_line ? ":" + m.source.first_line + "-" + m.source.last_line : ""}` }) : null,
    el("div", { class: "row", style: "margin-top:6px" },
      mark ? el("button", { type: "button", onclick: unmark, text: "Unmark" })
        : [el("button", { type: "button", onclick: markWrong, text: "Mark wrong" }),
           el("button", { type: "button", onclick: supersede, text: "Superseded by…" })],
      el("button", { type: "button", class: "danger", onclick: forgetMemory, text: "Forget memory" }),
      el("button", { type: "button", class: "danger", onclick: forgetDocument, text: "Forget document" }),
    ),
  );
}

function originLine(origin) {
  // Which agent and session a memory (or a recalled hit) came from, as its document says.
  if (!origin) return null;
  const parts = [];
  if (origin.agent) parts.push(el("span", { class: "chip agent", text: origin.agent + (origin.agent_version ? ` ${origin.agent_version}` : "") }));
  if (origin.session_id) parts.push(el("span", { class: "mono", title: origin.session_id, text: `session ${origin.session_id.slice(0, 8)}` }));
  if (origin.cwd) parts.push(el("span", { class: "mono muted", title: origin.cwd, text: origin.cwd }));
  return el("p", { class: "origin" }, parts);
}

async function pageMemories(bank, params) {
  if (needBank(bank)) return;
  if (params.get("id")) {  // one memory, e.g. from the hook activity page
    const m = await api("GET", `${bankPath(bank)}/memories/${enc(params.get("id"))}`);
    show(el("h2", { text: `A memory of ${bank}` }),
      el("p", {}, el("a", { href: `#/memories?bank=${enc(bank)}`, text: "← All memories" })),
      el("p", { class: "muted", role: "status" }),
      el("div", { id: "memories" }, memoryCard(m, bank, () => go("memories", { bank }), [])));
    return;
  }
  const filters = { q: params.get("q") || "", document: params.get("document") || "", agent: params.get("agent") || "", kind: params.get("kind") || "",
    tag: params.get("tag") || "", since: params.get("since") || "", until: params.get("until") || "" };
  const offset = Number(params.get("offset") || 0);
  const limit = 50;
  const query = new URLSearchParams({ limit: String(limit), offset: String(offset) });
  for (const [k, v] of Object.entries(filters)) {
    if (!v) continue;
    query.set(k, k === "since" ? `${v}T00:00:00Z` : k === "until" ? `${v}T23:59:59Z` : v);
  }
  const [page, documents] = await Promise.all([
    api("GET", `${bankPath(bank)}/memories?${query}`),
    api("GET", `${bankPath(bank)}/documents?limit=1000`),
  ]);
  const field = (name, label, input) => el("label", { for: `f-${name}` }, label, input);
  const q = el("input", { id: "f-q", type: "search", name: "q", value: filters.q, placeholder: "words in the text" });
  const documentSelect = el("select", { id: "f-document", name: "document" }, el("option", { value: "", text: "any document" }),
    documents.documents.map((d) => el("option", { value: d.id, text: d.id, selected: d.id === filters.document })));
  const agentSelect = el("select", { id: "f-agent", name: "agent" }, el("option", { value: "", text: "any agent" }),
    Object.entries(page.agents || {}).map(([a, n]) => el("option", { value: a, text: `${a} (${n} sessions)`, selected: a === filters.agent })));
  const kindSelect = el("select", { id: "f-kind", name: "kind" }, el("option", { value: "", text: "any kind" }),
    Object.entries(page.kinds).map(([k, n]) => el("option", { value: k, text: `${k} (${n})`, selected: k === filters.kind })));
  const tag = el("input", { id: "f-tag", name: "tag", value: filters.tag });
  const since = el("input", { id: "f-since", type: "date", name: "since", value: filters.since });
  const until = el("input", { id: "f-until", type: "date", name: "until", value: filters.until });
  const form = el("form", { class: "filters", role: "search", onsubmit: (e) => {
    e.preventDefault();
    go("memories", { bank, q: q.value.trim(), document: documentSelect.value, agent: agentSelect.value, kind: kindSelect.value, tag: tag.value.trim(), since: since.value, until: until.value });
  } },
    el("label", { for: "f-q", class: "wide" }, "Search (every word must occur)", q),
    field("document", "Document", documentSelect), field("agent", "Agent", agentSelect), field("kind", "Kind", kindSelect), field("tag", "Tag", tag),
    field("since", "Since", since), field("until", "Until", until),
    el("div", { class: "row" }, el("button", { type: "submit", class: "primary", text: "Search" }),
      el("button", { type: "button", text: "Clear", onclick: () => go("memories", { bank }) })),
  );
  const status = el("p", { class: "muted", role: "status" });
  const refresh = (message) => { render().then(() => { const s = main.querySelector("[role=status]"); if (s) s.textContent = message; }); };
  const from = page.total ? offset + 1 : 0;
  const to = Math.min(offset + limit, page.total);
  const pager = () => el("div", { class: "pager" },
    el("button", { type: "button", disabled: offset === 0, text: "← Newer", onclick: () => go("memories", { bank, ...filters, offset: Math.max(0, offset - limit) }) }),
    el("span", { text: `${from}–${to} of ${num(page.total)}` }),
    el("button", { type: "button", disabled: to >= page.total, text: "Older →", onclick: () => go("memories", { bank, ...filters, offset: offset + limit }) }),
  );
  const filtered = Object.values(filters).some(Boolean);
  const list = page.items.length
    ? el("div", { id: "memories" }, page.items.map((m) => memoryCard(m, bank, refresh, filters.q.toLowerCase().split(/\s+/).filter(Boolean))))
    : empty(filtered ? "No memory matches these filters." : "This bank holds no memories yet.");
  const paged = page.total > limit;
  show(el("h2", { text: `Memories of ${bank}` }), form, status,
    el("p", { class: "muted", id: "memory-count", text: `${num(page.total)} ${filtered ? "matching " : ""}memories` }),
    paged ? pager() : null, list, paged ? pager() : null);
}

// -- 3. recall playground ----------------------------------------------------------------------
function contextMessages(text) {
  // "user: ..." / "assistant: ..." lines; a line without a role continues the previous message.
  const out = [];
  for (const line of text.split("\n")) {
    const m = line.match(/^\s*(user|assistant)\s*:\s?(.*)$/i);
    if (m) out.push({ role: m[1].toLowerCase(), content: m[2] });
    else if (out.length) out[out.length - 1].content += "\n" + line;
    else if (line.trim()) out.push({ role: "user", content: line });
  }
  return out.filter((m) => m.content.trim());
}

function channelBars(hit, top) {
  return el("div", { class: "bars", "aria-label": "score per channel" }, CHANNELS.map((name) => {
    const c = hit.channels[name];
    const width = c && top[name] > 0 ? Math.max(3, Math.round((100 * c.score) / top[name])) : 0;
    return [
      el("span", { text: name }),
      el("div", { class: `bar ${name}`, role: "img", "aria-label": c ? `${name}: rank ${c.rank}, score ${c.score}` : `${name}: not found` },
        el("span", { style: `width:${width}%` })),
      el("span", { class: "muted", text: c ? `#${c.rank} · ${Number(c.score).toPrecision(3)}` : "—" }),
    ];
  }));
}

async function pageRecall(bank, params) {
  if (needBank(bank)) return;
  const mode = params.get("mode") === "hook" ? "hook" : "query";
  const query = el("textarea", { id: "r-query", name: "query", rows: 2, placeholder: "what to search for" });
  query.value = params.get("q") || "";
  const prompt = el("textarea", { id: "r-prompt", rows: 2, placeholder: "the next prompt" });
  prompt.value = params.get("prompt") || "";
  const context = el("textarea", { id: "r-context", rows: 4, placeholder: "user: earlier prompt\nassistant: earlier reply" });
  // Empty: the hook's own budget (hook.budget), which the server recalls with.
  const budget = el("input", { id: "r-budget", type: "number", min: 1, max: 200000, value: params.get("budget") || "",
    placeholder: hookBudget ? `${hookBudget} (the hook's)` : "the hook's" });
  const agents = (await api("GET", `${bankPath(bank)}/memories?limit=1`)).agents || {};
  const agent = el("select", { id: "r-agent" }, el("option", { value: "", text: "every agent (as the hook)" }),
    Object.keys(agents).map((a) => el("option", { value: a, text: a, selected: a === params.get("agent") })));
  const hookMode = el("input", { id: "r-hook", type: "checkbox", checked: mode === "hook", onchange: () => {
    queryLabel.hidden = hookMode.checked; hookFields.hidden = !hookMode.checked;
  } });
  const queryLabel = el("label", { for: "r-query", hidden: mode === "hook" }, "Query", query);
  const hookFields = el("div", { class: "stack", hidden: mode !== "hook" },
    el("label", { for: "r-prompt" }, "Prompt", prompt),
    el("label", { for: "r-context" }, "Earlier turns (optional; one message per line as user: … or assistant: …)", context));
  const results = el("div", { id: "recall-results" });
  const run = async () => {
    const body = {};
    if (Number(budget.value) > 0) body.budget = Number(budget.value);
    if (agent.value) body.agents = [agent.value];
    if (hookMode.checked) { body.prompt = prompt.value; body.context = contextMessages(context.value); }
    else body.query = query.value;
    fill(results, el("p", { class: "muted", text: "Recalling…" }));
    try {
      drawRecall(results, await api("POST", `${bankPath(bank)}/recall/preview`, body));
    } catch (err) { fill(results, errorBox(err)); }
  };
  const form = el("form", { class: "stack", onsubmit: (e) => { e.preventDefault(); run(); } },
    el("label", { class: "row", for: "r-hook" }, hookMode, "Compose the query as the prompt hook does (prompt + last turns)"),
    queryLabel, hookFields,
    el("div", { class: "row" }, el("label", { for: "r-budget" }, "Budget (tokens) "), budget,
      Object.keys(agents).length ? [el("label", { for: "r-agent" }, "Agent "), agent] : null,
      el("button", { type: "submit", class: "primary", text: "Recall" })),
  );
  show(el("h2", { text: `Recall playground · ${bank}` }), form, results);
  if ((mode === "query" && query.value) || (mode === "hook" && prompt.value)) await run();
  else (mode === "hook" ? prompt : query).focus();
}

function drawRecall(target, data) {
  const top = {};
  for (const hit of data.results) for (const [name, c] of Object.entries(hit.channels)) top[name] = Math.max(top[name] || 0, c.score);
  const list = data.results.length
    ? el("ol", { class: "hits", id: "hits" }, data.results.map((hit, i) => el("li", { class: "memory" },
        el("header", {},
          el("strong", { text: `#${i + 1}` }), el("span", { class: "relevance", title: "relevance, 0 to 1", text: `relevance ${Number(hit.score).toFixed(3)}` }),
          el("span", { text: hit.kind }), el("span", { text: when(hit.time) }),
          el("span", { class: "mono", text: hit.document }), el("span", { text: `${hit.tokens} tokens${hit.shortened ? " (shortened)" : ""}` })),
        originLine((data.origins || {})[hit.document]),
        el("div", { class: "text", text: hit.text.length > 400 ? hit.text.slice(0, 400) + "…" : hit.text }),
        channelBars(hit, top))))
    : empty("No memory matched this query.");
  const block = data.block
    ? [el("p", { class: "muted", id: "block-size", text: `${num(data.block_tokens)} of ${num(data.budget)} tokens · ${num(data.block_chars)} characters · ${data.block_memories} memories` }),
       el("pre", { id: "block", text: data.block })]
    : [empty(data.floor && !data.floor.passed ? `The hook would inject nothing: ${data.floor.reason}` : "The hook would inject nothing for this query.")];
  fill(target,
    el("p", { class: "muted" }, `Query${data.composed ? " (composed as the hook does)" : ""}: `, el("code", { text: data.query })),
    el("p", { class: "muted", text: `${data.results.length} results of ${num(data.considered)} considered, ${num(data.tokens)} tokens` }),
    el("div", { class: "split" },
      el("section", { "aria-label": "results" }, el("h3", { text: "Results, fused rank and channels" }), list),
      el("section", { "aria-label": "block" }, el("h3", { text: "The block the prompt hook would inject" }), block)),
  );
}

// -- 4. context logs ---------------------------------------------------------------------------
const levelClass = (level) => (level > 5 ? "lmore" : `l${level}`);

async function pageLogs(bank, params) {
  if (needBank(bank)) return;
  const data = await api("GET", `${bankPath(bank)}/logs`);
  const head = el("h2", { text: `Context logs · ${bank}` });
  if (!data.logs.length) {
    show(head, empty("This bank has no context logs. A log is kept by: lamina compile FILE --bank BANK --log NAME (or the API's /logs endpoints)."));
    return;
  }
  const chosen = params.get("log") && data.logs.some((l) => l.id === params.get("log")) ? params.get("log") : data.logs[0].id;
  const table = el("div", { class: "table-wrap" }, el("table", {},
    el("thead", {}, el("tr", {}, el("th", { text: "log" }), el("th", { class: "num", text: "messages" }), el("th", { class: "num", text: "tokens" }), el("th", { class: "num", text: "summaries" }), el("th", { text: "updated" }))),
    el("tbody", {}, data.logs.map((l) => el("tr", {},
      el("td", {}, l.id === chosen ? el("strong", { text: l.id }) : el("a", { href: `#/logs?bank=${enc(bank)}&log=${enc(l.id)}`, text: l.id })),
      el("td", { class: "num", text: num(l.messages) }), el("td", { class: "num", text: num(l.tokens) }),
      el("td", { class: "num", text: num(l.summaries) }), el("td", { text: when(l.updated) })))),
  ));
  const holder = el("div", { id: "strip-holder" });
  const budget = el("input", { id: "s-budget", type: "number", min: 1000, step: 1000, value: params.get("budget") || 8000 });
  const form = el("form", { class: "row", onsubmit: async (e) => {
    e.preventDefault();
    fill(holder, el("p", { class: "muted", text: "Compiling…" }));
    try { drawStrip(holder, bank, await api("POST", `${bankPath(bank)}/logs/${enc(chosen)}/strip`, { budget: Number(budget.value) })); }
    catch (err) { fill(holder, errorBox(err)); }
  } },
    el("label", { for: "s-budget", text: "Compile with a budget of" }), budget, el("span", { text: "tokens" }),
    el("button", { type: "submit", class: "primary", text: "Compile (preview)" }));
  show(head, table, el("h3", { text: `Log ${chosen}` }), form, holder);
  drawStrip(holder, bank, await api("GET", `${bankPath(bank)}/logs/${enc(chosen)}/strip`));
}

function drawStrip(target, bank, s) {
  const detail = el("div", { id: "summary-detail" },
    el("p", { class: "muted", text: "Choose a stretch (click it, or Tab to it and press Enter): a summary opens beside the messages it covers." }));
  const total = s.stretches.reduce((a, x) => a + Math.max(1, x.tokens), 0) || 1;
  const buttons = s.stretches.map((x, i) => {
    const name = x.level ? `summary level ${x.level}` : "raw";
    const label = `messages ${x.start}–${x.end - 1}: ${name}, ${x.region}, ${x.tokens} tokens (${x.shown_tokens} shown)${x.pins.length ? ", pinned: " + x.pins.join(", ") : ""}`;
    const classes = [levelClass(x.level), x.region, x.pins.length ? "pinned" : "", s.prefix_break !== null && s.prefix_break !== undefined && x.start <= s.prefix_break && s.prefix_break < x.end ? "break" : ""].join(" ");
    const b = el("button", { type: "button", class: classes, title: label, "aria-label": label, "aria-pressed": "false",
      "data-level": x.level, style: `flex:${Math.max(1, x.tokens) / total} 0 auto`,
      onclick: () => {
        for (const other of target.querySelectorAll(".strip button")) other.setAttribute("aria-pressed", "false");
        b.setAttribute("aria-pressed", "true");
        showStretch(detail, bank, s, x);
      } }, `${x.level ? "L" + x.level : "raw"} · ${short(x.tokens)}`);
    b.dataset.index = i;
    return b;
  });
  const levels = s.levels.map((l) => el("span", {}, el("i", { class: levelClass(l), style: `background:var(--${l === 0 ? "raw" : l > 5 ? "l5" : "l" + l})` }), l ? `summary level ${l}` : "raw"));
  const facts = s.compiled
    ? `${num(s.messages)} messages, ${num(s.tokens)} tokens; ${s.preview ? "this compile" : "the last compile"} sent ${num(s.request_tokens)} tokens: head 0–${s.head_end - 1}, recent from ${s.tail_start}`
    : `${num(s.messages)} messages, ${num(s.tokens)} tokens; not compiled yet (everything raw)`;
  const cache = s.preview
    ? el("p", { class: "muted", id: "prefix-note", text: s.prefix_break === null || s.prefix_break === undefined
        ? (s.report && s.report.changed && s.report.changed.first_compile ? "First compile of this log: no cached prefix to keep." : "This compile keeps the last compile's prefix (a cache hit).")
        : `This compile breaks the cached prefix at message ${s.prefix_break} (marked red).` })
    : null;
  const rows = s.stretches.map((x) => el("tr", {},
    el("td", { text: `${x.start}–${x.end - 1}` }), el("td", { text: x.region }),
    el("td", { text: x.level ? `L${x.level}` : "raw" }), el("td", { class: "num", text: num(x.tokens) }),
    el("td", { class: "num", text: num(x.shown_tokens) }), el("td", { text: x.pins.join(", ") })));
  fill(target,
    el("p", { id: "strip-facts", text: facts }),
    s.preview ? el("p", { class: "muted", text: "Preview: computed now and not stored; the agent's next compile is unchanged." }) : null,
    cache,
    el("div", { class: "legend" }, levels, el("span", { text: "▁ head and recent windows (underlined)" }), s.pins.length ? el("span", { text: "📌 pinned" }) : null),
    el("div", { class: "strip", id: "strip", role: "group", "aria-label": "the log from oldest to newest" }, buttons),
    s.pins.length ? el("p", { class: "muted", text: `Pins: ${s.pins.map((p) => `${p.name} (${p.mode}${p.level ? " " + p.level : ""})`).join(", ")}` }) : null,
    detail,
    compileHistory(s.compiles || []),
    el("details", {}, el("summary", { text: "Stretches as a table" }), el("div", { class: "table-wrap" }, el("table", {},
      el("thead", {}, el("tr", {}, ["messages", "region", "shown as", "tokens", "shown tokens", "pins"].map((h) => el("th", { text: h })))),
      el("tbody", {}, rows)))),
  );
}

function compileHistory(compiles) {
  // The log's last compiles, newest first: did each keep the provider's cached prefix?
  if (!compiles.length) return null;
  const kept = compiles.filter((c) => !c.first && c.prefix_break === null).length;
  const later = compiles.filter((c) => !c.first).length;
  return el("section", { id: "compiles", "aria-label": "recent compiles" },
    el("h3", { text: "Recent compiles and the prompt cache" }),
    el("p", { class: "muted", text: later ? `${kept} of ${later} compiles after the first kept the previous request's prefix whole.` : "One compile so far." }),
    el("div", { class: "table-wrap" }, el("table", {},
      el("thead", {}, el("tr", {}, ["when", "messages", "request tokens", "cached prefix"].map((h) => el("th", { text: h })))),
      el("tbody", {}, compiles.slice().reverse().map((c) => el("tr", { class: c.prefix_break !== null && !c.first ? "broke" : "" },
        el("td", { text: when(c.at) }), el("td", { class: "num", text: num(c.messages) }),
        el("td", { class: "num", text: num(c.tokens) }),
        el("td", { text: c.first ? "first compile" : c.prefix_break === null ? "kept" : `broke at message ${c.prefix_break}` })))))));
}

async function showStretch(target, bank, s, x) {
  if (!x.summary) {
    fill(target, el("p", { class: "muted", text: `Messages ${x.start}–${x.end - 1} are shown raw (${x.region}), ${num(x.shown_tokens)} tokens.` }));
    return;
  }
  fill(target, el("p", { class: "muted", text: "Loading the summary…" }));
  try {
    const d = await api("GET", `${bankPath(bank)}/logs/${enc(s.log)}/summaries/${enc(x.summary)}`);
    fill(target, el("div", { class: "split" },
      el("section", { "aria-label": "summary" },
        el("h3", { text: `Summary level ${d.level} of messages ${d.start}–${d.end - 1}` }),
        el("p", { class: "muted", text: `${num(d.tokens)} tokens · ${d.summariser}` }),
        el("pre", { id: "summary-text", text: d.text })),
      el("section", { "aria-label": "messages covered" },
        el("h3", { text: `The ${num(d.covered)} messages it covers${d.covered > d.messages.length ? ` (first ${d.messages.length} shown)` : ""}` }),
        el("div", { class: "covered" }, d.messages.map((m) => el("div", { class: "msg" },
          el("p", { class: "who", text: `#${m.position} ${m.role} · ${m.kind} · ${m.tokens} tokens` }),
          el("div", { class: "text", text: m.text || "(no text)" })))))));
  } catch (err) { fill(target, errorBox(err)); }
}

// -- 5. hook activity --------------------------------------------------------------------------
function injectionsSection(data) {
  // What the prompt hook injected on each prompt, newest first, with the memories and why
  // nothing when nothing was.
  const head = el("h2", { text: "Injections" });
  if (!data.injections.length) return [head, empty("No prompts recorded yet: the prompt hook adds one entry per prompt.")];
  return [head, el("div", { class: "table-wrap" }, el("table", { class: "injections" },
    el("thead", {}, el("tr", {}, ["time", "session", "prompt", "outcome", "memories"].map((h) => el("th", { text: h })))),
    el("tbody", {}, data.injections.map((entry) => el("tr", {},
      el("td", { text: when(entry.at) }),
      el("td", { class: "mono", text: (entry.session || "—").slice(0, 8) }),
      el("td", { text: entry.prompt === null ? "(not kept)" : entry.prompt }),
      el("td", { text: entry.injected ? `${entry.memories.length} memories, ${entry.tokens} tokens, ${entry.path}, ${Math.round(entry.ms || 0)} ms` : `nothing: ${entry.reason || "no memories found"}` }),
      el("td", {}, entry.memories.length ? el("ol", { class: "injected" }, entry.memories.map((m) => el("li", {},
        el("a", { class: "mono", href: `#/memories?bank=${enc(entry.bank || "")}&id=${enc(m.id)}`, text: m.id }),
        el("span", { class: "muted", text: ` ${m.kind || ""} · score ${m.score} · ${m.tokens} tokens` }),
        m.mark ? el("span", { class: "chip mark", text: m.mark.state === "wrong" ? "marked wrong since" : `superseded by ${m.mark.replacement}` }) : null,
        m.replaces ? el("span", { class: "muted", text: ` (replaces ${m.replaces.join(", ")})` }) : null,
        m.text !== null ? el("div", { class: "muted", style: "font-size:0.85rem", text: m.text.slice(0, 200) }) : el("div", { class: "muted", text: "(forgotten since)" }),
      ))) : "—"),
    )))))];
}

async function pageHooks() {
  const data = await api("GET", "/v1/hooks?limit=300");
  const injected = await api("GET", "/v1/injections?limit=100");
  const head = el("h2", { text: "Hook activity" });
  const where = data.log ? el("p", { class: "muted" }, "From ", el("code", { text: data.log })) : null;
  if (!data.runs.length) {
    show(...injectionsSection(injected), head, where, empty("No hook runs logged yet. They appear once Claude Code runs Lamina's hooks (lamina install)."));
    return;
  }
  const sessions = new Map();
  for (const run of data.runs) {
    if (!sessions.has(run.session)) sessions.set(run.session, []);
    sessions.get(run.session).push(run);
  }
  const sections = [...sessions.entries()].map(([session, runs]) => el("section", { class: "card", style: "margin-bottom:12px" },
    el("h3", { class: "mono", text: session }),
    el("p", { class: "muted", text: `${runs.length} runs, last ${when(runs[0].time)}` }),
    el("div", { class: "table-wrap" }, el("table", {},
      el("thead", {}, el("tr", {}, ["time", "event", "outcome", "total", "stages", "injected"].map((h) => el("th", { text: h })))),
      el("tbody", {}, runs.slice(0, 20).map((run) => {
        const t = run.timings || {};
        const stages = t.stages_ms || {};
        const sum = Object.values(stages).reduce((a, b) => a + b, 0) || 1;
        return el("tr", {},
          el("td", { text: when(run.time) }), el("td", { text: run.event }),
          el("td", { text: run.outcome.split(" | timings")[0] }),
          el("td", { class: "num", text: t.total_ms !== undefined ? `${t.total_ms} ms` : "—" }),
          el("td", {}, Object.keys(stages).length ? [
            el("div", { class: "stages", role: "img", "aria-label": Object.entries(stages).map(([k, v]) => `${k} ${v} ms`).join(", ") },
              Object.entries(stages).map(([k, v]) => el("span", { title: `${k} ${v} ms`, style: `width:${(100 * v) / sum}%` }))),
            el("span", { class: "muted", style: "font-size:0.8rem", text: Object.entries(stages).map(([k, v]) => `${k} ${v}`).join(" · ") }),
          ] : "—"),
          el("td", {}, t.memories !== undefined ? [
            el("span", { text: `${t.memories} memories, ${num(t.chars)} chars${t.lexical_only ? " (lexical only)" : ""}` }),
            (t.ids || []).length && t.bank ? el("ol", { class: "injected" }, t.ids.map((id) =>
              el("li", {}, el("a", { class: "mono", href: `#/memories?bank=${enc(t.bank)}&id=${enc(id)}`, text: id })))) : null,
          ] : "—"),
        );
      }))))));
  show(...injectionsSection(injected), head, where, sections);
}

// -- start ---------------------------------------------------------------------------------------
bankSelect.addEventListener("change", () => {
  sessionStorage.setItem(BANK, bankSelect.value);
  const { page, params } = route();
  go(page === "banks" ? "memories" : page, { bank: bankSelect.value, mode: params.get("mode") });
});
forgetKey.addEventListener("click", () => { sessionStorage.removeItem(KEY); banks = null; render(); });
window.addEventListener("hashchange", () => { render().then(() => main.focus({ preventScroll: true })); });
render();
