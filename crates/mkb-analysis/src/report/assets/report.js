(function () {
  // Self-check: every expected plot is present, visible and has its data marks.
  var problems = (window.__mkbErrors || []).slice();
  var expected = [];
  try { expected = JSON.parse(document.getElementById('mkb-expected').textContent); }
  catch (e) { problems.push('cannot read the expected plot list: ' + e); }
  expected.forEach(function (id) {
    var el = document.getElementById(id);
    if (!el) { problems.push('missing plot ' + id); return; }
    var want = parseInt(el.getAttribute('data-marks') || '0', 10);
    var got = el.querySelectorAll('.mark').length;
    if (got < 1 || got !== want) { problems.push('plot ' + id + ' has ' + got + ' marks, expected ' + want); }
    var box = el.getBoundingClientRect();
    if (box.width < 50 || box.height < 50) { problems.push('plot ' + id + ' is not visible'); }
  });
  var out = document.getElementById('mkb-selfcheck');
  out.setAttribute('data-status', problems.length ? 'fail' : 'ok');
  out.setAttribute('data-plots', String(expected.length));
  out.textContent = problems.join('; ');
  if (problems.length) { console.error('mkb report self-check failed: ' + problems.join('; ')); }

  // Sortable tables: click a header; cells may carry data-v with a numeric sort key.
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function (table) {
    Array.prototype.forEach.call(table.querySelectorAll('thead th'), function (th, col) {
      th.addEventListener('click', function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var asc = th.getAttribute('data-order') !== 'asc';
        th.setAttribute('data-order', asc ? 'asc' : 'desc');
        rows.sort(function (a, b) {
          var x = a.cells[col], y = b.cells[col];
          var vx = x.getAttribute('data-v'), vy = y.getAttribute('data-v');
          var r;
          if (vx !== null && vy !== null) { r = parseFloat(vx) - parseFloat(vy); }
          else { r = x.textContent.localeCompare(y.textContent); }
          return asc ? r : -r;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  var filter = document.getElementById('problem-filter');
  if (filter) {
    filter.addEventListener('input', function () {
      var q = filter.value.toLowerCase();
      Array.prototype.forEach.call(document.querySelectorAll('#problem-table tbody tr'), function (tr) {
        tr.style.display = tr.textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
      });
    });
  }
})();
