// Opening a notebook never changes it (issue 33): `attention-lab lab --no-browser` on a copy of
// the notebooks folder, every notebook opened in headless Chromium as a student opens it; once
// its kernel is idle the tab must not be marked modified, Ctrl+S saves it, and the file on disk
// must be byte-identical to the copy's original. Then JupyterLab's autosave, its timer run
// forward in the page (no cell is run), must leave an unmodified notebook alone, and does save
// one with an edit (else the first half would prove nothing).
//
// The copy is `.e2e-open/` in the repository (its notebooks' first cells name `..`, the
// repository, as the originals do), made afresh and removed at the end; the repository's own
// notebooks are never opened.
//
// Usage: ATTENTION_LAB_BIN=/path/to/attention-lab node e2e/open.test.mjs
// Screenshots: target/e2e/open-*.png (relative to the repository).

import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { kernelIdle, menu } from './notebook.mjs';
import { freePort, launchChromium, startLab, stopLab } from './serve.mjs';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const shots = path.join(repo, 'target', 'e2e');
const copy = path.join(repo, '.e2e-open');
const bin = process.env.ATTENTION_LAB_BIN;
if (!bin) {
  console.error('e2e: set ATTENTION_LAB_BIN to the attention-lab binary');
  process.exit(2);
}
// The notebook on show, and its tab.
const PANEL = '.jp-NotebookPanel:not(.lm-mod-hidden)';
const TAB = '.lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-current';
// JupyterLab's default autosave interval is 120 s; the page's clock is run past it.
const AUTOSAVE_MS = 130 * 1000;
// The notebook the autosave check opens (small, no model).
const AUTOSAVED = '002_problem_sheet.ipynb';

// The copy: every file of notebooks/ (the notebooks and evcxr.toml), made afresh; returns
// each notebook's bytes by name.
function makeCopy() {
  fs.rmSync(copy, { recursive: true, force: true });
  fs.mkdirSync(copy);
  const from = path.join(repo, 'notebooks');
  const originals = new Map();
  for (const name of fs.readdirSync(from).sort()) {
    const file = path.join(from, name);
    if (!fs.statSync(file).isFile()) continue;
    fs.copyFileSync(file, path.join(copy, name));
    if (name.endsWith('.ipynb')) originals.set(name, fs.readFileSync(file));
  }
  return originals;
}

// What changed in a file, in one line: how many lines differ, and the first one, both sides.
function shortDiff(before, after) {
  const a = before.toString('utf8').split('\n');
  const b = after.toString('utf8').split('\n');
  let first = -1;
  let count = 0;
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i]) {
      count++;
      if (first < 0) first = i;
    }
  }
  if (first < 0) return 'same lines, other bytes';
  const cut = (s) => JSON.stringify(s === undefined ? '(none)' : s.trim().slice(0, 100));
  return `${count} lines differ, first line ${first + 1}: ${cut(a[first])} became ${cut(b[first])}`;
}

// Each notebook whose file is no longer its original, with a short diff.
function changedFiles(originals, skip = new Set()) {
  const changed = [];
  for (const [name, bytes] of originals) {
    if (skip.has(name)) continue;
    const now = fs.readFileSync(path.join(copy, name));
    if (!now.equals(bytes)) changed.push(`${name} changed on disk: ${shortDiff(bytes, now)}`);
  }
  return changed;
}

// Waits for the notebook's kernel and lets JupyterLab write what it writes when a kernel
// starts (the kernelspec, language_info) into its model.
async function openNotebook(page, base, token, name) {
  // `reset`: a fresh workspace, so the previous notebook's tab is not restored beside it.
  await page.goto(`${base}/lab/tree/${encodeURIComponent(name)}?reset&token=${token}`);
  await page.waitForSelector(`${PANEL} .jp-Cell`, { timeout: 120000 });
  await kernelIdle(page, PANEL);
  await page.waitForTimeout(2000);
}

const isDirty = (page) => page.locator(`${TAB}.jp-mod-dirty`).count().then((n) => n > 0);

// Saves with Ctrl+S, as a student does, and waits for the server to answer the save.
async function save(page, name) {
  const saved = page.waitForResponse((r) => r.request().method() === 'PUT'
    && decodeURIComponent(new URL(r.url()).pathname).endsWith(`/api/contents/${name}`), { timeout: 30000 });
  // Command mode on the notebook (a click on its prompt area edits nothing).
  await page.locator(`${PANEL} .jp-Cell .jp-InputPrompt`).first().click();
  await page.keyboard.press('Escape');
  await page.keyboard.press('Control+s');
  const response = await saved;
  if (!response.ok()) throw new Error(`${name}: the save answered ${response.status()}`);
}

async function shutDownKernel(page) {
  await menu(page, 'Kernel', 'Shut Down Kernel');
  await page.locator('.jp-Dialog button.jp-mod-accept').click({ timeout: 10000 }).catch(() => {});
}

// Every notebook opened, checked clean, saved with Ctrl+S, and compared on disk.
async function openAndSave(context, base, token, originals, failures) {
  const page = await context.newPage();
  for (const name of originals.keys()) {
    try {
      await openNotebook(page, base, token, name);
      if (await isDirty(page)) failures.push(`${name}: marked modified once opened, nothing edited`);
      await save(page, name);
      await page.waitForTimeout(1000);
      if (await isDirty(page)) failures.push(`${name}: still marked modified after Ctrl+S`);
      await page.screenshot({ path: path.join(shots, `open-${name.replace(/\.ipynb$/, '')}.png`) });
      await shutDownKernel(page);
    } catch (error) {
      failures.push(`${name}: ${error && error.message || error}`);
    }
    failures.push(...changedFiles(new Map([[name, originals.get(name)]])));
  }
  await page.close();
}

// JupyterLab's autosave, its timer run forward on a page with a fake clock: an unmodified
// notebook is not saved; an edited one is (so the timer did run).
async function autosave(context, base, token, originals, failures) {
  const page = await context.newPage();
  await page.clock.install();
  const saves = [];
  page.on('request', (r) => {
    if (r.method() === 'PUT' && decodeURIComponent(new URL(r.url()).pathname).endsWith(`/api/contents/${AUTOSAVED}`)) saves.push(r);
  });
  await openNotebook(page, base, token, AUTOSAVED);
  if (await isDirty(page)) failures.push(`autosave: ${AUTOSAVED} marked modified once opened`);
  await page.clock.fastForward(AUTOSAVE_MS);
  await page.waitForTimeout(3000);
  if (saves.length) failures.push(`autosave: ${AUTOSAVED} saved ${saves.length} times, unmodified`);
  failures.push(...changedFiles(new Map([[AUTOSAVED, originals.get(AUTOSAVED)]])).map((f) => `autosave: ${f}`));
  await page.screenshot({ path: path.join(shots, 'open-autosave-unmodified.png') });
  // The control: one character typed into the first cell, and the timer run forward again.
  await page.locator(`${PANEL} .jp-Cell .jp-InputPrompt`).first().click();
  await page.keyboard.press('Enter');
  await page.keyboard.type('x');
  await page.keyboard.press('Escape');
  if (!(await isDirty(page))) failures.push('autosave: an edit did not mark the notebook modified');
  const saved = page.waitForResponse((r) => saves.includes(r.request()), { timeout: 30000 }).catch(() => null);
  await page.clock.fastForward(AUTOSAVE_MS);
  if (!(await saved)) failures.push('autosave: an edited notebook was not autosaved either: the check proves nothing');
  await shutDownKernel(page);
  await page.close();
}

async function main() {
  fs.mkdirSync(shots, { recursive: true });
  const originals = makeCopy();
  const port = await freePort();
  const { child, url, exited } = startLab(bin, repo, path.basename(copy), port);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'attention-lab-chromium-'));
  let context;
  const failures = [];
  try {
    const labUrl = new URL(await url);
    const token = labUrl.searchParams.get('token');
    const base = `${labUrl.protocol}//${labUrl.host}`;
    // lab's start (its warm replay of the copy included) changed nothing.
    failures.push(...changedFiles(originals).map((f) => `before any was opened: ${f}`));
    context = await launchChromium(chromium, profile);
    await openAndSave(context, base, token, originals, failures);
    await autosave(context, base, token, originals, failures);
  } catch (error) {
    failures.push(String(error && error.stack || error));
  } finally {
    if (context) await context.close().catch(() => {});
    const stopped = await stopLab(child, exited);
    if (stopped) failures.push(stopped);
    fs.rmSync(profile, { recursive: true, force: true });
  }
  // Nothing written since, by the kernels' shutdown or lab's (but the autosave's control).
  failures.push(...changedFiles(originals, new Set([AUTOSAVED])).map((f) => `at the end: ${f}`));
  fs.rmSync(copy, { recursive: true, force: true });
  if (failures.length) {
    for (const f of [...new Set(failures)]) console.error(`FAIL ${f}`);
    process.exit(1);
  }
  console.log(`e2e: ${originals.size} notebooks opened and saved unchanged, autosave leaves an unmodified one alone; screenshots in ${shots}`);
}

await main();
