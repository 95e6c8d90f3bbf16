// Site-wide fixes for the book's pages. Loaded with `defer` by book/_ext/book_site.py, so it
// runs after the page is parsed and before the theme scripts bind their handlers.
(function () {
  "use strict";

  // Navigation at every width. pydata-sphinx-theme 0.17 puts its own sidebar toggles in a header
  // that sphinx-book-theme hides, ahead of the book theme's visible ones; both theme scripts bind
  // document.querySelector(".primary-toggle") / (".secondary-toggle"), i.e. the hidden buttons,
  // so the visible ones did nothing (pydata-sphinx-theme #2451, sphinx-book-theme #988). Remove
  // a toggle only when another of its kind exists and it is itself never displayed.
  ["primary-toggle", "secondary-toggle"].forEach(function (kind) {
    var all = Array.from(document.querySelectorAll("." + kind));
    if (all.length < 2) return;
    all.forEach(function (button) {
      if (getComputedStyle(button).display === "none" && button.closest(".bd-header")) {
        button.remove();
      }
    });
  });

  // A figure opens at full size on tap or click: wrap each output or figure image that is not
  // already a link in a link to itself.
  document.querySelectorAll(".bd-article .cell_output img, .bd-article figure img").forEach(
    function (img) {
      if (img.closest("a")) return;
      var link = document.createElement("a");
      link.href = img.getAttribute("src");
      link.className = "book-fullsize";
      link.title = "Open the figure at full size";
      img.parentNode.insertBefore(link, img);
      link.appendChild(img);
    }
  );

  // Search snippets are cut from the pages' HTML, where math is still TeX source; show it
  // without its delimiters and backslashes ("Theta(n^2 d)", not "\(\Theta(n^2 d)\)").
  // (searchtools.js declares Search with const: a global binding, not a window property.)
  // eslint-disable-next-line no-undef
  if (typeof Search !== "undefined" && typeof Search.htmlToText === "function") {
    var toText = Search.htmlToText;
    Search.htmlToText = function (htmlString, anchor) {
      return toText(htmlString, anchor)
        .replace(/\\[()[\]]|\$\$/g, "")
        .replace(/\\(begin|end)\{[^}]*\}/g, "")
        .replace(/\\([A-Za-z]+)/g, "$1")
        .replace(/\\(.)/g, "$1");
    };
  }
})();
