/* Marks each display equation that has more to its right or left than its box shows
   (book-math-more-right, book-math-more-left); static/book-math.css fades that edge. Loaded by
   book/_ext/book_math.py. MathJax typesets lazily (as equations scroll into view) and may
   typeset again (menu settings), so new equations are found as they appear in the page, and
   each is measured again when it or its content changes size and when it is scrolled. */
(() => {
  const SELECTOR = 'div.math mjx-container[display="true"]';
  const seen = new WeakSet();

  const mark = (box) => {
    const more = box.scrollWidth - box.clientWidth;
    box.classList.toggle('book-math-more-left', more > 1 && box.scrollLeft > 1);
    box.classList.toggle('book-math-more-right', more > 1 && box.scrollLeft < more - 1);
  };

  const sizes = new ResizeObserver((entries) => {
    for (const e of entries) mark(e.target.closest('mjx-container') || e.target);
  });

  const watch = (box) => {
    // The content is observed too: it changes width (fonts, typesetting) inside a fixed box.
    if (box.firstElementChild) sizes.observe(box.firstElementChild);
    if (!seen.has(box)) {
      seen.add(box);
      box.addEventListener('scroll', () => mark(box), {passive: true});
      sizes.observe(box);
    }
    mark(box);
  };

  let queued = false;
  const scan = () => {
    queued = false;
    document.querySelectorAll(SELECTOR).forEach(watch);
  };
  const queue = () => {
    if (!queued) {
      queued = true;
      requestAnimationFrame(scan);
    }
  };

  const start = () => {
    scan();
    new MutationObserver((records) => {
      // Only additions of MathJax output matter; other changes to the page are left alone.
      for (const r of records) {
        for (const n of r.addedNodes) {
          if (n.nodeType === 1 && (n.matches('mjx-container, mjx-math') ||
                                   n.querySelector('mjx-container'))) {
            queue();
            return;
          }
        }
      }
    }).observe(document.body, {childList: true, subtree: true});
  };
  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
})();
