// Everything the dashboard's pages run, from this file: the Content-Security-Policy allows no
// inline script (api/security_headers.py), so pages carry data, never code.
(function () {
  "use strict";

  // Charts: each <div class="chart" data-figure="ID"> is drawn from the JSON in <script
  // type="application/json" id="ID">, which the browser never runs.
  document.querySelectorAll("div.chart[data-figure]").forEach(function (div) {
    var block = document.getElementById(div.dataset.figure);
    if (!block) { return; }
    var fig = JSON.parse(block.textContent);
    Plotly.newPlot(div, fig.data, fig.layout, fig.config);
  });

  // Filters: a control marked data-submit-on-change submits its form when changed (the URL is
  // the permalink); data-clear names fields to empty first (the compare page's A and B).
  document.querySelectorAll("[data-submit-on-change]").forEach(function (control) {
    control.addEventListener("change", function () {
      (control.dataset.clear || "").split(" ").filter(Boolean).forEach(function (name) {
        var field = control.form.elements[name];
        if (field) { field.value = ""; }
      });
      control.form.submit();
    });
  });

  // Pages that refresh themselves (the fleet): <body data-reload-ms="5000">.
  var reload = Number(document.body.dataset.reloadMs || 0);
  if (reload > 0) { setTimeout(function () { location.reload(); }, reload); }
})();
