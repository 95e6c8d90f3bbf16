// A live figure (attnlib.widgets.live_figure) as the page shows it: its image, the frame's
// point, every control with its label, readout and aria-valuetext, and the stored grid.
(fig) => {
  const img = fig.querySelector('img');
  const controls = Array.from(fig.querySelectorAll('[data-control]')).map(el => {
    const label = fig.querySelector('label[for="' + el.id + '"]');
    const out = fig.querySelector('output[for="' + el.id + '"]');
    const r = el.getBoundingClientRect();
    return {id: el.id, tag: el.tagName.toLowerCase(), type: el.type || '', value: el.value,
            max: el.max === undefined ? null : el.max, options: el.options ? el.options.length : 0,
            label: label ? label.textContent.trim() : null, aria: el.getAttribute('aria-label'),
            valuetext: el.getAttribute('aria-valuetext'), readout: out ? out.textContent : null,
            visible: r.width > 0 && r.height > 0};
  });
  const data = JSON.parse(fig.querySelector('script.live-figure-data').textContent);
  const r = img.getBoundingClientRect();
  return {src: img.getAttribute('src'), alt: img.getAttribute('alt'), point: img.dataset.point,
          ok: img.complete && img.naturalWidth > 0, right: r.right, viewport: window.innerWidth,
          name: fig.dataset.liveFigure, draw: fig.dataset.draw, controls,
          frames: data.frames.length, points: data.frames.map(f => JSON.stringify(f.point)),
          grid: data.controls.map(c => c.labels.length), labels: data.controls.map(c => c.labels)};
}
