// Two students at once, as a class sees it: each signs in through the hub's login page in a
// headless Chromium of their own, JupyterHub starts their server, they open notebook 000 from
// their own folder, Run All, and the page must show NumPy's text and the heatmap as stored.
//
// Usage, against a running `attention-lab hub` whose roster holds the students, with the
// handout that printed their passwords:
//   HUB_URL=http://127.0.0.1:8019 HUB_USERS=ci-ann,ci-ben HUB_PASSWORDS=handout.txt node e2e/hub.test.mjs
// Screenshots: target/e2e/hub-<student>-*.png (relative to the repository).

import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkCells, kernelIdle, menu, runAll, stored } from './notebook.mjs';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const shots = path.join(repo, 'target', 'e2e');
const NOTEBOOK = '000_two_heads_worked_example.ipynb';
// 2 heads over "Thinking Machines": one heads_grid of 2 x 2 x 2 cells.
const HEATMAP_CELLS = [2 * 2 * 2];
const PANEL = '.jp-NotebookPanel:not(.lm-mod-hidden)';
const RUN_TIMEOUT_MS = 10 * 60 * 1000;

const hub = (process.env.HUB_URL || '').replace(/\/$/, '');
const users = (process.env.HUB_USERS || '').split(',').filter(Boolean);
const handout = process.env.HUB_PASSWORDS || '';
if (!hub || users.length !== 2 || !handout) {
  console.error('hub e2e: set HUB_URL, HUB_USERS (two logins, comma-separated) and HUB_PASSWORDS (the handout)');
  process.exit(2);
}
// Each student's handout line: `... user NAME (Name)  password PASSWORD`.
const passwords = Object.fromEntries(fs.readFileSync(handout, 'utf8').split('\n')
  .map((line) => line.match(/ user (\S+).* password ([a-z0-9-]+)$/)).filter(Boolean).map((m) => [m[1], m[2]]));

// One student's visit: the login page, their server, notebook 000, Run All, the checks.
async function student(browser, name, expected, failures) {
  const fail = (problem) => failures.push(`${name}: ${problem}`);
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await context.newPage();
  try {
    await page.goto(`${hub}/hub/login`);
    await page.fill('input[name="username"]', name);
    await page.fill('input[name="password"]', passwords[name] || '');
    await page.screenshot({ path: path.join(shots, `hub-${name}-login.png`) });
    await Promise.all([page.waitForURL(/\/user\/[^/]+\/lab/, { timeout: 180000 }), page.press('input[name="password"]', 'Enter')]);
    if (!page.url().includes(`/user/${name}/`)) fail(`signed in to ${page.url()}, not to their own server`);
    // `reset`: no workspace of an earlier visit restored beside the notebook.
    // The server opens in ~/attention-lab, where the lessons are.
    await page.goto(`${hub}/user/${name}/lab/tree/${NOTEBOOK}?reset`);
    await page.waitForSelector(`${PANEL} .jp-Cell`, { timeout: 120000 });
    await kernelIdle(page, PANEL);
    const cells = await runAll(page, PANEL, RUN_TIMEOUT_MS, fail);
    const svgCounts = checkCells(`${name} ${NOTEBOOK}`, expected, cells, failures);
    if (JSON.stringify(svgCounts) !== JSON.stringify(HEATMAP_CELLS)) fail(`heatmap cells ${JSON.stringify(svgCounts)}, expected ${JSON.stringify(HEATMAP_CELLS)}`);
    await page.screenshot({ path: path.join(shots, `hub-${name}-end.png`) });
    const heatmap = page.locator(`${PANEL} .jp-Cell:has(img.alab-figure)`).first();
    if (await heatmap.count()) {
      await heatmap.scrollIntoViewIfNeeded();
      await page.waitForTimeout(1000);
      await page.screenshot({ path: path.join(shots, `hub-${name}-heatmap.png`) });
    }
    await menu(page, 'Kernel', 'Shut Down Kernel');
    await page.locator('.jp-Dialog button.jp-mod-accept').click({ timeout: 10000 }).catch(() => {});
  } catch (error) {
    fail(`${String(error && error.stack || error)} (at ${page.url()})`);
    await page.screenshot({ path: path.join(shots, `hub-${name}-failed.png`) }).catch(() => {});
  } finally {
    await context.close().catch(() => {});
  }
}

async function main() {
  fs.mkdirSync(shots, { recursive: true });
  const expected = stored(JSON.parse(fs.readFileSync(path.join(repo, 'notebooks', NOTEBOOK))));
  const failures = [];
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--no-first-run'],
  });
  try {
    // Both at the same time, each in a context of their own (cookies apart, as two laptops).
    await Promise.all(users.map((name) => student(browser, name, expected, failures)));
  } finally {
    await browser.close().catch(() => {});
  }
  if (failures.length) {
    for (const f of failures) console.error(`FAIL ${f}`);
    process.exit(1);
  }
  console.log(`hub e2e: ${users.join(' and ')} ran ${NOTEBOOK} as stored; screenshots in ${shots}`);
}

await main();
