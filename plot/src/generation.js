// attention-lab's views of a model writing: the next-token distribution (temperature and
// top-k sliders) and the generation view (the text growing token by token, where each new
// token attends). The picture is complete without this script (an image of its SVG); the
// script makes it live SVG and redraws it from the numbers in its view's data- attributes.
// It finds its view as its own parent: no ids, no globals, no network.
(function () {
  var root = document.currentScript && document.currentScript.parentNode;
  if (!root || root.getAttribute('data-ready')) return;
  root.setAttribute('data-ready', '1');
  // The picture arrives as an <img> of the SVG (what untrusted output keeps); make it live.
  var img = root.querySelector('img.alab-picture');
  if (!img) return;
  var bytes = Uint8Array.from(atob(img.getAttribute('src').split(',')[1]), function (c) { return c.charCodeAt(0); });
  var doc = new DOMParser().parseFromString(new TextDecoder().decode(bytes), 'image/svg+xml');
  // Should the SVG not parse, the image stays: a picture without interaction.
  if (doc.documentElement.nodeName !== 'svg') return;
  var svg = document.importNode(doc.documentElement, true);
  img.parentNode.replaceChild(svg, img);
  var NS = svg.namespaceURI;
  var attr = function (el, name) { return el.getAttribute('data-' + name); };
  var num = function (el, name) { return Number(attr(el, name)); };
  var list = function (el, name) { var v = attr(el, name); return v ? v.split(',').map(Number) : []; };
  // Text carried as base64 of UTF-8, one item a comma.
  var texts = function (el, name) {
    var v = attr(el, name);
    return v ? v.split(',').map(function (b) {
      return new TextDecoder().decode(Uint8Array.from(atob(b), function (c) { return c.charCodeAt(0); }));
    }) : [];
  };
  var all = function (el, sel) { return Array.prototype.slice.call(el.querySelectorAll(sel)); };
  var make = function (parent, tag, attrs) {
    var el = document.createElementNS(NS, tag);
    Object.keys(attrs).forEach(function (a) { el.setAttribute(a, attrs[a]); });
    parent.appendChild(el);
    return el;
  };
  // A text's own words (after its <title>) and its tooltip.
  var setText = function (t, words, tip) {
    while (t.firstChild) t.removeChild(t.firstChild);
    if (tip) make(t, 'title', {}).textContent = tip;
    t.appendChild(document.createTextNode(words));
  };
  var words = function (t) { var c = t.lastChild; return c && c.nodeType === 3 ? c.nodeValue : ''; };

  // The bar above the view, as the other views have it: its own controls, then the size menu,
  // the dark switch and the download button.
  var div = document.createElement('div');
  div.className = 'alab-bar';
  svg.parentNode.insertBefore(div, svg);
  var box = svg.viewBox.baseVal;
  function option(sel, value, label) {
    var o = document.createElement('option'); o.value = String(value); o.textContent = label; sel.appendChild(o); return o;
  }
  function menu(cls, options, change) {
    var sel = document.createElement('select');
    sel.className = cls;
    options.forEach(function (o) { option(sel, o[0], o[1]); });
    sel.addEventListener('change', function () { change(sel.value); });
    div.appendChild(sel);
    return sel;
  }
  function button(label, act) {
    var b = document.createElement('button');
    b.type = 'button';
    b.textContent = label;
    b.addEventListener('click', act);
    div.appendChild(b);
    return b;
  }
  // A labelled slider of whole numbers; `change` hears the value and returns what to show.
  function slider(cls, name, min, max, value, change) {
    var label = document.createElement('label');
    label.className = cls;
    label.textContent = name + ' ';
    var input = document.createElement('input');
    input.type = 'range'; input.min = min; input.max = max; input.step = 1; input.value = value;
    var out = document.createElement('output');
    label.appendChild(input); label.appendChild(document.createTextNode(' ')); label.appendChild(out);
    var update = function () { out.textContent = change(Number(input.value)); };
    input.addEventListener('input', update);
    div.appendChild(label);
    return { input: input, out: out, update: update };
  }
  function common(file) {
    // The bar's text grows with the view (13 px at 100%), never under 12 px.
    var text = function (z) { div.style.fontSize = Math.max(12, 13 * z) + 'px'; };
    var sizes = menu('alab-size', [[0.75, '75%'], [1, '100%'], [1.25, '125%'], [1.5, '150% (projector)'], [2, '200%']],
      function (z) { svg.setAttribute('width', box.width * z); svg.setAttribute('height', box.height * z); text(Number(z)); });
    var now = Number(svg.getAttribute('width')) / box.width;
    text(now);
    // Taller than the panel the notebook scrolls in: the view scrolls inside, under its bar
    // (measured now, once the page is whole, and when the window is resized).
    var limit = function () {
      var most = window.innerHeight;
      for (var el = root.parentNode; el && el.nodeType === 1; el = el.parentNode) {
        var y = getComputedStyle(el).overflowY;
        if ((y === 'auto' || y === 'scroll') && el.clientHeight > 0 && el.scrollHeight > el.clientHeight + 1) { most = Math.min(el.clientHeight, most); break; }
      }
      root.style.maxHeight = Math.max(300, most - 8) + 'px';
    };
    limit();
    setTimeout(limit, 0);
    window.addEventListener('resize', limit);
    if (!all(sizes, 'option').some(function (o) { return Number(o.value) === now; })) option(sizes, now, Math.round(now * 100) + '%');
    sizes.value = String(now);
    sizes.title = 'size';
    if (document.body && document.body.getAttribute('data-jp-theme-light') === 'false') root.classList.add('alab-dark');
    button('dark', function () { root.classList.toggle('alab-dark'); });
    button('download SVG', function () {
      // What is shown: hidden rows and tokens are left out of the file.
      var copy = svg.cloneNode(true);
      all(copy, '[display="none"]').forEach(function (el) { el.parentNode.removeChild(el); });
      var a = document.createElement('a');
      a.href = URL.createObjectURL(new Blob([new XMLSerializer().serializeToString(copy)], { type: 'image/svg+xml' }));
      a.download = file;
      document.body.appendChild(a);
      a.click();
      setTimeout(function () { URL.revokeObjectURL(a.href); a.parentNode.removeChild(a); }, 0);
    }).className = 'alab-download';
  }
  var grouped = function (n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ','); };

  // The next-token distribution. The view carries the N largest logits (N is the top-k
  // slider's end) and, for each temperature the slider offers, the sum over every other
  // logit of exp((logit - max) / T): the softmax of the library's sampling (generate.rs,
  // draw) is then exact at every setting.
  function nextToken() {
    var top = num(root, 'top'), logits = list(root, 'logits'), ids = list(root, 'ids');
    var labels = texts(root, 'labels'), names = texts(root, 'names');
    var temps = list(root, 'temps'), tails = list(root, 'tails');
    var vocab = num(root, 'vocab'), kmax = logits.length;
    var T = num(root, 'temperature'), k = attr(root, 'k') === '' ? null : num(root, 'k');
    var rows = all(svg, 'g.alab-row');
    var barX = num(svg, 'bar-x'), barW = num(svg, 'bar-w');
    var caption = svg.querySelector('text.alab-caption'), rest = svg.querySelector('text.alab-rest');
    function draw() {
      var s = logits.map(function (l) { return (l - top) / T; });
      var order = s.map(function (_, i) { return i; }).sort(function (a, b) {
        return s[a] > s[b] ? -1 : s[a] < s[b] ? 1 : ids[a] - ids[b];
      });
      var every = k === null || k >= vocab, kept = every ? order : order.slice(0, k);
      var max = s[kept[0]];
      var z = 0;
      kept.forEach(function (i) { z += Math.exp(s[i] - max); });
      if (every) z += tails[temps.indexOf(T)];
      var shown = Math.min(rows.length, kept.length), sum = 0;
      rows.forEach(function (g, r) {
        g.setAttribute('display', r < shown ? 'inline' : 'none');
        if (r >= shown) return;
        var i = kept[r], p = Math.exp(s[i] - max) / z;
        sum += p;
        var name = i < names.length ? names[i] : 'id ' + ids[i];
        var tip = 'id ' + ids[i] + ' · ' + name + ' · logit ' + logits[i].toFixed(4) + ' · p ' + p.toFixed(6);
        setText(g.querySelector('text.alab-tok'), i < labels.length ? labels[i] : 'id ' + ids[i], tip);
        g.querySelector('rect').setAttribute('width', p * barW);
        var t = g.querySelector('text.alab-p');
        t.setAttribute('x', barX + p * barW + 4);
        setText(t, p.toFixed(3), tip);
      });
      setText(caption, 'temperature ' + T.toFixed(2) + ' · top-k: ' + (every ? 'all (' + grouped(vocab) + ' tokens)' : k));
      setText(rest, 'the other ' + grouped(vocab - shown) + ' tokens: ' + Math.max(0, 1 - sum).toFixed(3) + ' in all');
    }
    var temp = slider('alab-temperature', 'temperature', 2, 40, Math.min(40, Math.max(2, Math.round(T / 0.05))), function (v) {
      T = Number((v * 0.05).toFixed(2)); draw(); return T.toFixed(2);
    });
    temp.out.textContent = T.toFixed(2);
    var topk = slider('alab-top-k', 'top-k', 1, kmax + 1, k === null ? kmax + 1 : Math.min(k, kmax), function (v) {
      k = v > kmax ? null : v; draw(); return k === null ? 'all' : String(k);
    });
    topk.out.textContent = k === null ? 'all' : String(k);
    common('next_token_view.svg');
    draw();
  }

  // The generation view: the text as it grows; for the step shown, where its new token
  // attends in one layer, each head in its colour (a strip of boxes under each earlier token)
  // or one head (the token's background too). Each weight travels as one byte,
  // round(255 * sqrt(w)): the opacity drawn is that byte / 255, the weight written (b / 255)^2.
  function generation() {
    var prompt = num(root, 'prompt'), steps = num(root, 'steps'), H = num(root, 'heads');
    var carried = list(root, 'layers'), data = (attr(root, 'weights') || '').split(',');
    var decoded = {};
    var xs = list(svg, 'xs'), ws = list(svg, 'ws'), ys = list(svg, 'ys');
    var bgY = num(svg, 'bg-y'), bgH = num(svg, 'bg-h'), segY = num(svg, 'seg-y'), segH = num(svg, 'seg-h'), bgMax = num(svg, 'bg-max');
    var step = num(svg, 'step'), layer = num(svg, 'layer'), head = attr(svg, 'head') === '' ? null : num(svg, 'head');
    var tokens = all(svg, 'g.alab-tok'), wordsOf = all(svg, 'text.alab-word');
    var shade = svg.querySelector('g.alab-shade'), cur = svg.querySelector('rect[data-cur]');
    var caption = svg.querySelector('text.alab-caption');
    var swatches = all(svg, 'rect[data-h]');
    var colour = swatches.map(function (r) { return r.getAttribute('stroke'); });
    var pretty = wordsOf.map(words);
    var role = function (j) { return j < prompt ? 'token ' + (j + 1) + ' of the prompt' : 'generated token ' + (j - prompt + 1); };
    // Bytes of step s, head h, key j in a layer: heads x (prompt + s + 1) a step.
    function bytesOf(l) {
      var c = carried.indexOf(l);
      if (c < 0 || !data[c]) return null;
      if (!decoded[l]) decoded[l] = atob(data[c]);
      return decoded[l];
    }
    function draw() {
      var p = prompt + step, at = H * (step * (prompt + 1) + step * (step - 1) / 2);
      var b = bytesOf(layer);
      while (shade.firstChild) shade.removeChild(shade.firstChild);
      tokens.forEach(function (g, j) { g.setAttribute('display', j <= p ? 'inline' : 'none'); });
      var heads = head === null ? Array.from({ length: H }, function (_, h) { return h; }) : [head];
      for (var j = 0; j <= p; j++) {
        var tip = [];
        heads.forEach(function (h, n) {
          var v = b ? b.charCodeAt(at + h * (p + 1) + j) : 0;
          tip.push('head ' + (h + 1) + ' ' + Math.pow(v / 255, 2).toFixed(3));
          if (!v) return;
          var x0 = xs[j] + (head === null ? n * ws[j] / H : 0), x1 = head === null ? x0 + ws[j] / H : xs[j] + ws[j];
          if (head !== null) {
            make(shade, 'line', { x1: xs[j], x2: xs[j] + ws[j], y1: ys[j] + bgY, y2: ys[j] + bgY, stroke: colour[h],
              'stroke-width': bgH, 'stroke-opacity': (bgMax * v / 255).toFixed(3), 'data-t': j, 'data-h': h });
          }
          make(shade, 'line', { x1: x0, x2: x1, y1: ys[j] + segY, y2: ys[j] + segY, stroke: colour[h],
            'stroke-width': segH, 'stroke-opacity': (v / 255).toFixed(3), 'data-t': j, 'data-h': h });
        });
        var name = '“' + pretty[p] + '”';
        setText(wordsOf[j], pretty[j], pretty[j] + ': ' + role(j) + (b ? ' · weights of ' + name + ', layer ' + layer + ': ' + tip.join(' · ') : ''));
      }
      cur.setAttribute('x', xs[p] - 2); cur.setAttribute('y', ys[p]);
      cur.setAttribute('width', ws[p] + 4);
      setText(caption, 'token ' + (step + 1) + ' of ' + steps + ': “' + pretty[p] + '” · layer ' + layer + ' · ' + (head === null ? 'all heads' : 'head ' + (head + 1)));
      swatches.forEach(function (r, h) { r.setAttribute('fill', head === null || head === h ? colour[h] : 'none'); });
      headMenu.value = head === null ? 'all' : String(head);
      layerMenu.value = String(layer);
    }
    if (!data[0]) { common('generation_view.svg'); return; } // too large to carry: the picture only
    var run = slider('alab-step', 'step', 1, steps, step + 1, function (v) { step = v - 1; draw(); return v + '/' + steps; });
    run.out.textContent = (step + 1) + '/' + steps;
    var timer = null;
    var play = button('▶ play', function () {
      if (timer) { stop(); return; }
      if (step + 1 >= steps) { run.input.value = 1; run.update(); }
      play.textContent = '❚❚ pause';
      timer = setInterval(function () {
        if (step + 1 >= steps || !root.isConnected) { stop(); return; }
        run.input.value = step + 2; run.update();
      }, 700);
    });
    function stop() { clearInterval(timer); timer = null; play.textContent = '▶ play'; }
    var layerMenu = menu('alab-layer', carried.map(function (l) { return [l, 'layer ' + l]; }), function (v) { layer = Number(v); draw(); });
    if (carried.length < 2) layerMenu.style.display = 'none';
    var headMenu = menu('alab-heads', [['all', 'all heads']].concat(colour.map(function (_, h) { return [h, 'head ' + (h + 1)]; })),
      function (v) { head = v === 'all' ? null : Number(v); draw(); });
    // A click on a head's colour shows that head alone; another click, every head.
    svg.addEventListener('click', function (e) {
      var h = e.target.closest && e.target.closest('rect[data-h], text[data-h]');
      if (!h) return;
      var n = num(h, 'h');
      head = head === n ? null : n;
      draw();
    });
    common('generation_view.svg');
    draw();
  }

  if (svg.classList.contains('alab-next-token-view')) nextToken();
  if (svg.classList.contains('alab-generation-view')) generation();
})();
