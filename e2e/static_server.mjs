// A static file server for the built page (dist/) on a free 127.0.0.1 port, shared by the
// end-to-end test and the grid benchmark.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.csv': 'text/csv', '.json': 'application/json', '.md': 'text/plain' };

/** Serves `dist`; resolves to { base: 'http://127.0.0.1:PORT/', close() }. */
export async function serveDist(dist) {
  const server = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://x');
    let p = path.join(dist, decodeURIComponent(u.pathname));
    if (!p.startsWith(dist)) { res.writeHead(403).end(); return; }
    if (fs.existsSync(p) && fs.statSync(p).isDirectory()) p = path.join(p, 'index.html');
    if (!fs.existsSync(p)) { res.writeHead(404).end('not found'); return; }
    res.writeHead(200, { 'content-type': TYPES[path.extname(p)] || 'application/octet-stream' });
    fs.createReadStream(p).pipe(res);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { base: `http://127.0.0.1:${server.address().port}/`, close: () => server.close() };
}
