// `attention-lab lab` for a browser test: a free port, and lab started on a folder, with the
// URL it prints. (e2e/lab.test.mjs keeps copies of its own, to move here when it is next
// changed.)

import { spawn } from 'node:child_process';
import net from 'node:net';

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// `bin lab --no-browser --port PORT DIR` in `cwd`; its stdout is echoed, its stderr passed on.
// Returns the child, a promise of JupyterLab's URL (rejected if lab exits first) and one of
// its exit.
export function startLab(bin, cwd, dir, port) {
  const child = spawn(bin, ['lab', '--no-browser', '--port', String(port), dir], {
    cwd,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const url = new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      process.stdout.write(chunk);
      const m = out.match(/JupyterLab: (http\S+)/);
      if (m) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`attention-lab lab exited with ${code}`)));
  });
  return { child, url, exited };
}

// Headless Chromium (Debian's, or $CHROMIUM) with its profile in `profile`.
export function launchChromium(chromium, profile) {
  return chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1400, height: 1000 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--no-first-run'],
  });
}

// SIGTERM to `lab` alone, as a process manager sends it (it stops JupyterLab and its kernels);
// returns what went wrong, if anything.
export async function stopLab(child, exited) {
  try { process.kill(child.pid, 'SIGTERM'); } catch { /* already gone */ }
  const ended = await Promise.race([exited, new Promise((resolve) => setTimeout(() => resolve(null), 15000))]);
  return ended ? null : 'lab still runs 15 s after SIGTERM';
}
