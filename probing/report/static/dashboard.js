// Click-to-sort for table.sortable (numeric cells sort by their full value in data-v), then, once the
// figures have drawn, write the rendered heatmap count and script errors into #status.
(function () {
  function sortable(table) {
    table.querySelectorAll('thead th').forEach(function (th, i) {
      th.title = 'click to sort';
      th.addEventListener('click', function () {
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        var asc = th.dataset.dir !== 'asc';
        table.querySelectorAll('thead th').forEach(function (o) { delete o.dataset.dir; });
        th.dataset.dir = asc ? 'asc' : 'desc';
        function key(r) {
          var c = r.cells[i], t = c.dataset.v !== undefined ? c.dataset.v : c.textContent, x = parseFloat(t);
          return isNaN(x) ? t : x;
        }
        rows.sort(function (a, b) {
          var x = key(a), y = key(b);
          var c = (typeof x === 'number' && typeof y === 'number') ? x - y : String(x).localeCompare(String(y));
          return asc ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }
  document.querySelectorAll('table.sortable').forEach(sortable);
  window.addEventListener('load', function () {
    setTimeout(function () {
      var status = document.getElementById('status');
      var n = document.querySelectorAll('.js-plotly-plot g.hm image').length;
      status.dataset.heatmaps = String(n);
      status.dataset.errors = String(window.__probingErrors.length);
      status.textContent = n + ' of ' + status.dataset.expected + ' heatmaps rendered'
        + (window.__probingErrors.length ? '; script errors: ' + window.__probingErrors.join('; ') : '');
    }, 200);
  });
})();
