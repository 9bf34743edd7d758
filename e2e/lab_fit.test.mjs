// Issue 47 in JupyterLab itself, without a kernel: notebooks 000, 008, 010 and 011 are copied
// to a temporary folder, trusted there (`jupyter trust`, so that JupyterLab runs their stored
// views' scripts as it does after Run All), and opened in the lab venv's JupyterLab in
// headless Chromium at 1366 x 768 with the file browser open, as a class sees them. Every
// stored view and picture is scrolled to and checked (e2e/fit.mjs) at 100% and at 150% (the
// size menu): none wider than the output area, text of 12 px and 18 px (toolbars included),
// the open head's key column inside the output, a tall view scrolling inside the notebook's
// panel; 008's model view opens layer 3 at 150% and is checked again. No console error and no
// request off the server. Screenshots in target/e2e/lab-fit/.
//
// Usage: node e2e/lab_fit.test.mjs   (JUPYTER=/path/to/jupyter, default the venv that
// `attention-lab lab` made: its cache folder, as io::cache finds it, venv-lab/bin/jupyter)

import { chromium } from 'playwright-core';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkOutput, sizeTo } from './fit.mjs';
import { labCache as cache } from './notebook.mjs';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const shots = path.join(repo, 'target', 'e2e', 'lab-fit');
const jupyter = process.env.JUPYTER || path.join(cache, 'venv-lab', 'bin', 'jupyter');
const NOTEBOOKS = ['000_two_heads_worked_example', '008_attention_in_a_real_model', '010_attention_that_learns', '011_a_real_model_writes'];
const PANEL = '.jp-NotebookPanel:not(.lm-mod-hidden)';

if (!fs.existsSync(jupyter)) {
  console.error(`lab_fit: no JupyterLab at ${jupyter} (run \`attention-lab lab\` once, or set JUPYTER)`);
  process.exit(2);
}

// How many views and pictures the notebook stores.
function stored(name) {
  const nb = JSON.parse(fs.readFileSync(path.join(repo, 'notebooks', `${name}.ipynb`), 'utf8'));
  return nb.cells.flatMap((c) => c.outputs || []).filter((o) => {
    const html = o.data && o.data['text/html'];
    const text = Array.isArray(html) ? html.join('') : html || '';
    return text.includes('alab-view') || text.includes('alab-figure');
  }).length;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => { const { port } = server.address(); server.close(() => resolve(port)); });
  });
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'alab-lab-fit-'));
const dirs = { nb: path.join(tmp, 'nb'), data: path.join(tmp, 'data'), config: path.join(tmp, 'config') };
Object.values(dirs).forEach((d) => fs.mkdirSync(d));
const env = { ...process.env, JUPYTER_DATA_DIR: dirs.data, JUPYTER_CONFIG_DIR: dirs.config, JUPYTER_RUNTIME_DIR: path.join(dirs.data, 'runtime') };
const files = NOTEBOOKS.map((n) => {
  const to = path.join(dirs.nb, `${n}.ipynb`);
  fs.copyFileSync(path.join(repo, 'notebooks', `${n}.ipynb`), to);
  return to;
});
const trust = spawnSync(jupyter, ['trust', ...files], { env, encoding: 'utf8' });
if (trust.status !== 0) { console.error(trust.stderr); process.exit(1); }

const port = await freePort();
const token = `fit${process.pid}`;
const args = ['lab', '--no-browser', `--port=${port}`, '--ip=127.0.0.1', `--ServerApp.token=${token}`, `--ServerApp.root_dir=${dirs.nb}`];
if (process.getuid && process.getuid() === 0) args.push('--allow-root');
const lab = spawn(jupyter, args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
let log = '';
lab.stderr.on('data', (d) => { log += d; });
const base = `http://127.0.0.1:${port}`;
for (let i = 0; ; i++) {
  try { if ((await fetch(`${base}/api/status?token=${token}`)).ok) break; } catch { /* not yet */ }
  if (i > 120) { console.error(`lab_fit: JupyterLab did not start\n${log}`); lab.kill('SIGTERM'); process.exit(1); }
  await new Promise((r) => setTimeout(r, 500));
}

const failures = [];
let checked = 0;
fs.rmSync(shots, { recursive: true, force: true });
fs.mkdirSync(shots, { recursive: true });
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
try {
  const page = await (await browser.newContext({ viewport: { width: 1366, height: 768 } })).newPage();
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('request', (r) => { if (!r.url().startsWith(base) && !r.url().startsWith('data:') && !r.url().startsWith('blob:')) errors.push(`request ${r.url()}`); });
  for (const name of NOTEBOOKS) {
    const stem = name.slice(0, 3);
    await page.goto(`${base}/lab/tree/${name}.ipynb?token=${token}`);
    // JupyterLab restores the notebooks opened before: wait for this one's tab to be current.
    await page.waitForFunction((file) => [...document.querySelectorAll('.jp-mod-current .lm-TabBar-tab.lm-mod-current, .lm-DockPanel .lm-TabBar-tab.lm-mod-current')]
      .some((t) => t.textContent.includes(file)), `${name}.ipynb`, { timeout: 120000 });
    await page.waitForSelector(`${PANEL} .jp-Cell`, { timeout: 120000 });
    // The project's kernel is not installed here: JupyterLab asks for one; no kernel.
    const dialog = page.locator('.jp-Dialog');
    const dismiss = async () => { while (await dialog.count()) { await page.keyboard.press('Escape'); await page.waitForTimeout(200); } };
    await dialog.waitFor({ timeout: 15000 }).catch(() => {});
    await dismiss();
    const files = await page.evaluate(() => { const f = document.querySelector('.jp-FileBrowser'); return f ? f.getBoundingClientRect().width : 0; });
    if (files < 100) failures.push(`${stem}: the file browser is not open (${files} px)`);
    const outputs = page.locator(`${PANEL} .jp-OutputArea-output:has(div.alab-view, img.alab-figure)`);
    await outputs.first().waitFor({ timeout: 60000 }).catch(() => {});
    // JupyterLab renders the cells near the screen only: scroll down the notebook, checking
    // each view or picture once (a cell's index and the output's place in it), until every
    // one the notebook stores is checked.
    const expected = stored(name);
    const done = new Set();
    let i = 0;
    for (let step = 0; step < 400 && done.size < expected; step++) {
      await dismiss();
      const keys = await outputs.evaluateAll((els) => els.map((el) => {
        const cell = el.closest('.jp-Cell');
        return `${cell.getAttribute('data-windowed-list-index')}:${[...cell.querySelectorAll('.jp-OutputArea-output')].indexOf(el)}`;
      }));
      const next = keys.findIndex((k) => !done.has(k));
      if (next < 0) {
        const end = await page.evaluate((panel) => {
          const s = document.querySelector(`${panel} .jp-WindowedPanel-outer`);
          const before = s.scrollTop;
          s.scrollTop += 300;
          return s.scrollTop === before;
        }, PANEL);
        await page.waitForTimeout(end ? 1000 : 150);
        continue;
      }
      done.add(keys[next]);
      const output = outputs.nth(next);
      i += 1;
      await output.scrollIntoViewIfNeeded();
      await page.waitForTimeout(300);
      const views = await output.locator('div.alab-view').count();
      if (views && !(await output.locator('div.alab-view svg').count())) failures.push(`${stem} output ${i}: the view is not live (the notebook is trusted)`);
      for (const zoom of views ? [1, 1.5] : [1]) {
        if (views) await sizeTo(output, zoom);
        await output.scrollIntoViewIfNeeded();
        failures.push(...await checkOutput(output, `${stem} output ${i} at ${zoom * 100}%`, zoom));
        checked += 1;
      }
      const model = output.locator('svg.alab-model-view');
      if (await model.count()) {
        await dismiss();
        await model.locator('image[data-l="3"][data-h="7"]').click();
        failures.push(...await checkOutput(output, `${stem} model view, layer 3 open, at 150%`, 1.5));
        checked += 1;
        await output.scrollIntoViewIfNeeded();
        await page.screenshot({ path: path.join(shots, `${stem}-model-view-layer3-150.png`) });
      } else if (views) {
        await page.screenshot({ path: path.join(shots, `${stem}-output${i}-150.png`) });
      } else if (stem === '008' && i === 1) {
        await page.screenshot({ path: path.join(shots, `${stem}-layer-grid.png`) });
      }
      if (views) await sizeTo(output, 1);
    }
    if (done.size !== expected) failures.push(`${stem}: ${done.size} views and pictures checked of the ${expected} stored`);
  }
  failures.push(...errors.filter((e) => !/kernel|Kernel|404/.test(e)).map((e) => `console: ${e}`));
} catch (error) {
  failures.push(String(error && error.stack || error));
} finally {
  await browser.close();
  lab.kill('SIGTERM');
  await new Promise((r) => { lab.on('exit', r); setTimeout(r, 10000); });
  fs.rmSync(tmp, { recursive: true, force: true });
}
if (failures.length) {
  console.error(failures.join('\n'));
  console.error(`lab_fit: ${failures.length} failures (${checked} checks)`);
  process.exit(1);
}
console.log(`lab_fit: ${checked} checks passed in JupyterLab at 1366 x 768 with the file browser open; screenshots in ${path.relative(repo, shots)}/`);
