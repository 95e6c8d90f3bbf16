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

  // Search snippets are cut from the pages' HTML, where math is still TeX source; show each
  // formula as plain text, its commands as the symbols they stand for ("\\(\\mathcal A = \\{a_1,
  // \\dots\\}\\)" reads "A = {a_1, …}"); the same rules as tex_to_text in book/_ext/book_a11y.py.
  // (searchtools.js declares Search with const: a global binding, not a window property.)
  var SYMBOLS = {
    dots: "…", ldots: "…", cdots: "⋯", cdot: "·", times: "×", le: "≤", leq: "≤", ge: "≥",
    geq: "≥", ne: "≠", neq: "≠", approx: "≈", sim: "∼", in: "∈", to: "→", infty: "∞",
    sqrt: "√", top: "ᵀ", pm: "±", mid: "|", lceil: "⌈", rceil: "⌉", lfloor: "⌊", rfloor: "⌋",
    sum: "∑", prod: "∏", partial: "∂", nabla: "∇", ell: "ℓ", alpha: "α", beta: "β",
    gamma: "γ", delta: "δ", epsilon: "ε", varepsilon: "ε", eta: "η", theta: "θ", lambda: "λ",
    mu: "μ", pi: "π", rho: "ρ", sigma: "σ", tau: "τ", phi: "φ", varphi: "φ", omega: "ω",
    Theta: "Θ", Omega: "Ω", Delta: "Δ", Sigma: "Σ", Phi: "Φ", Lambda: "Λ", Pi: "Π",
    Gamma: "Γ", quad: " ", qquad: " ", ",": " ", ";": " ", "!": "", "%": "%", "&": "&",
    _: "_", "#": "#",
  };
  var FUNCTIONS = /^(log|exp|max|min|poly|softmax|sin|cos|det|lim)$/;
  function texToText(tex) {
    return tex
      .replace(/\^\\top/g, "\\top")
      .replace(/\\frac\{([^{}]*)\}\{([^{}]*)\}/g, "($1)/($2)")
      .replace(/\\\{/g, "\u0000")
      .replace(/\\\}/g, "\u0001")
      .replace(/\\(begin|end)\{[^}]*\}/g, "")
      .replace(/\\([A-Za-z]+|.)(\s?)/g, function (m, name, space) {
        if (Object.prototype.hasOwnProperty.call(SYMBOLS, name)) return SYMBOLS[name] + space;
        return FUNCTIONS.test(name) ? name + space : "";
      })
      .replace(/[{}]/g, "")
      .replace(/\u0000/g, "{")
      .replace(/\u0001/g, "}")
      .replace(/\s+/g, " ")
      .trim();
  }
  // eslint-disable-next-line no-undef
  if (typeof Search !== "undefined" && typeof Search.htmlToText === "function") {
    var toText = Search.htmlToText;
    Search.htmlToText = function (htmlString, anchor) {
      return toText(htmlString, anchor).replace(
        /\\\(([\s\S]*?)\\\)|\\\[([\s\S]*?)\\\]|\$\$([\s\S]*?)\$\$/g,
        function (m, inline, display, dollars) {
          return texToText(inline || display || dollars || "");
        }
      );
    };
  }
})();
