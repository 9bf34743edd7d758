// attention-lab's interactive views. The picture is complete without this script (an image of
// its SVG); the script makes it live SVG and adds interaction, and finds its view as its own
// parent (no ids, no globals, no network). Every number it draws with (colours, offsets,
// opacities, weights) is written by the Rust side into the SVG's data- attributes.
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
  var list = function (el, name) { return (el.getAttribute('data-' + name) || '').split(',').map(Number); };
  var all = function (el, sel) { return Array.prototype.slice.call(el.querySelectorAll(sel)); };
  var make = function (parent, tag, attrs) {
    var el = document.createElementNS(NS, tag);
    Object.keys(attrs).forEach(function (a) { el.setAttribute(a, attrs[a]); });
    parent.appendChild(el);
    return el;
  };

  // The height of the panel the notebook scrolls in (JupyterLab's: the nearest ancestor that
  // scrolls, not an output's box, whose overflow is auto too), less a margin; else the window's.
  function height() {
    for (var el = root.parentNode; el && el.nodeType === 1; el = el.parentNode) {
      var y = getComputedStyle(el).overflowY;
      if ((y === 'auto' || y === 'scroll') && el.clientHeight > 0 && el.scrollHeight > el.clientHeight + 1) return Math.min(el.clientHeight, window.innerHeight) - 8;
    }
    return (window.innerHeight || 800) - 8;
  }

  // The bar above a view: its menus and buttons, then the size menu, the dark switch and the
  // download button every view has.
  // The view's size (the size menu, `.scale` at first) and its layout for the room it has:
  // `arrange(width, height)` lays the picture out for that many of its pixels and returns the
  // width and height it then takes. The room is the output area's width, read when the view
  // is drawn and whenever it is resized, and the height of the notebook's scrolled panel.
  function bar(svg, file) {
    var div = document.createElement('div');
    div.className = 'alab-bar';
    svg.parentNode.insertBefore(div, svg);
    var box = svg.viewBox.baseVal;
    var zoom = Number(svg.getAttribute('width')) / box.width;
    var sizes = menu(div, 'alab-size', [[0.75, '75%'], [1, '100%'], [1.25, '125%'], [1.5, '150% (projector)'], [2, '200%']],
      function (z) { zoom = Number(z); fit(); });
    var now = zoom;
    if (!all(sizes, 'option').some(function (o) { return Number(o.value) === now; })) option(sizes, now, Math.round(now * 100) + '%');
    sizes.value = String(now);
    sizes.title = 'size';
    var w0 = box.width, h0 = box.height;
    var arrange = function () { return [w0, h0]; };
    var last = { width: 0, zoom: 0 };
    function apply(room) {
      var size = arrange(room / zoom - 1, Math.max(200, height() - div.offsetHeight - 8) / zoom);
      svg.setAttribute('viewBox', '0 0 ' + size[0] + ' ' + size[1]);
      svg.setAttribute('width', size[0] * zoom);
      svg.setAttribute('height', size[1] * zoom);
    }
    function fit() {
      // The bar's text grows with the view (13 px at 100%), never under 12 px.
      div.style.fontSize = Math.max(12, 13 * zoom) + 'px';
      // What is still taller than the panel scrolls inside the view, under its bar.
      root.style.maxHeight = Math.max(300, height()) + 'px';
      var room = root.clientWidth || svg.parentNode.clientWidth || 1e6;
      apply(room);
      // Its scroll bar, if it now has one, takes from the width: lay it out once more.
      if (root.clientWidth && root.clientWidth < room) apply(root.clientWidth);
      last = { width: root.clientWidth, zoom: zoom };
    }
    // A new width (not a scroll bar's coming or going) or size lays the view out again.
    var refit = function () { if (Math.abs(root.clientWidth - last.width) > 20 || zoom !== last.zoom) fit(); };
    if (window.ResizeObserver) new ResizeObserver(refit).observe(root);
    window.addEventListener('resize', refit);
    // Laid out now, and again once the page around the view is whole.
    div.layout = function (a) { arrange = a; fit(); setTimeout(fit, 0); };
    var theme = document.body && document.body.getAttribute('data-jp-theme-light') === 'false';
    if (theme) root.classList.add('alab-dark');
    button(div, 'dark', function () { root.classList.toggle('alab-dark'); });
    button(div, 'download SVG', function () { download(svg, file); }).className = 'alab-download';
    return div;
  }

  function option(sel, value, label) {
    var o = document.createElement('option'); o.value = String(value); o.textContent = label; sel.appendChild(o); return o;
  }

  // A menu of [value, label] pairs, placed before the bar's buttons; `change` hears the value.
  function menu(div, cls, options, change) {
    var sel = document.createElement('select');
    sel.className = cls;
    options.forEach(function (o) { option(sel, o[0], o[1]); });
    sel.addEventListener('change', function () { change(sel.value); });
    div.insertBefore(sel, div.querySelector('button'));
    return sel;
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
    b.addEventListener('click', act);
    div.appendChild(b);
    return b;
  }

  // The head view: hover a token to keep its lines and see each head's weight in the strip of
  // boxes beside the other side's tokens, click it to pin them, click a head's colour to hide
  // or show the head, double-click it to show that head alone, or pick heads, a layer and the
  // sentences' pairs in the menus. `shown` hears the layer and the heads shown after each change.
  function headView(svg, host, shownHook) {
    var swatches = all(svg, 'rect[data-h]');
    var heads = swatches.length;
    var colour = {}, shown = {};
    swatches.forEach(function (r) { colour[num(r, 'h')] = r.getAttribute('stroke'); shown[num(r, 'h')] = r.getAttribute('fill') !== 'none'; });
    var dy = list(svg, 'dy'), fade = list(svg, 'fade'), floor = num(svg, 'floor');
    var x1 = num(svg, 'x1'), x2 = num(svg, 'x2'), top = num(svg, 'top'), row = num(svg, 'row');
    var box = num(svg, 'box'), stripQ = num(svg, 'strip-q'), stripK = num(svg, 'strip-k');
    var b = svg.hasAttribute('data-b') ? num(svg, 'b') : null;
    var least = svg.hasAttribute('data-min') ? num(svg, 'min') : 0;
    // The layout drawn in Rust; the key side moves left (x2) and the rows close up (row) to fit.
    var x20 = x2, row0 = row, stripK0 = stripK, right0 = svg.viewBox.baseVal.width;
    var layers = svg.hasAttribute('data-weights') ? svg.getAttribute('data-weights').split(',') : null;
    var layer = layers ? num(svg, 'layer') : 0;
    var pairs = 'all';
    var pinned = svg.getAttribute('data-query') === '' ? null : { side: 'q', i: num(svg, 'query') };
    var hover = null;
    var strip = make(host, 'g', { 'class': 'alab-strip' });
    var file = svg.classList.contains('alab-model-view') ? 'model_view.svg' : 'head_view.svg';
    var div = bar(svg, file);
    var headsMenu = menu(div, 'alab-heads', [['all', 'all heads']].concat(swatches.map(function (r) {
      return [num(r, 'h'), 'head ' + (num(r, 'h') + 1)];
    })).concat([['', 'some heads']]), function (v) {
      Object.keys(shown).forEach(function (h) { shown[h] = v === 'all' || v === h; });
      show();
    });
    // "some heads" names what the legend's clicks made: the menu shows it, it is not a choice.
    var some = headsMenu.lastChild;
    some.disabled = true;
    var layerMenu = layers && layers.length > 1 ? menu(div, 'alab-layer', layers.map(function (_, l) { return [l, 'layer ' + l]; }),
      function (v) { draw(Number(v)); show(); }) : null;
    if (b !== null) {
      menu(div, 'alab-pairs', [['all', 'all pairs'], ['AA', 'A → A'], ['AB', 'A → B'], ['BA', 'B → A'], ['BB', 'B → B']],
        function (v) { pairs = v; show(); });
    }
    var lines = function () { return all(host, 'line[data-h][data-q]'); };
    var sentence = function (i) { return i < b ? 'A' : 'B'; };
    var paired = function (l) { return pairs === 'all' || pairs === sentence(num(l, 'q')) + sentence(num(l, 'k')); };
    var token = function (side, i) { var t = svg.querySelector('text.alab-' + side + '[data-' + side + '="' + i + '"]'); return t ? t.textContent : ''; };

    // Every head's lines of layer `l`, from the weights the view carries.
    function draw(l) {
      layer = l;
      if (layerMenu) layerMenu.value = String(l);
      lines().forEach(function (e) { e.parentNode.removeChild(e); });
      var bytes = atob(layers[l]);
      var keys = all(svg, 'text.alab-k').length;
      var queries = bytes.length / 3 / heads / keys;
      var first = host.querySelector('text.alab-q');
      for (var h = 0; h < heads; h++) {
        for (var q = 0; q < queries; q++) {
          for (var k = 0; k < keys; k++) {
            var at = 3 * ((h * queries + q) * keys + k);
            var s = bytes.charCodeAt(at);
            if (!s) continue;
            var w = Math.pow(2, (bytes.charCodeAt(at + 1) * 256 + bytes.charCodeAt(at + 2) - 65535) / 256);
            var line = make(host, 'line', {
              x1: x1, x2: x20, y1: top + q * row0 + row0 / 2 + dy[h], y2: top + k * row0 + row0 / 2 + dy[h],
              stroke: colour[h], 'stroke-width': svg.getAttribute('data-lw'),
              'data-h': h, 'data-q': q, 'data-k': k, 'data-s': (s / 255).toFixed(3), 'data-w': w.toPrecision(3),
            });
            if (w < least) line.setAttribute('data-u', '1');
            host.insertBefore(line, first);
            place(line);
          }
        }
      }
    }

    function show() {
      var focus = hover || pinned;
      var on = Object.keys(shown).map(Number).filter(function (h) { return shown[h]; }).sort(function (a, c) { return a - c; });
      var f = fade[Math.max(on.length, 1) - 1];
      while (strip.firstChild) strip.removeChild(strip.firstChild);
      lines().forEach(function (l) {
        var visible = shown[num(l, 'h')] && paired(l) && (!focus || num(l, focus.side) === focus.i);
        // A weight under the legend's least draws no line; its box is empty, its tooltip kept.
        var under = l.hasAttribute('data-u');
        l.setAttribute('display', visible && !under ? 'inline' : 'none');
        l.setAttribute('stroke-opacity', ((floor + num(l, 's')) * f).toFixed(3));
        if (visible && focus) {
          // The other side's token gets this head's box, as opaque as one head's line.
          var other = focus.side === 'q' ? 'k' : 'q';
          var h = num(l, 'h'), i = num(l, other);
          var r = make(strip, 'rect', {
            x: (other === 'k' ? stripK : stripQ) + h * box, y: top + i * row + 3, width: box - 1, height: row - 6,
            fill: colour[h], 'fill-opacity': under ? 0 : (floor + num(l, 's')).toFixed(3), 'class': 'alab-box',
          });
          if (under) { r.setAttribute('stroke', colour[h]); r.setAttribute('stroke-opacity', '0.5'); r.setAttribute('stroke-width', '0.5'); }
          make(r, 'title', {}).textContent = 'head ' + (h + 1) + ': ' + token('q', num(l, 'q')) + ' → ' + token('k', num(l, 'k')) + ', weight ' + l.getAttribute('data-w');
        }
      });
      all(svg, 'text.alab-q, text.alab-k').forEach(function (t) {
        var side = t.classList.contains('alab-q') ? 'q' : 'k';
        t.classList.toggle('alab-on', !!focus && focus.side === side && num(t, side) === focus.i);
      });
      swatches.forEach(function (r) { r.setAttribute('fill', shown[num(r, 'h')] ? r.getAttribute('stroke') : 'none'); });
      headsMenu.value = on.length === heads ? 'all' : on.length === 1 ? String(on[0]) : '';
      some.textContent = on.length ? 'some heads' : 'no heads';
      if (shownHook) shownHook(layer, on);
    }
    var tokenAt = function (e) { return e.target.closest && e.target.closest('text.alab-q, text.alab-k'); };
    var side = function (t) { return t.classList.contains('alab-q') ? { side: 'q', i: num(t, 'q') } : { side: 'k', i: num(t, 'k') }; };
    var headAt = function (e) { return e.target.closest && e.target.closest('rect[data-h], text[data-h]'); };
    svg.addEventListener('mouseover', function (e) { var t = tokenAt(e); if (t) { hover = side(t); show(); } });
    svg.addEventListener('mouseout', function (e) { if (tokenAt(e)) { hover = null; show(); } });
    svg.addEventListener('click', function (e) {
      var h = headAt(e);
      if (h && !h.hasAttribute('data-l')) { shown[num(h, 'h')] = !shown[num(h, 'h')]; show(); return; }
      var t = tokenAt(e);
      if (t) { var s = side(t); pinned = pinned && pinned.side === s.side && pinned.i === s.i ? null : s; show(); }
    });
    svg.addEventListener('dblclick', function (e) {
      var h = headAt(e);
      if (h && !h.hasAttribute('data-l')) { e.preventDefault(); only(num(h, 'h')); }
    });
    function only(h) { Object.keys(shown).forEach(function (k) { shown[k] = Number(k) === h; }); show(); }
    // Where an element was drawn in Rust, kept to lay it out again.
    function place(el) {
      var at = el.alabAt;
      if (!at) {
        at = el.alabAt = {};
        ['x', 'y', 'x1', 'x2', 'y1', 'y2'].forEach(function (a) { if (el.hasAttribute(a)) at[a] = Number(el.getAttribute(a)); });
      }
      var x = function (v) { return v >= x20 ? v + x2 - x20 : v; };
      var y = function (v) { return v > top ? top + (v - top) * row / row0 : v; };
      ['x', 'x1', 'x2'].forEach(function (a) { if (a in at) el.setAttribute(a, x(at[a])); });
      ['y', 'y1', 'y2'].forEach(function (a) { if (a in at) el.setAttribute(a, y(at[a])); });
    }
    var rows = Math.max(all(host, 'text.alab-q').length, all(host, 'text.alab-k').length);
    // The head view laid out for `width` x `height` of its own pixels: the span between the
    // query and key tokens narrows (to 60 pixels), the rows close up (to 15 pixels, text is
    // 13); returns the width and height it takes.
    function arrange(width, height) {
      var span = Math.max(60, Math.min(x20 - x1, x20 - x1 + width - right0));
      var r = Math.max(15, Math.min(row0, (height - top - 10) / rows));
      if (x1 + span !== x2 || r !== row) {
        x2 = x1 + span; stripK = stripK0 + x2 - x20; row = r;
        all(host, 'text.alab-q, text.alab-k, line').forEach(place);
        show();
      }
      var wide = right0 + x2 - x20;
      all(host, 'text.alab-head, text.alab-min, text.alab-title').forEach(function (t) {
        try { var bb = t.getBBox(); wide = Math.max(wide, bb.x + bb.width + 10); } catch (e) { /* not shown */ }
      });
      return [Math.ceil(wide), Math.ceil(top + rows * row + 10)];
    }
    // The heads not shown are drawn here from the weights, when the view carries them.
    if (layers) draw(layer);
    show();
    return {
      open: function (l, h) { if (l !== layer) draw(l); pinned = null; only(h); },
      arrange: arrange,
      bar: div,
    };
  }

  // The model view: a click on a panel opens that layer and head in the head view beside the
  // grid; the title and the frame follow the layer and heads shown.
  function modelView(svg) {
    var detail = svg.querySelector('g.alab-detail');
    var title = detail.querySelector('text.alab-title');
    var pick = svg.querySelector('rect[data-pick]');
    var heads = num(svg, 'heads'), step = num(svg, 'panel'), left = num(svg, 'grid-left'), top = num(svg, 'grid-top');
    var side = Number(pick.getAttribute('width'));
    function follow(l, on) {
      if (title) {
        title.textContent = 'layer ' + l + (on.length === 1 ? ', head ' + (on[0] + 1)
          : on.length === heads ? ', all heads' : on.length ? ', heads ' + on.map(function (h) { return h + 1; }).join(', ') : ', no heads');
      }
      // One head: its panel framed; more: the layer's row.
      var wide = on.length === 1 ? side : (heads - 1) * step + side;
      pick.setAttribute('x', left - 2 + (on.length === 1 ? on[0] * step : 0));
      pick.setAttribute('y', top - 2 + l * step);
      pick.setAttribute('width', wide);
    }
    var view = headView(svg, detail, follow);
    // Beside the grid when both fit the width, else under it.
    var layers = num(svg, 'layers');
    var gridRight = left + heads * step + 10, gridBottom = top + layers * step + 10;
    var x0 = left + heads * step + 12, y0 = top - 22;
    view.bar.layout(function (w, h) {
      var beside = view.arrange(w, h);
      if (beside[0] <= w) {
        detail.removeAttribute('transform');
        return [Math.max(gridRight, beside[0]), Math.max(gridBottom, beside[1])];
      }
      var dx = 10 - x0, dy = gridBottom - y0;
      var below = view.arrange(w - dx, h - dy);
      detail.setAttribute('transform', 'translate(' + dx + ',' + dy + ')');
      return [Math.max(gridRight, below[0] + dx), below[1] + dy];
    });
    if (!svg.hasAttribute('data-weights')) return; // too large to carry: the picked panel only
    svg.addEventListener('click', function (e) {
      var p = e.target.closest && e.target.closest('image[data-l]');
      if (p) view.open(num(p, 'l'), num(p, 'h'));
    });
  }

  // The neuron view: menus pick the layer, the head and the query token (those the view
  // carries); a click on a key's token picks it as the query, one on "q of ..." the next query.
  function neuronView(svg) {
    var groups = all(svg, 'g.alab-neuron-q');
    var div = bar(svg, 'neuron_view.svg');
    var now = { l: num(svg, 'layer'), h: num(svg, 'head'), q: num(svg, 'query') };
    var values = function (name) {
      return groups.map(function (g) { return num(g, name); }).filter(function (v, i, a) { return a.indexOf(v) === i; });
    };
    var menus = {};
    function pick(name, value) {
      now[name] = value;
      groups.forEach(function (g) {
        var on = num(g, 'l') === now.l && num(g, 'h') === now.h && num(g, 'q') === now.q;
        g.setAttribute('display', on ? 'inline' : 'none');
      });
      Object.keys(menus).forEach(function (m) { menus[m].value = String(now[m]); });
    }
    var label = {
      l: function (l) { return 'layer ' + l; },
      h: function (h) { return 'head ' + (h + 1); },
      q: function (q) { return 'query ' + q + ': ' + svg.querySelector('g.alab-neuron-q[data-q="' + q + '"] text.alab-q').textContent.replace(/^q of /, ''); },
    };
    ['l', 'h', 'q'].forEach(function (name) {
      var vs = values(name);
      if (vs.length < 2) return;
      menus[name] = menu(div, 'alab-' + { l: 'layer', h: 'heads', q: 'query' }[name], vs.map(function (v) { return [v, label[name](v)]; }),
        function (v) { pick(name, Number(v)); });
    });
    pick('q', now.q);
    var queries = values('q');
    svg.addEventListener('click', function (e) {
      var t = e.target.closest && e.target.closest('text.alab-q, text.alab-k');
      if (!t) return;
      var q = t.classList.contains('alab-q') ? queries[(queries.indexOf(num(t, 'q')) + 1) % queries.length] : num(t, 'k');
      if (queries.indexOf(q) >= 0) pick('q', q);
    });
  }

  all(root, 'svg.alab-head-view').forEach(function (svg) { var v = headView(svg, svg, null); v.bar.layout(v.arrange); });
  all(root, 'svg.alab-model-view').forEach(modelView);
  all(root, 'svg.alab-neuron-view').forEach(neuronView);
})();
