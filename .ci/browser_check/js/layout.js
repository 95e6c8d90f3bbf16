// The page's width against the viewport (naming what sticks out) and the display equations
// that are cut off instead of scrolling.
() => {
  const out = {pageWidth: document.documentElement.scrollWidth, viewport: window.innerWidth,
               clipped: [], wide: []};
  for (const d of document.querySelectorAll('div.math')) {
    const c = d.querySelector('mjx-container');
    if (!c) continue;
    const cs = getComputedStyle(c), dr = d.getBoundingClientRect(), cr = c.getBoundingClientRect();
    if (dr.width === 0) continue;  // inside a collapsed solution
    const scrolls = ['auto', 'scroll'].includes(cs.overflowX);
    const overflowing = c.scrollWidth > c.clientWidth + 1;
    const outside = cr.right > dr.right + 1 || cr.left < dr.left - 1;
    if ((overflowing && !scrolls) || outside) {
      out.clipped.push((d.id || '') + ' ' + d.textContent.trim().slice(0, 50));
    }
  }
  if (out.pageWidth > out.viewport) {
    // Name the widest elements that stick out, to say what makes the page pan sideways.
    for (const el of document.querySelectorAll('.bd-article *')) {
      const r = el.getBoundingClientRect();
      if (r.right > out.viewport + 1 && getComputedStyle(el).position !== 'fixed') {
        const inScroller = el.parentElement && el.parentElement.closest(
          'pre, .highlight, .cell_output .output, div.math, .table-wrapper, table, mjx-container');
        if (!inScroller) out.wide.push(el.tagName.toLowerCase() + '.' +
          (el.className && el.className.baseVal === undefined ? el.className : '') +
          ' ' + Math.round(r.right) + 'px');
      }
      if (out.wide.length >= 3) break;
    }
  }
  return out;
}
