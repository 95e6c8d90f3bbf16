// Whether the page has a live figure's control (a slider or a drop-down list).
() => !!document.querySelector('input[data-control], select[data-control]')
