// True once MathJax 3 has begun its startup (its promise exists).
() => window.MathJax && MathJax.startup && MathJax.startup.promise
