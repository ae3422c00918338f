// Builds the kvqueue page into dist/ (or the folder given): a static site of one HTML
// file, two wasm modules and the example files, served by any static file server.
//
//   node app/build.mjs [OUT]        (scripts/serve.sh and scripts/test.sh call it)
//
// What it does, in order:
//   1. `cargo build` of the page (bin `app`, profile wasm-release: size first) and of its
//      sweep worker (bin `worker`, profile wasm-speed: the simulator's hot loop), at once:
//      the two profiles build in their own target folders, so each one's single-threaded
//      LTO link runs beside the other's;
//   2. wasm-bindgen on each (the page as an ES module, the worker as a classic script for
//      `new Worker`), then wasm-opt (-Oz for the page, -O3 for the worker);
//   3. the page's files named by their content's hash (the worker's by name: the page
//      starts it at ./worker_loader.js), public/examples copied beside them;
//   4. app/index.html with the loader script in place of its marker, preloads of the
//      module and its wasm (with their SHA-384 for subresource integrity), and the SHA-256
//      of every inline <script> and <style> put into its Content-Security-Policy in place
//      of the two placeholders.
// It builds into OUT.tmp and moves that onto OUT only when every step has succeeded, so
// a failed build leaves the last good page in place.
//
// Needs cargo with the wasm32-unknown-unknown target, wasm-bindgen at Cargo.lock's
// version and wasm-opt 132 (`scripts/setup.sh web` installs all three).
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TARGET = 'wasm32-unknown-unknown';
const LOADER_MARKER = '<!-- the page\'s wasm loader (app/build.mjs) -->';
const MODULES = [
  { bin: 'app', profile: 'wasm-release', bindgen: 'web', opt: '-Oz', hashed: true },
  { bin: 'worker', profile: 'wasm-speed', bindgen: 'no-modules', opt: '-O3', hashed: false },
];

function fail(msg) {
  console.error(`build.mjs: ${msg}`);
  process.exit(1);
}

// A tool on PATH, or a clear message naming the install step.
function tool(name, versionWanted) {
  const r = spawnSync(name, ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) fail(`${name} is not on PATH; scripts/setup.sh web installs it`);
  if (versionWanted && !r.stdout.includes(versionWanted)) {
    fail(`${name} is ${r.stdout.trim()}, the page needs ${versionWanted}; scripts/setup.sh web installs it`);
  }
  return name;
}

// Runs a command, its output lines prefixed with `tag`; resolves on success.
function run(tag, cmd, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const prefix = (stream, out) => {
      let rest = '';
      stream.on('data', (chunk) => {
        const lines = (rest + chunk).split('\n');
        rest = lines.pop();
        for (const l of lines) out.write(`[${tag}] ${l}\n`);
      });
      stream.on('end', () => rest && out.write(`[${tag}] ${rest}\n`));
    };
    prefix(child.stdout, process.stdout);
    prefix(child.stderr, process.stderr);
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${tag}: ${cmd} exited with ${code}`))));
  });
}

const sha = (algo, bytes, enc = 'base64') => crypto.createHash(algo).update(bytes).digest(enc);

// Inline elements of one tag, hashed exactly as the browser hashes their text.
function inlineHashes(html, tag) {
  const re = new RegExp(`<${tag}\\b([^>]*)>([\\s\\S]*?)</${tag}>`, 'gi');
  return [...html.matchAll(re)]
    .filter((m) => !/\bsrc\s*=/i.test(m[1]))
    .map((m) => `'sha256-${sha('sha256', m[2].replace(/\r\n?/g, '\n'))}'`);
}

const PLACEHOLDERS = { script: "'inline-script-hashes'", style: "'inline-style-hashes'" };

// app/index.html, checked for the marker and the two placeholders before anything builds.
function template() {
  const html = fs.readFileSync(path.join(ROOT, 'app', 'index.html'), 'utf8');
  if (!html.includes(LOADER_MARKER)) fail(`app/index.html has no ${LOADER_MARKER}`);
  for (const p of Object.values(PLACEHOLDERS)) {
    if (!html.includes(p)) fail(`app/index.html has no ${p} in its Content-Security-Policy`);
  }
  return html;
}

function page(source, appJs, appWasm, outDir) {
  const integrity = (f) => `sha384-${sha('sha384', fs.readFileSync(path.join(outDir, f)))}`;
  const loader = [
    '<script type="module">',
    `import init from './${appJs}';`,
    `await init({ module_or_path: './${appWasm}' });`,
    '</script>',
  ].join('\n');
  const preloads =
    `<link rel="modulepreload" href="./${appJs}" crossorigin="anonymous" integrity="${integrity(appJs)}">\n` +
    `  <link rel="preload" href="./${appWasm}" crossorigin="anonymous" integrity="${integrity(appWasm)}" as="fetch" type="application/wasm">\n`;
  let html = source.replace(LOADER_MARKER, loader).replace('</head>', `  ${preloads}</head>`);
  const hashes = Object.entries(PLACEHOLDERS).map(([tag, p]) => [p, inlineHashes(html, tag).join(' ')]);
  for (const [placeholder, hash] of hashes) html = html.split(placeholder).join(hash);
  return html;
}

async function main() {
  const t0 = Date.now();
  const out = path.resolve(ROOT, process.argv[2] || 'dist');
  const html = template();
  const lock = fs.readFileSync(path.join(ROOT, 'Cargo.lock'), 'utf8');
  const bindgenVersion = lock.match(/name = "wasm-bindgen"\nversion = "([^"]+)"/)?.[1];
  if (!bindgenVersion) fail('Cargo.lock names no wasm-bindgen version');
  const bindgen = tool('wasm-bindgen', bindgenVersion);
  const wasmOpt = tool('wasm-opt', 'version 132');
  const meta = spawnSync('cargo', ['metadata', '--format-version', '1', '--no-deps', '--locked'], {
    cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20,
  });
  if (meta.status !== 0) fail(`cargo metadata failed:\n${meta.stderr}`);
  const targetDir = JSON.parse(meta.stdout).target_directory;

  // 1. Both modules at once (each profile has its own target folder and lock).
  await Promise.all(
    MODULES.map((m) =>
      run(m.bin, 'cargo', ['build', '-p', 'app', '--bin', m.bin, `--target=${TARGET}`, '--profile', m.profile, '--locked']),
    ),
  );

  // 2-3. Bindings, optimisation and names, into OUT.tmp.
  const stage = `${out}.tmp`;
  fs.rmSync(stage, { recursive: true, force: true });
  fs.mkdirSync(stage, { recursive: true });
  const files = {};
  await Promise.all(
    MODULES.map(async (m) => {
      const bound = path.join(targetDir, 'wasm-bindgen', m.profile);
      fs.mkdirSync(bound, { recursive: true });
      await run(m.bin, bindgen, [
        `--target=${m.bindgen}`, `--out-dir=${bound}`, `--out-name=${m.bin}`, '--no-typescript',
        path.join(targetDir, TARGET, m.profile, `${m.bin}.wasm`),
      ]);
      const wasm = path.join(stage, `${m.bin}_bg.wasm`);
      await run(m.bin, wasmOpt, [`--output=${wasm}`, m.opt, path.join(bound, `${m.bin}_bg.wasm`)]);
      const base = m.hashed ? `${m.bin}-${sha('sha256', fs.readFileSync(wasm), 'hex').slice(0, 16)}` : m.bin;
      fs.renameSync(wasm, path.join(stage, `${base}_bg.wasm`));
      fs.copyFileSync(path.join(bound, `${m.bin}.js`), path.join(stage, `${base}.js`));
      files[m.bin] = { js: `${base}.js`, wasm: `${base}_bg.wasm` };
    }),
  );
  const worker = files.worker;
  fs.writeFileSync(path.join(stage, 'worker_loader.js'), `importScripts("./${worker.js}");wasm_bindgen("./${worker.wasm}");`);
  fs.cpSync(path.join(ROOT, 'public', 'examples'), path.join(stage, 'examples'), { recursive: true });

  // 4. The page.
  fs.writeFileSync(path.join(stage, 'index.html'), page(html, files.app.js, files.app.wasm, stage));

  fs.rmSync(out, { recursive: true, force: true });
  fs.renameSync(stage, out);
  const size = (f) => fs.statSync(path.join(out, f)).size;
  const gz = (f) => zlib.gzipSync(fs.readFileSync(path.join(out, f))).length;
  const kb = (n) => `${(n / 1024).toFixed(0)} KiB`;
  console.log(
    `build.mjs: ${path.relative(ROOT, out) || out}/ in ${((Date.now() - t0) / 1000).toFixed(0)} s: ` +
      `page ${files.app.wasm} ${kb(size(files.app.wasm))} (${kb(gz(files.app.wasm))} gzipped), ` +
      `worker ${kb(size(files.worker.wasm))} (${kb(gz(files.worker.wasm))} gzipped)`,
  );
}

main().catch((e) => fail(e.message));
