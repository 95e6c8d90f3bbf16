// Keyboard help. Loaded with `defer` by book/_ext/book_a11y.py.
(function () {
  "use strict";

  // A skip link to the first live figure's controls, beside "Skip to main content": without it
  // a keyboard reader tabs through the navigation and every link above the figure first.
  var control = document.querySelector("input[data-control], select[data-control]");
  var first = document.querySelector("#pst-skip-link");
  if (control && control.id && first) {
    var holder = document.createElement("div");
    holder.className = "skip-link d-print-none";
    var link = document.createElement("a");
    link.href = "#" + control.id;
    link.textContent = "Skip to the live figure";
    link.addEventListener("click", function (event) {
      event.preventDefault();
      control.scrollIntoView({ block: "center" });
      control.focus();
    });
    holder.appendChild(link);
    first.insertAdjacentElement("afterend", holder);
  }

  // A region that scrolls sideways (a long equation or output on a phone) must be reachable by
  // keyboard, or its hidden part cannot be scrolled into view without a pointer: give each
  // one with nothing focusable inside a Tab stop while it overflows, and take it back when the
  // page is wide enough. Equations are typeset as they scroll into view, so look again then.
  var FOCUSABLE = "a[href], button, input, select, textarea, [tabindex]";
  var SCROLLERS = 'div, pre, table, figure, section, mjx-container[display="true"]';
  function markScrollers() {
    var article = document.querySelector(".bd-article");
    if (!article) return;
    // Read every element first and write after, so that the layout is computed once.
    var changes = [];
    // Block boxes only: the thousands of MathJax's inner nodes never scroll themselves.
    article.querySelectorAll(SCROLLERS).forEach(function (el) {
      var marked = el.hasAttribute("data-book-scroll");
      var wide = el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0;
      var x = wide || marked ? getComputedStyle(el).overflowX : "";
      var scrolls =
        wide && (x === "auto" || x === "scroll") && (marked || !el.querySelector(FOCUSABLE));
      if (scrolls !== marked && (marked || !el.hasAttribute("tabindex"))) {
        changes.push([el, scrolls]);
      }
    });
    changes.forEach(function (change) {
      if (change[1]) {
        change[0].setAttribute("tabindex", "0");
        change[0].setAttribute("data-book-scroll", "");
      } else {
        change[0].removeAttribute("tabindex");
        change[0].removeAttribute("data-book-scroll");
      }
    });
  }
  var pending = null;
  function soon() {
    clearTimeout(pending);
    pending = setTimeout(markScrollers, 200);
  }
  window.addEventListener("load", soon);
  window.addEventListener("resize", soon);
  var main = document.querySelector(".bd-article");
  if (main && window.MutationObserver) {
    new MutationObserver(function (records) {
      for (var i = 0; i < records.length; i++) {
        if (records[i].addedNodes.length) return soon();
      }
    }).observe(main, { childList: true, subtree: true });
  }
})();
