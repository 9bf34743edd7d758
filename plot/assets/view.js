// attention-lab's interactive views. The picture is complete without this script (an image of
// its SVG); the script makes it live SVG and adds interaction, and finds its view as its own
// parent (no ids, no globals, no network).
(function () {
  var root = document.currentScript && document.currentScript.parentNode;
  if (!root || root.getAttribute('data-ready')) return;
  root.setAttribute('data-ready', '1');
  var NS = 'http://www.w3.org/2000/svg';
  // The picture arrives as an <img> of the SVG (what untrusted output keeps); make it live.
  Array.prototype.slice.call(root.querySelectorAll('img.alab-picture')).forEach(function (img) {
    var bytes = Uint8Array.from(atob(img.getAttribute('src').split(',')[1]), function (c) { return c.charCodeAt(0); });
    var doc = new DOMParser().parseFromString(new TextDecoder().decode(bytes), 'image/svg+xml');
    // Should the SVG not parse, the image stays: a picture without interaction.
    if (doc.documentElement.nodeName !== 'svg') return;
    img.parentNode.replaceChild(document.importNode(doc.documentElement, true), img);
  });
  var num = function (el, name) { return Number(el.getAttribute('data-' + name)); };
  var all = function (el, sel) { return Array.prototype.slice.call(el.querySelectorAll(sel)); };

  function bar(svg) {
    var div = document.createElement('div');
    div.className = 'alab-bar';
    svg.parentNode.insertBefore(div, svg);
    return div;
  }

  // Downloads what is shown: hidden lines and groups are left out of the file.
  function download(svg, name) {
    var copy = svg.cloneNode(true);
    all(copy, '[display="none"]').forEach(function (el) { el.parentNode.removeChild(el); });
    copy.removeAttribute('data-weights');
    var text = new XMLSerializer().serializeToString(copy);
    var a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([text], { type: 'image/svg+xml' }));
    a.download = name;
    document.body.appendChild(a);
    a.click();
    setTimeout(function () { URL.revokeObjectURL(a.href); a.parentNode.removeChild(a); }, 0);
  }

  function button(div, label, act) {
    var b = document.createElement('button');
    b.type = 'button';
    b.textContent = label;
    b.className = 'alab-download';
    b.addEventListener('click', act);
    div.appendChild(b);
  }

  // The head view: hover a token to keep its lines, click it to pin them, click a head's
  // colour to hide or show the head, or pick heads in the menu.
  function headView(svg) {
    var swatches = all(svg, 'rect[data-h]');
    var shown = {};
    swatches.forEach(function (r) { shown[num(r, 'h')] = r.getAttribute('fill') !== 'none'; });
    var pinned = svg.getAttribute('data-query') === '' ? null : { side: 'q', i: num(svg, 'query') };
    var hover = null;
    var div = bar(svg);
    var menu = document.createElement('select');
    menu.className = 'alab-heads';
    var option = function (value, label) {
      var o = document.createElement('option'); o.value = value; o.textContent = label; menu.appendChild(o);
    };
    option('all', 'all heads');
    swatches.forEach(function (r) { option(String(num(r, 'h')), 'head ' + (num(r, 'h') + 1)); });
    option('', 'some heads');
    var some = menu.lastChild;
    div.appendChild(menu);
    var file = svg.classList.contains('alab-model-view') ? 'model_view.svg' : 'head_view.svg';
    button(div, 'download SVG', function () { download(svg, file); });

    function show() {
      var focus = hover || pinned;
      all(svg, 'line[data-h]').forEach(function (l) {
        var on = shown[num(l, 'h')] && (!focus || num(l, focus.side) === focus.i);
        l.setAttribute('display', on ? 'inline' : 'none');
      });
      swatches.forEach(function (r) { r.setAttribute('fill', shown[num(r, 'h')] ? r.getAttribute('stroke') : 'none'); });
      var on = swatches.filter(function (r) { return shown[num(r, 'h')]; });
      menu.value = on.length === swatches.length ? 'all' : on.length === 1 ? String(num(on[0], 'h')) : '';
      some.textContent = on.length ? 'some heads' : 'no heads';
    }
    var token = function (e) { return e.target.closest && e.target.closest('text.alab-q, text.alab-k'); };
    var side = function (t) { return t.classList.contains('alab-q') ? { side: 'q', i: num(t, 'q') } : { side: 'k', i: num(t, 'k') }; };
    svg.addEventListener('mouseover', function (e) { var t = token(e); if (t) { hover = side(t); show(); } });
    svg.addEventListener('mouseout', function (e) { if (token(e)) { hover = null; show(); } });
    svg.addEventListener('click', function (e) {
      var h = e.target.closest && e.target.closest('rect[data-h], text[data-h]');
      if (h) { shown[num(h, 'h')] = !shown[num(h, 'h')]; show(); return; }
      var t = token(e);
      if (t) { var s = side(t); pinned = pinned && pinned.side === s.side && pinned.i === s.i ? null : s; show(); }
    });
    menu.addEventListener('change', function () {
      if (menu.value === '') { show(); return; }
      Object.keys(shown).forEach(function (h) { shown[h] = menu.value === 'all' || menu.value === h; });
      show();
    });
    show();
    return {
      show: show,
      only: function (h) { Object.keys(shown).forEach(function (k) { shown[k] = Number(k) === h; }); pinned = null; show(); },
    };
  }

  // The model view: a click on a panel draws that layer's lines in the head view below.
  function modelView(svg, view) {
    if (!svg.hasAttribute('data-weights')) return; // too large to carry: the picked panel only
    var layers = svg.getAttribute('data-weights').split(',');
    var heads = num(svg, 'heads'), n = num(svg, 'tokens');
    var x1 = num(svg, 'x1'), x2 = num(svg, 'x2'), top = num(svg, 'top'), row = num(svg, 'row');
    var detail = svg.querySelector('g.alab-detail');
    var colour = {};
    all(detail, 'rect[data-h]').forEach(function (r) { colour[num(r, 'h')] = r.getAttribute('stroke'); });
    var title = detail.querySelector('text.alab-title');
    var pick = svg.querySelector('rect[data-pick]');
    function open(l, h) {
      all(detail, 'line[data-h]').forEach(function (e) { e.parentNode.removeChild(e); });
      var bytes = atob(layers[l]);
      var first = detail.querySelector('text');
      for (var hh = 0; hh < heads; hh++) {
        for (var q = 0; q < n; q++) {
          for (var k = 0; k < n; k++) {
            var b = bytes.charCodeAt((hh * n + q) * n + k);
            if (!b) continue;
            var line = document.createElementNS(NS, 'line');
            line.setAttribute('x1', x1); line.setAttribute('x2', x2);
            line.setAttribute('y1', top + q * row + row / 2); line.setAttribute('y2', top + k * row + row / 2);
            line.setAttribute('stroke', colour[hh]); line.setAttribute('stroke-width', '2');
            line.setAttribute('stroke-opacity', (b / 255).toFixed(3));
            line.setAttribute('data-h', hh); line.setAttribute('data-q', q); line.setAttribute('data-k', k);
            detail.insertBefore(line, first);
          }
        }
      }
      if (title) title.textContent = 'layer ' + l + ', head ' + (h + 1);
      var panel = svg.querySelector('image[data-l="' + l + '"][data-h="' + h + '"]');
      pick.setAttribute('x', Number(panel.getAttribute('x')) - 2);
      pick.setAttribute('y', Number(panel.getAttribute('y')) - 2);
      view.only(h);
    }
    svg.addEventListener('click', function (e) {
      var p = e.target.closest && e.target.closest('image[data-l]');
      if (p) open(num(p, 'l'), num(p, 'h'));
    });
    // Every head's lines of the picked layer, the picked head shown.
    open(num(svg, 'layer'), num(svg, 'head'));
  }

  // The neuron view: a menu picks the query token.
  function neuronView(svg) {
    var groups = all(svg, 'g.alab-neuron-q');
    var div = bar(svg);
    if (groups.length > 1) {
      var menu = document.createElement('select');
      menu.className = 'alab-query';
      groups.forEach(function (g) {
        var o = document.createElement('option');
        o.value = num(g, 'q');
        o.textContent = 'query ' + num(g, 'q') + ': ' + g.querySelector('text.alab-q').textContent.replace(/^q of /, '');
        menu.appendChild(o);
      });
      menu.value = svg.getAttribute('data-query');
      menu.addEventListener('change', function () {
        groups.forEach(function (g) { g.setAttribute('display', String(num(g, 'q')) === menu.value ? 'inline' : 'none'); });
      });
      div.appendChild(menu);
    }
    button(div, 'download SVG', function () { download(svg, 'neuron_view.svg'); });
  }

  all(root, 'svg.alab-head-view, svg.alab-model-view').forEach(function (svg) {
    var view = headView(svg);
    if (svg.classList.contains('alab-model-view')) modelView(svg, view);
  });
  all(root, 'svg.alab-neuron-view').forEach(neuronView);
})();
