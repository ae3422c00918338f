// Runs a wasm32-wasip1 program under Node's WASI (the same V8 WebAssembly engine as
// Chromium): node --no-warnings e2e/wasi_run.mjs prog.wasm [args…]
import { WASI } from 'node:wasi';
import fs from 'node:fs';
const [file, ...args] = process.argv.slice(2);
const wasi = new WASI({ version: 'preview1', args: [file, ...args], env: process.env });
const mod = await WebAssembly.compile(fs.readFileSync(file));
const inst = await WebAssembly.instantiate(mod, wasi.getImportObject());
wasi.start(inst);
