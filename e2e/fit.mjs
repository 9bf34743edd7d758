// Issue 47's checks of one notebook output (a view or a picture) as it is shown now, shared by
// e2e/fit.test.mjs (a page of JupyterLab's size) and e2e/lab_fit.test.mjs (JupyterLab itself).

// The failures of the output `output` (a Playwright locator of one `.jp-OutputArea-output`)
// at the size `zoom` (1 or 1.5): nothing wider than the output area's text, no text under
// 12 px x zoom (pictures: 12 px, their size is their own), toolbars included, every key token
// of an open head inside the output area and the view, a view no taller than the notebook's
// panel (it scrolls inside), and "some heads" not pickable.
export async function checkOutput(output, name, zoom) {
  return output.evaluate((el, { name, zoom }) => {
    const fails = [];
    const least = 12 * zoom;
    const style = getComputedStyle(el);
    const width = el.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const area = el.getBoundingClientRect();
    const svgText = (svg, shown) => {
      const vb = svg.viewBox.baseVal;
      const ratio = shown / (vb && vb.width ? vb.width : Number(svg.getAttribute('width')));
      let small = Infinity;
      svg.querySelectorAll('text').forEach((t) => {
        if (t.closest('[display="none"]')) return;
        const size = Number(t.getAttribute('font-size') || getComputedStyle(t).fontSize.replace('px', ''));
        small = Math.min(small, size * ratio);
      });
      return small;
    };
    for (const img of el.querySelectorAll('img.alab-figure')) {
      const r = img.getBoundingClientRect();
      if (r.width > width + 0.5) fails.push(`${name}: a picture ${r.width} px wide in ${width}`);
      const svg = new DOMParser().parseFromString(atob(img.src.split(',')[1]), 'image/svg+xml').documentElement;
      const small = svgText(svg, r.width);
      if (small < 12 - 0.05) fails.push(`${name}: a picture's text of ${small.toFixed(1)} px`);
    }
    for (const root of el.querySelectorAll('div.alab-view')) {
      const svg = root.querySelector('svg');
      if (!svg) { fails.push(`${name}: the view is not live`); continue; }
      const r = svg.getBoundingClientRect();
      if (r.width > width + 0.5) fails.push(`${name}: the view is ${r.width.toFixed(0)} px wide in ${width}`);
      if (root.scrollWidth > root.clientWidth + 1) fails.push(`${name}: the view scrolls sideways (${root.scrollWidth} in ${root.clientWidth})`);
      const small = svgText(svg, r.width);
      if (small < least - 0.05) fails.push(`${name}: text of ${small.toFixed(1)} px at ${zoom * 100}%`);
      root.querySelectorAll('.alab-bar select, .alab-bar button').forEach((c) => {
        const px = parseFloat(getComputedStyle(c).fontSize);
        if (px < least - 0.05) fails.push(`${name}: the toolbar's ${c.className || c.textContent} at ${px} px`);
      });
      // The open head's key column: every key token inside the output area and the view.
      const box = root.getBoundingClientRect();
      svg.querySelectorAll('text.alab-k').forEach((t) => {
        const k = t.getBoundingClientRect();
        if (!k.width) return; // not shown (another query's group)
        if (k.right > Math.min(area.right, box.right) + 0.5 || k.left < area.left - 0.5) {
          fails.push(`${name}: key ${t.textContent} at ${k.left.toFixed(0)}..${k.right.toFixed(0)}, outside ${area.left.toFixed(0)}..${Math.min(area.right, box.right).toFixed(0)}`);
        }
      });
      // Taller than the panel the notebook scrolls in: it scrolls inside, no taller.
      const scroller = root.closest('#panel, .jp-WindowedPanel-outer, .jp-Notebook');
      const panel = scroller ? scroller.clientHeight : window.innerHeight;
      if (box.height > panel + 1) fails.push(`${name}: the view is ${box.height.toFixed(0)} px tall in a panel of ${panel}`);
      const some = root.querySelector('select.alab-heads option[value=""]');
      if (some && !some.disabled) fails.push(`${name}: "some heads" can be picked`);
    }
    return fails;
  }, { name, zoom });
}

// Sets every view of the output to the size `zoom` with its size menu, as a person does.
export async function sizeTo(output, zoom) {
  await output.evaluate((el, z) => {
    el.querySelectorAll('select.alab-size').forEach((s) => {
      const o = [...s.options].find((x) => Number(x.value) === z);
      if (!o) return;
      s.value = o.value;
      s.dispatchEvent(new Event('change'));
    });
  }, zoom);
  await output.page().waitForTimeout(50);
}
