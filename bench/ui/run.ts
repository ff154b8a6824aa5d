// bench:ui — the A@UI runtime in a real browser (Chromium via playwright-core,
// launched as the browser tests launch it), fed by the relay of a real server.
//
// 1. Dispatch throughput per transport: 10 widgets rendered, then 1,000
//    updates published in one batch; measured in the page from the first
//    update dispatched to the last (commands/s), plus the runtime alone
//    (dispatch called in a loop in the page, no transport) as the ceiling.
// 2. End-to-end latency per transport: `computer.ui.update()` in Node (an HTTP
//    POST to the relay) to the DOM change in the page (MutationObserver),
//    both timed on the shared wall clock (performance.timeOrigin + now()),
//    one update in flight at a time; p50 / p99 over N samples.
// Sizes from the environment: UI_BENCH_UPDATES (1000), UI_BENCH_SAMPLES (300),
// UI_BENCH_ROUNDS (3).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ComputerClient } from "../../src/client/index.js";
import { Computer } from "../../src/index.js";
import { createComputerServer } from "../../src/server/index.js";
import { haveChromium, launchChromium } from "../../test/support/chromium.js";
import { percentile } from "../support/stats.js";

if (!haveChromium("bench:ui")) process.exit(1);
const UPDATES = Number(process.env.UI_BENCH_UPDATES ?? 1000);
const WIDGETS = 10;
const SAMPLES = Number(process.env.UI_BENCH_SAMPLES ?? 300);
const ROUNDS = Number(process.env.UI_BENCH_ROUNDS ?? 3);
const TRANSPORTS = ["sse", "websocket", "poll"];

const workspace = mkdtempSync(join(tmpdir(), "ac-bench-ws-"));
const profile = mkdtempSync(join(tmpdir(), "ac-bench-chromium-"));
const server = createComputerServer({
  computer: (observer) => new Computer({ workspace, observer }),
  workspace,
  port: 0,
  logger: false,
});
const base = await server.listen();
const token = server.token as string; // generated, since no token option is given
const client = new ComputerClient({ url: base, token });

server.router.get(
  "/bench/:channel/:transport",
  (_req, res, params) => {
    res.setHeader("content-type", "text/html; charset=utf-8");
    res.end(pageHtml(params.channel, params.transport));
  },
  { public: true },
);

const context = await launchChromium(profile);
await context.addCookies([{ name: server.router.auth.cookieName, value: token, url: base }]);

const f1 = (n: number) => n.toFixed(1);
const f2 = (n: number) => n.toFixed(2);

/** What the page (pageHtml) exposes as `globalThis.bench` to the Node side. */
interface PageBench {
  state: string;
  count: number;
  first: number;
  last: number;
  widgets(): number;
  resetCount(): void;
  /** Resolves with the wall-clock time the DOM showed `value`. */
  waitFor(value: string): Promise<number>;
  /** Updates per second of the runtime alone over `n` updates. */
  local(n: number): number;
}
// Callbacks passed to page.evaluate run in the page (serialized as text), so
// they reach the page's global through a cast, which compiles to nothing.
type WithBench = { bench: PageBench };

async function openPage(channel: string, transport: string) {
  const page = await context.newPage();
  await page.goto(`${base}/bench/${channel}/${transport}`);
  await page.waitForFunction(() => (globalThis as unknown as WithBench).bench?.state === "open");
  return page;
}

const results: { transport: string; rate: number; wallMs?: number }[] = [];
// The runtime alone: the ceiling any transport can reach.
{
  const page = await openPage("bench-local", "sse");
  const rates: number[] = [];
  for (let r = 0; r < ROUNDS; r++)
    rates.push(
      await page.evaluate((n) => (globalThis as unknown as WithBench).bench.local(n), UPDATES),
    );
  results.push({ transport: "none (dispatch loop in page)", rate: Math.max(...rates) });
  await page.close();
}

const latency: { transport: string; p50: number; p99: number }[] = [];
for (const transport of TRANSPORTS) {
  const ui = client.ui.channel(`bench-${transport}`);
  const page = await openPage(`bench-${transport}`, transport);
  const ids: string[] = [];
  for (let i = 0; i < WIDGETS; i++) ids.push((await ui.render("Cell", { v: "0" })).widgetId);
  await page.waitForFunction(
    (n) => (globalThis as unknown as WithBench).bench.widgets() === n,
    WIDGETS,
  );
  const rates: number[] = [];
  const walls: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    await page.evaluate(() => (globalThis as unknown as WithBench).bench.resetCount());
    const commands: { type: "update"; widgetId: string; params: { v: string } }[] = [];
    for (let i = 0; i < UPDATES; i++)
      commands.push({ type: "update", widgetId: ids[i % WIDGETS], params: { v: `${r}:${i}` } });
    const t0 = performance.now();
    const res = await fetch(`${base}/v1/ui/bench-${transport}/commands`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ commands }),
    });
    if (!res.ok) throw new Error(`publish failed: ${res.status} ${await res.text()}`);
    await page.waitForFunction(
      (n) => (globalThis as unknown as WithBench).bench.count >= n,
      UPDATES,
      { polling: 5 },
    );
    walls.push(performance.now() - t0);
    const span = await page.evaluate(
      () =>
        (globalThis as unknown as WithBench).bench.last -
        (globalThis as unknown as WithBench).bench.first,
    );
    rates.push((UPDATES - 1) / (span / 1000));
  }
  results.push({ transport, rate: Math.max(...rates), wallMs: Math.min(...walls) });

  // latency: update() -> DOM change, one in flight at a time
  const target = ids[0];
  const samples: number[] = [];
  for (let k = 0; k < SAMPLES + 20; k++) {
    const value = `lat-${k}`;
    const sent = performance.timeOrigin + performance.now();
    await ui.update(target, { v: value });
    const seen = await page.evaluate(
      (v) => (globalThis as unknown as WithBench).bench.waitFor(v),
      value,
    );
    if (k >= 20) samples.push(seen - sent); // first 20: warm-up
  }
  latency.push({
    transport,
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
  });
  await page.close();
}

await context.close();
await server.close();
rmSync(profile, { recursive: true, force: true });
rmSync(workspace, { recursive: true, force: true });

console.log(
  `\nA@UI runtime in Chromium: ${UPDATES} updates to ${WIDGETS} widgets (best of ${ROUNDS})\n`,
);
console.log("| transport | commands/s dispatched in the page | publish → last DOM update (ms) |");
console.log("| --- | ---: | ---: |");
for (const r of results) {
  console.log(
    `| ${r.transport} | ${Math.round(r.rate).toLocaleString("en-US")} | ${r.wallMs === undefined ? "–" : f1(r.wallMs)} |`,
  );
}
console.log(
  `\nEnd-to-end latency, computer.ui.update() → DOM change (${SAMPLES} samples, one in flight)\n`,
);
console.log("| transport | p50 (ms) | p99 (ms) |");
console.log("| --- | ---: | ---: |");
for (const l of latency) console.log(`| ${l.transport} | ${f2(l.p50)} | ${f2(l.p99)} |`);
process.exit(0);

function pageHtml(channel: string, transport: string): string {
  return `<!doctype html><meta charset="utf-8"><main id="app"></main>
<script type="module">
import { createAAtUIRuntime, relayWidgetId } from "/assets/lib/aui/runtime.js";
import { connectAAtUI } from "/assets/lib/aui/connect.js";
const manifest = { specVersion: "1.0", library: "bench", components: [
  { name: "Cell", description: "one value", params: { type: "object" }, events: [],
    lifecycle: { render: true, update: true, destroy: true } } ] };
const Cell = { mount(el, props) {
  const t = document.createTextNode(props.v); el.append(t);
  return { update(p) { t.data = p.v; }, destroy() {} };
} };
const bench = { state: "connecting", count: 0, first: 0, last: 0, seen: new Map(), waiters: new Map() };
globalThis.bench = bench;
const rt = createAAtUIRuntime({ manifest, components: { Cell }, mountTarget: "#app",
  createWidgetId: relayWidgetId, onEvent: () => {} });
const dispatch = rt.dispatch;
rt.dispatch = (c, meta) => {
  const out = dispatch(c, meta);
  if (c && c.type === "update") {
    const now = performance.now();
    if (bench.count === 0) bench.first = now;
    bench.last = now;
    bench.count++;
  }
  return out;
};
bench.widgets = () => rt.widgets().size;
bench.resetCount = () => { bench.count = 0; };
// DOM-change timestamps on the shared wall clock
new MutationObserver((records) => {
  const at = performance.timeOrigin + performance.now();
  for (const r of records) {
    const v = r.target.data;
    if (typeof v === "string" && v.startsWith("lat-") && !bench.seen.has(v)) {
      bench.seen.set(v, at);
      bench.waiters.get(v)?.(at);
    }
  }
}).observe(document.getElementById("app"), { characterData: true, subtree: true });
bench.waitFor = (v) => bench.seen.has(v) ? bench.seen.get(v) : new Promise((r) => bench.waiters.set(v, r));
// the runtime alone, no transport
bench.local = (n) => {
  const local = createAAtUIRuntime({ manifest, components: { Cell }, mountTarget: document.body,
    onEvent: () => {} });
  const ids = [];
  for (let i = 0; i < 10; i++) ids.push(local.dispatch({ type: "render", component: "Cell", params: { v: "0" } }));
  const t0 = performance.now();
  for (let i = 0; i < n; i++) local.dispatch({ type: "update", widgetId: ids[i % 10], params: { v: String(i) } });
  const dt = performance.now() - t0;
  local.close();
  return n / (dt / 1000);
};
connectAAtUI("/v1/ui/${channel}", rt, { transport: "${transport}",
  onState: (s) => { bench.state = s; } });
</script>`;
}
