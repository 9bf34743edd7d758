// End to end, as a person sees it: `attention-lab lab --no-browser` on a free port, notebooks
// 000, 003 and 008 opened in headless Chromium, Run All, then the page is checked against the
// outputs stored in the notebooks (NumPy's text, heatmaps as SVG, no error); the first head
// view is hovered, toggled and downloaded, and 008's model view opens a panel. Issue 33's
// checks, on 000's head view and 008's model view: no two shown heads share a colour, no line
// lies on another head's, the 12-head model view with a layer open fits 1366 x 768, and every
// label is 16 px or more at the projector size; on 008's sentence-pair view, the layer menu,
// the A/B pair filters, the dark switch and prettified WordPiece tokens. Notebook 011 (SmolLM2
// writing): its next-token view's bars, at the defaults equal to the static picture drawn in
// Rust and to the softmax recomputed here from the logits it carries, under the temperature and
// top-k sliders; its generation view's step slider and play button revealing one token a step,
// the layer and head menus redrawing the weights (each head's a distribution), and the view
// fitting 1366 x 768 with the file browser open; no console error and no network request from
// either view.
//
// Then e2e/fit.test.mjs and e2e/lab_fit.test.mjs (issue 47: the views and pictures of 000,
// 008, 010 and 011 fit 1366 x 768 with the file browser open, at 100% and 150%).
//
// Usage: ATTENTION_LAB_BIN=/path/to/attention-lab node e2e/lab.test.mjs
// Screenshots: target/e2e/*.png (relative to the repository).

import { chromium } from 'playwright-core';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkCells, kernelIdle, labCache as cache, menu, runAll, stored } from './notebook.mjs';

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
  // One heatmap: the induction head over the sentence twice, 2 x 14 tokens.
  '011_a_real_model_writes.ipynb': [28 * 28],
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
  '011_a_real_model_writes.ipynb': () => null,
};
// Notebooks whose page, from Run All to the last check of their views, logs no console error
// and requests nothing but JupyterLab's own API (the views fetch nothing).
const QUIET = new Set(['011_a_real_model_writes.ipynb']);
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

// The stored outputs are to be checked untrusted, but JupyterLab trusts a notebook it saved
// after Run All, and a run reproduces the stored outputs byte for byte: an earlier run on this
// machine leaves the very same notebooks signed in `lab`'s notary. Their signatures are taken
// out (nbformat's own `unsign`, in the lab venv), which leaves every other notebook's trust.
function untrust(names) {
  const script = 'import sys, nbformat\nfrom nbformat.sign import NotebookNotary\n'
    + 'notary = NotebookNotary(data_dir=sys.argv[1])\n'
    + 'for f in sys.argv[2:]:\n    notary.unsign(nbformat.read(f, as_version=4))\n';
  const files = names.map((name) => path.join(repo, 'notebooks', name));
  const run = spawnSync(path.join(cache, 'venv-lab', 'bin', 'python'), ['-c', script, path.join(cache, 'jupyter'), ...files], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`e2e: could not untrust the notebooks: ${run.stderr || run.error}`);
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
    await keepPictures(page);
    const watch = QUIET.has(name) ? watchPage(page, base) : null;
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
    if (await page.locator(`${PANEL} .alab-view[data-view="model-view"]`).count()) {
      await modelView(page, stem, failures);
      await pairView(page, stem, failures);
    } else if (await page.locator(`${PANEL} .alab-view[data-view="next-token-view"]`).count()) {
      await nextTokenView(page, stem, failures);
      await generationView(page, stem, failures);
    } else await headView(page, stem, printed, failures);
    if (watch) {
      const { errors, requests } = watch();
      for (const e of errors) failures.push(`${name}: console error from Run All to the views' last check: ${e.slice(0, 300)}`);
      for (const r of requests) failures.push(`${name}: a request outside JupyterLab's API: ${r}`);
    }
    // Stop the kernel so the next notebook does not compete with it.
    await menu(page, 'Kernel', 'Shut Down Kernel');
    const confirm = page.locator('.jp-Dialog button.jp-mod-accept');
    await confirm.click({ timeout: 10000 }).catch(() => {});
  }
}

// The lines a view shows (not hidden): head, query, key, opacity, weight, colour and ends.
const shownLines = (svg) => svg.evaluate((s) => [...s.querySelectorAll('line[data-h]')]
  .filter((l) => getComputedStyle(l).display !== 'none')
  .map((l) => ({
    h: +l.dataset.h, q: +l.dataset.q, k: +l.dataset.k, o: +l.getAttribute('stroke-opacity'), w: +l.dataset.w,
    c: l.getAttribute('stroke'), at: ['x1', 'y1', 'x2', 'y2'].map((a) => Number(l.getAttribute(a)).toFixed(1)).join(' '),
  })));

// Issue 33's legibility checks on the lines shown: no two heads in one colour, no line on the
// very place of another head's, none fainter than the floor.
function apart(stem, lines, failures) {
  const colour = new Map();
  const place = new Map();
  // The floor, 0.08 with one head shown, fades as 1/√heads (plot/src/colormap.rs).
  const floor = 0.08 / Math.sqrt(new Set(lines.map((l) => l.h)).size) - 0.0005;
  for (const l of lines) {
    if (!colour.has(l.h)) colour.set(l.h, l.c);
    else if (colour.get(l.h) !== l.c) failures.push(`${stem}: head ${l.h + 1} has two colours`);
    const other = place.get(l.at);
    if (other !== undefined && other !== l.h) failures.push(`${stem}: a line of head ${l.h + 1} lies on one of head ${other + 1} at ${l.at}`);
    place.set(l.at, l.h);
    if (!(l.o >= floor)) failures.push(`${stem}: line ${JSON.stringify(l)} is fainter than the floor`);
  }
  const colours = [...colour.values()];
  if (new Set(colours).size !== colours.length) failures.push(`${stem}: ${colours.length} heads shown in ${new Set(colours).size} colours: ${JSON.stringify([...colour])}`);
  return colour.size;
}

// At the projector size (the size menu's 150%), every text of the view is 16 px or more.
async function projector(page, view, svg, stem, failures) {
  await view.locator('select.alab-size').selectOption('1.5');
  const small = await svg.evaluate((s) => {
    const zoom = s.getBoundingClientRect().width / s.viewBox.baseVal.width;
    return [...s.querySelectorAll('text')].map((t) => ({ t: t.textContent, px: Number(t.getAttribute('font-size')) * zoom }))
      .filter((t) => t.px < 16);
  });
  if (small.length) failures.push(`${stem}: at the projector size ${small.length} texts are under 16 px: ${JSON.stringify(small.slice(0, 3))}`);
  await view.scrollIntoViewIfNeeded();
  await page.waitForTimeout(300);
  await page.screenshot({ path: path.join(shots, `${stem}-after-projector.png`) });
  await view.locator('select.alab-size').selectOption('1');
}

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
  // A weight under the legend's least (data-u: 0.001 by default) draws no line, keeps its box.
  const drawable = (sel) => svg.locator(`line[data-h]${sel}:not([data-u])`).count();
  const before = await shown();
  const all0 = await drawable('');
  if (before.length !== all0) failures.push(`${stem}: ${before.length} lines shown at first, expected ${all0}`);
  if (apart(stem, before, failures) !== heads) failures.push(`${stem}: not every head's lines are shown at first`);
  await page.screenshot({ path: path.join(shots, `${stem}-head-view-before.png`) });

  const q = queries - 1;
  await svg.locator(`text.alab-q[data-q="${q}"]`).hover();
  const hovered = await shown();
  const ofQ = await drawable(`[data-q="${q}"]`);
  if (hovered.length !== ofQ || hovered.some((l) => l.q !== q)) {
    failures.push(`${stem}: hovering query ${q} shows ${JSON.stringify(hovered)}, expected its ${ofQ} lines only`);
  }
  if (printed) {
    for (const l of hovered) {
      const w = printed[l.h] && printed[l.h][l.q * keys + l.k];
      if (w === undefined || Math.abs(l.w - w) > 0.0015) failures.push(`${stem}: line ${JSON.stringify(l)} against printed weight ${w}`);
    }
  }
  // Every shown head's weight has its box beside the keys, and the hovered token is marked.
  const boxes = await svg.locator('rect.alab-box').count();
  if (boxes !== heads * keys) failures.push(`${stem}: ${boxes} boxes beside the keys for ${heads * keys} weights`);
  if (!(await svg.locator(`text.alab-q.alab-on[data-q="${q}"]`).count())) failures.push(`${stem}: the hovered token is not highlighted`);
  apart(stem, hovered, failures);
  await page.screenshot({ path: path.join(shots, `${stem}-head-view-hover.png`) });
  await page.mouse.move(5, 5);
  const left = await shown();
  if (left.length !== before.length) failures.push(`${stem}: ${left.length} lines after the mouse left, expected ${before.length}`);

  await svg.locator('rect[data-h="0"]').click();
  const toggled = await shown();
  const without0 = all0 - await drawable('[data-h="0"]');
  if (toggled.length !== without0 || toggled.some((l) => l.h === 0)) {
    failures.push(`${stem}: after hiding head 1, ${toggled.length} lines shown, expected ${without0} without heads[0]'s`);
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
  // A double-click shows that head alone.
  await svg.locator(`rect[data-h="${heads - 1}"]`).dblclick();
  const alone = await shown();
  if (!alone.length || alone.some((l) => l.h !== heads - 1)) failures.push(`${stem}: a double-click on head ${heads} shows heads ${[...new Set(alone.map((l) => l.h + 1))]}`);
  await view.locator('select.alab-heads').selectOption('all');
  await projector(page, view, svg, `${stem}-head-view`, failures);
  // The neuron view: a click on a key's token follows it as the query.
  const neuron = page.locator(`${PANEL} .alab-view[data-view="neuron-view"]`).first();
  if (await neuron.count()) {
    await neuron.scrollIntoViewIfNeeded();
    const nsvg = neuron.locator('svg.alab-neuron-view');
    const shownQuery = () => nsvg.evaluate((s) => [...s.querySelectorAll('g.alab-neuron-q')].filter((g) => g.getAttribute('display') !== 'none').map((g) => +g.dataset.q));
    await nsvg.locator('g.alab-neuron-q:not([display="none"]) text.alab-k[data-k="1"]').click();
    const afterKey = await shownQuery();
    const visibleQ = nsvg.locator('g.alab-neuron-q:not([display="none"]) text.alab-q');
    await visibleQ.click();
    const afterQ = await shownQuery();
    if (JSON.stringify(afterKey) !== '[1]' || JSON.stringify(afterQ) !== '[0]') failures.push(`${stem}: neuron view queries ${JSON.stringify(afterKey)} after a click on key 1 and ${JSON.stringify(afterQ)} after one on "q of", expected [1] and [0]`);
    await page.screenshot({ path: path.join(shots, `${stem}-after-neuron-view.png`) });
  }
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
  // Heads 1 and 8 chosen: the title and the frame say so (the frame spans the layer).
  await svg.locator('rect[data-h="0"]').click();
  const both = await svg.locator('g.alab-detail text.alab-title').textContent();
  const frame = Number(await svg.locator('rect[data-pick]').getAttribute('width'));
  const panel = Number(await svg.locator('image[data-l="1"][data-h="7"]').getAttribute('width'));
  if (both !== 'layer 1, heads 1, 8' || frame < heads * panel) failures.push(`${stem}: with heads 1 and 8 shown the title says ${JSON.stringify(both)} and the frame is ${frame} px wide`);
  // Every head of the layer: twelve colours, no line on another head's.
  await view.locator('select.alab-heads').selectOption('all');
  const every = await shown();
  if (apart(stem, every, failures) !== heads) failures.push(`${stem}: all heads chosen, lines of ${new Set(every.map((l) => l.h)).size} heads shown`);
  await svg.locator('text.alab-q[data-q="2"]').hover();
  await page.screenshot({ path: path.join(shots, `${stem}-after-model-view-all-heads-hover.png`) });
  await page.mouse.move(5, 5);
  // On a 1366 x 768 screen the grid and the open layer are seen whole at their own size.
  await page.setViewportSize({ width: 1366, height: 768 });
  await page.waitForTimeout(1000);
  await view.evaluate((v) => v.scrollIntoView({ block: 'start' }));
  await page.waitForTimeout(500);
  const fit = await view.evaluate((v) => {
    const s = v.querySelector('svg');
    const r = s.getBoundingClientRect();
    const bar = v.querySelector('.alab-bar').getBoundingClientRect();
    const area = v.closest('.jp-WindowedPanel-outer, .jp-Notebook').getBoundingClientRect();
    return {
      width: r.width, height: r.bottom - bar.top, own: Number(s.getAttribute('width')),
      areaWidth: v.clientWidth, scroll: v.scrollWidth, areaHeight: area.height,
    };
  });
  if (Math.abs(fit.width - fit.own) > 1 || fit.scroll > fit.areaWidth + 1 || fit.height > fit.areaHeight) {
    failures.push(`${stem}: the model view does not fit 1366 x 768: ${JSON.stringify(fit)}`);
  }
  await page.screenshot({ path: path.join(shots, `${stem}-after-model-view-1366x768.png`) });
  await projector(page, view, svg, `${stem}-model-view`, failures);
  await page.setViewportSize({ width: 1400, height: 1000 });
}

// 008's last view: every layer of a sentence pair (head_view_layers with sentence_b). The layer
// menu redraws the lines from that layer's weights; the pairs menu keeps only A -> B (then
// B -> A) lines; the dark switch turns the view dark and back; WordPiece pieces are prettified.
async function pairView(page, stem, failures) {
  const view = page.locator(`${PANEL} .alab-view[data-view="head-view"]`).last();
  if (!(await view.count())) { failures.push(`${stem}: no sentence-pair head view`); return; }
  await view.scrollIntoViewIfNeeded();
  await page.waitForTimeout(500);
  const svg = view.locator('svg.alab-head-view');
  const tokens = await svg.locator('text.alab-q').allTextContents();
  const b = tokens.indexOf('someone');
  if (b < 1) { failures.push(`${stem}: the pair view's tokens ${JSON.stringify(tokens)} have no "someone"`); return; }
  if (!tokens.includes('·rum') || tokens.some((t) => t.startsWith('##'))) {
    failures.push(`${stem}: WordPiece pieces not prettified: ${JSON.stringify(tokens)}`);
  }
  const layerMenu = view.locator('select.alab-layer');
  const layers = await layerMenu.locator('option').count();
  if (layers !== 6) failures.push(`${stem}: the pair view's layer menu has ${layers} layers, not 6`);
  const key = (lines) => lines.map((l) => `${l.h} ${l.q} ${l.k} ${l.w}`).sort().join(',');
  const last = key(await shownLines(svg));
  await layerMenu.selectOption('2');
  await page.waitForTimeout(300);
  const second = await shownLines(svg);
  if (!second.length || key(second) === last) failures.push(`${stem}: layer 2 drew ${second.length} lines, the same as layer 5`);
  for (const [pairs, keep] of [['AB', (l) => l.q < b && l.k >= b], ['BA', (l) => l.q >= b && l.k < b]]) {
    await view.locator('select.alab-pairs').selectOption(pairs);
    await page.waitForTimeout(300);
    const lines = await shownLines(svg);
    const wrong = lines.filter((l) => !keep(l));
    if (!lines.length || wrong.length) failures.push(`${stem}: pairs ${pairs}: ${lines.length} lines shown, ${wrong.length} outside it`);
    if (pairs === 'AB') await page.screenshot({ path: path.join(shots, `${stem}-pair-view-a-to-b.png`) });
  }
  await view.locator('select.alab-pairs').selectOption('all');
  const dark = () => view.evaluate((v) => v.classList.contains('alab-dark') || !!v.querySelector('.alab-dark'));
  const before = await dark();
  await view.locator('button', { hasText: 'dark' }).click();
  await page.waitForTimeout(300);
  const after = await dark();
  await page.screenshot({ path: path.join(shots, `${stem}-pair-view-dark.png`) });
  await view.locator('button', { hasText: 'dark' }).click();
  if (before || !after || (await dark())) failures.push(`${stem}: the dark switch went ${before} -> ${after} -> ${await dark()}`);
}

// The pictures drawn in Rust that the views' scripts replace: each <img class="alab-picture">
// as it leaves the page (its view's script swaps it for live SVG as the output is shown), its
// data: URI kept by the view's kind, in order. Set up before Run All, in the page.
async function keepPictures(page) {
  await page.evaluate(() => {
    window.alabPictures = {};
    new MutationObserver((records) => {
      for (const r of records) {
        const kind = r.target.dataset && r.target.dataset.view;
        for (const n of r.removedNodes) {
          if (kind && n.nodeType === 1 && n.matches('img.alab-picture')) (window.alabPictures[kind] ||= []).push(n.getAttribute('src'));
        }
      }
    }).observe(document.body, { childList: true, subtree: true });
  });
}

// Console errors, uncaught exceptions and requests from the page from now until the returned
// function is called; a request counts unless it is JupyterLab's own (to its server: the REST
// API, its workspace saves, the busy favicon) or a data: or blob: URI.
const LAB_PATHS = /^\/(api|lab\/api)\/|^\/static\/favicons\//;
function watchPage(page, base) {
  const errors = [];
  const requests = [];
  const server = new URL(base).host;
  const onConsole = (m) => { if (m.type() === 'error') errors.push(m.text()); };
  const onError = (e) => errors.push(String(e && e.stack || e));
  const onRequest = (r) => {
    const u = r.url();
    if (/^(data|blob):/.test(u)) return;
    const url = new URL(u);
    if (url.host !== server || !LAB_PATHS.test(url.pathname)) requests.push(`${r.method()} ${u.slice(0, 120)}`);
  };
  page.on('console', onConsole);
  page.on('pageerror', onError);
  page.on('request', onRequest);
  return () => {
    page.off('console', onConsole);
    page.off('pageerror', onError);
    page.off('request', onRequest);
    return { errors, requests };
  };
}

// The rows of a next-token picture (live SVG or one parsed from its data: URI) as drawn: each
// shown row's token, probability text, the id and 6-decimal probability of its tooltip, and
// its bar's length; with the caption and the line about the other tokens.
function barsOf(svg) {
  const own = (t) => (t && t.lastChild && t.lastChild.nodeType === 3 ? t.lastChild.nodeValue : '');
  const rows = [...svg.querySelectorAll('g.alab-row')].filter((g) => g.getAttribute('display') !== 'none').map((g) => {
    const p = g.querySelector('text.alab-p');
    const tip = (p.querySelector('title') || { textContent: '' }).textContent;
    const m = tip.match(/^id (\d+) · .* · p ([\d.]+)$/);
    return { tok: own(g.querySelector('text.alab-tok')), p: own(p), id: m ? +m[1] : -1, p6: m ? +m[2] : NaN, w: +g.querySelector('rect').getAttribute('width') };
  });
  return { rows, caption: own(svg.querySelector('text.alab-caption')), rest: own(svg.querySelector('text.alab-rest')) };
}

// The softmax of the library's sampling, computed here from what the view carries (its div's
// data- attributes: the largest logits and ids, and for each slider temperature the rest's
// sum): the first `rows` tokens' ids and probabilities at temperature T, top-k k (null: all).
function carriedSoftmax(d, T, k, rows) {
  const s = d.logits.map((l) => (l - d.top) / T);
  const order = s.map((_, i) => i).sort((a, b) => s[b] - s[a] || d.ids[a] - d.ids[b]);
  const every = k === null || k >= d.vocab;
  const kept = every ? order : order.slice(0, k);
  const max = s[kept[0]];
  let z = kept.reduce((sum, i) => sum + Math.exp(s[i] - max), 0);
  if (every) {
    const t = d.temps.findIndex((x) => Math.abs(x - T) < 1e-12);
    if (t < 0) return null;
    z += d.tails[t];
  }
  return kept.slice(0, rows).map((i) => ({ id: d.ids[i], p: Math.exp(s[i] - max) / z }));
}

// 011's next-token view, as a teacher uses it. At the defaults (temperature 1, every token) the
// script's bars say what the picture drawn in Rust over all 49,152 logits says, token for
// token; each setting of the sliders shows the softmax computed here from the carried logits;
// a low temperature makes the top token likelier, a high one less likely; top-k 1 leaves one
// bar at 1.000; back at the defaults, the picture again.
async function nextTokenView(page, stem, failures) {
  const view = page.locator(`${PANEL} .alab-view[data-view="next-token-view"]`).first();
  await view.scrollIntoViewIfNeeded();
  await page.waitForTimeout(500);
  const svg = view.locator('svg.alab-next-token-view');
  if (!(await svg.count()) || !(await view.locator('.alab-bar .alab-temperature input').count())) {
    failures.push(`${stem}: the next-token view's script did not run (no live SVG or no sliders)`);
    return;
  }
  const d = await view.evaluate((v) => {
    const list = (n) => v.getAttribute(`data-${n}`).split(',').map(Number);
    return { top: +v.dataset.top, vocab: +v.dataset.vocab, logits: list('logits'), ids: list('ids'), temps: list('temps'), tails: list('tails') };
  });
  const toolbars = await view.locator(':scope > .alab-bar').count();
  if (toolbars !== 1) failures.push(`${stem}: the next-token view has ${toolbars} toolbars, expected one (its script ran once)`);
  // The picture as the cell's output brought it, before the script drew over it.
  const pictures = await page.evaluate(() => window.alabPictures['next-token-view'] || []);
  if (!pictures.length) { failures.push(`${stem}: no picture of the next-token view was seen replaced by its script`); return; }
  const parsed = await page.evaluateHandle((uri) => {
    const bytes = Uint8Array.from(atob(uri.split(',')[1]), (c) => c.charCodeAt(0));
    return new DOMParser().parseFromString(new TextDecoder().decode(bytes), 'image/svg+xml').documentElement;
  }, pictures[pictures.length - 1]);
  const picture = await parsed.evaluate(barsOf);
  await parsed.dispose();
  const bars = () => svg.evaluate(barsOf);
  const temperature = view.locator('.alab-temperature input');
  const topK = view.locator('.alab-top-k input');
  const kEnd = Number(await topK.getAttribute('max'));
  const slide = async (input, value) => { await input.fill(String(value)); await page.waitForTimeout(100); };
  // Each shown row against the softmax from the carried logits, and the bars' lengths.
  const barW = Number(await svg.getAttribute('data-bar-w'));
  const slots = await svg.locator('g.alab-row').count();
  const against = (what, got, T, k) => {
    const want = carriedSoftmax(d, T, k, slots);
    if (!want) { failures.push(`${stem}: ${what}: the view carries no sum for temperature ${T}`); return; }
    if (got.rows.length !== want.length) failures.push(`${stem}: ${what}: ${got.rows.length} bars shown, expected ${want.length}`);
    got.rows.forEach((r, i) => {
      const w = want[i];
      if (!w || r.id !== w.id || Math.abs(r.p6 - w.p) > 1.5e-6 || Math.abs(Number(r.p) - w.p) > 0.0005 + 1e-9 || Math.abs(r.w - w.p * barW) > 0.01) {
        failures.push(`${stem}: ${what}: row ${i} shows ${JSON.stringify(r)}, the softmax of the carried logits gives ${JSON.stringify(w)}`);
      }
    });
    const caption = `temperature ${T.toFixed(2)} · top-k: ${k === null ? `all (${d.vocab.toLocaleString('en-US')} tokens)` : k}`;
    if (got.caption !== caption) failures.push(`${stem}: ${what}: the caption says ${JSON.stringify(got.caption)}, expected ${JSON.stringify(caption)}`);
  };
  const same = (what, got) => {
    const key = (b) => JSON.stringify(b.rows.map((r) => [r.id, r.tok, r.p]).concat([b.caption, b.rest]));
    if (!picture.rows.length || key(got) !== key(picture)) {
      failures.push(`${stem}: ${what}: the bars ${key(got).slice(0, 300)} differ from the picture drawn in Rust ${key(picture).slice(0, 300)}`);
    }
    // Rust's probabilities over every logit, and the script's from the carried ones.
    got.rows.forEach((r, i) => {
      if (picture.rows[i] && Math.abs(r.p6 - picture.rows[i].p6) > 1.5e-6) failures.push(`${stem}: ${what}: row ${i} p ${r.p6}, the picture's ${picture.rows[i].p6}`);
    });
  };
  const first = await bars();
  same('at the defaults', first);
  against('at the defaults', first, 1, null);
  const sliders = await view.evaluate((v) => [...v.querySelectorAll('.alab-bar label')].map((l) => l.textContent.replace(/\s+/g, ' ')));
  if (JSON.stringify(sliders) !== JSON.stringify(['temperature 1.00', 'top-k all'])) failures.push(`${stem}: the sliders read ${JSON.stringify(sliders)}, expected temperature 1.00 and top-k all`);
  await page.screenshot({ path: path.join(shots, `${stem}-next-token.png`) });
  const top = (b) => Number(b.rows[0] && b.rows[0].p);
  // The slider's positions are hundredths / 5: 2 is 0.10, 40 is 2.00.
  await slide(temperature, 2);
  const cold = await bars();
  against('at temperature 0.10', cold, 0.1, null);
  if (!(top(cold) > top(first))) failures.push(`${stem}: at temperature 0.10 the top bar is ${cold.rows[0] && cold.rows[0].p}, not above ${first.rows[0].p} at 1.00`);
  await page.screenshot({ path: path.join(shots, `${stem}-next-token-cold.png`) });
  await slide(temperature, 40);
  const hot = await bars();
  against('at temperature 2.00', hot, 2, null);
  if (!(top(hot) < top(first))) failures.push(`${stem}: at temperature 2.00 the top bar is ${hot.rows[0] && hot.rows[0].p}, not below ${first.rows[0].p} at 1.00`);
  await slide(temperature, 20);
  await slide(topK, 1);
  const one = await bars();
  against('at top-k 1', one, 1, 1);
  if (one.rows.length !== 1 || one.rows[0].p !== '1.000' || one.rows[0].id !== first.rows[0].id
    || one.rest !== `the other ${(d.vocab - 1).toLocaleString('en-US')} tokens: 0.000 in all`) {
    failures.push(`${stem}: at top-k 1: ${JSON.stringify(one)}, expected the top token alone at 1.000`);
  }
  await page.screenshot({ path: path.join(shots, `${stem}-next-token-top-k-1.png`) });
  await slide(topK, 5);
  const five = await bars();
  against('at top-k 5', five, 1, 5);
  const sum5 = five.rows.reduce((s, r) => s + r.p6, 0);
  if (Math.abs(sum5 - 1) > 1e-5) failures.push(`${stem}: at top-k 5 the five bars add up to ${sum5}`);
  await slide(topK, kEnd);
  const back = await bars();
  same('back at the defaults', back);
}

// 011's generation view: the step slider and the play button reveal the generated tokens one a
// step; every layer the menu offers draws other weights, each head's adding up to 1 (the
// strip's opacities are √weight); one head chosen (menu or a click on its colour) draws that
// head alone, the tokens shaded in its colour; at 100% it fits a 1366 x 768 screen with the
// file browser open.
async function generationView(page, stem, failures) {
  const view = page.locator(`${PANEL} .alab-view[data-view="generation-view"]`).first();
  await view.scrollIntoViewIfNeeded();
  await page.waitForTimeout(500);
  const svg = view.locator('svg.alab-generation-view');
  if (!(await svg.count()) || !(await view.locator('.alab-bar .alab-step input').count())) {
    failures.push(`${stem}: the generation view's script did not run (no live SVG or no step slider)`);
    return;
  }
  const toolbars = await view.locator(':scope > .alab-bar').count();
  if (toolbars !== 1) failures.push(`${stem}: the generation view has ${toolbars} toolbars, expected one (its script ran once)`);
  const prompt = Number(await view.getAttribute('data-prompt'));
  const steps = Number(await view.getAttribute('data-steps'));
  const heads = Number(await view.getAttribute('data-heads'));
  const layers = (await view.getAttribute('data-layers')).split(',').map(Number);
  const xs = (await svg.getAttribute('data-xs')).split(',').map(Number);
  const segH = Number(await svg.getAttribute('data-seg-h'));
  const bgH = Number(await svg.getAttribute('data-bg-h'));
  const bgMax = Number(await svg.getAttribute('data-bg-max'));
  const state = () => svg.evaluate((s, prompt) => {
    const own = (t) => (t && t.lastChild && t.lastChild.nodeType === 3 ? t.lastChild.nodeValue : '');
    const shown = [...s.querySelectorAll('g.alab-tok')].filter((g) => g.getAttribute('display') !== 'none').map((g) => +g.dataset.t);
    return {
      shown,
      generated: shown.filter((t) => t >= prompt).length,
      lines: [...s.querySelectorAll('g.alab-shade line')].map((l) => ({
        t: +l.dataset.t, h: +l.dataset.h, o: +l.getAttribute('stroke-opacity'), width: +l.getAttribute('stroke-width'), c: l.getAttribute('stroke'),
      })),
      caption: own(s.querySelector('text.alab-caption')),
      cur: +s.querySelector('rect[data-cur]').getAttribute('x'),
      fills: [...s.querySelectorAll('rect[data-h]')].map((r) => r.getAttribute('fill')),
      colours: [...s.querySelectorAll('rect[data-h]')].map((r) => r.getAttribute('stroke')),
    };
  }, prompt);
  // Each shown head's weights over the tokens up to the step's: (opacity)² adds up to 1, less
  // what one byte a weight and 3 decimals lose (under 0.05 over 66 tokens).
  const distributions = (what, st, step, only) => {
    const p = prompt + step - 1;
    const strips = st.lines.filter((l) => l.width === segH);
    const sums = new Map();
    for (const l of strips) sums.set(l.h, (sums.get(l.h) || 0) + l.o * l.o);
    const want = only === null ? [...Array(heads).keys()] : [only];
    const bad = want.filter((h) => !(Math.abs((sums.get(h) || 0) - 1) < 0.05));
    const late = st.lines.filter((l) => l.t > p);
    if (bad.length || late.length || [...sums.keys()].some((h) => !want.includes(h))) {
      failures.push(`${stem}: ${what}: heads' weights add up to ${JSON.stringify([...sums].map(([h, s]) => [h + 1, +s.toFixed(3)]))}, ${late.length} drawn past token ${p}`);
    }
  };
  const first = await state();
  if (first.generated !== steps || first.shown.length !== prompt + steps) failures.push(`${stem}: at first the generation view shows ${first.generated} of ${steps} generated tokens (${first.shown.length} in all)`);
  distributions('at first', first, steps, null);
  await page.screenshot({ path: path.join(shots, `${stem}-generation.png`) });

  // The step slider: step k shows the prompt and k generated tokens, the k-th framed.
  const stepInput = view.locator('.alab-step input');
  for (let k = 1; k <= steps; k++) {
    await stepInput.fill(String(k));
    const st = await state();
    const p = prompt + k - 1;
    const contiguous = st.shown.length === p + 1 && st.shown.every((t, i) => t === i);
    if (st.generated !== k || !contiguous || !st.caption.startsWith(`token ${k} of ${steps}:`) || Math.abs(st.cur - (xs[p] - 2)) > 0.01) {
      failures.push(`${stem}: at step ${k}: ${st.generated} generated tokens shown (${st.shown.length} in all), caption ${JSON.stringify(st.caption)}, frame at ${st.cur} (token ${p} is at ${xs[p]})`);
    }
    distributions(`at step ${k}`, st, k, null);
    if (k === Math.ceil(steps / 2)) await page.screenshot({ path: path.join(shots, `${stem}-generation-step-${k}.png`) });
  }
  // The play button, from step 1: one more token every tick, until paused.
  await stepInput.fill('1');
  const play = view.locator('.alab-bar button', { hasText: 'play' });
  await play.click();
  const seen = await svg.evaluate((s, prompt) => new Promise((resolve) => {
    const counts = [];
    const count = () => [...s.querySelectorAll('g.alab-tok')].filter((g) => +g.dataset.t >= prompt && g.getAttribute('display') !== 'none').length;
    const timer = setInterval(() => { counts.push(count()); }, 40);
    setTimeout(() => { clearInterval(timer); resolve(counts); }, 3200);
  }), prompt);
  const label = await view.locator('.alab-bar button').first().textContent();
  await view.locator('.alab-bar button').first().click();
  const paused = await state();
  await page.waitForTimeout(1500);
  const still = await state();
  const changes = seen.filter((c, i) => i > 0 && c !== seen[i - 1]).length;
  const jumps = seen.filter((c, i) => i > 0 && c !== seen[i - 1] && c !== seen[i - 1] + 1);
  if (seen[0] > 2 || changes < 3 || jumps.length || !label.includes('pause') || still.generated !== paused.generated) {
    failures.push(`${stem}: play: counts ${JSON.stringify([...new Set(seen)])} (${changes} steps, jumps ${JSON.stringify(jumps)}), button ${JSON.stringify(label)}, ${paused.generated} then ${still.generated} tokens once paused`);
  }

  // Every layer the menu offers, at the last step: other weights each, every head's adding up.
  await stepInput.fill(String(steps));
  const layerMenu = view.locator('select.alab-layer');
  const drawn = new Map();
  for (const l of layers) {
    await layerMenu.selectOption(String(l));
    const st = await state();
    if (!st.caption.includes(`· layer ${l} ·`)) failures.push(`${stem}: layer ${l} chosen, the caption says ${JSON.stringify(st.caption)}`);
    distributions(`layer ${l}`, st, steps, null);
    drawn.set(JSON.stringify(st.lines), l);
  }
  if (drawn.size !== layers.length) failures.push(`${stem}: ${layers.length} layers drew ${drawn.size} different pictures of the weights`);
  await layerMenu.selectOption(String(layers.includes(4) ? 4 : layers[0]));

  // One head: the menu's head 3, then a click on head 6's colour, and another for every head.
  const headMenu = view.locator('select.alab-heads');
  const alone = async (h, how) => {
    const st = await state();
    const strips = st.lines.filter((l) => l.width === segH);
    const shades = st.lines.filter((l) => l.width === bgH);
    const wrong = st.lines.filter((l) => l.h !== h || l.c !== st.colours[h]);
    const unmatched = shades.filter((b) => !strips.some((s) => s.t === b.t && Math.abs(b.o - bgMax * s.o) < 0.002));
    const fills = st.fills.map((f, i) => (f !== 'none') === (i === h));
    if (!strips.length || shades.length !== strips.length || wrong.length || unmatched.length || fills.includes(false)
      || !st.caption.endsWith(`· head ${h + 1}`) || (await headMenu.inputValue()) !== String(h)) {
      failures.push(`${stem}: head ${h + 1} by ${how}: ${strips.length} strips, ${shades.length} shades, ${wrong.length} lines of another head or colour, ${unmatched.length} shades unlike their strip, swatches ${JSON.stringify(st.fills)}, caption ${JSON.stringify(st.caption)}`);
    }
    distributions(`head ${h + 1} alone`, st, steps, h);
  };
  await headMenu.selectOption('2');
  await alone(2, 'the menu');
  await page.screenshot({ path: path.join(shots, `${stem}-generation-head-3.png`) });
  await svg.locator('rect[data-h="5"]').click();
  await alone(5, 'a click on its colour');
  await svg.locator('rect[data-h="5"]').click();
  const every = await state();
  if ((await headMenu.inputValue()) !== 'all' || new Set(every.lines.map((l) => l.h)).size !== heads || every.lines.some((l) => l.width !== segH)) {
    failures.push(`${stem}: a second click on head 6's colour left the menu at ${await headMenu.inputValue()}, lines of ${new Set(every.lines.map((l) => l.h)).size} heads`);
  }

  // A 1366 x 768 screen, the file browser open, the view at 100%: it fits the notebook's width.
  await page.setViewportSize({ width: 1366, height: 768 });
  await page.waitForTimeout(1000);
  if (!(await page.locator('#filebrowser').isVisible())) {
    await page.locator('.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="filebrowser"]').click();
    await page.waitForTimeout(500);
  }
  await view.locator('select.alab-size').selectOption('1');
  await view.evaluate((v) => v.scrollIntoView({ block: 'start' }));
  await page.waitForTimeout(500);
  const measure = () => view.evaluate((v) => {
    const r = v.querySelector('svg').getBoundingClientRect();
    const area = v.closest('.jp-WindowedPanel-outer, .jp-Notebook').getBoundingClientRect();
    const files = document.querySelector('#filebrowser');
    return {
      left: r.left, right: r.right, width: r.width, areaLeft: area.left, areaRight: area.right,
      clientWidth: v.clientWidth, scrollWidth: v.scrollWidth,
      files: files ? files.getBoundingClientRect().width : 0,
    };
  });
  const fit = await measure();
  if (!fit.files || fit.left < fit.areaLeft - 1 || fit.right > fit.areaRight + 1 || fit.scrollWidth > fit.clientWidth + 1) {
    failures.push(`${stem}: the generation view at 100% does not fit 1366 x 768 with the file browser open: ${JSON.stringify(fit)}`);
  }
  await page.screenshot({ path: path.join(shots, `${stem}-generation-1366x768.png`) });
  await view.locator('select.alab-size').selectOption('1.5');
  await page.waitForTimeout(300);
  const projector = await measure();
  console.log(`e2e: ${stem}: generation view at 1366 x 768, file browser ${fit.files} px: ${fit.width} px at 100%, ${projector.width} px at 150% in a notebook area of ${fit.areaRight - fit.areaLeft} px`);
  await view.locator('select.alab-size').selectOption('1');
  await page.setViewportSize({ width: 1400, height: 1000 });
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
    untrust(Object.keys(NOTEBOOKS));
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
  // Issue 47: the stored views and pictures of 000, 008, 010 and 011 fit 1366 x 768 with the
  // file browser open at 100% and 150%, in a page of JupyterLab's size, then in JupyterLab
  // (the venv `lab` made).
  for (const test of ['fit.test.mjs', 'lab_fit.test.mjs']) {
    const run = spawnSync(process.execPath, [path.join(repo, 'e2e', test)], { stdio: 'inherit' });
    if (run.status !== 0) failures.push(`e2e/${test} failed (status ${run.status})`);
  }
  if (failures.length) {
    for (const f of failures) console.error(`FAIL ${f}`);
    process.exit(1);
  }
  console.log(`e2e: ${Object.keys(NOTEBOOKS).length} notebooks ok; screenshots in ${shots}`);
}

await main();
