// The element that has keyboard focus: whether it is a live figure's control (a slider or a
// drop-down list) or a skip link to one, and whether it draws a ring (an outline or a box-shadow),
// as a11y.py judges.
() => {
  const el = document.activeElement;
  if (!el || el === document.body) return {none: true};
  const st = getComputedStyle(el);
  const r = el.getBoundingClientRect();
  const hash = el.matches('.skip-link a[href^="#"]') ? el.getAttribute('href').slice(1) : '';
  const target = hash ? document.getElementById(hash) : null;
  return {
    none: false,
    skipToControl: !!target && target.matches('[data-control]'),
    control: el.matches('input[data-control], select[data-control]'),
    tag: el.tagName.toLowerCase(),
    label: (el.getAttribute('aria-label') || el.title || el.textContent || el.id || '')
      .trim().replace(/\s+/g, ' ').slice(0, 40),
    inHeader: !!el.closest('.bd-header, .bd-header-article, .header-article, #pst-primary-sidebar,'
                           + ' .bd-sidebar-primary'),
    visible: r.width > 0 && r.height > 0,
    outline: st.outlineStyle !== 'none' ? parseFloat(st.outlineWidth) : 0,
    shadow: st.boxShadow && st.boxShadow !== 'none' ? st.boxShadow : '',
  };
}
