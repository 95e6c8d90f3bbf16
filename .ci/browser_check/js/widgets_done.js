// True once every embedded widget view has a rendered area next to it.
() => Array.from(document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]')).every(s => {
  const a = s.previousElementSibling;
  return a && a.classList.contains('widget-subarea') && a.querySelector('*') !== null;
})
