// A live figure (attnlib.widgets.live_figure) as the page shows it: its image (the source the
// browser chose, its natural and shown width), the frame's point, every control with its label,
// readout, aria-valuetext and the boxes of control and readout, the figure's caption, whether
// the note for an untrusted notebook shows, and the stored grid with every frame's files.
(fig) => {
  const img = fig.querySelector('img'), source = fig.querySelector('picture source');
  const url = s => (s ? new URL(s, document.baseURI).href : null);
  const box = el => { const r = el.getBoundingClientRect();
                      return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
  const controls = Array.from(fig.querySelectorAll('[data-control]')).map(el => {
    const label = fig.querySelector('label[for="' + el.id + '"]');
    const out = fig.querySelector('output[for="' + el.id + '"]');
    const r = el.getBoundingClientRect();
    return {id: el.id, tag: el.tagName.toLowerCase(), type: el.type || '', value: el.value,
            max: el.max === undefined ? null : el.max, options: el.options ? el.options.length : 0,
            label: label ? label.textContent.trim() : null, aria: el.getAttribute('aria-label'),
            valuetext: el.getAttribute('aria-valuetext'), readout: out ? out.textContent : null,
            visible: r.width > 0 && r.height > 0, box: box(el),
            readout_box: out ? box(out) : null};
  });
  const data = JSON.parse(fig.querySelector('script.live-figure-data').textContent);
  const r = img.getBoundingClientRect();
  const phone = source ? url(source.getAttribute('srcset')) : null;
  const figure = fig.closest('figure');
  const number = figure ? figure.querySelector('figcaption .caption-number') : null;
  const caption = figure ? figure.querySelector('figcaption .caption-text') : null;
  const note = fig.querySelector('.live-figure-untrusted');
  return {src: img.currentSrc || url(img.getAttribute('src')), alt: img.getAttribute('alt'),
          form: phone && img.currentSrc === phone ? 'phone' : 'wide',
          point: img.dataset.point, ok: img.complete && img.naturalWidth > 0,
          natural: img.naturalWidth, client: r.width, right: r.right,
          viewport: window.innerWidth, name: fig.dataset.liveFigure, draw: fig.dataset.draw,
          controls, number: number ? number.textContent.trim() : null,
          caption: caption ? caption.textContent.trim() : null,
          note: note ? note.getBoundingClientRect().height > 0 : false,
          frames: data.frames.length, points: data.frames.map(f => JSON.stringify(f.point)),
          files: data.frames.map(f => [url(f.src), f.phone ? url(f.phone.src) : null]),
          grid: data.controls.map(c => c.labels.length), labels: data.controls.map(c => c.labels)};
}
