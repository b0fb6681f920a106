/* tracelens report: draws the plotly figures and the kernel table from the JSON in #tl-data.
   Every string in that JSON may come from a trace: the table is built with textContent only. */
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("tl-data").textContent);
  // No mode bar: it would cover legends and right-hand axes. Drag zooms, double-click resets.
  var config = { displaylogo: false, responsive: true, displayModeBar: false };

  function drawFigures() {
    var jobs = [];
    Array.prototype.forEach.call(document.querySelectorAll("div.plot[data-fig]"), function (div) {
      var fig = data.figures[div.getAttribute("data-fig")];
      if (!fig) { return; }
      jobs.push(Plotly.newPlot(div, fig.data, fig.layout, config));
    });
    return Promise.all(jobs);
  }

  function fmt(v, digits) {
    if (v === null || v === undefined) { return "-"; }
    return v.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
  }

  function kernelTable() {
    var table = document.getElementById("kernel-table");
    if (!table) { return; }
    var rows = data.kernels, tbody = table.tBodies[0];
    var filter = document.getElementById("kernel-filter");
    var count = document.getElementById("kernel-count");
    var sortKey = "sum_ms", sortDir = -1, sortType = "num";

    function cell(tr, text, cls) {
      var td = document.createElement("td");
      td.textContent = text;
      if (cls) { td.className = cls; }
      tr.appendChild(td);
      return td;
    }

    function render() {
      var q = (filter.value || "").toLowerCase();
      var shown = rows.filter(function (r) {
        return !q || (r.name + " " + r.category + " " + r.sub + " " + r.rule).toLowerCase().indexOf(q) >= 0;
      });
      shown.sort(function (a, b) {
        var x = a[sortKey], y = b[sortKey];
        if (sortType === "num") { x = x === null ? -Infinity : x; y = y === null ? -Infinity : y; return sortDir * (x - y); }
        return sortDir * String(x).localeCompare(String(y));
      });
      while (tbody.firstChild) { tbody.removeChild(tbody.firstChild); }
      shown.forEach(function (r) {
        var tr = document.createElement("tr");
        var name = cell(tr, r.short, "l name");
        name.title = r.name;
        name.addEventListener("click", function () {
          var full = name.classList.toggle("full");
          name.textContent = full ? r.name : r.short;
        });
        var cat = cell(tr, "", "l cat");
        var sw = document.createElement("span");
        sw.className = "sw";
        sw.style.background = r.color;
        cat.appendChild(sw);
        cat.appendChild(document.createTextNode(r.category + (r.sub ? "/" + r.sub : "")));
        cell(tr, fmt(r.count, 0));
        cell(tr, fmt(r.sum_ms, 3));
        cell(tr, fmt(r.mean_us, 1));
        cell(tr, r.share === null ? "-" : fmt(r.share, 1) + "%");
        cell(tr, fmt(r.devices, 0));
        cell(tr, r.rule, "l");
        tbody.appendChild(tr);
      });
      count.textContent = "showing " + shown.length + " of " + rows.length;
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
        th.setAttribute("aria-sort", th.getAttribute("data-key") === sortKey ?
          (sortDir > 0 ? "ascending" : "descending") : "none");
      });
    }

    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      th.addEventListener("click", function () {
        var key = th.getAttribute("data-key");
        if (key === sortKey) { sortDir = -sortDir; }
        else { sortKey = key; sortType = th.getAttribute("data-type"); sortDir = sortType === "num" ? -1 : 1; }
        render();
      });
    });
    filter.addEventListener("input", render);
    render();
  }

  kernelTable();
  drawFigures().then(function () {
    window.__tracelensReady = true;
  }, function (err) {
    console.error("tracelens: a chart failed to draw: " + err);
    window.__tracelensReady = true;
  });
}());
