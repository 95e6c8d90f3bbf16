// What a reader sees of a notebook open in JupyterLab: the text of each rendered markdown cell
// (its editor is hidden, so innerText is the rendered text), how many MyST boxes (admonitions,
// definitions, theorems) jupyterlab-myst drew, each live figure (an output with an image and a
// control) with its default frame and its note about trust, and the first code cell.
() => {
  const shown = (el) => {
    if (!el) return false;
    const r = el.getBoundingClientRect();
    const s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none';
  };
  // The innermost element whose text mentions trust: the note, wherever the figure puts it.
  const trustNote = (root) => {
    const hits = [...root.querySelectorAll('*')].filter((e) => /\btrust/i.test(e.textContent));
    return hits.find((e) => ![...e.children].some((c) => /\btrust/i.test(c.textContent)));
  };
  const live = [...document.querySelectorAll('.jp-OutputArea-output')]
    .filter((o) => o.querySelector('img') && o.querySelector('input[type=range], select'))
    .map((o) => {
      const img = o.querySelector('img');
      const note = trustNote(o);
      return {
        frame: shown(img) && img.complete && img.naturalWidth > 0,
        width: img.naturalWidth,
        note: note ? note.textContent.trim().slice(0, 200) : null,
        noteShown: shown(note),
      };
    });
  const code = document.querySelector('.jp-CodeCell');
  const first = code && {
    prompt: (code.querySelector('.jp-InputPrompt') || {}).innerText || '',
    outputs: [...code.querySelectorAll('.jp-OutputArea-output')].map((o) => ({
      mime: o.dataset.mimeType || '',
      text: o.innerText,
    })),
  };
  return {
    cells: document.querySelectorAll('.jp-Notebook .jp-Cell').length,
    markdown: [...document.querySelectorAll('.jp-MarkdownCell')].map((c) => c.innerText),
    boxes: document.querySelectorAll('.jp-MarkdownCell .myst-admonition, .jp-MarkdownCell .myst-proof')
      .length,
    live,
    first,
  };
}
