// The views and pictures fit the screen a class sees (issue 47), fast and without JupyterLab:
// every stored view and picture of notebooks 000, 008, 010 and 011 is put, as its notebook
// stores it, into a page of 1366 x 768 whose output area is JupyterLab's with the file browser
// open (934 px, 914 of them for the output), under a scrolled panel 647 px tall, with
// JupyterLab's rule that shrinks a picture to the output's width. At 100% and at 150% (the
// views' size menu), the checks of e2e/fit.mjs:
// - no view or picture is wider than the output area;
// - every text is at least 12 px at 100% and 18 px at 150%, the views' toolbars included
//   (the stored pictures at 100%; their 150% is `.scale(1.5)`: the pages below, and
//   plot/tests/plot.rs);
// - the open head's key column is inside the visible area;
// - a view taller than the panel scrolls inside itself, its toolbar in sight;
// and the heads menu's "some heads" is a state that cannot be picked; a weight under the
// least weight draws no line and keeps an empty box with its tooltip. Screenshots at 150% of
// 008's model view with a layer open, its pair view and its layer grids in target/e2e/fit/.
//
// Usage: node e2e/fit.test.mjs   (CHROMIUM=/path/to/chromium, default /usr/bin/chromium)

import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkOutput, sizeTo } from './fit.mjs';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const shots = path.join(repo, 'target', 'e2e', 'fit');
// JupyterLab 4's at 1366 x 768 with the file browser open (250 px), as e2e/lab_fit.test.mjs
// measures it: an output area of 934 px (its text 914 px wide, 20 px padding) in a notebook
// panel of 647 px.
const OUTPUT_WIDTH = 934;
const PANEL_HEIGHT = 647;
const NOTEBOOKS = ['000_two_heads_worked_example', '008_attention_in_a_real_model', '010_attention_that_learns', '011_a_real_model_writes'];
// Pictures at 150%, if present: 008's layer grids and single heads drawn with `.scale(1.5)`
// (`python3 scripts/fit_pages_008.py`, which replays a copy of 008) and a made-up grid of 008's
// size (`cargo run -p attention-lab-plot --example fit_pages`); checked for text of 18 px.
const EXTRA = path.join(repo, 'target', 'e2e', 'fit-pages');

function outputs(stem) {
  const nb = JSON.parse(fs.readFileSync(path.join(repo, 'notebooks', `${stem}.ipynb`), 'utf8'));
  const found = [];
  nb.cells.forEach((cell, i) => {
    for (const out of cell.outputs || []) {
      const html = out.data && out.data['text/html'];
      if (!html) continue;
      const text = Array.isArray(html) ? html.join('') : html;
      if (text.includes('alab-view') || text.includes('alab-figure')) found.push({ name: `${stem.slice(0, 3)}-cell${i}`, html: text });
    }
  });
  return found;
}

function page(html) {
  return `<!doctype html><html><head><meta charset="utf-8"><style>
body { margin: 0; font: 13px sans-serif; }
#panel { position: absolute; top: 104px; left: 0; width: 1366px; height: ${PANEL_HEIGHT}px; overflow-y: auto; }
.jp-OutputArea-output { margin-left: 330px; width: ${OUTPUT_WIDTH - 20}px; padding-right: 20px; }
.jp-RenderedHTMLCommon img { max-width: 100%; height: auto; }
</style></head><body><div id="panel"><div class="jp-OutputArea-output jp-RenderedHTMLCommon">${html}</div>
<div style="height: 1200px"></div></div></body></html>`;
}

// A screenshot of the output whole: the panel grows to show it, then scrolls again.
async function shoot(p, name) {
  await p.evaluate(() => { document.getElementById('panel').style.height = 'auto'; });
  await p.locator('.jp-OutputArea-output').screenshot({ path: path.join(shots, `${name}.png`) });
  await p.evaluate((h) => { document.getElementById('panel').style.height = `${h}px`; }, PANEL_HEIGHT);
}


const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox'],
});
fs.rmSync(shots, { recursive: true, force: true });
fs.mkdirSync(shots, { recursive: true });
const failures = [];
let checked = 0;
try {
  const context = await browser.newContext({ viewport: { width: 1366, height: 768 } });
  const items = NOTEBOOKS.flatMap(outputs);
  if (fs.existsSync(EXTRA)) {
    for (const f of fs.readdirSync(EXTRA).filter((f) => f.endsWith('.html')).sort()) {
      items.push({ name: `extra-${f.replace('.html', '')}`, html: fs.readFileSync(path.join(EXTRA, f), 'utf8'), extra: true });
    }
  }
  for (const item of items) {
    const p = await context.newPage();
    const errors = [];
    p.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    p.on('pageerror', (e) => errors.push(String(e)));
    p.on('request', (r) => { if (!r.url().startsWith('data:') && !r.url().startsWith('about:')) errors.push(`request ${r.url()}`); });
    await p.setContent(page(item.html));
    const views = await p.locator('div.alab-view').count();
    for (const zoom of views ? [1, 1.5] : [1]) {
      if (views) await sizeTo(p.locator('.jp-OutputArea-output'), zoom);
      failures.push(...await checkOutput(p.locator('.jp-OutputArea-output'), `${item.name} at ${zoom * 100}%`, item.extra ? 1.5 : zoom));
      checked += 1;
      if (zoom === 1.5 || !views) await shoot(p, views ? `${item.name}-150` : item.name);
    }
    // A weight under the legend's least (0.001) draws no line; hovering its query gives it an
    // empty box beside the key, whose tooltip has the weight.
    const under = p.locator('svg.alab-head-view line[data-u]').first();
    if (await under.count()) {
      const [q, w] = [await under.getAttribute('data-q'), await under.getAttribute('data-w')];
      await p.locator(`svg.alab-head-view text.alab-q[data-q="${q}"]`).first().hover();
      const seen = await p.evaluate((w) => ({
        lines: [...document.querySelectorAll('svg.alab-head-view line[data-u]')].filter((l) => l.getAttribute('display') !== 'none').length,
        box: [...document.querySelectorAll('rect.alab-box')].filter((r) => r.getAttribute('fill-opacity') === '0' && r.textContent.endsWith(`weight ${w}`)).length,
      }), w);
      if (seen.lines || !seen.box) failures.push(`${item.name}: a weight of ${w} under the least: ${seen.lines} lines shown, ${seen.box} empty boxes with its tooltip`);
      await p.mouse.move(1, 1);
      checked += 1;
    }
    // 008's model view: open another layer's panel, then check again at 150%.
    if (await p.locator('svg.alab-model-view').count()) {
      await p.locator('svg.alab-model-view image[data-l="3"][data-h="7"]').click();
      failures.push(...await checkOutput(p.locator('.jp-OutputArea-output'), `${item.name} layer 3 open at 150%`, 1.5));
      const title = await p.locator('svg.alab-model-view g.alab-detail text.alab-title').textContent();
      if (title !== 'layer 3, head 8') failures.push(`${item.name}: opened "${title}"`);
      await shoot(p, `${item.name}-layer3-150`);
      // On resize the view lays itself out again: beside the grid in a wide output area, under
      // it again in the narrow one.
      const placed = async (width) => {
        await p.evaluate((w) => { document.querySelector('.jp-OutputArea-output').style.width = `${w}px`; }, width);
        await p.waitForTimeout(200);
        return p.evaluate(() => document.querySelector('svg.alab-model-view g.alab-detail').hasAttribute('transform') ? 'under' : 'beside');
      };
      const wide = await placed(1400);
      const narrow = await placed(OUTPUT_WIDTH - 20);
      if (wide !== 'beside' || narrow !== 'under') failures.push(`${item.name}: at 150% the open layer is ${wide} the grid in 1400 px and ${narrow} it in ${OUTPUT_WIDTH - 20} px`);
      checked += 1;
      // The same scrolled inside the view to the open layer's last token.
      await p.evaluate(() => { const v = document.querySelector('div.alab-view'); v.scrollTop = v.scrollHeight; });
      await shoot(p, `${item.name}-layer3-150-scrolled`);
    }
    failures.push(...errors.map((e) => `${item.name}: ${e}`));
    await p.close();
  }
} finally {
  await browser.close();
}
if (failures.length) {
  console.error(failures.join('\n'));
  console.error(`fit: ${failures.length} failures (${checked} checks)`);
  process.exit(1);
}
console.log(`fit: ${checked} checks passed; screenshots in ${path.relative(repo, shots)}/`);
