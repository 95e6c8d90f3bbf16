// What a reader sees on a loaded page: math typeset or not, MathJax errors, raw TeX left in the
// text, images, embedded widget views and their rendered areas, output text (checks.observed).
() => {
  const skip = 'pre, code, script, style, textarea, mjx-container, .highlight, .MathJax';
  const out = {math: 0, typeset: 0, untypeset: [], merror: [], raw: [], images: [],
               views: 0, widgets: [], widgetText: []};
  for (const el of document.querySelectorAll('.math')) {
    out.math += 1;
    if (el.querySelector('mjx-container')) out.typeset += 1;
    else out.untypeset.push(el.textContent.trim().slice(0, 60));
  }
  for (const el of document.querySelectorAll('mjx-merror')) {
    out.merror.push((el.getAttribute('data-mjx-error') || el.textContent).slice(0, 80));
  }
  // MathJax 3 draws an undefined macro as its name in red (the noundefined extension); the
  // assistive MathML copy holds it as text.
  for (const el of document.querySelectorAll('mjx-container mtext[mathcolor="red"]')) {
    if (el.textContent.startsWith('\\')) {
      out.merror.push('undefined macro ' + el.textContent.slice(0, 60));
    }
  }
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const rawRe = /\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{/;
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement && n.parentElement.closest(skip)) continue;
    const m = n.textContent.match(rawRe);
    if (m) {
      const i = n.textContent.indexOf(m[0]);
      out.raw.push(n.textContent.slice(Math.max(0, i - 30), i + 40).replace(/\s+/g, ' '));
    }
  }
  // A cross-reference whose link text is a section title with math shows that math as TeX
  // source ("why \sqrt{\log n} is the threshold"): MathJax does not typeset link text.
  for (const el of document.querySelectorAll('span.std-ref')) {
    if (/\\[A-Za-z]+|\$/.test(el.textContent)) {
      out.raw.push('link text: ' + el.textContent.slice(0, 70).replace(/\s+/g, ' '));
    }
  }
  // A formula in the Tab order is a keyboard stop that leads only to MathJax's menu
  out.mathTabStops = document.querySelectorAll('mjx-container[tabindex="0"]').length;
  for (const img of document.querySelectorAll('img')) {
    out.images.push({src: img.currentSrc || img.src, ok: img.complete && img.naturalWidth > 0,
                     w: img.naturalWidth});
  }
  for (const s of document.querySelectorAll(
      'script[type="application/vnd.jupyter.widget-view+json"]')) {
    out.views += 1;
    let id = '?';
    try { id = JSON.parse(s.textContent).model_id; } catch (e) {}
    const area = s.previousElementSibling;
    let visible = false, what = 'no rendered element';
    if (area && area.classList.contains('widget-subarea')) {
      const kids = area.querySelectorAll('*');
      what = 'empty widget area';
      for (const k of kids) {
        const r = k.getBoundingClientRect();
        const st = getComputedStyle(k);
        if (r.width > 0 && r.height > 0 && st.visibility !== 'hidden' && st.display !== 'none') {
          visible = true; what = k.className; break;
        }
      }
    }
    out.widgets.push({id, visible, what});
  }
  for (const pre of document.querySelectorAll('.cell_output pre, .output pre')) {
    out.widgetText.push(pre.textContent.slice(0, 200));
  }
  return out;
}
