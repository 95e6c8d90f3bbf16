// True once the search page has listed more than three results with snippets.
() => document.querySelectorAll('#search-results .context').length > 3
