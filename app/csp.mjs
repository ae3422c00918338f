// Completes the page's Content-Security-Policy after trunk has written index.html (a
// trunk post_build hook, see Trunk.toml): the policy in app/index.html names its inline
// code by placeholder, 'inline-script-hashes' and 'inline-style-hashes', and this puts
// the SHA-256 of every inline <script> and <style> element of the built page in their
// place. The inline script is trunk's wasm loader, whose text names the hashed file
// names of this build, so its hash is only known here. A placeholder left in the page
// would block the loader, so a missing one fails the build.
//
// Usage (trunk sets the variable): TRUNK_STAGING_DIR=dist node app/csp.mjs
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const dir = process.env.TRUNK_STAGING_DIR || process.argv[2];
if (!dir) {
  console.error('csp.mjs: TRUNK_STAGING_DIR is not set (run it as a trunk post_build hook)');
  process.exit(1);
}
const file = path.join(dir, 'index.html');
let html = fs.readFileSync(file, 'utf8');

// Inline elements of one tag: their text exactly as the browser hashes it.
function inlineHashes(tag) {
  const re = new RegExp(`<${tag}\\b([^>]*)>([\\s\\S]*?)</${tag}>`, 'gi');
  return [...html.matchAll(re)]
    .filter((m) => !/\bsrc\s*=/i.test(m[1]))
    .map((m) => `'sha256-${crypto.createHash('sha256').update(m[2].replace(/\r\n?/g, '\n'), 'utf8').digest('base64')}'`);
}

const fill = { "'inline-script-hashes'": inlineHashes('script'), "'inline-style-hashes'": inlineHashes('style') };
for (const [placeholder, hashes] of Object.entries(fill)) {
  if (!html.includes(placeholder)) {
    console.error(`csp.mjs: ${file} has no ${placeholder} in its Content-Security-Policy`);
    process.exit(1);
  }
  html = html.split(placeholder).join(hashes.join(' '));
}
fs.writeFileSync(file, html);
console.log(`csp.mjs: ${fill["'inline-script-hashes'"].length} inline script(s), ${fill["'inline-style-hashes'"].length} inline style(s) hashed into the CSP`);
