// Click-to-sort for table.sortable (numeric cells sort by their full value in data-v); a link into a closed
// section opens it, and an opened section fits its figures to its width; once the figures have drawn, the
// rendered heatmap count and script errors go into #status (its data-*), in words only when something failed.
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
  function reveal() {
    var el = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (!el) return;
    for (var d = el; d; d = d.parentElement) { if (d.tagName === 'DETAILS') d.open = true; }
    el.scrollIntoView();
  }
  document.querySelectorAll('table.sortable').forEach(sortable);
  document.querySelectorAll('details').forEach(function (d) {
    d.addEventListener('toggle', function () {
      if (d.open && window.Plotly) d.querySelectorAll('.js-plotly-plot').forEach(function (g) { Plotly.Plots.resize(g); });
    });
  });
  window.addEventListener('hashchange', reveal);
  document.addEventListener('click', function (e) {  // a link to the hash already set fires no hashchange
    if (e.target.closest && e.target.closest('a[href^="#"]')) setTimeout(reveal, 0);
  });
  window.addEventListener('load', function () {
    reveal();
    setTimeout(function () {
      var status = document.getElementById('status'), errors = window.__probingErrors;
      var n = document.querySelectorAll('.js-plotly-plot g.hm image').length, expected = Number(status.dataset.expected);
      status.dataset.heatmaps = String(n);
      status.dataset.errors = String(errors.length);
      var failed = (n < expected ? [(expected - n) + ' of ' + expected + ' heatmaps did not draw'] : [])
        .concat(errors.length ? ['script errors: ' + errors.join('; ')] : []);
      status.textContent = failed.length ? 'Some figures failed: ' + failed.join('; ') + '.' : '';
    }, 200);
  });
})();
