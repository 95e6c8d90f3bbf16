// Resolves when MathJax's startup, and with it the first typesetting pass, has finished.
() => MathJax.startup.promise.then(() => true)
