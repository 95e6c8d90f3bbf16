#!/usr/bin/env bash
# Vendor MathJax 3 and the Jupyter widget JavaScript into _vendor/ (git-ignored), so the
# built book typesets math and draws widgets with no network. Fetched from the npm registry.
# Exit 3 when npm is missing: the Makefile then builds with the CDN configuration instead.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v npm >/dev/null 2>&1 || { echo "vendor: npm not found; math and widgets will load from CDNs"; exit 3; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent mathjax@3.2.2 requirejs@2.3.7 @jupyter-widgets/html-manager@1.0.6 axe-core@4.10.2 >/dev/null)
for f in "$tmp"/*.tgz; do d="${f%.tgz}"; mkdir -p "$d"; tar xzf "$f" -C "$d"; done
rm -rf _vendor && mkdir -p _vendor/mathjax/output/chtml _vendor/widgets
mj="$tmp/mathjax-3.2.2/package/es5"
# TeX input only: the book writes no MathML, and tex-chtml.js is lighter than tex-mml-chtml.js.
cp "$mj/tex-chtml.js" _vendor/mathjax/
cp -r "$mj/output/chtml/fonts" _vendor/mathjax/output/chtml/
# Lazy typesetting (MathJax's ui/lazy): equations are typeset as they scroll into view, so a
# chapter of several hundred equations is ready in about a second instead of several.
mkdir -p _vendor/mathjax/ui && cp "$mj/ui/lazy.js" _vendor/mathjax/ui/
cp "$tmp/requirejs-2.3.7/package/require.js" _vendor/require.js
hm="$tmp/jupyter-widgets-html-manager-1.0.6/package/dist"
cp "$hm"/embed-amd.js "$hm"/*.embed.js "$hm"/*.woff2 _vendor/widgets/
# Loaded between require.js and embed-amd.js (see nb_ipywidgets_js in _config.yml). It fixes two
# problems that the browser check (.ci/browser_check/) found: the widget fonts were requested
# next to the page, and ipywidgets threw a TypeError calling MathJax 2's API.
cat > _vendor/widgets/offline.js <<'JS'
(function () {
  // html-manager's modules find their fonts and lazy chunks relative to their require.js URL,
  // which defaults to the page's folder. Map them onto this folder (_static/widgets/), so the
  // assets load offline from a page at any depth.
  var here = document.currentScript && document.currentScript.src;
  if (here && window.requirejs) {
    var dir = here.slice(0, here.lastIndexOf("/") + 1);
    window.requirejs.config({
      paths: {
        "@jupyter-widgets/base": dir + "base",
        "@jupyter-widgets/controls": dir + "controls",
        "@jupyter-widgets/html-manager": dir + "html-manager",
        "@jupyter-widgets/html-manager/dist/libembed-amd": dir + "libembed-amd",
      },
    });
  }
  // ipywidgets typesets labels with the MathJax 2 call MathJax.Hub.Queue; the book loads
  // MathJax 3, so bridge that one call once MathJax 3 is on the page. MathJax 3 defines
  // typesetPromise only when its startup finishes, which the lazy-typesetting component
  // delays past DOMContentLoaded: so wait for startup.promise inside the call, not before.
  document.addEventListener("DOMContentLoaded", function () {
    var mj = window.MathJax;
    if (!mj || !mj.startup || mj.Hub) return;
    mj.Hub = {
      Queue: function (job) {
        var el = Array.isArray(job) ? job[2] : undefined;
        Promise.resolve(mj.startup.promise).then(function () {
          return mj.typesetPromise ? mj.typesetPromise(el ? [el] : undefined) : null;
        });
      },
    };
  });
})();
JS
# axe-core runs only in the browser check (.ci/browser_check/a11y.py), never in the site: it goes
# next to the check, in a git-ignored node_modules/, not into _vendor/ (served as _static/).
mkdir -p .ci/browser_check/node_modules/axe-core
cp "$tmp/axe-core-4.10.2/package/axe.min.js" .ci/browser_check/node_modules/axe-core/
touch _vendor/.stamp
echo "vendor: MathJax 3.2.2, require.js 2.3.7 and html-manager 1.0.6 in _vendor/;" \
  "axe-core 4.10.2 for the browser check"
