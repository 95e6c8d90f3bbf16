// Every figure image of the article, as shown: the data-text-px of the source actually shown
// (a <picture>'s <source> when the browser picked it, else the <img>), its natural and its
// displayed width, and whether it is displayed at all.
() => Array.from(document.querySelectorAll(
  '.bd-article .cell_output img, .bd-article figure img'
)).map(img => {
  const shownSrc = img.currentSrc || img.src;
  let holder = img;
  const picture = img.parentElement && img.parentElement.tagName === 'PICTURE'
    ? img.parentElement : null;
  if (picture) {
    for (const source of picture.querySelectorAll('source')) {
      const url = new URL(source.getAttribute('srcset'), document.baseURI).href;
      if (url === shownSrc) { holder = source; break; }
    }
  }
  return {
    src: (img.getAttribute('src') || '').split('/').pop(),
    shown: shownSrc.split('/').pop(),
    phone: holder !== img,
    text_px: holder.hasAttribute('data-text-px')
      ? parseFloat(holder.getAttribute('data-text-px')) : null,
    natural: img.naturalWidth,
    client: img.clientWidth,
  };
})
