// Load the lazy images too (those below the fold or in collapsed solutions).
() => document.querySelectorAll('img[loading=lazy]').forEach(i => i.loading = 'eager')
