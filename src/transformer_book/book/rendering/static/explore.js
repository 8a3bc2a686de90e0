// 热图逐格可读，可调的图在记录好的状态之间切换。数据都由构建写进页面（rendering/interactive.py）：
// 每一格的标签、按书中精度格式化好的数值、颜色；每个状态画好的样子。这里只负责显示和切换，不算任何数。
// 没有 JavaScript 时（以及印刷版），页面上是静态的图和默认状态。不依赖外部库，不从网络加载任何东西。
(function () {
  "use strict";

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // 表格里的格与格、行与行之间放一个空白：排版时表格不理会它，但按文字读这张表（复制、屏幕阅读器的
  // 文字模式、textContent）时，相邻的数不会连成一串（“0.370.63”），而是“0.37 0.63”。
  function gap(parent, text) {
    parent.appendChild(document.createTextNode(text || " "));
  }

  function readJSON(script) {
    try {
      return JSON.parse(script.textContent);
    } catch (err) {
      return null;
    }
  }

  var uid = 0;

  // ---- 热图 -----------------------------------------------------------------------------------------

  function name(axis, fallback) {
    return axis || fallback;
  }

  // 图里有几个刻度标签另上了颜色（比如主语标红）：格子表里用同色的一道边标出它们，字仍是正文的颜色（深浅两种配色都看得清）。
  function usual(colors) {
    var count = {}, best = colors[0];
    colors.forEach(function (c) { count[c] = (count[c] || 0) + 1; if (count[c] > count[best]) best = c; });
    return best;
  }

  // 列标签横着写要多宽（以半个汉字计：汉字和全角符号算 2，其余算 1）。比格子宽的标签竖着写，
  // 否则相邻的列标签会挤成一串（密集的热图里“10 11 12”连成“101112”）。
  function across(label) {
    var n = 0;
    String(label).split("").forEach(function (ch) { n += ch.charCodeAt(0) >= 0x2e80 ? 2 : 1; });
    return n;
  }

  function describe(g, r, c) {
    return name(g.row_name, "行") + "「" + g.rows[r] + "」，" + name(g.col_name, "列") + "「" + g.cols[c] + "」：" + g.values[r][c];
  }

  function buildGrid(panel, g, title) {
    panel.textContent = "";
    var rows = g.rows.length, cols = g.cols.length;
    var dense = rows * cols > 400 || cols > 24;
    var showValues = rows <= 6 && cols <= 5;  // 格子够大时把数写在格子里
    var readout = el("p", "book-hm-readout");
    readout.setAttribute("aria-live", "polite");
    readout.textContent = "把鼠标移到格子上（手机上轻点，键盘用 Tab 进入后按方向键），看它的行、列和数值。";
    var scroller = el("div", "book-hm-scroll");
    var table = el("table", "book-hm-grid" + (dense ? " book-hm-dense" : "") + (showValues ? " book-hm-values" : ""));
    table.setAttribute("role", "grid");
    table.setAttribute("aria-label", title || "热图");
    var thead = el("thead");
    var hr = el("tr");
    var caption = el("caption", "book-hm-axes", "行：" + name(g.row_name, "行") + "　列：" + name(g.col_name, "列"));
    table.appendChild(caption);
    gap(table, "\n");
    var corner = el("th", "book-hm-corner");
    corner.setAttribute("scope", "col");
    corner.appendChild(el("span", "book-hm-sr", name(g.row_name, "行") + "＼" + name(g.col_name, "列")));
    hr.appendChild(corner);
    gap(hr);
    var colHeads = [];
    for (var c = 0; c < cols; c++) {
      var th = el("th", "book-hm-col", g.cols[c]);
      th.setAttribute("scope", "col");
      if (g.col_colors && g.col_colors[c] !== usual(g.col_colors)) th.style.boxShadow = "inset 0 -3px 0 " + g.col_colors[c];
      if (across(g.cols[c]) > (dense ? 1 : 2)) th.classList.add("book-hm-vertical");
      hr.appendChild(th);
      gap(hr);
      colHeads.push(th);
    }
    thead.appendChild(hr);
    table.appendChild(thead);
    gap(table, "\n");
    var tbody = el("tbody");
    var rowHeads = [], cells = [];
    for (var r = 0; r < rows; r++) {
      var tr = el("tr");
      var rh = el("th", "book-hm-row", g.rows[r]);
      rh.setAttribute("scope", "row");
      if (g.row_colors && g.row_colors[r] !== usual(g.row_colors)) rh.style.boxShadow = "inset -3px 0 0 " + g.row_colors[r];
      tr.appendChild(rh);
      gap(tr);
      rowHeads.push(rh);
      var line = [];
      for (c = 0; c < cols; c++) {
        var td = el("td", "book-hm-cell");
        td.setAttribute("role", "gridcell");
        td.tabIndex = r === 0 && c === 0 ? 0 : -1;
        td.dataset.r = r;
        td.dataset.c = c;
        var s = g.shades[r][c];
        if (s >= 0) {
          td.style.background = g.colors[s];
          if (s > 0.6 * (g.colors.length - 1)) td.classList.add("book-hm-ink-light");
        } else {
          td.classList.add("book-hm-empty");
        }
        td.setAttribute("aria-label", describe(g, r, c));
        if (showValues) td.textContent = g.values[r][c];
        tr.appendChild(td);
        gap(tr);
        line.push(td);
      }
      tbody.appendChild(tr);
      gap(tbody, "\n");
      cells.push(line);
    }
    table.appendChild(tbody);
    scroller.appendChild(table);

    var bar = el("div", "book-hm-bar");
    bar.setAttribute("aria-hidden", "true");
    var stops = [];
    for (var i = 0; i < g.colors.length; i += 8) stops.push(g.colors[i]);
    stops.push(g.colors[g.colors.length - 1]);
    var ramp = el("div", "book-hm-ramp");
    ramp.style.background = "linear-gradient(to right, " + stops.join(", ") + ")";
    var marker = el("div", "book-hm-marker");
    marker.hidden = true;
    ramp.appendChild(marker);
    bar.appendChild(el("span", "book-hm-low", g.low));
    gap(bar);
    bar.appendChild(ramp);
    gap(bar);
    bar.appendChild(el("span", "book-hm-high", g.high));

    // 手机上格子只有十几像素宽：读数旁边四个按钮（各 44 像素见方），把选中的格子往上下左右挪一格，读数随之更新。
    var steps = el("div", "book-hm-steps");
    steps.setAttribute("role", "group");
    steps.setAttribute("aria-label", "挪到相邻的格子");
    [["↑", "上一行", -1, 0], ["↓", "下一行", 1, 0], ["←", "左一列", 0, -1], ["→", "右一列", 0, 1]].forEach(function (s) {
      var button = el("button", "book-hm-step", s[0]);
      button.type = "button";
      button.setAttribute("aria-label", s[1]);
      button.addEventListener("click", function () { step(s[2], s[3]); });
      steps.appendChild(button);
    });
    var head = el("div", "book-hm-head");
    head.appendChild(readout);
    head.appendChild(steps);
    panel.appendChild(head);
    gap(panel, "\n");
    panel.appendChild(scroller);
    gap(panel, "\n");
    panel.appendChild(bar);

    var active = null;
    function activate(td) {
      var r = +td.dataset.r, c = +td.dataset.c;
      if (active) {
        active.classList.remove("book-hm-active");
        rowHeads[+active.dataset.r].classList.remove("book-hm-hl");
        colHeads[+active.dataset.c].classList.remove("book-hm-hl");
        active.setAttribute("aria-selected", "false");
      }
      active = td;
      td.classList.add("book-hm-active");
      td.setAttribute("aria-selected", "true");
      rowHeads[r].classList.add("book-hm-hl");
      colHeads[c].classList.add("book-hm-hl");
      readout.textContent = describe(g, r, c);
      var s = g.shades[r][c];
      marker.hidden = s < 0;
      if (s >= 0) marker.style.left = (100 * s / (g.colors.length - 1)) + "%";
    }
    // 读数所占的高度按最长的那句读数定下（面板宽度变了再量）：读数变长变短时格子不再上下移动，
    // 手指点下去时，落在的还是刚才看到的那一格。
    function reserve() {
      if (!readout.isConnected) return;
      var longest = readout.textContent, shown = longest;
      for (var r = 0; r < rows; r++) {
        for (var c = 0; c < cols; c++) {
          var text = describe(g, r, c);
          if (across(text) > across(longest)) longest = text;
        }
      }
      readout.style.minHeight = "";
      readout.textContent = longest;
      var height = readout.getBoundingClientRect().height;
      readout.textContent = shown;
      if (height) readout.style.minHeight = Math.ceil(height) + "px";
    }
    panel.bookReserve = reserve;
    requestAnimationFrame(reserve);
    function step(dr, dc) {
      var td = active || cells[0][0];
      var r = active ? Math.max(0, Math.min(rows - 1, +td.dataset.r + dr)) : 0;
      var c = active ? Math.max(0, Math.min(cols - 1, +td.dataset.c + dc)) : 0;
      cells.forEach(function (line) { line.forEach(function (x) { x.tabIndex = -1; }); });
      cells[r][c].tabIndex = 0;
      activate(cells[r][c]);
    }
    function move(td, dr, dc, to) {
      var r = +td.dataset.r, c = +td.dataset.c;
      if (to === "start") c = 0;
      else if (to === "end") c = cols - 1;
      else {
        r = Math.max(0, Math.min(rows - 1, r + dr));
        c = Math.max(0, Math.min(cols - 1, c + dc));
      }
      var next = cells[r][c];
      td.tabIndex = -1;
      next.tabIndex = 0;
      next.focus();
    }
    table.addEventListener("mouseover", function (e) {
      var td = e.target.closest("td.book-hm-cell");
      if (td) activate(td);
    });
    table.addEventListener("click", function (e) {
      var td = e.target.closest("td.book-hm-cell");
      if (td) activate(td);
    });
    table.addEventListener("focusin", function (e) {
      var td = e.target.closest("td.book-hm-cell");
      if (td) {
        cells.forEach(function (line) { line.forEach(function (x) { x.tabIndex = -1; }); });
        td.tabIndex = 0;
        activate(td);
      }
    });
    table.addEventListener("keydown", function (e) {
      var td = e.target.closest("td.book-hm-cell");
      if (!td) return;
      var keys = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1]};
      if (keys[e.key]) move(td, keys[e.key][0], keys[e.key][1]);
      else if (e.key === "Home") move(td, 0, 0, "start");
      else if (e.key === "End") move(td, 0, 0, "end");
      else return;
      e.preventDefault();
    });
  }

  function setupHeatmap(script) {
    var data = readJSON(script);
    var figure = script.previousElementSibling;
    while (figure && figure.tagName !== "FIGURE") figure = figure.previousElementSibling;
    if (!data || !figure || !data.grids || !data.grids.length) return;
    var box = el("div", "book-hm");
    box.dataset.for = data["for"];
    var panel = el("div", "book-hm-panel");
    if (data.grids.length > 1) {
      var id = "book-hm-pick-" + (++uid);
      var pick = el("div", "book-hm-pick");
      var label = el("label", null, "小图：");
      label.htmlFor = id;
      var select = el("select");
      select.id = id;
      data.grids.forEach(function (g, i) {
        var opt = el("option", null, g.title || "第 " + (i + 1) + " 幅");
        opt.value = i;
        select.appendChild(opt);
      });
      select.addEventListener("change", function () {
        buildGrid(panel, data.grids[+select.value], data.grids[+select.value].title);
      });
      pick.appendChild(label);
      pick.appendChild(select);
      box.appendChild(pick);
    } else if (data.grids[0].title) {
      box.appendChild(el("p", "book-hm-title", data.grids[0].title));
    }
    box.appendChild(panel);
    buildGrid(panel, data.grids[0], data.grids[0].title);
    var width = 0;
    window.addEventListener("resize", function () {  // 面板变宽变窄，最长的读数占的行数也变
      if (panel.clientWidth !== width && panel.bookReserve) {
        width = panel.clientWidth;
        panel.bookReserve();
      }
    });
    var caption = figure.querySelector("figcaption");
    figure.insertBefore(box, caption);
    // 只有一幅热图：格子代替静态图；几幅：静态图留作总览，下面一次放大读一幅。
    if (data.grids.length === 1) figure.classList.add("book-hm-on");
    else figure.classList.add("book-hm-many");
  }

  // ---- 可调的图 ---------------------------------------------------------------------------------------

  function setupExplorable(root) {
    var script = root.querySelector("script.book-ex-data");
    var data = script && readJSON(script);
    var form = root.querySelector(".book-ex-controls");
    var view = root.querySelector(".book-ex-view");
    var state = root.querySelector(".book-ex-state");
    // 说明文字里“这里显示的是 …… 时的结果”的那个状态名：跟着控件改（屏幕上这一句由 engine.css 藏起，
    // 上面那一行已经写着当前状态；打印时它说的仍是画出来的那一个）。
    var noteState = root.querySelector(".book-ex-note-state");
    if (!data || !form || !view) return;
    var sizes = data.labels.map(function (l) { return l.length; });
    function chosen() {
      return data.labels.map(function (_, i) {
        var slider = form.querySelector('input[type="range"][data-control="' + i + '"]');
        if (slider) return +slider.value;
        var radio = form.querySelector('input[type="radio"][data-control="' + i + '"]:checked');
        return radio ? +radio.value : 0;
      });
    }
    function current() {
      var pick = chosen();
      var index = 0;
      for (var i = 0; i < pick.length; i++) index = index * sizes[i] + pick[i];  // 与 itertools.product 同序
      return index;
    }
    function update() {
      var index = current();
      view.innerHTML = data.states[index];
      if (state) state.textContent = data.state_names[index];
      if (noteState) noteState.textContent = data.state_names[index];
      root.dataset.state = index;
      form.querySelectorAll('input[type="range"]').forEach(function (slider) {
        var label = data.labels[+slider.dataset.control][+slider.value];
        slider.setAttribute("aria-valuetext", label);
        var out = slider.parentNode.querySelector("output");
        if (out) out.textContent = label;
      });
    }
    form.addEventListener("input", update);
    form.addEventListener("change", update);
    form.addEventListener("submit", function (e) { e.preventDefault(); });
    form.hidden = false;
    root.classList.add("book-ex-on");
    // 浏览器在“后退”回到这一页时会恢复控件上次的选择：那时画出来的要跟着换成控件所选的状态。
    var named = state || noteState;
    if (named && data.state_names[current()] !== named.textContent) update();
  }

  // 页面自己的脚本（第 20 章“试一试”一页）用同一个热图显示它在浏览器里算出的注意力权重：
  // bookHeatmap.build(容器, g, 标题)，g 与构建写进页面的数据同一种格式（rendering/interactive.py 的 grid_payload）。
  window.bookHeatmap = {build: buildGrid};

  function init() {
    document.querySelectorAll("script.book-grid-data").forEach(function (s) {
      if (!s.dataset.done) { s.dataset.done = "1"; setupHeatmap(s); }
    });
    document.querySelectorAll(".book-explorable").forEach(function (root) {
      if (!root.dataset.done) { root.dataset.done = "1"; setupExplorable(root); }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
  // Material 的“即时加载”换页时不重新加载脚本：换页后再找一遍。
  if (window.document$ && window.document$.subscribe) window.document$.subscribe(init);
})();
