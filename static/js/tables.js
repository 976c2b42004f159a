// A table wider than its box (on a phone, most tables with many columns) becomes a list of cards:
// a card per row, each cell on a line of its own under its column's name. A table that fits
// stays a table; without this script a wide table scrolls inside its box as before.
(function () {
  "use strict";

  function headers(table) {
    var head = table.tHead;
    if (!head || !head.rows.length) { return []; }
    var names = [];
    Array.prototype.forEach.call(head.rows[head.rows.length - 1].cells, function (cell) {
      for (var n = 0; n < (cell.colSpan || 1); n++) { names.push(cell.textContent.trim()); }
    });
    return names;
  }

  function label(table) {
    var names = headers(table);
    Array.prototype.forEach.call(table.tBodies, function (body) {
      Array.prototype.forEach.call(body.rows, function (row) {
        var column = 0;
        Array.prototype.forEach.call(row.cells, function (cell) {
          if (names[column] && !cell.hasAttribute("data-label") && cell.colSpan === 1) {
            cell.setAttribute("data-label", names[column]);
            // The cell's content as one piece beside its column's name (a value and its
            // interval on two lines stay together).
            var value = document.createElement("span");
            value.className = "cell";
            while (cell.firstChild) { value.appendChild(cell.firstChild); }
            cell.appendChild(value);
          }
          column += cell.colSpan || 1;
        });
      });
    });
  }

  function inner(box) {
    var style = getComputedStyle(box);
    return box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  }

  function fit() {
    document.querySelectorAll("main table").forEach(function (table) {
      table.classList.remove("stacked");
      if (!table.offsetParent) { return; }  // in a closed <details>: when it opens
      if (table.getBoundingClientRect().width > inner(table.parentElement) + 1) {
        label(table);
        table.classList.add("stacked");
      }
    });
  }

  var pending = null;
  function soon() {
    if (pending === null) {
      pending = window.requestAnimationFrame(function () { pending = null; fit(); });
    }
  }
  fit();
  window.addEventListener("resize", soon);
  document.addEventListener("toggle", soon, true);  // a <details> opened
  document.addEventListener("htmx:afterSettle", soon);  // a part of the page replaced
})();
