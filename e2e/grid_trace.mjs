// Diagnostic: where the browser's CPU goes during the reference grid runs of a fresh page.
// Records a Chrome trace (CDP Tracing) around grid runs 1..N and prints, per run, the
// thread CPU time (`tdur`) of top-level trace events summed per thread and per event name,
// plus per-thread /proc CPU deltas. Usage: node e2e/grid_trace.mjs dist [N=2] [out.json]
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { serveDist } from './static_server.mjs';

const dist = path.resolve(process.argv[2] || 'dist');
const n = Number(process.argv[3] || 2);
const out = process.argv[4];
const { base, close: closeServer } = await serveDist(dist);
const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvq-trace-'));
const browser = await chromium.launchPersistentContext(userDir, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    ...(process.env.CHROME_ARGS ? process.env.CHROME_ARGS.split(' ') : [])],
});

// Per-thread CPU ticks of this browser's processes: "pid/comm(thread)" -> ticks.
function threadTicks() {
  const m = new Map();
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (!fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(userDir)) continue;
      const type = (fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').match(/--type=([a-z-]+)/) || [, 'browser'])[1];
      for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
        const s = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const comm = s.slice(s.indexOf('(') + 1, s.lastIndexOf(')'));
        const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
        const key = `${type}:${comm}`;
        m.set(key, (m.get(key) || 0) + Number(f[11]) + Number(f[12]));
      }
    } catch { /* ended */ }
  }
  return m;
}
function diffTicks(a, b) {
  const d = [];
  for (const [k, v] of b) { const x = v - (a.get(k) || 0); if (x > 0) d.push([k, x * 10]); }
  return d.sort((x, y) => y[1] - x[1]);
}

const page = await browser.newPage();
await page.goto(base);
await page.waitForFunction(() => document.documentElement.dataset.sweepDone, null, { timeout: 60000 });
await page.click('.bench summary');
if (Number(process.env.IDLE_MS) > 0) {
  // CPU the page spends with nothing to do, right after its first sweep.
  const a = threadTicks();
  await page.waitForTimeout(Number(process.env.IDLE_MS));
  console.log(`idle ${process.env.IDLE_MS} ms after the first sweep: ` + diffTicks(a, threadTicks()).map(([k, v]) => `${k} ${v}`).join(', '));
}
await page.waitForTimeout(Number(process.env.SETTLE_MS || 0));
const cdp = await browser.newCDPSession(page);
const categories = (process.env.TRACE_CATS ||
  'devtools.timeline,v8,v8.wasm,blink,disabled-by-default-v8.compile,disabled-by-default-devtools.timeline,toplevel,loading,netlog')
  .split(',');

const tracing = process.env.TRACE !== '0';
async function traced(fn) {
  if (!tracing) { await fn(); return []; }
  const chunks = [];
  const onData = (e) => chunks.push(...e.value);
  cdp.on('Tracing.dataCollected', onData);
  await cdp.send('Tracing.start', { traceConfig: { includedCategories: categories, recordMode: 'recordAsMuchAsPossible' } });
  await fn();
  const done = new Promise((r) => cdp.once('Tracing.tracingComplete', r));
  await cdp.send('Tracing.end');
  await done;
  cdp.off('Tracing.dataCollected', onData);
  return chunks;
}

function summarise(events, label) {
  const names = new Map(); // "pid:tid" -> thread name
  const procs = new Map();
  for (const e of events) {
    if (e.ph === 'M' && e.name === 'thread_name') names.set(`${e.pid}:${e.tid}`, e.args.name);
    if (e.ph === 'M' && e.name === 'process_name') procs.set(e.pid, e.args.name);
  }
  // Top-level complete events per thread (not nested inside another X event of that thread).
  const byThread = new Map();
  for (const e of events) if (e.ph === 'X' && e.dur != null) {
    const k = `${e.pid}:${e.tid}`;
    if (!byThread.has(k)) byThread.set(k, []);
    byThread.get(k).push(e);
  }
  const rows = [];
  for (const [k, evs] of byThread) {
    evs.sort((a, b) => a.ts - b.ts || b.dur - a.dur);
    let end = -1;
    const agg = new Map();
    let total = 0;
    for (const e of evs) {
      if (e.ts < end) continue; // nested
      end = e.ts + e.dur;
      const t = (e.tdur ?? e.dur) / 1000;
      total += t;
      agg.set(e.name, (agg.get(e.name) || 0) + t);
    }
    const [pid] = k.split(':');
    rows.push({ thread: `${procs.get(Number(pid)) || pid}/${names.get(k) || k}`, total, top: [...agg].sort((a, b) => b[1] - a[1]).slice(0, 6) });
  }
  rows.sort((a, b) => b.total - a.total);
  console.log(`--- ${label}: top-level trace events, thread CPU ms`);
  for (const r of rows.slice(0, 14)) {
    if (r.total < 2) continue;
    console.log(`${r.total.toFixed(1).padStart(8)}  ${r.thread}: ${r.top.map(([n, t]) => `${n} ${t.toFixed(1)}`).join(', ')}`);
  }
  // Nested events of interest anywhere (compile work).
  const interest = new Map();
  for (const e of events) if (e.ph === 'X' && /wasm|Wasm|compile|Compile|Worker|worker|GC|Parse|script/i.test(e.name)) {
    const k = `${names.get(`${e.pid}:${e.tid}`) || e.tid} ${e.name}`;
    const v = interest.get(k) || [0, 0];
    v[0] += (e.tdur ?? e.dur) / 1000; v[1]++;
    interest.set(k, v);
  }
  console.log(`--- ${label}: compile/wasm/worker events (incl. nested), ms (count)`);
  for (const [k, [t, c]] of [...interest].sort((a, b) => b[1][0] - a[1][0]).slice(0, 20)) {
    if (t >= 1) console.log(`${t.toFixed(1).padStart(8)}  ${k} (${c})`);
  }
}

for (let i = 0; i < n; i++) {
  await page.evaluate(() => { delete document.documentElement.dataset.gridMs; });
  const t0 = threadTicks();
  const ev = await traced(async () => {
    await page.click('#run-grid');
    await page.waitForFunction(() => document.documentElement.dataset.gridMs, null, { timeout: 120000 });
    await page.waitForTimeout(200);
  });
  const t1 = threadTicks();
  const ms = await page.evaluate(() => document.documentElement.dataset.gridMs);
  const d = diffTicks(t0, t1);
  console.log(`\n===== grid run ${i + 1}: ${ms} ms, browser CPU ${d.reduce((s, [, v]) => s + v, 0)} ms, load ${os.loadavg()[0].toFixed(2)}`);
  console.log('per-thread /proc CPU ms: ' + d.slice(0, 14).map(([k, v]) => `${k} ${v}`).join(', '));
  if (tracing) summarise(ev, `run ${i + 1}`);
  if (out && tracing) fs.writeFileSync(out.replace(/\.json$/, `-${i + 1}.json`), JSON.stringify({ traceEvents: ev }));
}
await browser.close();
closeServer();
fs.rmSync(userDir, { recursive: true, force: true });
