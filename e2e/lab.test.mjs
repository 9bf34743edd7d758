// End to end, as a person sees it: `attention-lab lab --no-browser` on a free port, notebooks
// 000, 003 and 008 opened in headless Chromium, Run All, then the page is checked against the
// outputs stored in the notebooks (NumPy's text, heatmaps as SVG, no error); the first head
// view is hovered, toggled and downloaded, and 008's model view opens a panel.
//
// Usage: ATTENTION_LAB_BIN=/path/to/attention-lab node e2e/lab.test.mjs
// Screenshots: target/e2e/*.png (relative to the repository).

import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkCells, kernelIdle, menu, runAll, stored } from './notebook.mjs';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const shots = path.join(repo, 'target', 'e2e');
const bin = process.env.ATTENTION_LAB_BIN;
if (!bin) {
  console.error('e2e: set ATTENTION_LAB_BIN to the attention-lab binary');
  process.exit(2);
}

// Heatmap cells per notebook: heads x tokens x tokens of each heads_grid, from the notebooks'
// own inputs (000: 2 heads over "Thinking Machines"; 003: 3 heads over x1..x5).
const NOTEBOOKS = {
  '000_two_heads_worked_example.ipynb': [2 * 2 * 2],
  '003_column_split_heads.ipynb': [3 * 5 * 5],
  // 13 tokens: three layer grids of 12 heads, then three single heads.
  '008_attention_in_a_real_model.ipynb': [...Array(3).fill(12 * 13 * 13), ...Array(3).fill(13 * 13)],
};
// Each head's weights as the notebook prints them (NumPy's text, rounded to 3 decimals), to
// check the head view's line opacities against; null where the notebook prints none.
const PRINTED_WEIGHTS = {
  '000_two_heads_worked_example.ipynb': (text) => [1, 2].map((h) => {
    const m = text.match(new RegExp(`Head ${h} - Softmax Attention Weights:([^A-Za-z]*)`));
    return m ? m[1].match(/-?\d+(\.\d*)?(e[-+]?\d+)?/g).map(Number) : null;
  }),
  '003_column_split_heads.ipynb': () => null,
  '008_attention_in_a_real_model.ipynb': () => null,
};
// The notebook on show (earlier notebooks' panels stay in the page, hidden).
const PANEL = '.jp-NotebookPanel:not(.lm-mod-hidden)';
const RUN_TIMEOUT_MS = 15 * 60 * 1000;

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function startLab(port) {
  const child = spawn(bin, ['lab', '--no-browser', '--port', String(port), 'notebooks'], {
    cwd: repo,
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

// Whether something accepts connections on the port.
function serving(port) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('connect', () => { socket.destroy(); resolve(true); });
    socket.on('error', () => resolve(false));
  });
}

async function runNotebook(page, base, token, name, failures) {
  const expected = stored(JSON.parse(fs.readFileSync(path.join(repo, 'notebooks', name))));
  {
    // `reset`: a fresh workspace, so the previous notebook's tab is not restored beside this
    // one (it would start a kernel of its own and take the menu's commands).
    await page.goto(`${base}/lab/tree/${name}?reset&token=${token}`);
    await page.waitForSelector(`${PANEL} .jp-Cell`, { timeout: 120000 });
    await kernelIdle(page, PANEL);
    // `lab` turns JupyterLab's news question off: no pop-up over the notebook a class sees.
    const news = await page.getByText('official Jupyter news').count();
    if (news) failures.push(`${name}: the "official Jupyter news" pop-up is shown`);
    // The stored outputs are untrusted: JupyterLab runs no script in them, yet the views'
    // pictures (SVG drawn in Rust) are there, lines included. JupyterLab attaches the cells
    // below the first screen after its first paint, and decodes pictures when it can (on a
    // fresh machine, still busy, neither had happened when the kernel was idle): wait up to a
    // minute for them to be drawn before counting.
    const count = (panel) => {
      const drawn = (sel) => [...document.querySelectorAll(`${panel} ${sel}`)].filter((i) => i.complete && i.naturalWidth > 0).length;
      return {
        views: document.querySelectorAll(`${panel} .alab-view`).length,
        pictures: drawn('.alab-view img.alab-picture'),
        figures: drawn('img.alab-figure'),
        live: document.querySelectorAll(`${panel} .alab-view svg, ${panel} .alab-view .alab-bar`).length,
      };
    };
    const drawnAll = `(() => { const c = (${count})(${JSON.stringify(PANEL)}); return c.views > 0 && c.pictures === c.views && c.figures > 0; })()`;
    await page.waitForFunction(drawnAll, null, { timeout: 60000 }).catch(() => {});
    const stored = await page.evaluate(count, PANEL);
    if (!stored.views || stored.pictures !== stored.views || !stored.figures || stored.live) {
      failures.push(`${name}: untrusted stored outputs ${JSON.stringify(stored)}: expected every view and heatmap drawn, no script run`);
    }
    if (stored.views) {
      await page.locator(`${PANEL} .alab-view`).first().scrollIntoViewIfNeeded();
      await page.waitForTimeout(500);
      await page.screenshot({ path: path.join(shots, `${name.replace(/\.ipynb$/, '')}-untrusted.png`) });
    }
    const cells = await runAll(page, PANEL, RUN_TIMEOUT_MS, (problem) => failures.push(`${name}: ${problem}`));
    const svgCounts = checkCells(name, expected, cells, failures);
    if (JSON.stringify(svgCounts) !== JSON.stringify(NOTEBOOKS[name])) {
      failures.push(`${name}: heatmap cells ${JSON.stringify(svgCounts)}, expected ${JSON.stringify(NOTEBOOKS[name])}`);
    }
    const stem = name.replace(/\.ipynb$/, '');
    await page.screenshot({ path: path.join(shots, `${stem}-end.png`) });
    const svgCells = page.locator(`${PANEL} .jp-Cell:has(.jp-OutputArea-output svg)`);
    for (let k = 0; k < await svgCells.count(); k++) {
      await svgCells.nth(k).scrollIntoViewIfNeeded();
      await page.waitForTimeout(1000); // cells scrolled into view are drawn on the next frames
      await page.screenshot({ path: path.join(shots, `${stem}-heatmap-${k}.png`) });
    }
    const printed = PRINTED_WEIGHTS[name](cells.map((c) => c.out).join('\n'));
    if (await page.locator(`${PANEL} .alab-view[data-view="model-view"]`).count()) await modelView(page, stem, failures);
    else await headView(page, stem, printed, failures);
    // Stop the kernel so the next notebook does not compete with it.
    await menu(page, 'Kernel', 'Shut Down Kernel');
    const confirm = page.locator('.jp-Dialog button.jp-mod-accept');
    await confirm.click({ timeout: 10000 }).catch(() => {});
  }
}

// The lines a view shows (not hidden): head, query, key and opacity of each.
const shownLines = (svg) => svg.evaluate((s) => [...s.querySelectorAll('line[data-h]')]
  .filter((l) => getComputedStyle(l).display !== 'none')
  .map((l) => ({ h: +l.dataset.h, q: +l.dataset.q, k: +l.dataset.k, o: +l.getAttribute('stroke-opacity') })));

// The first head view of the notebook, as a teacher uses it: every line shown at first;
// hovering a query token keeps only its lines (one a key and head, opacities the weights);
// clicking a head's colour hides that head; the download button saves what is shown.
async function headView(page, stem, printed, failures) {
  const view = page.locator(`${PANEL} .alab-view[data-view="head-view"]`).first();
  if (!(await view.count())) { failures.push(`${stem}: no head view`); return; }
  await view.scrollIntoViewIfNeeded();
  await page.waitForTimeout(500);
  const svg = view.locator('svg.alab-head-view');
  if (!(await view.locator('.alab-bar select.alab-heads').count())) failures.push(`${stem}: the head view's script did not run`);
  // Each view's script made its own view live, once, and no other.
  const counts = await page.evaluate((panel) => [...document.querySelectorAll(`${panel} .alab-view`)]
    .map((v) => v.querySelectorAll(':scope > .alab-bar').length + v.querySelectorAll(':scope > img').length * 10), PANEL);
  if (counts.some((c) => c !== 1)) failures.push(`${stem}: toolbars and images per view ${JSON.stringify(counts)}, expected one toolbar each and no image left`);
  const shown = () => shownLines(svg);
  const heads = await svg.locator('rect[data-h]').count();
  const queries = await svg.locator('text.alab-q').count();
  const keys = await svg.locator('text.alab-k').count();
  const before = await shown();
  if (before.length !== heads * queries * keys) failures.push(`${stem}: ${before.length} lines shown at first, expected ${heads * queries * keys}`);
  await page.screenshot({ path: path.join(shots, `${stem}-head-view-before.png`) });

  const q = queries - 1;
  await svg.locator(`text.alab-q[data-q="${q}"]`).hover();
  const hovered = await shown();
  if (hovered.length !== heads * keys || hovered.some((l) => l.q !== q)) {
    failures.push(`${stem}: hovering query ${q} shows ${JSON.stringify(hovered)}, expected its ${heads * keys} lines only`);
  }
  if (printed) {
    for (const l of hovered) {
      const w = printed[l.h] && printed[l.h][l.q * keys + l.k];
      if (w === undefined || Math.abs(l.o - w) > 0.0015) failures.push(`${stem}: line ${JSON.stringify(l)} against printed weight ${w}`);
    }
  }
  await page.screenshot({ path: path.join(shots, `${stem}-head-view-hover.png`) });
  await page.mouse.move(5, 5);
  const left = await shown();
  if (left.length !== before.length) failures.push(`${stem}: ${left.length} lines after the mouse left, expected ${before.length}`);

  await svg.locator('rect[data-h="0"]').click();
  const toggled = await shown();
  if (toggled.length !== (heads - 1) * queries * keys || toggled.some((l) => l.h === 0)) {
    failures.push(`${stem}: after hiding head 1, ${toggled.length} lines shown, expected ${(heads - 1) * queries * keys} without heads[0]'s`);
  }
  await page.screenshot({ path: path.join(shots, `${stem}-head-view-toggled.png`) });
  const [download] = await Promise.all([
    page.waitForEvent('download', { timeout: 10000 }),
    view.locator('button.alab-download').click(),
  ]);
  const file = path.join(shots, `${stem}-head-view.svg`);
  await download.saveAs(file);
  const saved = fs.readFileSync(file, 'utf8');
  const savedLines = (saved.match(/<line [^>]*data-h=/g) || []).length;
  if (!saved.startsWith('<svg') || savedLines !== toggled.length) failures.push(`${stem}: the downloaded SVG has ${savedLines} lines, the view shows ${toggled.length}`);
  await svg.locator('rect[data-h="0"]').click();
  if ((await shown()).length !== before.length) failures.push(`${stem}: showing head 1 again did not bring its lines back`);
}

// The model view: a click on a panel opens that layer and head in the head view below it.
async function modelView(page, stem, failures) {
  const view = page.locator(`${PANEL} .alab-view[data-view="model-view"]`).first();
  await view.scrollIntoViewIfNeeded();
  const svg = view.locator('svg.alab-model-view');
  const shown = () => shownLines(svg);
  const panels = await svg.locator('image[data-l]').count();
  const layers = Number(await svg.getAttribute('data-layers'));
  const heads = Number(await svg.getAttribute('data-heads'));
  const n = Number(await svg.getAttribute('data-tokens'));
  if (panels !== layers * heads) failures.push(`${stem}: ${panels} panels for ${layers} layers x ${heads} heads`);
  // At first the picked layer's every head has its lines, only the picked head's shown.
  const first = await svg.evaluate((s) => [...new Set([...s.querySelectorAll('line[data-h]')].map((l) => l.dataset.h))].length);
  const firstShown = await shown();
  if (first !== heads || !firstShown.length || firstShown.some((l) => l.h !== firstShown[0].h)) {
    failures.push(`${stem}: at first the model view has lines of ${first} heads (expected ${heads}), ${firstShown.length} shown`);
  }
  await svg.locator('image[data-l="1"][data-h="7"]').click();
  const opened = await shown();
  const title = await svg.locator('text.alab-title').textContent();
  if (title !== 'layer 1, head 8' || !opened.length || opened.length > n * n || opened.some((l) => l.h !== 7)) {
    failures.push(`${stem}: after a click on layer 1, head 8: title ${JSON.stringify(title)}, ${opened.length} lines of heads ${[...new Set(opened.map((l) => l.h))]}`);
  }
  await page.screenshot({ path: path.join(shots, `${stem}-model-view-opened.png`) });
  await svg.locator('text.alab-q[data-q="2"]').hover();
  const hovered = await shown();
  if (!hovered.length || hovered.some((l) => l.q !== 2)) failures.push(`${stem}: hovering query 2 in the opened head shows ${JSON.stringify(hovered.slice(0, 5))}`);
  await page.mouse.move(5, 5);
}

async function main() {
  fs.mkdirSync(shots, { recursive: true });
  const port = await freePort();
  const { child, url, exited } = startLab(port);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'attention-lab-chromium-'));
  let context;
  const failures = [];
  // JupyterLab autosaves the notebooks it ran; the repository's copies are put back at the end.
  const originals = Object.keys(NOTEBOOKS).map((name) => {
    const file = path.join(repo, 'notebooks', name);
    return [file, fs.readFileSync(file)];
  });
  try {
    const labUrl = new URL(await url);
    const token = labUrl.searchParams.get('token');
    const base = `${labUrl.protocol}//${labUrl.host}`;
    context = await chromium.launchPersistentContext(profile, {
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      headless: true,
      viewport: { width: 1400, height: 1000 },
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
        '--disable-component-update', '--no-first-run'],
    });
    const page = context.pages()[0] || await context.newPage();
    for (const name of Object.keys(NOTEBOOKS)) {
      await runNotebook(page, base, token, name, failures);
    }
  } catch (error) {
    failures.push(String(error && error.stack || error));
  } finally {
    if (context) await context.close().catch(() => {});
    // SIGTERM to `lab` alone, as a process manager sends it: it stops JupyterLab and its
    // kernels itself, and nothing serves on the port after it.
    try { process.kill(child.pid, 'SIGTERM'); } catch { /* already gone */ }
    const ended = await Promise.race([exited, new Promise((resolve) => setTimeout(() => resolve(null), 15000))]);
    if (!ended) failures.push('lab still runs 15 s after SIGTERM');
    else if (ended.signal !== 'SIGTERM') failures.push(`lab ended with ${JSON.stringify(ended)}, not by SIGTERM`);
    if (await serving(port)) failures.push(`port ${port} still serves after lab stopped`);
    for (const [file, bytes] of originals) {
      if (!fs.readFileSync(file).equals(bytes)) fs.writeFileSync(file, bytes);
    }
    fs.rmSync(profile, { recursive: true, force: true });
  }
  if (failures.length) {
    for (const f of failures) console.error(`FAIL ${f}`);
    process.exit(1);
  }
  console.log(`e2e: ${Object.keys(NOTEBOOKS).length} notebooks ok; screenshots in ${shots}`);
}

await main();
