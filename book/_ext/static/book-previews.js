// Previews of cross-referenced figures, equations and theorem-like boxes, while the pointer
// rests on the link or the link has keyboard focus. The previews are written into the page by
// book/_ext/book_previews.py (script#book-previews: href -> HTML); the preview holds no link or
// control, so it adds no Tab stop. Escape hides it.
(function () {
  "use strict";
  var data = document.getElementById("book-previews");
  if (!data) return;
  var previews;
  try {
    previews = JSON.parse(data.textContent);
  } catch (e) {
    return;
  }
  var tip = document.createElement("div");
  tip.id = "book-preview";
  tip.className = "book-preview";
  tip.setAttribute("role", "tooltip");
  tip.hidden = true;
  document.body.appendChild(tip);
  var current = null;
  var timer = null;
  // A tap is not a hover: on a touch screen the preview would stay up after the jump.
  var hovers = !window.matchMedia || window.matchMedia("(hover: hover)").matches;

  function linkOf(el) {
    var a = el && el.closest ? el.closest("a.reference.internal") : null;
    return a && previews[a.getAttribute("href")] ? a : null;
  }

  function place(a) {
    var r = a.getBoundingClientRect();
    var width = Math.min(480, window.innerWidth - 16);
    tip.style.width = width + "px";
    tip.style.left = Math.max(8, Math.min(r.left, window.innerWidth - width - 8)) + "px";
    var below = r.bottom + 6;
    var h = tip.offsetHeight;
    tip.style.top = (below + h > window.innerHeight && r.top - h - 6 > 0 ? r.top - h - 6 : below) + "px";
  }

  function show(a) {
    clearTimeout(timer);
    if (current === a && !tip.hidden) return;
    current = a;
    tip.innerHTML = previews[a.getAttribute("href")];
    tip.hidden = false;
    a.setAttribute("aria-describedby", "book-preview");
    place(a);
    var mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) {
      mj.startup.promise
        .then(function () {
          return mj.typesetPromise ? mj.typesetPromise([tip]) : null;
        })
        .then(function () {
          if (current === a) place(a);
        });
    }
  }

  function hide() {
    clearTimeout(timer);
    if (current) current.removeAttribute("aria-describedby");
    current = null;
    tip.hidden = true;
  }

  function hideSoon() {
    clearTimeout(timer);
    timer = setTimeout(hide, 200);
  }

  document.addEventListener("mouseover", function (event) {
    var a = hovers ? linkOf(event.target) : null;
    if (a) {
      clearTimeout(timer);
      timer = setTimeout(function () {
        show(a);
      }, 250);
    } else if (tip.contains(event.target)) {
      clearTimeout(timer); // the pointer may move onto the preview to read it
    } else if (current || timer) {
      hideSoon();
    }
  });
  document.addEventListener("focusin", function (event) {
    // Keyboard focus only (a tapped link may take focus too).
    var a = linkOf(event.target);
    if (a && a.matches(":focus-visible")) show(a);
    else if (current) hide();
  });
  document.addEventListener("focusout", function (event) {
    if (linkOf(event.target) === current) hide();
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && current) hide();
  });
  window.addEventListener("scroll", function () {
    if (current) place(current);
  }, { passive: true });
})();
