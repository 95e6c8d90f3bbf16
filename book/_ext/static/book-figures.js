// A figure opens enlarged on the page: a tap, a click, or Enter/Space on a focused figure shows
// its desktop form at full size in a dialog, which scrolls and pans on a phone and closes on
// Escape, its close button, or a tap outside the image; focus then returns to the figure.
// Loaded with `defer` by book/_ext/book_figures.py. Works offline: no library.
(function () {
  "use strict";

  var FIGURES = ".bd-article .cell_output img, .bd-article figure img";
  var dialog = null;
  var shown = null;
  var opener = null;

  function build() {
    dialog = document.createElement("dialog");
    dialog.className = "book-zoom";
    dialog.setAttribute("aria-label", "Enlarged figure");
    var close = document.createElement("button");
    close.type = "button";
    close.className = "book-zoom-close";
    close.setAttribute("aria-label", "Close the enlarged figure");
    close.textContent = "\u00d7";
    close.addEventListener("click", function () {
      dialog.close();
    });
    var frame = document.createElement("div");
    frame.className = "book-zoom-frame";
    shown = document.createElement("img");
    frame.appendChild(shown);
    dialog.appendChild(close);
    dialog.appendChild(frame);
    // A tap outside the image (on the backdrop or the frame around it) closes the dialog.
    dialog.addEventListener("click", function (event) {
      if (event.target === dialog || event.target === frame) dialog.close();
    });
    dialog.addEventListener("close", function () {
      shown.removeAttribute("src");
      if (opener) opener.focus();
      opener = null;
    });
    document.body.appendChild(dialog);
  }

  function open(img) {
    if (!dialog) build();
    opener = img;
    // The desktop form at its 1x size: the <img>'s own source, not a <picture>'s phone source.
    shown.src = img.getAttribute("src");
    shown.alt = img.getAttribute("alt") || "";
    var width = img.getAttribute("width");
    if (width) shown.style.width = width + "px";
    else shown.style.removeProperty("width");
    dialog.showModal();
    dialog.querySelector(".book-zoom-close").focus();
  }

  function isFigure(target) {
    return target instanceof HTMLImageElement && target.matches(FIGURES);
  }

  document.querySelectorAll(FIGURES).forEach(function (img) {
    img.classList.add("book-zoomable");
    img.tabIndex = 0;
    img.setAttribute("role", "button");
    img.setAttribute("aria-haspopup", "dialog");
    img.title = "Enlarge the figure";
  });
  // Delegated, so figures a live widget draws later enlarge too.
  document.addEventListener("click", function (event) {
    if (!isFigure(event.target) || event.target.closest("a")) return;
    event.preventDefault();
    open(event.target);
  });
  document.addEventListener("keydown", function (event) {
    if ((event.key === "Enter" || event.key === " ") && isFigure(event.target)) {
      event.preventDefault();
      open(event.target);
    }
  });
})();
