// True once every image the browser loads up front has finished (lazy ones load on scroll).
() => Array.from(document.images).every(i => i.loading === 'lazy' || i.complete)
