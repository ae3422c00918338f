// Benchmark: the reference study's 800-run grid in the built page (dist/), run N times in
// Debian's headless Chromium; prints each wall time and the median, and the CPU time the
// browser's processes used per run (from /proc: steadier than wall time on a busy machine).
// Usage: node e2e/grid_bench.mjs dist [N=5]   (GRID_DELAY_MS=1000: wait that long after the
// page's first sweep before the first grid, past V8's background optimisation of the wasm)
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { serveDist } from './static_server.mjs';

const dist = path.resolve(process.argv[2] || 'dist');
const n = Number(process.argv[3] || 5);
const { base, close: closeServer } = await serveDist(dist);
const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvq-bench-'));
const browser = await chromium.launchPersistentContext(userDir, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
});
// CPU time [ms] of this browser's processes (their command lines name userDir).
function browserCpuMs() {
  let ticks = 0;
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (!fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(userDir)) continue;
      const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      ticks += Number(f[11]) + Number(f[12]); // utime + stime
    } catch { /* the process ended */ }
  }
  return ticks * 10; // USER_HZ = 100
}
const page = await browser.newPage();
await page.goto(base);
// The page's own first sweep must be over before the grid replaces it.
await page.waitForFunction(() => document.documentElement.dataset.sweepDone, null, { timeout: 60000 });
await page.click('.bench summary');
if (process.env.GRID_DELAY_MS) await page.waitForTimeout(Number(process.env.GRID_DELAY_MS));
const times = [];
const cpus = [];
for (let i = 0; i < n; i++) {
  await page.evaluate(() => { delete document.documentElement.dataset.gridMs; });
  const c0 = browserCpuMs();
  await page.click('#run-grid');
  await page.waitForFunction(() => document.documentElement.dataset.gridMs, null, { timeout: 120000 });
  cpus.push(browserCpuMs() - c0);
  times.push(Number(await page.evaluate(() => document.documentElement.dataset.gridMs)));
  console.log(`grid run ${i + 1}: ${times[i]} ms (browser CPU ${cpus[i]} ms)`);
}
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)];
const sorted = [...times].sort((a, b) => a - b);
console.log(`800-run grid in the page: median ${median(times)} ms, min ${sorted[0]}, max ${sorted[n - 1]}; browser CPU median ${median(cpus)} ms (${n} runs, ${os.loadavg()[0].toFixed(2)} load)`);
await browser.close();
closeServer();
fs.rmSync(userDir, { recursive: true, force: true });
