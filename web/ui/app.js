// The operators' console: plain DOM over the public HTTP API, nothing else. The token lives in
// this page's memory only and goes out as a bearer header, never in a URL.

const $ = (id) => document.getElementById(id);
const POLL_MS = 2000;
const HISTORY_MS = 5 * 60 * 1000; // the lag chart's window
const PAGE = 20; // events per page
const TAIL_ROWS = 500; // rows the live tail keeps

let token = "";

class ApiError extends Error {
  constructor(status, code, message) {
    super(`${status} ${code}: ${message}`);
    this.status = status;
  }
}

function headers(extra = {}) {
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

async function call(method, path) {
  const answer = await fetch(path, { method, headers: headers() });
  if (!answer.ok) {
    const body = await answer.json().catch(() => ({}));
    const error = body.error || { code: "error", message: answer.statusText };
    throw new ApiError(answer.status, error.code, error.message);
  }
  return answer;
}

const getJson = async (path) => (await call("GET", path)).json();

function say(text, isError = false) {
  const message = $("message");
  message.textContent = text;
  message.className = isError ? "error" : "";
}

function failed(error) {
  if (error.status === 401) say(`${error.message} — enter a token above.`, true);
  else say(error.message, true);
}

function cell(row, content) {
  const td = row.insertCell();
  if (content instanceof Node) td.append(content);
  else td.textContent = content;
  return td;
}

// --- the token -----------------------------------------------------------------------------

function showClaims() {
  // what the token says of itself, for the operator to read; the server verifies it
  let text = "";
  try {
    const claims = JSON.parse(atob(token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));
    text = `scopes: ${claims.scope || "none"}`;
    if (claims.journal_prefix) text += `; ids starting with ${claims.journal_prefix}`;
  } catch {
    text = token ? "not a JWT" : "";
  }
  $("token-claims").textContent = text;
}

$("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  token = $("token").value.trim();
  $("token").value = "";
  showClaims();
  route(); // the page again, with the token
  say(token ? "Token set." : "No token.");
});

$("token-forget").addEventListener("click", () => {
  token = "";
  showClaims();
  say("Token forgotten.");
});

// --- payloads ------------------------------------------------------------------------------

function payloadView(event) {
  const pre = document.createElement("pre");
  if ("payload" in event) pre.textContent = JSON.stringify(event.payload, null, 2);
  else if ("payloadText" in event) pre.textContent = event.payloadText;
  else if ("payloadBinary" in event) {
    const bytes = Uint8Array.from(atob(event.payloadBinary), (c) => c.charCodeAt(0));
    const hex = Array.from(bytes.slice(0, 64), (b) => b.toString(16).padStart(2, "0"));
    pre.textContent = `${bytes.length} bytes: ${hex.join(" ")}${bytes.length > 64 ? " …" : ""}`;
  } else pre.textContent = "(none)";
  return pre;
}

// --- overview ------------------------------------------------------------------------------

const history = new Map(); // partition -> [{at, records, seconds}]
let previous = null; // the last status, for rates
let pollTimer = null;

function sparkline(points) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 120 24");
  svg.setAttribute("class", "spark");
  svg.setAttribute("role", "img");
  const last = points[points.length - 1];
  svg.setAttribute("aria-label", `lag over the last minutes, now ${last.records} records`);
  const now = Date.now();
  const top = Math.max(1, ...points.map((p) => p.records));
  const frame = document.createElementNS(ns, "rect"); // the window, so an empty chart shows
  frame.setAttribute("width", "120");
  frame.setAttribute("height", "24");
  svg.append(frame);
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute(
    "points",
    points
      .map((p) => `${(120 * (1 - (now - p.at) / HISTORY_MS)).toFixed(1)},${(23 - (22 * p.records) / top).toFixed(1)}`)
      .join(" "),
  );
  svg.append(line);
  return svg;
}

function rate(now, before, field, seconds) {
  return before ? ((now[field] - before[field]) / seconds).toFixed(1) : "–";
}

async function pollStatus() {
  try {
    const ready = await fetch("/readyz");
    $("worker-ready").textContent = ready.ok ? "yes" : `no (${ready.status})`;
    const status = await getJson("/status");
    const at = Date.now();
    $("worker-version").textContent = status.version;
    $("quarantined").textContent = $("quarantine-count").textContent = status.quarantinedRecords;
    $("subscriptions").textContent = status.subscriptionsOpen;
    const seconds = previous ? (at - previous.at) / 1000 : 0;
    const before = previous && previous.status;
    $("request-rate").textContent = `${status.requests} (${rate(status, before, "requests", seconds)}/s)`;
    const errors = `${status.clientErrors} 4xx, ${status.serverErrors} 5xx`;
    $("error-rate").textContent = `${errors} (${rate(status, before, "serverErrors", seconds)} 5xx/s)`;
    previous = { at, status };
    const body = $("partitions").tBodies[0];
    body.replaceChildren();
    for (const p of status.partitions) {
      const points = (history.get(p.partition) || []).filter((q) => at - q.at < HISTORY_MS);
      points.push({ at, records: p.lagRecords, seconds: p.lagSeconds });
      history.set(p.partition, points);
      const row = body.insertRow();
      row.dataset.partition = p.partition;
      cell(row, p.partition);
      cell(row, p.lagRecords);
      cell(row, p.lagSeconds.toFixed(1));
      cell(row, sparkline(points));
    }
    if (!status.partitions.length) cell(body.insertRow(), "none (yet)").colSpan = 4;
    showWorkers(status.workers);
  } catch (error) {
    failed(error);
  }
}

function showWorkers(workers) {
  const body = $("workers").tBodies[0];
  body.replaceChildren();
  for (const worker of workers) {
    const row = body.insertRow();
    row.dataset.url = worker.url;
    const here = new URL(worker.url).host === location.host;
    cell(row, here ? `${worker.url} (this worker)` : worker.url);
    cell(row, worker.partitions.join(", ") || "none");
  }
  if (!workers.length) cell(body.insertRow(), "not known (yet)").colSpan = 2;
}

function showOverview() {
  $("worker-url").textContent = location.origin;
  pollStatus();
  pollTimer = setInterval(pollStatus, POLL_MS);
}

// --- quarantine ----------------------------------------------------------------------------

const QUARANTINE_SHOWN = 100; // the API's default; "Show up to 1000" asks for its maximum

async function showQuarantine(limit = QUARANTINE_SHOWN) {
  try {
    const page = await getJson(`/quarantine?limit=${limit}`);
    $("quarantine-total").textContent = page.total;
    const body = $("quarantined-records").tBodies[0];
    body.replaceChildren();
    for (const record of page.records) {
      const row = body.insertRow();
      row.dataset.offset = record.offset;
      cell(row, record.offset);
      cell(row, record.timestamp);
      cell(row, record.key ?? "–");
      const origin = record.originPartition ?? "?";
      cell(row, `${origin}:${record.originOffset ?? "?"}`);
      cell(row, record.reason);
      cell(row, record.replayed ? "yes" : "no");
    }
    if (!page.records.length) cell(body.insertRow(), "none").colSpan = 6;
    $("quarantine-more").hidden = page.records.length >= page.total || limit > QUARANTINE_SHOWN;
  } catch (error) {
    failed(error);
  }
}

$("quarantine-more").addEventListener("click", () => showQuarantine(1000));

// --- journals ------------------------------------------------------------------------------

let nextIds = null;

async function listJournals(after) {
  const query = new URLSearchParams({ prefix: $("prefix").value, limit: String(PAGE) });
  if (after) query.set("after", after);
  try {
    const page = await getJson(`/journals?${query}`);
    const list = $("journal-list");
    if (!after) list.replaceChildren();
    for (const id of page.journals) {
      const link = document.createElement("a");
      link.href = `#/journal/${encodeURIComponent(id)}`;
      link.textContent = id;
      const item = document.createElement("li");
      item.append(link);
      list.append(item);
    }
    nextIds = page.next;
    $("journals-next").hidden = !nextIds;
    say(`${list.children.length} journal(s) listed.`);
  } catch (error) {
    failed(error);
  }
}

$("search-form").addEventListener("submit", (e) => {
  e.preventDefault();
  listJournals(null);
});
$("journals-next").addEventListener("click", () => listJournals(nextIds));

// --- one journal ---------------------------------------------------------------------------

let journalId = null;
let eventsFrom = 1;

const journalPath = (id) => `/journals/${encodeURIComponent(id)}`;

async function readLines(answer) {
  const text = await answer.text();
  return text.split("\n").filter((line) => line).map((line) => JSON.parse(line));
}

async function showEvents(from) {
  eventsFrom = from;
  const events = await readLines(
    await call("GET", `${journalPath(journalId)}/events?from=${from}&limit=${PAGE}`),
  );
  const body = $("events").tBodies[0];
  body.replaceChildren();
  for (const event of events) {
    const row = body.insertRow();
    row.dataset.seqNr = event.seqNr;
    cell(row, event.seqNr);
    cell(row, event.timestamp);
    cell(row, event.tags.join(", "));
    cell(row, payloadView(event));
  }
  if (!events.length) cell(body.insertRow(), "no events").colSpan = 4;
  $("events-next").disabled = events.length < PAGE;
  $("events-next").dataset.from = events.length ? events[events.length - 1].seqNr + 1 : from;
}

async function showJournal(id) {
  journalId = id;
  $("journal-title").textContent = `Journal ${id}`;
  try {
    const info = await getJson(journalPath(id));
    $("journal-seq-nr").textContent = info.seqNr ?? "none";
    $("journal-delete-to").textContent = info.deleteTo ?? "none";
    await showEvents((info.deleteTo ?? 0) + 1);
    try {
      const snapshot = await getJson(`${journalPath(id)}/snapshots/latest`);
      $("journal-snapshot").replaceChildren(`seqNr ${snapshot.seqNr}, `, payloadView(snapshot));
    } catch (error) {
      if (error.status !== 404) throw error;
      $("journal-snapshot").textContent = "none";
    }
  } catch (error) {
    failed(error);
  }
}

$("events-first").addEventListener("click", () => showJournal(journalId));
$("events-next").addEventListener("click", () =>
  showEvents(Number($("events-next").dataset.from)).catch(failed),
);

function confirmed(text) {
  const dialog = $("confirm");
  $("confirm-text").textContent = text;
  dialog.showModal();
  return new Promise((resolve) =>
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true }),
  );
}

async function remove(what, method, path) {
  if (!(await confirmed(`${what} of journal ${journalId}? This cannot be undone.`))) return;
  try {
    await call(method, path);
    say(`${what}: done.`);
    await showJournal(journalId);
  } catch (error) {
    failed(error);
  }
}

$("delete-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const to = $("delete-to").value;
  remove(`Delete events up to ${to}`, "DELETE", `${journalPath(journalId)}/events?to=${to}`);
});
$("purge").addEventListener("click", () => remove("Purge", "DELETE", journalPath(journalId)));

// --- live tail: server-sent events read through fetch (an EventSource cannot send a token) --

const tail = { running: false, position: null, count: 0, abort: null, run: 0 };

function tailState(text) {
  $("tail-state").textContent = text;
}

function showTailed(event) {
  const body = $("tail-events").tBodies[0];
  const row = body.insertRow(0);
  row.dataset.id = event.id;
  row.dataset.seqNr = event.seqNr;
  cell(row, event.id);
  cell(row, event.seqNr);
  cell(row, event.timestamp);
  cell(row, event.tags.join(", "));
  cell(row, payloadView(event));
  while (body.rows.length > TAIL_ROWS) body.deleteRow(-1);
  $("tail-count").textContent = ++tail.count;
}

// one SSE message: its id (a position) and data (an event's JSON line), comments left out
function dispatch(block) {
  let data = null;
  for (const line of block.split("\n")) {
    if (line.startsWith("id:")) tail.position = line.slice(3).trim();
    else if (line.startsWith("data:")) data = line.slice(5).trim();
  }
  $("tail-position").textContent = tail.position || "now";
  if (data) showTailed(JSON.parse(data));
}

async function follow() {
  const query = new URLSearchParams({ live: "true" });
  // a fresh tail starts at the end: from the start it would first go through the whole log
  if (!tail.position) query.set("after", "end");
  if ($("tail-tags").value) query.set("tags", $("tail-tags").value);
  if ($("tail-prefix").value) query.set("prefix", $("tail-prefix").value);
  const extra = { Accept: "text/event-stream" };
  if (tail.position) extra["Last-Event-ID"] = tail.position; // resume exactly after it
  tail.abort = new AbortController();
  const answer = await fetch(`/events?${query}`, { headers: headers(extra), signal: tail.abort.signal });
  if (!answer.ok) {
    const body = await answer.json().catch(() => ({ error: { code: "error", message: "" } }));
    throw new ApiError(answer.status, body.error.code, body.error.message);
  }
  tailState("live");
  const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffered += value;
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      dispatch(buffered.slice(0, end));
      buffered = buffered.slice(end + 2);
    }
  }
}

// one loop per start or resume: a paused loop that wakes late sees it is no longer current
async function runTail() {
  const run = ++tail.run;
  const current = () => tail.running && tail.run === run;
  while (current()) {
    try {
      await follow();
    } catch (error) {
      if (!current()) return;
      if (error.status === 401 || error.status === 403 || error.status === 400) {
        failed(error);
        stopTail("stopped");
        return;
      }
    }
    if (!current()) return;
    tailState("reconnecting");
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

function stopTail(state) {
  tail.running = false;
  if (tail.abort) tail.abort.abort();
  $("tail-pause").textContent = state === "paused" ? "Resume" : "Pause";
  $("tail-pause").disabled = state !== "paused";
  tailState(state);
}

$("tail-form").addEventListener("submit", (e) => {
  e.preventDefault();
  stopTail("stopped");
  tail.position = null; // a new filter starts over
  tail.count = 0;
  $("tail-events").tBodies[0].replaceChildren();
  tail.running = true;
  $("tail-pause").disabled = false;
  tailState("connecting");
  runTail();
});

$("tail-pause").addEventListener("click", () => {
  if (tail.running) stopTail("paused");
  else {
    tail.running = true;
    $("tail-pause").textContent = "Pause";
    tailState("connecting");
    runTail();
  }
});

// for tests and operators alike: drop the connection as a network failure would
window.dropTail = () => tail.abort && tail.abort.abort(new Error("dropped"));

// --- pages ---------------------------------------------------------------------------------

function route() {
  clearInterval(pollTimer);
  say(""); // a message belongs to the page it came from
  const hash = location.hash || "#/overview";
  const [, page, ...rest] = hash.split("/");
  const id = page === "journal" ? decodeURIComponent(rest.join("/")) : null;
  for (const section of document.querySelectorAll("main > section")) {
    section.hidden = section.id !== page;
  }
  for (const link of document.querySelectorAll("nav a")) {
    if (link.getAttribute("href") === `#/${page}`) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (page === "overview" || page === "quarantine") showOverview();
  if (page === "quarantine") showQuarantine();
  else if (page === "journal") showJournal(id);
  const heading = document.querySelector(`#${page} h2`);
  if (heading) {
    heading.tabIndex = -1;
    heading.focus();
  }
}

window.addEventListener("hashchange", route);
route();
