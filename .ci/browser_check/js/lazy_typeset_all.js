// MathJax's ui/lazy typesets equations as they scroll into view; this typesets all of them (the
// function exists only when the extension is loaded, e.g. not in the CDN build).
async () => {
  const doc = window.MathJax && MathJax.startup && MathJax.startup.document;
  if (doc && doc.lazyTypesetAll) await doc.lazyTypesetAll();
  return true;
}
