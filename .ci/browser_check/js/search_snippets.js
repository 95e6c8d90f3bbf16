// The text of every search result's snippet.
() => Array.from(document.querySelectorAll('#search-results .context')).map(p => p.textContent)
