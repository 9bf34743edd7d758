// What the browser tests share: a notebook run in JupyterLab as a person runs it (Run All once
// the kernel is idle), and its page checked against the outputs stored in the notebook.

import os from 'node:os';
import path from 'node:path';

// `attention-lab lab`'s cache folder, as io::cache finds it: $ATTENTION_LAB_CACHE, else
// attention-lab in $XDG_CACHE_HOME or ~/.cache.
export const labCache = process.env.ATTENTION_LAB_CACHE
  || path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'attention-lab');

export const norm = (s) => s.replace(/[ \t]+\n/g, '\n').trim();
const textOf = (t) => (Array.isArray(t) ? t.join('') : t);

// What each code cell stored: its stream and text/plain texts, and its stderr.
export function stored(nb) {
  return nb.cells.map((cell) => {
    const texts = [];
    const stderr = [];
    for (const o of cell.outputs || []) {
      if (o.output_type === 'stream') (o.name === 'stderr' ? stderr : texts).push(norm(textOf(o.text)));
      else if (o.data && o.data['text/plain'] && !o.data['text/html']) texts.push(norm(textOf(o.data['text/plain'])));
    }
    return { type: cell.cell_type, texts: texts.filter((t) => t), stderr };
  });
}

export async function menu(page, top, item) {
  await page.locator('.lm-MenuBar-itemLabel', { hasText: new RegExp(`^${top}$`) }).click();
  await page.locator('.lm-Menu-item', { hasText: item }).first().click();
}

// Waits until the notebook in `panel` runs the project's kernel and the status bar calls it
// idle: a Run All sent before the kernel has started is lost (the kernel stays idle and the
// page waits).
export async function kernelIdle(page, panel) {
  await page.waitForFunction(
    (panel) => (document.querySelector(`${panel} .jp-Toolbar-kernelName`)?.textContent || '').includes('Rust (attention-lab)'),
    panel, { timeout: 180000 },
  );
  await page.waitForFunction(
    () => [...document.querySelectorAll('.jp-StatusBar-TextItem')]
      .some((t) => /Rust \(attention-lab\) \| Idle/.test(t.textContent || '')),
    null, { timeout: 180000 },
  );
}

// Clears the stored outputs (so that what is checked is new), runs every cell, waits until
// every prompt has its number, and reads each cell back: its output text, its stderr, its
// errors and the square cells of each heatmap (an image of its SVG, read back). `problem`
// hears what is wrong on the way.
export async function runAll(page, panel, timeout, problem) {
  await menu(page, 'Edit', 'Clear Outputs of All Cells');
  const leftover = await page.locator(`${panel} .jp-OutputArea-output`).count();
  if (leftover) problem(`${leftover} outputs left after clearing`);
  const prompts = () => page.evaluate((panel) => [...document.querySelectorAll(`${panel} .jp-CodeCell .jp-InputArea-prompt`)]
    .map((p) => p.textContent), panel);
  const isNumbered = (prompt) => /\[\d+\]/.test(prompt);
  const numbered = (await prompts()).filter(isNumbered).length;
  // Numbers left from the stored notebook would look like a finished run.
  if (numbered) problem(`${numbered} prompts still numbered after clearing`);
  await menu(page, 'Run', 'Run All Cells');
  // Idle: every code cell has a number in its prompt (none is queued or running).
  for (const deadline = Date.now() + timeout; ;) {
    const now = await prompts();
    if (now.length > 0 && now.every(isNumbered)) break;
    if (Date.now() > deadline) throw new Error(`Run All: ${now.filter((p) => !isNumbered(p)).length} of ${now.length} cells unfinished after ${timeout / 1000} s`);
    await page.waitForTimeout(1000);
  }
  await page.waitForTimeout(1000); // the last lines may follow the idle status
  return page.$$eval(`${panel} .jp-Notebook .jp-Cell`, (els) => els.map((el) => ({
    out: [...el.querySelectorAll('.jp-OutputArea-output')].map((o) => o.textContent).join('\n'),
    stderr: [...el.querySelectorAll('[data-mime-type="application/vnd.jupyter.stderr"]')].map((o) => o.textContent),
    errors: el.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]').length,
    svgs: [...el.querySelectorAll('.jp-OutputArea-output img.alab-figure')].map((img) => {
      const bytes = Uint8Array.from(atob(img.getAttribute('src').split(',')[1]), (c) => c.charCodeAt(0));
      const svg = new DOMParser().parseFromString(new TextDecoder().decode(bytes), 'image/svg+xml');
      return [...svg.querySelectorAll('rect')]
        .filter((r) => r.getAttribute('width') === r.getAttribute('height') && r.getAttribute('stroke') === 'none').length;
    }),
  })));
}

// Checks the cells read back against the notebook's stored outputs: every stored text on the
// page, no error, no stderr that was not stored. Returns the heatmaps' cell counts in order.
export function checkCells(name, expected, cells, failures) {
  if (cells.length !== expected.length) failures.push(`${name}: page has ${cells.length} cells, notebook ${expected.length}`);
  const svgCounts = [];
  expected.forEach((want, i) => {
    const got = cells[i];
    if (!got || want.type !== 'code') return;
    const page = norm(got.out).replace(/[ \t]+\n/g, '\n');
    for (const t of want.texts) {
      if (!page.includes(t)) failures.push(`${name} cell ${i}: page lacks ${JSON.stringify(t.slice(0, 80))}`);
    }
    if (got.errors) failures.push(`${name} cell ${i}: shows an error`);
    for (const s of got.stderr) {
      if (!want.stderr.includes(norm(s))) failures.push(`${name} cell ${i}: stderr ${JSON.stringify(norm(s).slice(0, 200))}`);
    }
    svgCounts.push(...got.svgs);
  });
  return svgCounts;
}
