// Every display equation on the page (collapsed solutions opened first): whether its scroll
// container is cut (content wider than the box, scrollWidth > clientWidth + 1, or the
// equation sticking out of its div.math), and what the cut edge shows: the background layers
// of the scroll container and the ::after of its div.math, where a scroll shadow or fade lives.
() => {
  const out = [];
  const text = el => el.getAttribute('aria-label') || (el.textContent || '').trim();
  for (const c of document.querySelectorAll('mjx-container[display="true"]')) {
    const d = c.closest('div.math') || c.parentElement;
    const dr = d.getBoundingClientRect(), cr = c.getBoundingClientRect();
    if (dr.width === 0 && dr.height === 0) continue;  // not rendered (display: none)
    const over = el => el.scrollWidth > el.clientWidth + 1;
    const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
    // The element the reader would have to scroll: the equation itself, else its div.math.
    const scroller = over(c) ? c : (over(d) ? d : c);
    const outside = cr.right > dr.right + 1 || cr.left < dr.left - 1;
    const cs = getComputedStyle(scroller), after = getComputedStyle(d, '::after');
    out.push({
      id: d.id || '',
      text: text(c).slice(0, 60) || (d.textContent || '').trim().slice(0, 60),
      width: Math.round((c.querySelector('mjx-math') || c).getBoundingClientRect().width),
      box: Math.round(scroller.clientWidth),
      cut: over(scroller) || outside,
      scrolls: scrolls(scroller),
      background: cs.backgroundImage,
      attachment: cs.backgroundAttachment,
      mask: cs.maskImage || cs.webkitMaskImage || 'none',
      after: after.content !== 'none' ? after.backgroundImage : 'none',
    });
  }
  return out;
}
