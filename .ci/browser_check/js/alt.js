// Images of the article with their alt text. An image drawn by a live widget (inside a widget
// area, or in a cell tagged nbval-ignore-output that embeds a widget view) is marked: the widget
// check owns those.
() => Array.from(document.querySelectorAll('.bd-article img')).map(i => {
  const cell = i.closest('.cell.tag_nbval-ignore-output');
  const widget = !!i.closest('.jupyter-widgets, .widget-subarea') || !!(cell && cell.querySelector(
      'script[type="application/vnd.jupyter.widget-view+json"]'));
  return {src: (i.getAttribute('src') || '').slice(-60), alt: i.getAttribute('alt'), widget};
})
